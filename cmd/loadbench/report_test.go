package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(c.in)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median reordered its argument: %v", c.in)
		}
	}
}

func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for r, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(s, r); !slices.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", s, r, got, want)
		}
	}
	if !slices.Equal(s, []string{"a", "b", "c"}) {
		t.Errorf("rotate changed its argument: %v", s)
	}
	if rotate(nil, 2) != nil {
		t.Error("rotate(nil) is not nil")
	}
}

func runs(rates ...float64) []wrkResult {
	var out []wrkResult
	for _, r := range rates {
		out = append(out, wrkResult{ReqPerSec: r, LatencyP99: time.Millisecond})
	}
	return out
}

// sampleResults is a run where every target is measured: marketfeed at
// 100k req/s on most routes against references chosen to pass or miss.
func sampleResults() *results {
	r := &results{
		Machine: machine{CPUs: 2, Model: "Test CPU", Kernel: "6.1", Go: "go1.26", Nginx: "nginx/1.22.1", Wrk: "wrk 4.1.0", Vegeta: "v12.12.0"},
		Rounds:  3, Duration: 5 * time.Second, Connections: 64,
		Routes:     benchRoutes("BTC_USDT"),
		Groups:     benchGroups(true, true),
		Throughput: map[cell][]wrkResult{},
		Latency:    map[cell][]latencyResult{},
		Sizes:      map[string][2]int{"book": {4268, 1300}, "book5": {278, 0}},
	}
	for _, rt := range r.Routes {
		r.Throughput[cell{srvMarketfeed, rt.Key, varPlain}] = runs(100e3, 90e3, 110e3)
		r.Throughput[cell{srvStatic, rt.Key, varPlain}] = runs(80e3, 80e3, 80e3)
	}
	// The drift of the host shows in both servers of a round; per-round
	// ratios see through it.
	r.Throughput[cell{srvMemory, "book", varPlain}] = runs(110e3, 105e3, 125e3)
	r.Throughput[cell{srvPeer, "book", varPlain}] = runs(40e3, 40e3, 40e3)
	r.Throughput[cell{srvLimitOff, limiterRoute, varXFF}] = runs(100e3, 100e3, 100e3)
	r.Throughput[cell{srvLimitOn, limiterRoute, varXFF}] = runs(97e3, 93e3, 96e3)
	r.Throughput[cell{srvMarketfeed, "book", varGzip}] = runs(120e3)
	r.Throughput[cell{srvStatic, "book", varGzip}] = runs(100e3)
	for _, rt := range r.Routes {
		r.Latency[cell{srvMarketfeed, rt.Key, varHalf}] = []latencyResult{
			{Target: 50e3, Rate: 50e3, P50: 200 * time.Microsecond, P99: time.Millisecond, Max: 3 * time.Millisecond, Success: 1, Statuses: "200:150000"},
		}
	}
	r.Latency[cell{srvMarketfeed, "pairs", varHalf}][0].P99 = 3 * time.Millisecond
	r.Latency[cell{srvMarketfeed, "tickers", varHalf}][0].Rate = 20e3 // the generator fell behind
	r.Bench = []benchLine{{Name: "BenchmarkHandler/pairs", NsPerOp: 300}, {Name: "BenchmarkHandler/tickers", NsPerOp: 350}}
	r.Hot = &hotResult{Pairs: 500, Every: 5 * time.Second, Window: 40 * time.Second, CPU: 2 * time.Second, Requests: 8000, RSSMax: 90e6, RSSLast: 85e6}
	return r
}

func rowNamed(t *testing.T, rows []checkRow, prefix string) checkRow {
	t.Helper()
	for _, r := range rows {
		if strings.HasPrefix(r.Name, prefix) {
			return r
		}
	}
	t.Fatalf("no row %q", prefix)
	return checkRow{}
}

