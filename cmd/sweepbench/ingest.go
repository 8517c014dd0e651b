package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"marketfeed/internal/process"
)

// The ingest run (-ingest) measures what keeping every book and trade list
// current costs marketfeed when nobody reads it: venuesim with -extra
// markets, every stream fed, no client. For each count and for one line and
// two (-venue-ws-lines), it waits until 99.9 % of the books are stream-fed,
// lets the start's REST reads settle, then measures -duration: the CPU share
// of a core, the CPU per depth event (all of the process's CPU, the trades,
// the publication and the collector included, divided by the depth events
// delivered), the heap allocations per event (depth and trade events
// together) and the peak RSS. In a single process the ingest and the
// answers share the cores: every microsecond an event costs is taken from
// the requests.

// Targets of the ingest run.
const (
	// targetIngestCPU is the share of a core one line may take at 846
	// pairs, and targetEventCPU the CPU per depth event, all in.
	targetIngestCPU = 0.10
	targetEventCPU  = 12 * time.Microsecond
	// targetLinesRatio is how much more two lines may cost than one.
	targetLinesRatio = 1.3
	// targetIngestPairs is the count the CPU targets are set at.
	targetIngestPairs = 846
	// ingestSettle is how long after the books are stream-fed the
	// measurement starts: the cold start's syncs and first reads end.
	ingestSettle = 15 * time.Second
)

const (
	seriesDepthEvents = `marketfeed_stream_events_total{kind="depth"}`
	seriesTradeEvents = `marketfeed_stream_events_total{kind="trades"}`
	seriesMallocs     = `go_memstats_mallocs_total`
)

// ingestResult is one configuration's measurement.
type ingestResult struct {
	Extra, Pairs, Lines int
	Synced              time.Duration // from the start until 99.9 % of the books were stream-fed
	Measured            time.Duration
	CPU                 time.Duration
	DepthEvents         float64
	TradeEvents         float64
	Mallocs             float64
	PeakRSS             int64
}

func (r ingestResult) cpuShare() float64 { return float64(r.CPU) / float64(r.Measured) }

// perDepthEvent is the CPU per depth event, all in.
func (r ingestResult) perDepthEvent() time.Duration {
	if r.DepthEvents == 0 {
		return 0
	}
	return time.Duration(float64(r.CPU) / r.DepthEvents)
}

// allocsPerEvent is the heap allocations per depth or trade event.
func (r ingestResult) allocsPerEvent() float64 {
	if n := r.DepthEvents + r.TradeEvents; n > 0 {
		return r.Mallocs / n
	}
	return 0
}

// runIngest measures every count with one line and two, and prints a table
// per count and the lines' ratio.
func runIngest(ctx context.Context, cfg *config, bins binaries) error {
	for _, extra := range cfg.extras {
		var byLines [3]ingestResult
		for _, lines := range []int{1, 2} {
			fmt.Fprintf(cfg.stdout, "\ningest: extra %d, %d line(s)\n", extra, lines)
			r, err := ingestOne(ctx, cfg, bins, extra, lines)
			if err != nil {
				return fmt.Errorf("ingest extra %d, %d line(s): %w", extra, lines, err)
			}
			byLines[lines] = r
		}
		writeIngest(cfg, byLines[1], byLines[2])
	}
	return nil
}

// ingestOne starts venuesim and marketfeed with lines lines, waits for the
// books, and measures the steady state with no client.
func ingestOne(ctx context.Context, cfg *config, bins binaries, extra, lines int) (ingestResult, error) {
	res := ingestResult{Extra: extra, Lines: lines}
	env, err := startPair(ctx, cfg, bins, extra, streamsOn, "-venue-ws-lines", strconv.Itoa(lines))
	if err != nil {
		return res, err
	}
	defer env.stop()
	rss := sampleRSS(env.feed.Pid())
	defer rss.stop()
	if err := process.WaitHTTP(ctx, env.feed, "http://"+env.opsAddr+"/readyz", 2*time.Minute); err != nil {
		return res, err
	}
	pairs, err := fetchPairs(ctx, "http://"+env.apiAddr)
	if err != nil {
		return res, err
	}
	res.Pairs = len(pairs)
	need := float64(recoveryShare(len(pairs)))
	deadline := env.t0.Add(cfg.coldTimeout)
	for {
		m, err := scrape(ctx, env.opsAddr)
		if err == nil && m[seriesStreamBooks] >= need {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("books stream-fed: %v of %d after %v", m[seriesStreamBooks], len(pairs), cfg.coldTimeout)
		}
		if err := process.Sleep(ctx, time.Second); err != nil {
			return res, err
		}
	}
	res.Synced = time.Since(env.t0)
	fmt.Fprintf(cfg.stdout, "  %d pairs stream-fed after %v; measuring for %v\n", len(pairs), dur(res.Synced), cfg.duration)
	if err := process.Sleep(ctx, ingestSettle); err != nil {
		return res, err
	}

	w, err := measureWindow(ctx, env, cfg.duration, nil, nil)
	if err != nil {
		return res, err
	}
	m0, m1 := w.before, w.after
	res.Measured, res.CPU = w.end.Sub(w.start), w.cpu
	res.DepthEvents = m1[seriesDepthEvents] - m0[seriesDepthEvents]
	res.TradeEvents = m1[seriesTradeEvents] - m0[seriesTradeEvents]
	res.Mallocs = m1[seriesMallocs] - m0[seriesMallocs]
	res.PeakRSS = rss.stop()
	return res, nil
}

