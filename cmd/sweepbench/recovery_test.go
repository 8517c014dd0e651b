package main

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/internal/venuetruth"
)

func TestParseMetricsAndLabels(t *testing.T) {
	m := parseMetrics([]byte(`# HELP x
marketfeed_book_resyncs_total{cause="gap"} 3
marketfeed_book_resyncs_total{cause="lost"} 446
marketfeed_pairs{part="books",source="stream"} 440
marketfeed_books_sync_eta_seconds +Inf
broken line
`))
	if got := m[`marketfeed_pairs{part="books",source="stream"}`]; got != 440 {
		t.Fatalf("stream books %v, want 440", got)
	}
	before := map[string]int{"gap": 1, "lost": 446}
	after := m.byLabel("marketfeed_book_resyncs_total", "cause")
	if want := map[string]int{"gap": 3, "lost": 446}; !maps.Equal(after, want) {
		t.Fatalf("by cause %v, want %v", after, want)
	}
	if got, want := since(before, after), map[string]int{"gap": 2}; !maps.Equal(got, want) {
		t.Fatalf("growth %v, want %v", got, want)
	}
	if got := causes(since(before, after)); got != "gap 2" {
		t.Fatalf("causes %q", got)
	}
	if got := causes(nil); got != "none" {
		t.Fatalf("no causes %q", got)
	}
}

// A pair counts from the later of its first book 200 and its first trades
// 200, and the phase ends when the need-th pair has both.
func TestAllAnswered(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	l := &answerLog{}
	l.record("orderbook", "A", 502, nil, at(1))
	l.record("orderbook", "A", 200, nil, at(2))
	l.record("trades", "A", 200, nil, at(3))
	l.record("trades", "B", 200, nil, at(1))
	l.record("orderbook", "B", 200, nil, at(9))
	l.record("orderbook", "C", 200, nil, at(4))
	if _, ok := l.allAnswered(3); ok {
		t.Fatal("C never answered its trades, yet three pairs count as answered")
	}
	if got, ok := l.allAnswered(2); !ok || !got.Equal(at(9)) {
		t.Fatalf("two pairs answered at %v (%v), want 9 s", got.Sub(t0), ok)
	}
	if got := l.statuses(at(1), at(2)); !maps.Equal(got, statusCount{502: 1, 200: 1}) {
		t.Fatalf("statuses in [1 s, 2 s): %v", got)
	}
	if got := l.statusesOf("trades", at(1), at(4)); !maps.Equal(got, statusCount{200: 2}) {
		t.Fatalf("trades statuses in [1 s, 4 s): %v", got)
	}
}

func TestRecoveryShare(t *testing.T) {
	for _, c := range []struct{ pairs, want int }{{446, 446}, {846, 846}, {1000, 999}, {2000, 1998}, {0, 0}} {
		if got := recoveryShare(c.pairs); got != c.want {
			t.Errorf("99.9 %% of %d pairs: %d, want %d", c.pairs, got, c.want)
		}
	}
}

// allEqual is a tally of n sampled books, every one the venue's.
func allEqual(n int) venuetruth.Tally {
	var t venuetruth.Tally
	for range n {
		t.Add(venuetruth.Equal)
	}
	return t
}

// goodRecovery is a 446-pair run that meets every target.
func goodRecovery() recoveryResult {
	return recoveryResult{
		Extra: 400, Pairs: 446, Budget: 1200, Round: 10 * time.Second, SyncDepth: 500, BookWeight: 10,
		ColdBooks: 80 * time.Second, ColdAnswers: 85 * time.Second,
		ColdWeight: weightUse{Total: 4800, PerMin: 1150},
		ColdLeast:  least{Books: 446, BookWeight: 10, Bulk: 50}, ColdBound: 3 * time.Minute, ColdSnapshot: 10,
		SteadyAgg: statusCount{200: 13380}, CPUShare: 0.2, MaxRSS: 200 << 20,
		Connections: 6, Rotations: 6,
		Drop: cut{Measured: true, Recovered: 2 * time.Second, Resyncs: map[string]int{},
			Agg: statusCount{200: 900}, AggTrades: statusCount{200: 450}},
		Truth: map[string]venuetruth.Tally{phaseCold: allEqual(20), phaseSteady: allEqual(600), phaseDrop: allEqual(50)},
	}
}