func TestEvaluate(t *testing.T) {
	rows := evaluate(sampleResults())
	for _, c := range []struct {
		prefix string
		result string
		ratio  float64
	}{
		{"/orderbook full depth req/s: marketfeed / nginx static", "pass", 1.25},
		{"/orderbook full depth req/s: marketfeed / nginx memory", "MISS", 0.88},
		{"/orderbook full depth req/s: marketfeed / Go peer", "pass", 2.5},
		{"/pairs req/s: marketfeed / nginx static", "pass", 1.25},
		{"/orderbook depth=5 req/s, a new X-Forwarded-For", "pass", 0.96},
		{"/orderbook full depth req/s, Accept-Encoding: gzip", "info", 1.2},
	} {
		row := rowNamed(t, rows, c.prefix)
		if row.Result() != c.result || row.Ratio < c.ratio-1e-9 || row.Ratio > c.ratio+1e-9 {
			t.Errorf("%s: %s at %.4f×, want %s at %.4f× (%s)", c.prefix, row.Result(), row.Ratio, c.result, c.ratio, row.Measured)
		}
	}
	if row := rowNamed(t, rows, "/orderbook full depth p99"); row.Result() != "pass" {
		t.Errorf("book latency: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "/pairs p99"); row.Result() != "MISS" {
		t.Errorf("pairs latency at 3 ms: %s", row.Result())
	}
	if row := rowNamed(t, rows, "/tickers p99"); row.Result() != "MISS" || !strings.Contains(row.Measured, "asked for 50.0k") {
		t.Errorf("tickers latency sent at 40%% of the rate: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "allocations"); row.Result() != "pass" || row.Measured != "max 0 allocs/op over 2 benchmarks" {
		t.Errorf("allocations: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "500 hot pairs: process CPU"); row.Result() != "pass" || !strings.HasPrefix(row.Measured, "5.0%") {
		t.Errorf("hot CPU: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "500 hot pairs: resident"); row.Result() != "pass" {
		t.Errorf("hot RSS: %s (%s)", row.Result(), row.Measured)
	}
}

func TestEvaluateFailures(t *testing.T) {
	r := sampleResults()
	r.Throughput[cell{srvMarketfeed, "book5", varPlain}][1].Non2xx = 3
	r.Bench = append(r.Bench, benchLine{Name: "BenchmarkHandler/trades", AllocsPerOp: 1})
	r.Hot.CPU = 8 * time.Second // 20% of the window
	r.Hot.RSSMax = 151e6
	delete(r.Throughput, cell{srvPeer, "book", varPlain})
	rows := evaluate(r)
	if row := rowNamed(t, rows, "/orderbook depth=5 req/s: marketfeed"); row.Result() != "MISS" || !strings.Contains(row.Measured, "3 non-2xx") {
		t.Errorf("failed requests must fail the row: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "allocations"); row.Result() != "MISS" || !strings.Contains(row.Measured, "BenchmarkHandler/trades") {
		t.Errorf("allocations: %s (%s)", row.Result(), row.Measured)
	}
	if row := rowNamed(t, rows, "500 hot pairs: process CPU"); row.Result() != "MISS" {
		t.Errorf("hot CPU at 20%%: %s", row.Result())
	}
	if row := rowNamed(t, rows, "500 hot pairs: resident"); row.Result() != "MISS" {
		t.Errorf("hot RSS at 151 MB: %s", row.Result())
	}
	if row := rowNamed(t, rows, "/orderbook full depth req/s: marketfeed / Go peer"); row.Result() != "not run" {
		t.Errorf("unmeasured peer: %s", row.Result())
	}

	empty := evaluate(&results{Routes: benchRoutes("BTC_USDT")})
	for _, row := range empty {
		if row.Result() != "not run" && row.Result() != "info" {
			t.Errorf("nothing measured, yet %q is %s", row.Name, row.Result())
		}
	}
}

// TestEvaluateDropsStalledRuns: a run with socket errors is left out of
// its round's ratio, and said so; the CPU-normalised ratio is shown where
// the server's CPU time is known.
func TestEvaluateDropsStalledRuns(t *testing.T) {
	r := sampleResults()
	book := r.Throughput[cell{srvMarketfeed, "book", varPlain}]
	book[2].SocketErrors = 64 // round 3: 110k vs 80k, dropped
	for i := range book {
		book[i].Requests, book[i].ServerCPU = 300e3, 3*time.Second // 100k per CPU-second
	}
	static := r.Throughput[cell{srvStatic, "book", varPlain}]
	for i := range static {
		static[i].Requests, static[i].ServerCPU = 240e3, 3*time.Second // 80k per CPU-second
	}
	rows := evaluate(r)
	row := rowNamed(t, rows, "/orderbook full depth req/s: marketfeed / nginx static")
	// Rounds 1 and 2 remain: 1.25 and 1.125, median 1.1875.
	if row.Ratio < 1.1874 || row.Ratio > 1.1876 || row.Result() != "MISS" {
		t.Errorf("ratio %.4f %s, want 1.1875 MISS", row.Ratio, row.Result())
	}
	for _, want := range []string{"per server CPU-second 1.25×", "1 runs dropped for socket errors"} {
		if !strings.Contains(row.Measured, want) {
			t.Errorf("measured %q lacks %q", row.Measured, want)
		}
	}
	md := markdown(r, rows)
	if want := "| /orderbook full depth | plain | 4268 | marketfeed | 95.0k | 90.0k–100.0k | 100.0k | 0.0 µs + 10.0 µs | 1.00 ms | 0 | 1 |"; !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
}

// TestUserCPUPerAnswer: the user CPU per answer of marketfeed and nginx's
// static file is compared round by round, printed with the system part, and
// passes at or below nginx's.
func TestUserCPUPerAnswer(t *testing.T) {
	r := sampleResults()
	if row := rowNamed(t, evaluate(r), "/orderbook full depth user CPU per answer"); row.Result() != "not run" {
		t.Fatalf("without CPU times: %s (%s)", row.Result(), row.Measured)
	}
	set := func(server string, user, system []time.Duration) {
		runs := r.Throughput[cell{server, "book", varPlain}]
		for i := range runs {
			runs[i].Requests = 100e3
			runs[i].ServerUser, runs[i].ServerCPU = 100e3*user[i], 100e3*(user[i]+system[i])
		}
	}
	us := time.Microsecond
	// Rounds: 6.6/5.9, 5.5/5.5, 5.0/6.0: ratios 1.12, 1.00, 0.83; median 1.00.
	set(srvMarketfeed, []time.Duration{6600 * time.Nanosecond, 5500 * time.Nanosecond, 5 * us}, []time.Duration{10 * us, 11 * us, 12 * us})
	set(srvStatic, []time.Duration{5900 * time.Nanosecond, 5500 * time.Nanosecond, 6 * us}, []time.Duration{12 * us, 13 * us, 14 * us})
	rows := evaluate(r)
	row := rowNamed(t, rows, "/orderbook full depth user CPU per answer: marketfeed / nginx static")
	want := "1.00× (marketfeed 5.5 µs user + 11.0 µs system, nginx static 5.9 µs + 13.0 µs per answer)"
	if row.Result() != "pass" || row.Measured != want {
		t.Errorf("got %s %q, want pass %q", row.Result(), row.Measured, want)
	}
	if md := markdown(r, rows); !strings.Contains(md, "| 5.5 µs + 11.0 µs |") || !strings.Contains(md, "| 5.9 µs + 13.0 µs |") {
		t.Errorf("the throughput table lacks the CPU per answer:\n%s", md)
	}

	r.Idle = &idleResult{Window: 5 * time.Second, User: 100 * time.Millisecond, CPU: 120 * time.Millisecond}
	row = rowNamed(t, evaluate(r), "/orderbook full depth user CPU per answer")
	// 2% of a core at marketfeed's median of 100k req/s: 0.2 µs an answer.
	if want += "; with no client marketfeed takes 2.0% of a core in user space, 0.2 µs per answer at 100.0k req/s"; row.Measured != want {
		t.Errorf("with the idle measurement: %q, want %q", row.Measured, want)
	}

	// One round more expensive for marketfeed moves the median over 1.
	r.Throughput[cell{srvMarketfeed, "book", varPlain}][1].ServerUser = 100e3 * 6 * us
	if row := rowNamed(t, evaluate(r), "/orderbook full depth user CPU per answer"); row.Result() != "MISS" {
		t.Errorf("marketfeed above nginx in two rounds of three: %s (%s)", row.Result(), row.Measured)
	}
}

func TestMarkdown(t *testing.T) {
	r := sampleResults()
	md := markdown(r, evaluate(r))
	for _, want := range []string{
		"Machine: 2 CPUs (Test CPU), Linux 6.1, go1.26, nginx/1.22.1, wrk 4.1.0, vegeta v12.12.0.",
		"| /orderbook full depth req/s: marketfeed / nginx memory | 0.88× (100.0k vs 110.0k req/s) | ≥ 0.90× | MISS |",
		"| /orderbook full depth | plain | 4268 | Go peer | 40.0k | 40.0k–40.0k | – | – | 1.00 ms | 0 | 0 |",
		"| /orderbook full depth | Accept-Encoding: gzip | 1300 gzip | marketfeed |",
		"| /pairs | 50% of max | marketfeed | 50.0k | 50.0k | 0.20 ms | 3.00 ms | 3.00 ms | 200:150000 |",
		"Process CPU 2.00s (5.0% of one core), including serving 8000 requests",
		"| BenchmarkHandler/pairs | 300.0 | 0 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	cols := 0
	for line := range strings.SplitSeq(md, "\n") {
		switch {
		case !strings.HasPrefix(line, "|"):
			cols = 0
		case cols == 0:
			cols = strings.Count(line, "|")
		case strings.Count(line, "|")-strings.Count(line, `\|`) != cols:
			t.Errorf("row with %d cells under a header with %d: %s", strings.Count(line, "|"), cols, line)
		}
	}
}
