package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestSummarize(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(100 - i) // unsorted on purpose: 100ms down to 1ms
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = ms(i + 1)
	}
	tests := []struct {
		name    string
		samples []time.Duration
		want    percentiles
	}{
		{"none", nil, percentiles{}},
		{"one", []time.Duration{ms(7)}, percentiles{N: 1, P50: ms(7), P99: ms(7), Max: ms(7)}},
		{"two", []time.Duration{ms(9), ms(1)}, percentiles{N: 2, P50: ms(1), P99: ms(9), Max: ms(9)}},
		{"hundred", hundred, percentiles{N: 100, P50: ms(50), P99: ms(99), Max: ms(100)}},
		{"thousand", thousand, percentiles{N: 1000, P50: ms(500), P99: ms(990), Max: ms(1000)}},
		{"one outlier in a hundred does not move p99", append(slices.Repeat([]time.Duration{ms(10)}, 99), time.Minute),
			percentiles{N: 100, P50: ms(10), P99: ms(10), Max: time.Minute}},
		{"two outliers in a hundred do", append(slices.Repeat([]time.Duration{ms(10)}, 98), time.Minute, time.Minute),
			percentiles{N: 100, P50: ms(10), P99: time.Minute, Max: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summarize(tt.samples); got != tt.want {
				t.Errorf("summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBookAge(t *testing.T) {
	now := time.UnixMilli(1_795_240_283_774)
	tests := []struct {
		name    string
		body    string
		want    time.Duration
		levels  int
		wantErr string
	}{
		{"fresh", `{"ticker_id":"BTC_USDT","timestamp":1795240283774,"bids":[],"asks":[]}`, 0, 0, ""},
		{"250 ms old", `{"ticker_id":"BTC_USDT","timestamp":1795240283524,"bids":[["1","2"],["0.9","1"]],"asks":[["1.1","3"]]}`, ms(250), 1, ""},
		{"a minute old", `{"timestamp":1795240223774}`, time.Minute, 0, ""},
		{"from a clock a hair ahead", `{"timestamp":1795240283776}`, 0, 0, ""},
		{"no timestamp", `{"ticker_id":"BTC_USDT","bids":[],"asks":[]}`, 0, 0, "no timestamp"},
		{"not json", `<html>`, 0, 0, "orderbook"},
		{"an error body", `{"error":"UNKNOWN_TICKER","message":"x"}`, 0, 0, "no timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, levels, err := bookAge([]byte(tt.body), now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || levels != tt.levels {
				t.Errorf("bookAge = %v, %d levels, %v; want %v, %d", got, levels, err, tt.want, tt.levels)
			}
		})
	}
}

func TestReadContracts(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	body := `[{"ticker_id":"A_USDT","timestamp":999000,"open_interest":"5","open_interest_timestamp":940000},` +
		`{"ticker_id":"B_USDT","timestamp":998500,"open_interest":null,"open_interest_timestamp":null}]`
	r, err := readContracts([]byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	if r.items != 2 || r.withInterest != 1 || r.oldestInterest != 60*time.Second ||
		!slices.Equal(r.markAges, []time.Duration{time.Second, 1500 * time.Millisecond}) {
		t.Errorf("%+v", r)
	}
	for _, bad := range []string{`{}`, `[{"ticker_id":"A_USDT"}]`, `nope`} {
		if _, err := readContracts([]byte(bad), now); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestTradeLag(t *testing.T) {
	now := time.UnixMilli(1_795_240_284_000)
	tests := []struct {
		name    string
		body    string
		want    time.Duration
		wantOK  bool
		wantErr bool
	}{
		{"newest first", `[{"trade_id":"a","trade_timestamp":1795240283674},{"trade_id":"b","trade_timestamp":1795240283133}]`, ms(326), true, false},
		{"misordered: the newest still counts", `[{"trade_timestamp":1795240283133},{"trade_timestamp":1795240283900}]`, ms(100), true, false},
		{"no trades", `[]`, 0, false, false},
		{"item without a timestamp", `[{"trade_id":"a"}]`, 0, false, true},
		{"an object, not a list", `{"error":"x"}`, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := tradeLag([]byte(tt.body), now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("tradeLag = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPairIDs(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr bool
	}{
		{"two", `[{"ticker_id":"BTC_USDT","base":"BTC","kind":"spot"},{"ticker_id":"SIM001_USDT","kind":"perp"}]`, []string{"BTC_USDT", "SIM001_USDT"}, false},
		{"empty", `[]`, []string{}, false},
		{"item without id", `[{"base":"BTC"}]`, nil, true},
		{"not a list", `{"error":"x"}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pairIDs([]byte(tt.body))
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("pairIDs = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWeightIn(t *testing.T) {
	from := time.Unix(1_000_000, 0)
	at := func(d time.Duration) int64 { return from.Add(d).UnixMicro() }
	call := func(d time.Duration, path string, weight int) venueCall {
		return venueCall{At: at(d), Path: path, Weight: weight}
	}
	steady := []venueCall{
		call(-time.Second, "/fapi/v1/ticker/24hr", 40), // before the window
		call(0, "/fapi/v1/depth", 10),
		call(30*time.Second, "/fapi/v1/aggTrades", 20),
		call(59*time.Second, "/fapi/v1/ticker/24hr", 40),
		call(60*time.Second, "/fapi/v1/exchangeInfo", 1),
		call(90*time.Second, "/fapi/v1/ticker/bookTicker", 5),
		call(150*time.Second, "/market/stream", 0), // no REST weight
		{At: at(170 * time.Second), Path: "/fapi/v1/depth", Weight: 10, Fault: true},
		call(180*time.Second, "/fapi/v1/depth", 20), // at the window's end: out
	}
	tests := []struct {
		name     string
		calls    []venueCall
		span     time.Duration
		want     weightUse
		wantPeak float64
	}{
		{"three minutes", steady, 3 * time.Minute,
			weightUse{Total: 86, Minutes: []int{70, 6, 10}, PerMin: 86.0 / 3, Calls: 7, Refused: 1, ByPath: map[string]int{
				"/fapi/v1/depth": 20, "/fapi/v1/aggTrades": 20, "/fapi/v1/ticker/24hr": 40,
				"/fapi/v1/exchangeInfo": 1, "/fapi/v1/ticker/bookTicker": 5,
			}}, 70},
		{"a part-minute counts in the total, not as a minute", steady, 150 * time.Second,
			weightUse{Total: 76, Minutes: []int{70, 6}, PerMin: 76 / 2.5, Calls: 5}, 70},
		{"under a minute: the rate is the peak", steady, 30 * time.Second,
			weightUse{Total: 10, Minutes: []int{}, PerMin: 20, Calls: 1}, 20},
		{"no calls", nil, time.Minute, weightUse{Minutes: []int{0}}, 0},
		{"an empty window", steady, 0, weightUse{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := weightIn(tt.calls, from, from.Add(tt.span))
			if got.Total != tt.want.Total || !slices.Equal(got.Minutes, tt.want.Minutes) || got.PerMin != tt.want.PerMin ||
				got.Calls != tt.want.Calls || got.Refused != tt.want.Refused ||
				(tt.want.ByPath != nil && !maps.Equal(got.ByPath, tt.want.ByPath)) {
				t.Errorf("weightIn = %+v, want %+v", got, tt.want)
			}
			if p := got.Peak(); p != tt.wantPeak {
				t.Errorf("Peak = %v, want %v", p, tt.wantPeak)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name   string
		pairs  []string
		period time.Duration
		want   []request
	}{
		{"none", nil, time.Minute, []request{}},
		{"one pair: book at the start, trades half-way", []string{"A"}, time.Minute, []request{
			{0, "A", "orderbook"}, {30 * time.Second, "A", "trades"},
		}},
		{"three pairs, 10 s apart", []string{"A", "B", "C"}, time.Minute, []request{
			{0, "A", "orderbook"}, {10 * time.Second, "A", "trades"},
			{20 * time.Second, "B", "orderbook"}, {30 * time.Second, "B", "trades"},
			{40 * time.Second, "C", "orderbook"}, {50 * time.Second, "C", "trades"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := schedule(tt.pairs, tt.period); !slices.Equal(got, tt.want) {
				t.Errorf("schedule = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestScheduleSpreadsEvenly checks the property the aggregator relies on for
// a pair count that does not divide the minute: every read inside the
// period, in order, and no two reads further apart than one step rounded up.
func TestScheduleSpreadsEvenly(t *testing.T) {
	for _, n := range []int{1, 7, 437, 823} {
		pairs := make([]string, n)
		for i := range pairs {
			pairs[i] = string(rune('A' + i%26))
		}
		got := schedule(pairs, time.Minute)
		if len(got) != 2*n {
			t.Fatalf("n=%d: %d reads, want %d", n, len(got), 2*n)
		}
		step := time.Minute / time.Duration(2*n)
		for i, r := range got {
			if r.At < 0 || r.At >= time.Minute {
				t.Fatalf("n=%d: read %d at %v, outside the minute", n, i, r.At)
			}
			if i > 0 {
				if gap := r.At - got[i-1].At; gap < step || gap > step+1 {
					t.Fatalf("n=%d: gap %v before read %d, want %v", n, gap, i, step)
				}
			}
		}
	}
}

func TestStatusCount(t *testing.T) {
	tests := []struct {
		name   string
		s      statusCount
		share  float64
		others string
	}{
		{"none", statusCount{}, 0, "none"},
		{"all 200", statusCount{200: 5}, 1, "none"},
		{"some errors", statusCount{200: 996, 429: 3, 0: 1}, 0.996, "error×1 429×3"},
		{"a zero count is not listed", statusCount{200: 1, 502: 0}, 1, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.okShare(); got != tt.share {
				t.Errorf("okShare = %v, want %v", got, tt.share)
			}
			if got := tt.s.others(); got != tt.others {
				t.Errorf("others = %q, want %q", got, tt.others)
			}
		})
	}
}

func TestParseExtras(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"400,800", []int{400, 800}, false},
		{" 20 ", []int{20}, false},
		{"0,", []int{0}, false},
		{"", nil, true},
		{"400,x", nil, true},
		{"-1", nil, true},
	}
	for _, tt := range tests {
		got, err := parseExtras(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseExtras(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