func TestRecoveryRowsVerdicts(t *testing.T) {
	r := goodRecovery()
	if m := missedFigures(recoveryRows(r)); len(m) != 0 {
		t.Fatalf("missed %v, want every target met", m)
	}
	r.RotResyncs = map[string]int{"short": 11}
	if m := missedFigures(recoveryRows(r)); len(m) != 0 {
		t.Fatalf("missed %v: a refresh of a book in sequence is no rotation resync", m)
	}
	r.ColdSnapshot = 5 // marketfeed synced at 100 levels, the bench counted 500
	r.ColdBooks = 3*time.Minute + 16*time.Second
	r.ColdWeight.Total = 5200 // over 1.15 × 4,510
	r.RotResyncs = map[string]int{"lost": 3, "short": 11}
	r.Drop.Resyncs = map[string]int{"lost": 446}
	r.Drop.Recovered = 5 * time.Minute
	r.Drop.AggTrades[http.StatusBadGateway] = 1
	short := allEqual(19)
	short.Add(venuetruth.Short)
	r.Truth[phaseCold] = short
	delete(r.Truth, phaseDrop)
	want := []string{
		"snapshot depth books are synced at (-sync-depth)",
		"rotation: books out of sequence",
		"every connection dropped: 99.9 % of books newer than the drop",
		"every connection dropped: aggregator answers for trades",
		"cold start: time against the venue's bound",
		"cold start: weight against the least",
		"cold start: books equal to the venue (sampled)",
		"steady, connections rotated: books out of sequence; answers not 200",
		"every connection cut: books equal to the venue (sampled)",
	}
	if m := missedFigures(recoveryRows(r)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}

// With two lines, one line's drop must cost nothing, and the CPU target is
// the two-line one.
func TestRecoveryRowsOfALineDrop(t *testing.T) {
	r := recoveryResult{
		Extra: 400, Pairs: 446, Budget: 1200, Round: 10 * time.Second, Lines: 2,
		ColdBooks: 80 * time.Second, ColdAnswers: 85 * time.Second,
		ColdWeight: weightUse{Total: 2300, PerMin: 1150},
		SteadyAgg:  statusCount{200: 13380}, CPUShare: 0.35, MaxRSS: 200 << 20,
		Connections: 12, Rotations: 12,
		Drop: cut{Measured: true, Recovered: 2 * time.Second, Resyncs: map[string]int{},
			Agg: statusCount{200: 900}, AggTrades: statusCount{200: 450}},
		Line: lineDrop{Measured: true, Back: time.Second, Agg: statusCount{200: 900}, Resyncs: map[string]int{"short": 2},
			OldestAge: 700 * time.Millisecond, Baseline: 700 * time.Millisecond},
		ColdLeast: least{Books: 446, BookWeight: 5}, ColdBound: 70 * time.Second,
		Truth: map[string]venuetruth.Tally{phaseCold: allEqual(20), phaseSteady: allEqual(600), phaseDrop: allEqual(50), phaseLine: allEqual(90)},
	}
	if m := missedFigures(recoveryRows(r)); len(m) != 0 {
		t.Fatalf("missed %v, want every target met", m)
	}
	r.Line.Agg[http.StatusBadGateway] = 3
	r.Line.Suspends, r.Line.Resyncs = 5, map[string]int{"lost": 2}
	r.Line.Over = 2 * time.Second
	r.Lines, r.Line.Measured = 1, true
	want := []string{
		"steady: CPU",
		"one line dropped: aggregator answers not 200",
		"one line dropped: books out of sequence; suspended",
		"one line dropped: oldest book",
		"one line cut: books out of sequence; answers not 200",
	}
	if m := missedFigures(recoveryRows(r)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}

// After an outage every book may have missed events: its target is the
// venue's bound on syncing every book again (the outage, then what the
// minute allows) plus 15 s, and the rows are there only when the outage was
// measured.
func TestRecoveryRowsOfAnOutage(t *testing.T) {
	r := goodRecovery()
	rows := recoveryRows(r)
	for _, row := range rows {
		if strings.Contains(row.Figure, "refused") {
			t.Fatalf("row %q without an outage measured", row.Figure)
		}
	}
	r.Outage = cut{Measured: true, Outage: 10 * time.Second, Recovered: 95 * time.Second, Resyncs: map[string]int{"lost": 446},
		Least: least{Books: 446, BookWeight: 10, Bulk: 50}, Bound: 80 * time.Second, Spent: 5000}
	r.Truth[phaseOutage] = allEqual(40)
	if m := missedFigures(recoveryRows(r)); len(m) != 0 {
		t.Fatalf("missed %v: 95 s is within the bound (80 s) + 15 s, 5,000 within 1.15 × 4,510", m)
	}
	r.Outage.Recovered = 96 * time.Second
	want := []string{"every connection dropped, refused for 10s: 99.9 % of books newer than the drop", "outage: time against the venue's bound"}
	if m := missedFigures(recoveryRows(r)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}

// The phase table prints each phase's time against its bound, its weight
// against the least, its books judged by the venue and its verdicts.
func TestPhaseTable(t *testing.T) {
	r := goodRecovery()
	r.ColdResyncs = map[string]int{"short": 87}
	short := allEqual(4)
	short.Add(venuetruth.Short)
	r.Truth[phaseSteady] = short
	r.Gap = gapPhase{Measured: true, Books: 10, Recovered: 1768 * time.Millisecond, Resyncs: map[string]int{"gap": 10}, Agg: statusCount{200: 203}}
	r.Truth[phaseGap] = allEqual(120)
	var b strings.Builder
	writePhases(&b, "phases", recoveryPhases(r))
	fields := map[string][]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1); len(f) > 1 {
			fields[f[0]] = f[1:]
		}
	}
	for name, want := range map[string][]string{
		"phase":     {"time", "bound", "weight", "least", "books equal to the venue", "resyncs by cause", "200 share", "targets"},
		phaseCold:   {"1m20s", "3m0s", "4800", "4510", "20 / 20", "short 87", "-", "time met, weight met, books met"},
		phaseSteady: {"-", "-", "-", "-", "4 / 5 (1 short)", "none", "100.000% of 13380", "books MISSED, quiet met"},
		phaseDrop:   {"2s", "0s", "0", "0", "50 / 50", "none", "100.000% of 900", "books met"},
		phaseGap:    {"1.768s", "-", "-", "-", "120 / 120", "gap 10", "100.000% of 203", "books met"},
	} {
		if got := fields[name]; !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q\n%s", name, got, want, b.String())
		}
	}
}