// writeIngest prints one count's two configurations side by side, judging
// the CPU targets at their count and the RSS and lines' ratio at every
// count.
func writeIngest(cfg *config, one, two ingestResult) {
	shape := "venuesim's default diffs"
	if cfg.depthWindow > 0 {
		shape = fmt.Sprintf("diffs of venuesim -depth-window %d", cfg.depthWindow)
	}
	fmt.Fprintf(cfg.stdout, "\n== ingest, %d pairs, %s, no client, measured %s (one line) and %s (two)\n", one.Pairs, shape, dur(one.Measured), dur(two.Measured))
	tw := tabwriter.NewWriter(cfg.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tone line\ttwo lines\ttarget\tverdict")
	judged := one.Pairs == targetIngestPairs
	line := func(figure, a, b, target string, ok bool, judge bool) {
		v := ""
		if judge {
			v = verdict(ok)
		}
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", figure, a, b, target, v)
	}
	line("books stream-fed after", dur(one.Synced), dur(two.Synced), "", true, false)
	line("depth events a second", fmt.Sprintf("%.0f", one.DepthEvents/one.Measured.Seconds()),
		fmt.Sprintf("%.0f", two.DepthEvents/two.Measured.Seconds()), "", true, false)
	line("trade events a second", fmt.Sprintf("%.0f", one.TradeEvents/one.Measured.Seconds()),
		fmt.Sprintf("%.0f", two.TradeEvents/two.Measured.Seconds()), "", true, false)
	line("CPU, share of a core", fmt.Sprintf("%.1f %%", 100*one.cpuShare()), fmt.Sprintf("%.1f %%", 100*two.cpuShare()),
		fmt.Sprintf("one line ≤ %.0f %% at %d pairs", 100*targetIngestCPU, targetIngestPairs), one.cpuShare() <= targetIngestCPU, judged)
	line("CPU per depth event, all in", fmt.Sprintf("%.1f µs", float64(one.perDepthEvent())/1e3), fmt.Sprintf("%.1f µs", float64(two.perDepthEvent())/1e3),
		fmt.Sprintf("one line ≤ %v at %d pairs", targetEventCPU, targetIngestPairs), one.perDepthEvent() <= targetEventCPU, judged)
	ratio := two.cpuShare() / one.cpuShare()
	line("two lines over one, CPU", "", fmt.Sprintf("%.2f", ratio), fmt.Sprintf("≤ %.1f", targetLinesRatio), ratio <= targetLinesRatio, true)
	line("heap allocations per event", fmt.Sprintf("%.2f", one.allocsPerEvent()), fmt.Sprintf("%.2f", two.allocsPerEvent()), "", true, false)
	line("peak RSS", mib(one.PeakRSS), mib(two.PeakRSS), fmt.Sprintf("≤ %s", mib(targetRSS)),
		one.PeakRSS <= targetRSS && two.PeakRSS <= targetRSS, true)
	tw.Flush()
}

// mib prints a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// window is what a measured window saw of marketfeed: its metrics as it
// opened and closed, when it did, and the CPU the process used in it.
type window struct {
	before, after metricsScrape
	start, end    time.Time
	cpu           time.Duration
}

// measureWindow scrapes marketfeed's metrics and reads its CPU, waits d and
// does both again; opened and closed, when not nil, run as the window opens
// and closes.
func measureWindow(ctx context.Context, env *pair, d time.Duration, opened, closed func()) (w window, err error) {
	if w.before, err = scrape(ctx, env.opsAddr); err != nil {
		return w, err
	}
	cpu0, err := readCPU(env.feed.Pid())
	if err != nil {
		return w, err
	}
	w.start = time.Now()
	if opened != nil {
		opened()
	}
	if err := process.Sleep(ctx, d); err != nil {
		return w, err
	}
	w.end = time.Now()
	if closed != nil {
		closed()
	}
	cpu1, err := readCPU(env.feed.Pid())
	if err != nil {
		return w, err
	}
	w.cpu = cpu1 - cpu0
	w.after, err = scrape(ctx, env.opsAddr)
	return w, err
}
