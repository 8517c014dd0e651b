package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/internal/venuetruth"
)

// good is a configuration that meets every target.
func good() result {
	return result{
		Extra: 400, Streams: streamsOn, Pairs: 446,
		Ready: 20 * time.Millisecond, ColdStart: 4 * time.Second,
		ColdWeight: weightUse{Total: 300, Calls: 10},
		Measured:   3 * time.Minute,
		HotRate:    50,
		Agg:        statusCount{200: 2676},
		Hot:        statusCount{200: 9000},
		BookAge:    percentiles{N: 1338, P50: ms(100), P99: ms(900), Max: ms(1200)},
		TradeLag:   percentiles{N: 1338, P50: ms(300), P99: ms(2000), Max: ms(3000)},
		HotBookAge: percentiles{N: 4500, P50: ms(50), P99: ms(200), Max: ms(300)},
		Steady: weightUse{Total: 120, Minutes: []int{40, 40, 40}, PerMin: 40, Calls: 24,
			ByPath: map[string]int{"/fapi/v1/depth": 40, "/fapi/v1/aggTrades": 40, "/fapi/v1/ticker/24hr": 40}},
		Contracts:       statusCount{200: 36},
		MarkAge:         percentiles{N: 36 * 446, P50: ms(800), P99: ms(1500), Max: ms(1900)},
		FewestContracts: 446, WithInterest: 446, OldestInterest: 55 * time.Second,
		ColdTruth: allEqual(45), Truth: allEqual(268),
		CPUShare: 0.031,
		MaxRSS:   48 << 20,
	}
}

func TestRowsVerdicts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*result)
		limit  int
		missed []string
	}{
		{"every target met", func(*result) {}, 2400, nil},
		{"one 429 in a thousand is within 99.9%", func(r *result) { r.Agg = statusCount{200: 999, 429: 1} }, 2400, nil},
		{"two in a thousand are not", func(r *result) { r.Agg = statusCount{200: 998, 429: 2} }, 2400,
			[]string{"aggregator: 200 share"}},
		{"no answers at all miss the share", func(r *result) { r.Hot = statusCount{} }, 2400,
			[]string{"hot client: 200 share"}},
		{"p99 of a second is met", func(r *result) { r.BookAge.P99 = time.Second }, 2400, nil},
		{"p99 over a second is not", func(r *result) { r.BookAge.P99 = time.Second + time.Millisecond }, 2400,
			[]string{"book age p50 / p99 / max"}},
		{"no book samples miss the age", func(r *result) { r.BookAge = percentiles{} }, 2400,
			[]string{"book age p50 / p99 / max"}},
		{"a heavy minute misses the weight though the mean is low", func(r *result) {
			r.Steady = weightUse{Total: 200, Minutes: []int{20, 160, 20}, PerMin: 66}
		}, 2400, []string{"REST weight a minute, steady"}},
		{"120 is 5% of 2400: met", func(r *result) { r.Steady = weightUse{Minutes: []int{120}, PerMin: 120} }, 2400, nil},
		{"under a minute the rate is judged", func(r *result) { r.Steady = weightUse{PerMin: 121} }, 2400,
			[]string{"REST weight a minute, steady"}},
		{"no venue limit: any weight is met", func(r *result) { r.Steady = weightUse{Minutes: []int{5000}} }, 0, nil},
		{"a book that never answered misses the cold start", func(r *result) { r.ColdPending = 3 }, 2400,
			[]string{"cold start: every book 200"}},
		{"one short book among those sampled misses the venue's truth", func(r *result) { r.Truth.Add(venuetruth.Short) }, 2400,
			[]string{"books equal to the venue (sampled)"}},
		{"no book sampled misses the venue's truth", func(r *result) { r.ColdTruth = venuetruth.Tally{} }, 2400,
			[]string{"cold start: books equal to the venue (sampled)"}},
		{"a book that answered and then did not misses the cold start", func(r *result) { r.ColdRelapsed, r.ColdRelapses = 1, 2 }, 2400,
			[]string{"cold start: books that answered, then did not or went stale"}},
		{"over REST alone a relapse is not judged", func(r *result) {
			r.Streams, r.ColdRelapsed = streamsOff, 5
			r.Steady = weightUse{Minutes: []int{100}, PerMin: 100}
		}, 2400, nil},
		{"an undecodable 200 is missed", func(r *result) { r.BadBodies = 1 }, 2400,
			[]string{"200 answers that did not decode"}},
		{"a mark over 2 s old at p99 is missed", func(r *result) { r.MarkAge.P99 = 2*time.Second + time.Millisecond }, 2400,
			[]string{"contract mark age p50 / p99 / max"}},
		{"a 502 of /contracts in a hundred is missed", func(r *result) { r.Contracts = statusCount{200: 99, 502: 1} }, 2400,
			[]string{"contracts (every 5 s): 200 share"}},
		{"no /contracts read: not judged", func(r *result) { r.Contracts = statusCount{} }, 2400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.change(&r)
			if got := missedFigures(rows(r, tt.limit)); !slices.Equal(got, tt.missed) {
				t.Errorf("missed %q, want %q", got, tt.missed)
			}
		})
	}
}

