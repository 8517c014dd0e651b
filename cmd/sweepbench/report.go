package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets of the sweep. A pair is current when its book is under a
// second old at the 99th percentile, for every pair at once, while the feed
// spends a twentieth of the venue's REST weight.
const (
	targetOKShare    = 0.999
	targetBookAgeP99 = time.Second
	// coldStaleAge is the oldest book a pair that has answered may serve
	// while the cold start goes on: twice the steady state's p99 target,
	// for the cold start's syncs may hold its refreshes a while.
	coldStaleAge     = 2 * time.Second
	targetWeightPart = 0.05 // of the venue's weight limit a minute
	// targetMarkAgeP99 is how old a contract's mark, index and funding
	// may be: the venue streams them once a second.
	targetMarkAgeP99 = 2 * time.Second
)

// row is one line of the table. Verdict is "met", "MISSED", or empty for a
// figure without a target.
type row struct {
	Figure, Value, Target, Verdict string
}

const (
	met    = "met"
	missed = "MISSED"
)

func verdict(ok bool) string {
	if ok {
		return met
	}
	return missed
}

// rows turns one configuration's result into the table's lines, judging each
// figure that has a target. weightLimit is the venue's weight a minute.
func rows(r result, weightLimit int) []row {
	var out []row
	add := func(figure, value, target, v string) { out = append(out, row{figure, value, target, v}) }

	add("marketfeed ready (/readyz)", dur(r.Ready), "", "")
	if r.ColdPending == 0 {
		add("cold start: every book 200", dur(r.ColdStart), "every book", met)
	} else {
		add("cold start: every book 200", fmt.Sprintf("%d of %d books never answered 200", r.ColdPending, r.Pairs), "every book", missed)
	}
	if r.Streams == streamsOn {
		add("cold start: books that answered, then did not or went stale", fmt.Sprintf("%d (%d answers, %d of them older than %v)", r.ColdRelapsed, r.ColdRelapses, r.ColdStale, dur(coldStaleAge)),
			"none", verdict(r.ColdRelapsed == 0))
	}
	add("REST weight of the cold start", fmt.Sprintf("%d (%d calls)", r.ColdWeight.Total, r.ColdWeight.Calls), "", "")
	add("cold start: books equal to the venue (sampled)", r.ColdTruth.String(), "every one", verdict(r.ColdTruth.AllEqual()))

	share := func(figure string, s statusCount) {
		ok := s.total() > 0 && s.okShare() >= targetOKShare
		add(figure+": 200 share", fmt.Sprintf("%.3f%% of %d", 100*s.okShare(), s.total()), fmt.Sprintf("≥ %.1f%%", 100*targetOKShare), verdict(ok))
		add(figure+": other statuses", s.others(), "", "")
	}
	share("aggregator", r.Agg)
	share("hot client", r.Hot)
	if r.Measured > 0 {
		// The hot client waits for each answer, so a feed that holds
		// requests shows here as a rate below the one aimed at.
		add("hot client reads a second", fmt.Sprintf("%.1f of %d aimed at", float64(r.Hot.total())/r.Measured.Seconds(), r.HotRate), "", "")
	}
	add("200 answers that did not decode", fmt.Sprint(r.BadBodies), "0", verdict(r.BadBodies == 0))

	bookOK := r.BookAge.N > 0 && r.BookAge.P99 <= targetBookAgeP99
	add("book age p50 / p99 / max", pct(r.BookAge), "p99 ≤ "+dur(targetBookAgeP99), verdict(bookOK))
	short := fmt.Sprintf("%d of %d", r.ShortBooks, r.BookAge.N)
	if r.ShortBooks > 0 {
		short += fmt.Sprintf(" (fewest %d)", r.FewestLevels)
	}
	add("book answers under 100 levels a side", short, "", "")
	add("books equal to the venue (sampled)", r.Truth.String(), "every one", verdict(r.Truth.AllEqual()))
	add("newest-trade lag p50 / p99 / max", pct(r.TradeLag), "", "")
	if r.NoTrades > 0 {
		add("trade answers with no trades", fmt.Sprint(r.NoTrades), "", "")
	}
	add("hot book age p50 / p99 / max", pct(r.HotBookAge), "", "")
	if r.Contracts.total() > 0 {
		share("contracts (every 5 s)", r.Contracts)
		add("contracts listed, fewest in an answer", fmt.Sprintf("%d of %d pairs", r.FewestContracts, r.Pairs), "", "")
		add("contract mark age p50 / p99 / max", pct(r.MarkAge), "p99 ≤ "+dur(targetMarkAgeP99), verdict(r.MarkAge.N > 0 && r.MarkAge.P99 <= targetMarkAgeP99))
		add("open interest at the end: contracts with one, oldest", fmt.Sprintf("%d of %d, %s", r.WithInterest, r.Pairs, dur(r.OldestInterest)), "", "")
	}

	limit := targetWeightPart * float64(weightLimit)
	w := r.Steady
	add("REST weight a minute, steady", fmt.Sprintf("mean %.0f, peak %.0f (%s)", w.PerMin, w.Peak(), minutes(w)),
		fmt.Sprintf("≤ %.0f (%.0f%% of %d)", limit, 100*targetWeightPart, weightLimit), verdict(weightLimit <= 0 || w.Peak() <= limit))
	add("venue calls, steady / refused", fmt.Sprintf("%d / %d", w.Calls, w.Refused), "", "")
	add("REST weight, steady, by path", byPath(w), "", "")
	add("marketfeed CPU", fmt.Sprintf("%.1f%% of one core", 100*r.CPUShare), "", "")
	add("marketfeed max RSS", fmt.Sprintf("%.1f MiB", float64(r.MaxRSS)/(1<<20)), "", "")
	return out
}

