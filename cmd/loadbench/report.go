package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Servers, as the tables name them.
const (
	srvMarketfeed = "marketfeed"
	srvStatic     = "nginx static"
	srvMemory     = "nginx memory"
	srvPeer       = "Go peer"
	srvLimitOff   = "marketfeed -rate-limit 0"
	srvLimitOn    = "marketfeed -rate-limit 600"
)

// Request variants.
const (
	varPlain = "plain"                 // GET, nothing else
	varXFF   = "X-Forwarded-For"       // a new client address on every request
	varGzip  = "Accept-Encoding: gzip" // the compressed answer

	// Latency runs: at half of marketfeed's measured maximum, or at the
	// fixed -latency-rate.
	varHalf  = "50% of max"
	varFixed = "fixed rate"
)

// route is one benchmarked request.
type route struct {
	Key   string // short name, also the static file's name
	Label string
	URI   string
}

// benchRoutes are the routes the targets name, for one pair.
func benchRoutes(ticker string) []route {
	return []route{
		{"book", "/orderbook full depth", "/api/public/orderbook?ticker_id=" + ticker},
		{"book5", "/orderbook depth=5", "/api/public/orderbook?ticker_id=" + ticker + "&depth=5"},
		{"trades", "/trades limit=10&type=buy", "/api/public/trades?ticker_id=" + ticker + "&limit=10&type=buy"},
		{"tickers", "/tickers", "/api/public/tickers"},
		{"pairs", "/pairs", "/api/public/pairs"},
	}
}

// limiterRoute is the route the rate limiter is measured on: the cheapest
// answer, where a fixed cost per request weighs most.
const limiterRoute = "book5"

// cell names one throughput or latency measurement.
type cell struct {
	Server, Route, Variant string
}

// group is the servers measured back to back on one route and variant in
// each round. The host is shared and its speed drifts over minutes, so a
// ratio is taken between runs of the same round and the median of those
// ratios is reported.
type group struct {
	Route, Variant string
	Servers        []string
}

func benchGroups(limiter, gzip bool) []group {
	gs := []group{
		{"book", varPlain, []string{srvMarketfeed, srvStatic, srvMemory, srvPeer}},
		{"book5", varPlain, []string{srvMarketfeed, srvStatic}},
		{"trades", varPlain, []string{srvMarketfeed, srvStatic}},
		{"tickers", varPlain, []string{srvMarketfeed, srvStatic}},
		{"pairs", varPlain, []string{srvMarketfeed, srvStatic}},
	}
	if limiter {
		gs = append(gs, group{limiterRoute, varXFF, []string{srvLimitOff, srvLimitOn}})
	}
	if gzip {
		gs = append(gs, group{"book", varGzip, []string{srvMarketfeed, srvStatic}})
	}
	return gs
}

// rotate returns s starting at element r mod len(s), so that no server is
// always measured first in its group.
func rotate(s []string, r int) []string {
	if len(s) == 0 {
		return nil
	}
	r %= len(s)
	return append(slices.Clone(s[r:]), s[:r]...)
}

// machine describes where the run happened.
type machine struct {
	CPUs   int
	Model  string
	Kernel string
	Go     string
	Nginx  string
	Wrk    string
	Vegeta string
}

// hotResult is the 500-hot-pairs measurement.
type hotResult struct {
	Pairs      int
	Every      time.Duration
	Window     time.Duration
	CPU        time.Duration // process CPU time over Window
	Requests   int64         // requests answered over Window
	Failed     int64         // requests not answered 200 over Window
	RSSMax     int64         // bytes
	RSSLast    int64         // bytes
	WarmFailed int64         // requests not answered 200 while warming up
}

// CPUShare is the process's CPU time as a fraction of one core.
func (h hotResult) CPUShare() float64 {
	if h.Window <= 0 {
		return 0
	}
	return h.CPU.Seconds() / h.Window.Seconds()
}

// idleResult is marketfeed's CPU time with no client: its feed's own work.
type idleResult struct {
	Window    time.Duration
	User, CPU time.Duration // user space, and in all
}

// UserShare is the user CPU time as a fraction of one core.
func (i idleResult) UserShare() float64 {
	if i.Window <= 0 {
		return 0
	}
	return i.User.Seconds() / i.Window.Seconds()
}

