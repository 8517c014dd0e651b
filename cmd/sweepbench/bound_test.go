package main

import (
	"testing"
	"time"
)

func TestRecoveryBound(t *testing.T) {
	fault := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration, weight int) venueCall {
		return venueCall{At: fault.Add(d).UnixMicro(), Path: "/fapi/v1/depth", Weight: weight}
	}
	for _, tc := range []struct {
		name          string
		calls         []venueCall
		budget, least int
		want          time.Duration
	}{
		{"nothing before, less than a minute's budget: at once", nil, 1200, 1000, 0},
		{"nothing before, exactly a minute's budget: at once", nil, 1200, 1200, 0},
		{"nothing to read", []venueCall{at(-time.Second, 1200)}, 1200, 0, 0},
		{"an unlimited budget", []venueCall{at(-time.Second, 1200)}, 0, 5000, 0},
		{"nothing before, two and a half minutes' budget: two minutes", nil, 1200, 3000, 2 * time.Minute},
		{"nothing before, a minute's budget and one more", nil, 1200, 1201, time.Minute},
		{"a minute already full: when its first spend expires", []venueCall{at(-50*time.Second, 600), at(-20*time.Second, 600)}, 1200, 500, 10 * time.Second},
		{"a minute already full, more than its first spend frees",
			[]venueCall{at(-50*time.Second, 600), at(-20*time.Second, 600)}, 1200, 1000, 40 * time.Second},
		{"part of the minute held: the rest at once, then as it expires",
			[]venueCall{at(-30*time.Second, 400)}, 1200, 1000, 30 * time.Second},
		{"part held, the least above a minute's budget: several minutes",
			[]venueCall{at(-30*time.Second, 400)}, 1200, 2400, 90 * time.Second},
		{"the budget share, not the venue's limit, bounds the spend", nil, 600, 1500, 2 * time.Minute},
		{"calls older than a minute and after the fault are not counted",
			[]venueCall{at(-61*time.Second, 1200), at(-60*time.Second, 1200), at(time.Second, 1200)}, 1200, 1200, 0},
		{"calls out of order", []venueCall{at(-20*time.Second, 600), at(-50*time.Second, 600)}, 1200, 500, 10 * time.Second},
		{"a minute over the budget (other processes): waits for more than it holds",
			[]venueCall{at(-50*time.Second, 1000), at(-10*time.Second, 1000)}, 1200, 500, 50 * time.Second},
	} {
		if got := recoveryBound(tc.calls, fault, tc.budget, tc.least); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLeastWeight(t *testing.T) {
	from := time.Unix(1_700_000_000, 0)
	call := func(d time.Duration, path string, weight int) venueCall {
		return venueCall{At: from.Add(d).UnixMicro(), Path: path, Weight: weight}
	}
	calls := []venueCall{
		call(-time.Second, "/fapi/v1/exchangeInfo", 1), // before the recovery
		call(0, "/fapi/v1/ticker/24hr", 40),
		call(time.Second, "/fapi/v1/ticker/24hr", 40), // read twice: once is the least
		call(2*time.Second, "/fapi/v1/premiumIndex", 10),
		call(3*time.Second, "/fapi/v1/depth", 10),          // a book: counted by the books
		call(4*time.Second, "/fapi/v1/aggTrades", 20),      // not a bulk read
		call(time.Minute, "/fapi/v1/ticker/bookTicker", 5), // after it
	}
	l := leastWeight(446, snapshotWeightAt(500), calls, from, from.Add(time.Minute))
	if l.Total() != 446*10+50 {
		t.Errorf("least %d (%s), want %d", l.Total(), l, 446*10+50)
	}
	if got, want := l.String(), "4510 = 446 books × 10 + 50 bulk (ticker/24hr, premiumIndex)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	depth := []venueCall{call(0, "/fapi/v1/depth", 10), call(time.Second, "/fapi/v1/depth", 20), call(2*time.Second, "/fapi/v1/depth", 10),
		call(3*time.Second, "/fapi/v1/depth", 20), call(4*time.Second, "/fapi/v1/depth", 5), call(2*time.Minute, "/fapi/v1/depth", 5)}
	if got := commonWeight(depth, "/fapi/v1/depth", from, from.Add(time.Minute)); got != 10 {
		t.Errorf("the depth reads' most common weight %d, want 10 (the smaller of two as common)", got)
	}
	if got := commonWeight(depth, "/fapi/v1/aggTrades", from, from.Add(time.Minute)); got != 0 {
		t.Errorf("no reads: most common weight %d, want 0", got)
	}
	for depth, want := range map[int]int{100: 5, 500: 10, 1000: 20} {
		if got := snapshotWeightAt(depth); got != want {
			t.Errorf("snapshot of %d levels: weight %d, want %d (Binance's)", depth, got, want)
		}
	}
}
