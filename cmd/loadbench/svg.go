package main

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 1040
	chartLabelW = 430 // left column: what a bar is
	chartBarW   = 420 // the bars
	chartRowH   = 22
	chartBarH   = 14
)

// serverColor gives each server one colour in every panel.
var serverColor = map[string]string{
	srvMarketfeed: "#1f77b4",
	srvStatic:     "#ff7f0e",
	srvMemory:     "#2ca02c",
	srvPeer:       "#9467bd",
	srvLimitOff:   "#8c564b",
	srvLimitOn:    "#e377c2",
}

// chartSVG draws the run as a standalone SVG: the ratio targets (bar per
// target, the floor as a black tick), then req/s per route and server.
func chartSVG(r *results, rows []checkRow) string {
	var body strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&body, format, args...) }
	text := func(x, y int, anchor, style, s string) {
		w(`<text x="%d" y="%d" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, style, html.EscapeString(s))
	}
	y := 30
	text(10, y, "start", `font-size="16" font-weight="bold"`, "marketfeed against nginx and a plain Go server: one server core, one load core")
	y += 30

	// Panel 1: ratios against their floors.
	var ratios []checkRow
	scale := 2.5
	for _, c := range rows {
		if c.Missing || (c.Target == 0 && c.Ratio == 0) {
			continue
		}
		ratios = append(ratios, c)
		scale = max(scale, c.Ratio*1.1, c.CPURatio*1.1, c.Target*1.1)
	}
	if len(ratios) > 0 {
		text(10, y, "start", `font-size="13" font-weight="bold"`, "req/s ratio (median of per-round ratios); black tick: target; circle: the ratio per server CPU-second")
		y += 12
		x0 := chartLabelW
		for _, c := range ratios {
			color := "#2ca02c"
			switch {
			case c.Info:
				color = "#999999"
			case !c.Pass:
				color = "#d62728"
			}
			name := c.Short
			if name == "" {
				name = c.Name
			}
			text(x0-8, y+chartBarH-3, "end", `font-size="11"`, name)
			bw := int(float64(chartBarW) * c.Ratio / scale)
			w(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x0, y, bw, chartBarH, color)
			label := fmt.Sprintf("%.2f×", c.Ratio)
			if c.CPURatio > 0 {
				label += fmt.Sprintf(" (%.2f× per CPU-s)", c.CPURatio)
			}
			text(x0+max(bw, int(float64(chartBarW)*max(c.CPURatio, c.Target)/scale))+8, y+chartBarH-3, "start", `font-size="11"`, label)
			if c.CPURatio > 0 {
				cx := x0 + int(float64(chartBarW)*c.CPURatio/scale)
				w(`<circle cx="%d" cy="%d" r="4" fill="white" stroke="black" stroke-width="1.5"/>`+"\n", cx, y+chartBarH/2)
			}
			if c.Target > 0 {
				tx := x0 + int(float64(chartBarW)*c.Target/scale)
				w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-width="2"/>`+"\n", tx, y-2, tx, y+chartBarH+2)
			}
			y += chartRowH
		}
		// The 1× line: parity with the reference.
		one := x0 + int(float64(chartBarW)/scale)
		w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555" stroke-dasharray="3,3"/>`+"\n", one, y-chartRowH*len(ratios)-4, one, y)
		text(one, y+12, "middle", `font-size="10" fill="#555"`, "1×")
		y += 30
	}

	// Panel 2: req/s per route and server.
	top := 0.0
	for c := range r.Throughput {
		_, hi := r.spread(c)
		top = max(top, hi)
	}
	if top > 0 {
		text(10, y, "start", `font-size="13" font-weight="bold"`, fmt.Sprintf("req/s, median of %d rounds (thin line: min–max)", r.Rounds))
		y += 12
		label := map[string]string{}
		for _, rt := range r.Routes {
			label[rt.Key] = rt.Label
		}
		x0 := chartLabelW
		for _, g := range r.Groups {
			name := label[g.Route]
			if g.Variant != varPlain {
				name += ", " + g.Variant
			}
			text(10, y+chartBarH-3, "start", `font-size="11" font-weight="bold"`, name)
			y += chartRowH - 4
			for _, s := range g.Servers {
				c := cell{s, g.Route, g.Variant}
				runs := r.Throughput[c]
				if len(runs) == 0 {
					continue
				}
				med, _, _ := r.rate(c)
				lo, hi := r.spread(c)
				px := func(v float64) int { return x0 + int(float64(chartBarW)*v/top) }
				text(x0-8, y+chartBarH-3, "end", `font-size="11"`, s)
				w(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x0, y, px(med)-x0, chartBarH, serverColor[s])
				w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", px(lo), y+chartBarH/2, px(hi), y+chartBarH/2)
				text(px(hi)+4, y+chartBarH-3, "start", `font-size="11"`, kilo(med))
				y += chartRowH
			}
			y += 6
		}
		y += 24
	}

	// Panel 3: p99 latency on a log scale, the 2 ms target as a tick.
	type latBar struct {
		name, server string
		p99          time.Duration
		ok           bool
	}
	var lats []latBar
	for _, v := range []string{varHalf, varFixed} {
		for _, rt := range r.Routes {
			for _, s := range []string{srvMarketfeed, srvMemory} {
				runs := r.Latency[cell{s, rt.Key, v}]
				if len(runs) == 0 {
					continue
				}
				var p99 []time.Duration
				for _, l := range runs {
					p99 = append(p99, l.P99)
				}
				rate := "50% of max"
				if v == varFixed {
					rate = kilo(runs[0].Target) + " req/s"
				}
				_, ok := latencySummary(runs)
				lats = append(lats, latBar{fmt.Sprintf("%s, %s: %s", rt.Label, rate, s), s, medianDuration(p99), ok})
			}
		}
	}
	if len(lats) > 0 {
		text(10, y, "start", `font-size="13" font-weight="bold"`, "open-loop p99 latency (vegeta), log scale; black tick: 2 ms; grey: nginx memory, the control")
		y += 12
		const lo, hi = 0.01, 1000.0 // ms
		px := func(d time.Duration) int {
			v := math.Min(math.Max(float64(d)/1e6, lo), hi)
			return chartLabelW + int(float64(chartBarW)*math.Log10(v/lo)/math.Log10(hi/lo))
		}
		for _, l := range lats {
			text(chartLabelW-8, y+chartBarH-3, "end", `font-size="11"`, l.name)
			color := "#999999" // the control
			if l.server == srvMarketfeed {
				color = serverColor[srvMarketfeed]
				if !l.ok {
					color = "#d62728"
				}
			}
			w(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", chartLabelW, y, px(l.p99)-chartLabelW, chartBarH, color)
			text(px(l.p99)+4, y+chartBarH-3, "start", `font-size="11"`, ms(l.p99))
			tx := px(2 * time.Millisecond)
			w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-width="2"/>`+"\n", tx, y-2, tx, y+chartBarH+2)
			y += chartRowH
		}
		for _, t := range []float64{0.1, 1, 10, 100, 1000} {
			x := px(time.Duration(t * 1e6))
			text(x, y+10, "middle", `font-size="10" fill="#555"`, fmt.Sprintf("%g ms", t))
		}
		y += 30
	}

	m := r.Machine
	y += 10
	text(10, y, "start", `font-size="10" fill="#555"`, fmt.Sprintf("%d × %s, Linux %s, %s, %s, %s, vegeta %s", m.CPUs, m.Model, m.Kernel, m.Go, m.Nginx, m.Wrk, m.Vegeta))
	y += 10

	var out strings.Builder
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n",
		chartWidth, y, chartWidth, y)
	fmt.Fprintf(&out, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartWidth, y)
	out.WriteString(body.String())
	out.WriteString("</svg>\n")
	return out.String()
}