// results is everything one run measured.
type results struct {
	Machine     machine
	Rounds      int
	Duration    time.Duration
	Connections int
	Routes      []route
	Groups      []group
	Throughput  map[cell][]wrkResult
	Latency     map[cell][]latencyResult
	Hot         *hotResult
	Bench       []benchLine
	// Noisy counts the measured runs that started while the machine was
	// busy with other work (see -quiet-wait).
	Noisy int
	// Idle is marketfeed's CPU time with no client, nil when not measured.
	Idle *idleResult
	// Sizes holds each route's body size in bytes: identity, and gzip (0
	// when marketfeed does not compress that answer).
	Sizes map[string][2]int
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// valid reports whether a run counts: a run with socket errors (wrk's
// timeouts, resets) happened while the host stalled the server or wrk for
// seconds, and is dropped. Non-2xx answers are not dropped: they are the
// server's own failures, and fail the target.
func (w wrkResult) valid() bool { return w.SocketErrors == 0 }

// rate is the median req/s of a cell over its valid runs, the non-2xx
// answers over all of them, and how many runs were dropped.
func (r *results) rate(c cell) (med float64, non2xx int64, dropped int) {
	var xs []float64
	for _, w := range r.Throughput[c] {
		non2xx += w.Non2xx
		if !w.valid() {
			dropped++
			continue
		}
		xs = append(xs, w.ReqPerSec)
	}
	return median(xs), non2xx, dropped
}

// perCPU is the median requests per server CPU-second of a cell's valid
// runs; 0 when unknown.
func (r *results) perCPU(c cell) float64 {
	var xs []float64
	for _, w := range r.Throughput[c] {
		if w.valid() && w.PerCPUSecond() > 0 {
			xs = append(xs, w.PerCPUSecond())
		}
	}
	return median(xs)
}

// ratio is the median over rounds of num's figure divided by den's, each
// pair taken from the same round and both runs valid. figure picks req/s
// or requests per CPU-second.
func (r *results) ratio(num, den cell, figure func(wrkResult) float64) float64 {
	a, b := r.Throughput[num], r.Throughput[den]
	var xs []float64
	for i := range min(len(a), len(b)) {
		if a[i].valid() && b[i].valid() && figure(a[i]) > 0 && figure(b[i]) > 0 {
			xs = append(xs, figure(a[i])/figure(b[i]))
		}
	}
	return median(xs)
}

func reqPerSec(w wrkResult) float64 { return w.ReqPerSec }

// checkRow is one target and what was measured against it.
type checkRow struct {
	Name     string
	Short    string // the chart's label
	Measured string
	Goal     string
	Pass     bool
	Info     bool    // no target: shown for context
	Ratio    float64 // for ratio rows, to chart
	CPURatio float64 // the same ratio per server CPU-second; 0 when unknown
	Target   float64 // the ratio's floor, for ratio rows
	Missing  bool    // not measured in this run
}

// Result is the verdict column.
func (c checkRow) Result() string {
	switch {
	case c.Missing:
		return "not run"
	case c.Info:
		return "info"
	case c.Pass:
		return "pass"
	default:
		return "MISS"
	}
}

// evaluate turns the measurements into one row per target.
func evaluate(r *results) []checkRow {
	var rows []checkRow
	label := map[string]string{}
	for _, rt := range r.Routes {
		label[rt.Key] = rt.Label
	}
	ratioRow := func(name, short string, num, den cell, floor float64, info bool) checkRow {
		row := checkRow{Name: name, Short: short, Target: floor, Info: info}
		if floor > 0 {
			row.Goal = fmt.Sprintf("≥ %.2f×", floor)
		}
		if len(r.Throughput[num]) == 0 || len(r.Throughput[den]) == 0 {
			row.Missing = true
			return row
		}
		a, errsA, dropA := r.rate(num)
		b, errsB, dropB := r.rate(den)
		row.Ratio = r.ratio(num, den, reqPerSec)
		row.Measured = fmt.Sprintf("%.2f× (%s vs %s req/s)", row.Ratio, kilo(a), kilo(b))
		if row.CPURatio = r.ratio(num, den, wrkResult.PerCPUSecond); row.CPURatio > 0 {
			row.Measured += fmt.Sprintf("; per server CPU-second %.2f×", row.CPURatio)
		}
		row.Pass = row.Ratio >= floor && row.Ratio > 0
		if errsA+errsB > 0 {
			row.Measured += fmt.Sprintf("; %d non-2xx answers", errsA+errsB)
			row.Pass = false
		}
		if dropA+dropB > 0 {
			row.Measured += fmt.Sprintf("; %d runs dropped for socket errors", dropA+dropB)
		}
		return row
	}
	type target struct {
		route, den string
		floor      float64
	}
	for _, t := range []target{
		{"book", srvStatic, 1.2}, {"book", srvMemory, 0.9}, {"book", srvPeer, 2},
		{"book5", srvStatic, 1}, {"trades", srvStatic, 1}, {"tickers", srvStatic, 1}, {"pairs", srvStatic, 1},
	} {
		rows = append(rows, ratioRow(
			fmt.Sprintf("%s req/s: marketfeed / %s", label[t.route], t.den),
			fmt.Sprintf("%s ÷ %s", label[t.route], t.den),
			cell{srvMarketfeed, t.route, varPlain}, cell{t.den, t.route, varPlain}, t.floor, false))
	}
	rows = append(rows, userCPURow(r, label["book"]))
	rows = append(rows, ratioRow(
		fmt.Sprintf("%s req/s, a new X-Forwarded-For per request: -rate-limit 600 / -rate-limit 0", label[limiterRoute]),
		fmt.Sprintf("%s, rate limit on ÷ off", label[limiterRoute]),
		cell{srvLimitOn, limiterRoute, varXFF}, cell{srvLimitOff, limiterRoute, varXFF}, 0.95, false))
	rows = append(rows, ratioRow(
		fmt.Sprintf("%s req/s, Accept-Encoding: gzip: marketfeed / nginx gzip_static", label["book"]),
		fmt.Sprintf("%s gzip ÷ nginx gzip_static", label["book"]),
		cell{srvMarketfeed, "book", varGzip}, cell{srvStatic, "book", varGzip}, 0, true))

	for _, rt := range r.Routes {
		row := checkRow{Name: fmt.Sprintf("%s p99 latency, open loop at 50%% of max req/s", rt.Label), Goal: "< 2 ms"}
		runs := r.Latency[cell{srvMarketfeed, rt.Key, varHalf}]
		if len(runs) == 0 {
			row.Missing = true
			rows = append(rows, row)
			continue
		}
		row.Measured, row.Pass = latencySummary(runs)
		rows = append(rows, row)
	}
	for _, x := range []struct {
		name string
		c    cell
	}{
		{"control: nginx memory p99, same route and rate as marketfeed's /orderbook full depth", cell{srvMemory, "book", varHalf}},
		{"/orderbook full depth p99 at the fixed -latency-rate: marketfeed", cell{srvMarketfeed, "book", varFixed}},
		{"/orderbook full depth p99 at the fixed -latency-rate: nginx memory", cell{srvMemory, "book", varFixed}},
	} {
		if runs := r.Latency[x.c]; len(runs) > 0 {
			m, _ := latencySummary(runs)
			rows = append(rows, checkRow{Name: x.name, Measured: m, Info: true})
		}
	}

	allocs := checkRow{Name: "allocations per request, every server benchmark (go test -bench ./server/)", Goal: "0"}
	if len(r.Bench) == 0 {
		allocs.Missing = true
	} else {
		var worst benchLine
		for _, b := range r.Bench {
			if b.AllocsPerOp >= worst.AllocsPerOp {
				worst = b
			}
		}
		allocs.Measured = fmt.Sprintf("max %d allocs/op over %d benchmarks", worst.AllocsPerOp, len(r.Bench))
		if worst.AllocsPerOp > 0 {
			allocs.Measured += " (" + worst.Name + ")"
		}
		allocs.Pass = worst.AllocsPerOp == 0
	}
	rows = append(rows, allocs)

	cpu := checkRow{Name: "500 hot pairs: process CPU (poller and the keep-alive requests)", Goal: "< 10% of one core"}
	rss := checkRow{Name: "500 hot pairs: resident memory (VmRSS, peak)", Goal: "< 150 MB"}
	if h := r.Hot; h == nil {
		cpu.Missing, rss.Missing = true, true
	} else {
		cpu.Measured = fmt.Sprintf("%.1f%% (%.2fs CPU in %.0fs; %d pairs, %.0f req/s)",
			100*h.CPUShare(), h.CPU.Seconds(), h.Window.Seconds(), h.Pairs, float64(h.Requests)/h.Window.Seconds())
		cpu.Pass = h.CPUShare() < 0.10 && h.Failed == 0
		if h.Failed > 0 {
			cpu.Measured += fmt.Sprintf("; %d requests not answered 200", h.Failed)
		}
		rss.Measured = fmt.Sprintf("%.1f MB (%.1f MB at the end)", mb(h.RSSMax), mb(h.RSSLast))
		rss.Pass = h.RSSMax < 150e6
	}
	return append(rows, cpu, rss)
}

// userCPURow compares the user-space CPU time per answer of marketfeed and
// nginx's static file on the full book, from the same rounds' runs: the
// part of an answer's cost that is the server's own code, the kernel's
// (system) part being mostly the same socket work for both. It passes when
// marketfeed's is at or below nginx's (median of the per-round ratios).
func userCPURow(r *results, book string) checkRow {
	num, den := cell{srvMarketfeed, "book", varPlain}, cell{srvStatic, "book", varPlain}
	row := checkRow{Name: fmt.Sprintf("%s user CPU per answer: marketfeed / %s", book, srvStatic), Goal: "≤ 1.00×"}
	ratio := r.ratio(num, den, userPerAnswer)
	if ratio <= 0 {
		row.Missing = true
		return row
	}
	mu, ms := r.perAnswer(num)
	nu, ns := r.perAnswer(den)
	row.Measured = fmt.Sprintf("%.2f× (marketfeed %s user + %s system, nginx static %s + %s per answer)",
		ratio, micros(mu), micros(ms), micros(nu), micros(ns))
	// marketfeed's figure carries its feed's own work, spread over the
	// answers of a second: say how much of it that is at its rate here.
	if rate, _, _ := r.rate(num); r.Idle != nil && rate > 0 {
		row.Measured += fmt.Sprintf("; with no client marketfeed takes %.1f%% of a core in user space, %s per answer at %s req/s",
			100*r.Idle.UserShare(), micros(time.Duration(r.Idle.UserShare()/rate*1e9)), kilo(rate))
	}
	row.Pass = ratio <= 1
	return row
}

// perAnswer is the median server CPU time per answer of a cell's valid
// runs, user and system; 0, 0 when unknown.
func (r *results) perAnswer(c cell) (user, system time.Duration) {
	var us, ss []time.Duration
	for _, w := range r.Throughput[c] {
		if u, s := w.PerAnswer(); w.valid() && u+s > 0 {
			us, ss = append(us, u), append(ss, s)
		}
	}
	if len(us) == 0 {
		return 0, 0
	}
	return medianDuration(us), medianDuration(ss)
}

// micros writes a duration in microseconds with one decimal.
func micros(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }

// latencySummary is the median over rounds of p50, p99 and max, with the
// rate sent; it passes when the median p99 is under 2 ms, every answer was
// a success and vegeta sent at least 95% of the rate asked for.
func latencySummary(runs []latencyResult) (string, bool) {
	var p50, p99, mx []time.Duration
	var rates []float64
	ok := true
	for _, l := range runs {
		p50, p99, mx = append(p50, l.P50), append(p99, l.P99), append(mx, l.Max)
		rates = append(rates, l.Rate)
		if l.Success < 1 {
			ok = false
		}
	}
	s := fmt.Sprintf("p99 %s (p50 %s, max %s) at %s req/s",
		ms(medianDuration(p99)), ms(medianDuration(p50)), ms(medianDuration(mx)), kilo(median(rates)))
	if !ok {
		s += "; some requests failed"
	}
	if median(rates) < 0.95*runs[0].Target {
		s += fmt.Sprintf("; asked for %s req/s", kilo(runs[0].Target))
		ok = false
	}
	return s, ok && medianDuration(p99) < 2*time.Millisecond
}

func kilo(x float64) string {
	if x >= 10000 {
		return fmt.Sprintf("%.1fk", x/1000)
	}
	return fmt.Sprintf("%.0f", x)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func mb(b int64) float64 { return float64(b) / 1e6 }

// markdown renders the whole report: the checks, then the measurements
// they come from.
func markdown(r *results, rows []checkRow) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	w("Machine: %d CPUs (%s), Linux %s, %s, %s, %s, vegeta %s.\n", m.CPUs, m.Model, m.Kernel, m.Go, m.Nginx, m.Wrk, m.Vegeta)
	w("Each server on one core with one worker, the load generator on the other; wrk -t1 -c%d, %d rounds of %s per server and route, interleaved.\n",
		r.Connections, r.Rounds, r.Duration)
	w("Measured runs that started while other work kept the machine busy: %d.\n\n", r.Noisy)

	w("| target | measured | goal | result |\n|---|---|---|---|\n")
	for _, c := range rows {
		w("| %s | %s | %s | %s |\n", c.Name, dash(c.Measured), dash(c.Goal), c.Result())
	}

	w("\nThroughput, req/s (median of %d rounds; min–max):\n\n", r.Rounds)
	w("| route | request | body bytes | server | req/s | min–max | req per server CPU-second | server CPU per answer, user + system | p99 (closed loop) | non-2xx | runs dropped |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	label := map[string]string{}
	for _, rt := range r.Routes {
		label[rt.Key] = rt.Label
	}
	for _, g := range r.Groups {
		for _, s := range g.Servers {
			c := cell{s, g.Route, g.Variant}
			runs := r.Throughput[c]
			if len(runs) == 0 {
				continue
			}
			med, errs, dropped := r.rate(c)
			lo, hi := r.spread(c)
			var p99 []time.Duration
			for _, x := range runs {
				if x.valid() {
					p99 = append(p99, x.LatencyP99)
				}
			}
			perAnswer := "–"
			if u, sys := r.perAnswer(c); u+sys > 0 {
				perAnswer = micros(u) + " + " + micros(sys)
			}
			w("| %s | %s | %s | %s | %s | %s–%s | %s | %s | %s | %d | %d |\n", label[g.Route], g.Variant, r.bodySize(g.Route, g.Variant),
				s, kilo(med), kilo(lo), kilo(hi), orDash(r.perCPU(c)), perAnswer, ms(medianDuration(p99)), errs, dropped)
		}
	}

	if len(r.Latency) > 0 {
		w("\nOpen-loop latency (vegeta, one worker thread; median of %d rounds):\n\n", r.Rounds)
		w("| route | rate | server | asked req/s | sent req/s | p50 | p99 | max | statuses (last round) |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, v := range []string{varHalf, varFixed} {
			for _, rt := range r.Routes {
				for _, s := range []string{srvMarketfeed, srvMemory} {
					runs := r.Latency[cell{s, rt.Key, v}]
					if len(runs) == 0 {
						continue
					}
					var p50, p99, mx []time.Duration
					var rates []float64
					for _, l := range runs {
						p50, p99, mx = append(p50, l.P50), append(p99, l.P99), append(mx, l.Max)
						rates = append(rates, l.Rate)
					}
					w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rt.Label, v, s, kilo(runs[0].Target), kilo(median(rates)),
						ms(medianDuration(p50)), ms(medianDuration(p99)), ms(medianDuration(mx)), runs[len(runs)-1].Statuses)
				}
			}
		}
	}

	if h := r.Hot; h != nil {
		w("\nHot pairs: %d pairs, each pair's /orderbook and /trades every %s over keep-alive connections; measured over %s after warming up.\n",
			h.Pairs, h.Every, h.Window)
		w("Process CPU %.2fs (%.1f%% of one core), including serving %d requests; VmRSS peak %.1f MB, at the end %.1f MB.\n",
			h.CPU.Seconds(), 100*h.CPUShare(), h.Requests, mb(h.RSSMax), mb(h.RSSLast))
	}

	if len(r.Bench) > 0 {
		w("\nGo benchmarks, `go test -run=^$ -bench=. -benchmem ./server/`:\n\n")
		w("| benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|\n")
		for _, bl := range r.Bench {
			w("| %s | %.1f | %d | %d |\n", bl.Name, bl.NsPerOp, bl.BytesPerOp, bl.AllocsPerOp)
		}
	}
	return b.String()
}

// spread is the lowest and highest req/s of a cell's valid runs.
func (r *results) spread(c cell) (lo, hi float64) {
	first := true
	for _, x := range r.Throughput[c] {
		if !x.valid() {
			continue
		}
		if first {
			lo, hi, first = x.ReqPerSec, x.ReqPerSec, false
		}
		lo, hi = min(lo, x.ReqPerSec), max(hi, x.ReqPerSec)
	}
	return lo, hi
}

// bodySize is the size of the body a throughput cell's requests get.
func (r *results) bodySize(route, variant string) string {
	sz, ok := r.Sizes[route]
	switch {
	case !ok:
		return "–"
	case variant == varGzip && sz[1] > 0:
		return fmt.Sprintf("%d gzip", sz[1])
	}
	return fmt.Sprint(sz[0])
}

func orDash(x float64) string {
	if x <= 0 {
		return "–"
	}
	return kilo(x)
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
