package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseWrk(t *testing.T) {
	got, err := parseWrk(readTestdata(t, "wrk.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{
		Requests:   114614,
		Elapsed:    2010 * time.Millisecond,
		ReqPerSec:  57066.86,
		BytesRead:  47.33 * (1 << 20),
		LatencyAvg: 1610 * time.Microsecond,
		LatencyMax: 15550 * time.Microsecond,
		LatencyP50: 432 * time.Microsecond,
		LatencyP99: 9650 * time.Microsecond,
	}
	if !closeWrk(got, want) {
		t.Errorf("parseWrk:\n got %+v\nwant %+v", got, want)
	}
	if got.Errors() != 0 {
		t.Errorf("Errors() = %d, want 0", got.Errors())
	}
}

// closeWrk compares two results allowing for float rounding in the
// conversions of units.
func closeWrk(a, b wrkResult) bool {
	near := func(x, y float64) bool { return x-y < 1e-6*max(1, y) && y-x < 1e-6*max(1, y) }
	nearD := func(x, y time.Duration) bool { return x-y < time.Microsecond && y-x < time.Microsecond }
	return a.Requests == b.Requests && nearD(a.Elapsed, b.Elapsed) && near(a.ReqPerSec, b.ReqPerSec) &&
		near(a.BytesRead, b.BytesRead) && a.Non2xx == b.Non2xx && a.SocketErrors == b.SocketErrors &&
		nearD(a.LatencyAvg, b.LatencyAvg) && nearD(a.LatencyMax, b.LatencyMax) &&
		nearD(a.LatencyP50, b.LatencyP50) && nearD(a.LatencyP99, b.LatencyP99)
}

func TestParseWrkErrors(t *testing.T) {
	got, err := parseWrk(readTestdata(t, "wrk_errors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Non2xx != 7 || got.SocketErrors != 45 || got.Errors() != 52 {
		t.Errorf("Non2xx %d, SocketErrors %d, Errors() %d; want 7, 45, 52", got.Non2xx, got.SocketErrors, got.Errors())
	}
	if got.LatencyP99 != 2*time.Second || got.ReqPerSec != 1203.71 {
		t.Errorf("p99 %v, req/s %v", got.LatencyP99, got.ReqPerSec)
	}
	if want := 1.02 * (1 << 30); got.BytesRead < want-1 || got.BytesRead > want+1 {
		t.Errorf("BytesRead %v, want %v", got.BytesRead, want)
	}
}

func TestParseWrkRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"empty":        "",
		"no rate":      "Running 1s test @ http://x\n  10 requests in 1.00s, 1KB read\n",
		"bad rate":     "Requests/sec: fast\n",
		"bad unit":     "    Latency     1.0ps    1ms  2ms  50%\nRequests/sec: 1\n",
		"bad socket":   "  Socket errors: connect x, read 0, write 0, timeout 0\nRequests/sec: 1\n",
		"bad non-2xx":  "  Non-2xx or 3xx responses: many\nRequests/sec: 1\n",
		"bad requests": "  ten requests in 1.00s, 1KB read\nRequests/sec: 1\n",
	} {
		if r, err := parseWrk(out); err == nil {
			t.Errorf("%s: parseWrk = %+v, want an error", name, r)
		}
	}
}

