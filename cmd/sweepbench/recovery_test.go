package main

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
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

func TestRecoveryShareAndSyncTime(t *testing.T) {
	for _, c := range []struct{ pairs, want int }{{446, 446}, {846, 846}, {1000, 999}, {2000, 1998}, {0, 0}} {
		if got := recoveryShare(c.pairs); got != c.want {
			t.Errorf("99.9 %% of %d pairs: %d, want %d", c.pairs, got, c.want)
		}
	}
	// 446 snapshots of weight 5 at 95 % of 1,200 a minute: 1,140 at once,
	// the rest a minute later; 846: four minutes' parts.
	for _, c := range []struct {
		books int
		want  time.Duration
	}{{446, 90 * time.Second}, {846, 3*time.Minute + 30*time.Second}, {200, 30 * time.Second}, {0, 0}} {
		if got := syncTime(c.books, 1200); got != c.want {
			t.Errorf("sync time of %d books %v, want %v", c.books, got, c.want)
		}
	}
}

// goodRecovery is a 446-pair run that meets every target.
func goodRecovery() recoveryResult {
	return recoveryResult{
		Extra: 400, Pairs: 446, Budget: 1200, Round: 10 * time.Second,
		ColdBooks: 80 * time.Second, ColdAnswers: 85 * time.Second,
		ColdWeight: weightUse{Total: 2300, PerMin: 1150},
		SteadyAgg:  statusCount{200: 13380}, CPUShare: 0.2, MaxRSS: 200 << 20,
		Connections: 6, Rotations: 6,
		Drop: cut{Measured: true, Recovered: 2 * time.Second, Resyncs: map[string]int{},
			Agg: statusCount{200: 900}, AggTrades: statusCount{200: 450}},
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
	r.ColdWeight.PerMin = 600
	r.RotResyncs = map[string]int{"lost": 3, "short": 11}
	r.Drop.Resyncs = map[string]int{"lost": 446}
	r.Drop.Recovered = 5 * time.Minute
	r.Drop.AggTrades[http.StatusBadGateway] = 1
	want := []string{
		"cold start: REST weight",
		"rotation: books out of sequence",
		"every connection dropped: 99.9 % of books newer than the drop",
		"every connection dropped: aggregator answers for trades",
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
	}
	if m := missedFigures(recoveryRows(r)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}

// After an outage every book may have missed events: its target is the
// outage plus a cold start of the books that did, and the rows are there
// only when the outage was measured.
func TestRecoveryRowsOfAnOutage(t *testing.T) {
	r := goodRecovery()
	rows := recoveryRows(r)
	for _, row := range rows {
		if strings.Contains(row.Figure, "refused") {
			t.Fatalf("row %q without an outage measured", row.Figure)
		}
	}
	r.Outage = cut{Measured: true, Outage: 10 * time.Second, Recovered: 95 * time.Second, Resyncs: map[string]int{"lost": 446}}
	if m := missedFigures(recoveryRows(r)); len(m) != 0 {
		t.Fatalf("missed %v: 95 s is within 10 s + a cold start of 446 books (90 s)", m)
	}
	r.Outage.Recovered = 105 * time.Second
	want := []string{"every connection dropped, refused for 10s: 99.9 % of books newer than the drop"}
	if m := missedFigures(recoveryRows(r)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}