// byPath lists the weight of each venue path, heaviest first.
func byPath(w weightUse) string {
	if w.Total == 0 {
		return "none"
	}
	paths := slices.Collect(maps.Keys(w.ByPath))
	slices.SortFunc(paths, func(a, b string) int {
		if c := cmp.Compare(w.ByPath[b], w.ByPath[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = fmt.Sprintf("%s %d", p, w.ByPath[p])
	}
	return strings.Join(parts, ", ")
}

// minutes says what the steady weight was measured over.
func minutes(w weightUse) string {
	if len(w.Minutes) == 0 {
		return "under a minute, as a rate"
	}
	return fmt.Sprintf("%d whole minutes", len(w.Minutes))
}

func dur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

func pct(p percentiles) string {
	if p.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("%s / %s / %s (n=%d)", dur(p.P50), dur(p.P99), dur(p.Max), p.N)
}

func title(r result) string {
	return fmt.Sprintf("extra %d, streams %s: %d pairs, measured %s", r.Extra, r.Streams, r.Pairs, dur(r.Measured))
}

// writeTable prints one configuration's rows under its title.
func writeTable(w io.Writer, heading string, rs []row) {
	fmt.Fprintf(w, "\n== %s\n", heading)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\ttarget\tverdict")
	for _, r := range rs {
		target := r.Target
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Figure, r.Value, target, r.Verdict)
	}
	tw.Flush()
}

// missedFigures lists the figures of rs whose target was missed.
func missedFigures(rs []row) []string {
	var out []string
	for _, r := range rs {
		if r.Verdict == missed {
			out = append(out, r.Figure)
		}
	}
	return out
}

// writeSummary prints one line per configuration side by side, so that
// streams on and off read against each other, then the verdict. Streams off
// is the baseline the feature is measured against: its misses are listed
// apart, not counted against the sweep.
func writeSummary(w io.Writer, results []result, weightLimit int) {
	fmt.Fprintf(w, "\n== summary\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "extra\tstreams\tpairs\tcold start\t200 share\tbooks equal to the venue\tbook age p99\ttrade lag p99\tweight/min peak\tCPU\tRSS MiB\ttargets")
	var judged, baseline []string
	for _, r := range results {
		miss := missedFigures(rows(r, weightLimit))
		cold := dur(r.ColdStart)
		if r.ColdPending > 0 {
			cold = fmt.Sprintf("%d pending", r.ColdPending)
		}
		v := "all met"
		if len(miss) > 0 {
			v = fmt.Sprintf("%s %d", missed, len(miss))
		}
		for _, m := range miss {
			line := fmt.Sprintf("extra %d, streams %s: %s", r.Extra, r.Streams, m)
			if r.Streams == streamsOff {
				baseline = append(baseline, line)
			} else {
				judged = append(judged, line)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.3f%%\t%s\t%s\t%s\t%.0f\t%.1f%%\t%.1f\t%s\n",
			r.Extra, r.Streams, r.Pairs, cold, 100*r.Agg.okShare(), r.Truth, p99(r.BookAge), p99(r.TradeLag),
			r.Steady.Peak(), 100*r.CPUShare, float64(r.MaxRSS)/(1<<20), v)
	}
	tw.Flush()
	if len(baseline) > 0 {
		fmt.Fprintf(w, "baseline (streams off), for comparison only:\n  %s\n", strings.Join(baseline, "\n  "))
	}
	if len(judged) == 0 {
		fmt.Fprintln(w, "every target met")
		return
	}
	fmt.Fprintf(w, "%s:\n  %s\n", missed, strings.Join(judged, "\n  "))
}

func p99(p percentiles) string {
	if p.N == 0 {
		return "-"
	}
	return dur(p.P99)
}
