package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The aggregator's book answers carry their age, which the phase of a
// venue closing connections judges at the 99th percentile; anything else
// has none.
func TestBookAgesOfTheAnswers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &answerLog{}
	book := func(ageMs int64) []byte {
		return fmt.Appendf(nil, `{"ticker_id":"A_USDT","timestamp":%d,"bids":[],"asks":[]}`, t0.UnixMilli()-ageMs)
	}
	for i := range 100 {
		l.record("orderbook", "A", 200, book(int64(10*i)), t0)
	}
	l.record("orderbook", "A", 502, nil, t0)
	l.record("trades", "A", 200, []byte(`[]`), t0)
	l.record("orderbook", "A", 200, book(5000), t0.Add(time.Second)) // outside the window
	got := l.bookAges(t0, t0.Add(time.Second))
	if want := (percentiles{N: 100, P50: 490 * time.Millisecond, P99: 980 * time.Millisecond, Max: 990 * time.Millisecond}); got != want {
		t.Fatalf("book ages %+v, want %+v", got, want)
	}
}

// The phase's rows judge the 200 share and the book age's p99; they are
// there only when the phase was measured, and its age is 20 s or half a
// shorter -ws-max-age.
func TestVenueCloseRows(t *testing.T) {
	if rows := venueCloseRows(venueCloses{}); rows != nil {
		t.Fatalf("rows %v without the phase measured", rows)
	}
	if got := phaseCloseAge(2 * time.Minute); got != 20*time.Second {
		t.Errorf("closing age for a 2 m max age %s, want 20 s", got)
	}
	if got := phaseCloseAge(20 * time.Second); got != 10*time.Second {
		t.Errorf("closing age for a 20 s max age %s, want 10 s", got)
	}
	v := venueCloses{Measured: true, Age: 20 * time.Second, For: time.Minute, Agg: statusCount{200: 3120},
		BookAge: percentiles{N: 1560, P50: 300 * time.Millisecond, P99: 800 * time.Millisecond, Max: 1200 * time.Millisecond},
		Resyncs: map[string]int{"short": 2}, Rotated: 60, Learned: 20 * time.Second}
	if m := missedFigures(venueCloseRows(v)); len(m) != 0 {
		t.Fatalf("missed %v, want every target met", m)
	}
	v.Agg[502] = 100
	v.BookAge.P99 = 8700 * time.Millisecond
	want := []string{
		"venue closes every connection at 20s for 1m0s: aggregator 200 share",
		"venue closes every connection at 20s for 1m0s: book age p50 / p99 / max",
	}
	if m := missedFigures(venueCloseRows(v)); !slices.Equal(m, want) {
		t.Fatalf("missed %q, want %q", m, want)
	}
}