func TestParseWrkUnits(t *testing.T) {
	durations := map[string]time.Duration{
		"850.00us": 850 * time.Microsecond, "1.50ms": 1500 * time.Microsecond, "2.00s": 2 * time.Second,
		"1.00m": time.Minute, "1.00h": time.Hour,
	}
	for in, want := range durations {
		if got, err := parseWrkDuration(in); err != nil || got != want {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	sizes := map[string]float64{"512.00B": 512, "1.50KB": 1536, "2.00MB": 2 << 20, "1.00GB": 1 << 30, "1.00TB": 1 << 40}
	for in, want := range sizes {
		if got, err := parseWrkBytes(in); err != nil || got != want {
			t.Errorf("parseWrkBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "12", "1.0ps", "xms"} {
		if _, err := parseWrkDuration(bad); err == nil {
			t.Errorf("parseWrkDuration(%q): no error", bad)
		}
	}
	for _, bad := range []string{"", "12", "1.0PB", "xMB"} {
		if _, err := parseWrkBytes(bad); err == nil {
			t.Errorf("parseWrkBytes(%q): no error", bad)
		}
	}
}

func TestParseVegeta(t *testing.T) {
	got, err := parseVegeta([]byte(readTestdata(t, "vegeta.json")), 5000)
	if err != nil {
		t.Fatal(err)
	}
	want := latencyResult{
		Target: 5000, Rate: 4997.384212890963,
		P50: 122019, P99: 1342225, Max: 5173051,
		Success: 1, Statuses: "200:24985",
	}
	if got != want {
		t.Errorf("parseVegeta:\n got %+v\nwant %+v", got, want)
	}

	mixed := `{"latencies":{"50th":1,"99th":2,"max":3},"requests":3,"rate":3,"success":0.5,"status_codes":{"503":1,"200":2,"0":1}}`
	got, err = parseVegeta([]byte(mixed), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Statuses != "0:1 200:2 503:1" || got.Success != 0.5 {
		t.Errorf("statuses %q success %v", got.Statuses, got.Success)
	}

	for _, bad := range []string{``, `{`, `{"requests":0}`} {
		if _, err := parseVegeta([]byte(bad), 1); err == nil {
			t.Errorf("parseVegeta(%q): no error", bad)
		}
	}
}

func TestParseGoBench(t *testing.T) {
	got, err := parseGoBench(readTestdata(t, "gobench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []benchLine{
		{Name: "BenchmarkHandler/pairs", NsPerOp: 380.7, BytesPerOp: 0, AllocsPerOp: 0},
		{Name: "BenchmarkLimiter", NsPerOp: 102.3, BytesPerOp: 53, AllocsPerOp: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	withAllocs := "BenchmarkX/a-b-8   \t 100\t 12 ns/op\t 16 B/op\t 2 allocs/op\n" +
		"BenchmarkLog some text the benchmark printed\n"
	got, err = parseGoBench(withAllocs)
	if err != nil || len(got) != 1 || got[0].Name != "BenchmarkX/a-b" || got[0].AllocsPerOp != 2 {
		t.Errorf("parseGoBench = %+v, %v", got, err)
	}
	if _, err := parseGoBench("BenchmarkY-2  100  12 ns/op\n"); err == nil {
		t.Error("a result without -benchmem columns: no error")
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkA-2": "BenchmarkA", "BenchmarkA": "BenchmarkA", "BenchmarkA/x-y": "BenchmarkA/x-y", "BenchmarkA/x-y-16": "BenchmarkA/x-y",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseCPUTimes(t *testing.T) {
	a, err := parseCPUTimes([]byte("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a != (cpuTimes{Busy: 160, Idle: 840}) {
		t.Errorf("parseCPUTimes = %+v, want busy 160 idle 840", a)
	}
	b := cpuTimes{Busy: a.Busy + 30, Idle: a.Idle + 70}
	if got := busyShare(a, b); got != 0.3 {
		t.Errorf("busyShare = %v, want 0.3", got)
	}
	if got := busyShare(a, a); got != 0 {
		t.Errorf("busyShare over no time = %v, want 0", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if _, err := parseCPUTimes([]byte(bad)); err == nil {
			t.Errorf("parseCPUTimes(%q): no error", bad)
		}
	}
}

func TestGroupCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if user, total, err := groupCPU(syscall.Getpgrp()); err != nil || user > total {
		t.Errorf("groupCPU(own group) = %v user of %v, %v", user, total, err)
	}
	if _, _, err := groupCPU(-12345); err == nil {
		t.Error("groupCPU of a group that does not exist: no error")
	}
}