func TestRowsValues(t *testing.T) {
	r := good()
	r.Agg = statusCount{200: 996, 429: 3, 0: 1}
	r.ShortBooks, r.FewestLevels = 3, 61
	got := map[string]row{}
	for _, x := range rows(r, 2400) {
		got[x.Figure] = x
	}
	want := map[string]string{
		"aggregator: 200 share":                "99.600% of 1000",
		"aggregator: other statuses":           "error×1 429×3",
		"book age p50 / p99 / max":             "100ms / 900ms / 1.2s (n=1338)",
		"REST weight a minute, steady":         "mean 40, peak 40 (3 whole minutes)",
		"marketfeed CPU":                       "3.1% of one core",
		"hot client reads a second":            "50.0 of 50 aimed at",
		"marketfeed max RSS":                   "48.0 MiB",
		"book answers under 100 levels a side": "3 of 1338 (fewest 61)",
		// Heaviest first; equal weights by path.
		"REST weight, steady, by path": "/fapi/v1/aggTrades 40, /fapi/v1/depth 40, /fapi/v1/ticker/24hr 40",
	}
	for fig, v := range want {
		if got[fig].Value != v {
			t.Errorf("%s = %q, want %q", fig, got[fig].Value, v)
		}
	}
	if w := got["REST weight a minute, steady"].Target; w != "≤ 120 (5% of 2400)" {
		t.Errorf("weight target = %q", w)
	}
}

func TestSummaryKeepsTheBaselineApart(t *testing.T) {
	on := good()
	off := good()
	off.Streams = streamsOff
	off.BookAge.P99 = 40 * time.Second
	tests := []struct {
		name    string
		results []result
		want    []string
		notWant []string
	}{
		{"streams on met, off missed", []result{on, off},
			[]string{"baseline (streams off), for comparison only:\n  extra 400, streams off: book age", "every target met"},
			[]string{"MISSED:"}},
		{"streams on missed", []result{func() result { r := on; r.ColdPending = 1; return r }(), off},
			[]string{"MISSED:\n  extra 400, streams on: cold start"},
			[]string{"every target met"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			writeSummary(&b, tt.results, 2400)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("summary lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(b.String(), w) {
					t.Errorf("summary has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		modes   []streamMode
		wantErr string
	}{
		{"defaults: on and off", nil, []streamMode{streamsOn, streamsOff}, ""},
		{"no comparison", []string{"-compare-off=false"}, []streamMode{streamsOn}, ""},
		{"REST only, one run", []string{"-streams-flags=false"}, []streamMode{streamsOmitted}, ""},
		{"unbounded hot rate", []string{"-hot-rate", "5000"}, nil, "-hot-rate"},
		{"no duration", []string{"-duration", "0s"}, nil, "-duration"},
		{"bad extra", []string{"-extra", "a"}, nil, "-extra"},
		{"stray argument", []string{"now"}, nil, "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, &bytes.Buffer{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.modes(); !slices.Equal(got, tt.modes) {
				t.Errorf("modes = %v, want %v", got, tt.modes)
			}
		})
	}
}

// levels100 is a side of 100 levels, as JSON array items.
var levels100 = strings.TrimSuffix(strings.Repeat(`["1","1"],`, 100), ",")

func TestCollectorFilesAnswers(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	c := newCollector()
	c.record(false, "orderbook", 200, []byte(`{"timestamp":999800}`), now) // no levels: short
	c.record(false, "orderbook", 200, []byte(`{"timestamp":999800,"bids":[`+levels100+`],"asks":[`+levels100+`]}`), now)
	c.record(false, "trades", 200, []byte(`[{"trade_timestamp":999000}]`), now)
	c.record(false, "trades", 200, []byte(`[]`), now)
	c.record(false, "orderbook", 200, []byte(`{}`), now)
	c.record(false, "orderbook", 502, []byte(`{"error":"UPSTREAM_UNAVAILABLE"}`), now)
	c.record(true, "orderbook", 200, []byte(`{"timestamp":999950}`), now)
	c.record(true, "trades", 0, nil, now)
	if !slices.Equal(c.bookAges, []time.Duration{ms(200), ms(200)}) || !slices.Equal(c.lags, []time.Duration{time.Second}) ||
		!slices.Equal(c.hotAges, []time.Duration{ms(50)}) {
		t.Errorf("ages: book %v, lag %v, hot %v", c.bookAges, c.lags, c.hotAges)
	}
	if c.noTrades != 1 || c.badBodies != 1 || c.short != 1 || c.fewest != 0 {
		t.Errorf("noTrades %d, badBodies %d, short %d (fewest %d); want 1, 1, 1 (0)", c.noTrades, c.badBodies, c.short, c.fewest)
	}
	if c.agg.others() != "502×1" || c.agg[200] != 5 || c.hot.others() != "error×1" {
		t.Errorf("statuses: aggregator %v, hot %v", c.agg, c.hot)
	}
}
