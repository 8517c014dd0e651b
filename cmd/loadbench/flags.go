package main

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// config is the command line of a comparison run.
type config struct {
	goCmd           string
	serverCPU       int
	loadCPU         int
	duration        time.Duration
	warmup          time.Duration
	rounds          int
	connections     int
	latencyDuration time.Duration
	ticker          string
	simExtra        int
	hotPairs        int
	hotEvery        time.Duration
	hotWarmup       time.Duration
	hotDuration     time.Duration
	quietWait       time.Duration
	quietBudget     time.Duration
	hotProfile      string
	svgPath         string
	mdPath          string
	install         bool
	keep            bool
	latencyRate     float64
	skipBench       bool
	skipThroughput  bool
	skipLatency     bool
	skipHot         bool
	skipLimiter     bool
	skipGzip        bool
}

// parseFlags reads the comparison's command line and refuses settings
// that would make its numbers meaningless.
func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.StringVar(&c.goCmd, "go", "go", "the go `command`")
	fs.IntVar(&c.serverCPU, "server-cpu", 0, "the `core` every server is pinned to")
	fs.IntVar(&c.loadCPU, "load-cpu", 1, "the `core` wrk, vegeta and this program are pinned to")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "length of one wrk run (whole seconds)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "wrk run before each measured run, not counted (whole seconds)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds: every server is measured once per round on every route")
	fs.IntVar(&c.connections, "connections", 64, "wrk connections")
	fs.DurationVar(&c.latencyDuration, "latency-duration", 3*time.Second, "length of one vegeta run")
	fs.Float64Var(&c.latencyRate, "latency-rate", 5000, "fixed req/s of the extra latency runs, where one vegeta worker is far from saturated; 0: none")
	fs.StringVar(&c.ticker, "ticker", "BTC_USDT", "the pair whose book and trades are benchmarked")
	fs.IntVar(&c.simExtra, "sim-extra", 460, "extra simulated markets for the hot-pairs run")
	fs.IntVar(&c.hotPairs, "hot-pairs", 500, "pairs kept hot in the hot-pairs run")
	fs.DurationVar(&c.hotEvery, "hot-every", 5*time.Second, "how often each hot pair's /orderbook and /trades are requested")
	fs.DurationVar(&c.hotWarmup, "hot-warmup", 10*time.Second, "hot-pairs run: time before measuring")
	fs.DurationVar(&c.hotDuration, "hot-duration", 35*time.Second, "hot-pairs run: measured window (at least 30s for the target)")
	fs.DurationVar(&c.quietWait, "quiet-wait", 5*time.Second, "before each measured run, wait up to this long for the machine to be idle (other work on a shared machine skews a run); 0: do not wait")
	fs.DurationVar(&c.quietBudget, "quiet-budget", 90*time.Second, "most time spent waiting for an idle machine over the whole run")
	fs.StringVar(&c.hotProfile, "hot-profile", "", "`file` to save a CPU profile of the hot-pairs window to (go tool pprof FILE)")
	fs.StringVar(&c.svgPath, "svg", "docs/benchmarks.svg", "`file` the chart is written to; empty: none")
	fs.StringVar(&c.mdPath, "md", "", "`file` the Markdown report is also written to")
	fs.BoolVar(&c.install, "install", true, "apt-get install wrk and nginx when they are missing")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary directory (configs, captured bodies, logs)")
	fs.BoolVar(&c.skipBench, "skip-gobench", false, "skip go test -bench ./server/")
	fs.BoolVar(&c.skipThroughput, "skip-throughput", false, "skip the wrk runs, and so the vegeta runs, whose rates come from them")
	fs.BoolVar(&c.skipLatency, "skip-latency", false, "skip the vegeta runs")
	fs.BoolVar(&c.skipHot, "skip-hot", false, "skip the hot-pairs run")
	fs.BoolVar(&c.skipLimiter, "skip-limiter", false, "skip the rate-limiter runs")
	fs.BoolVar(&c.skipGzip, "skip-gzip", false, "skip the Accept-Encoding: gzip runs")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case c.rounds < 1:
		return nil, errors.New("-rounds must be at least 1")
	case c.duration < time.Second || c.latencyDuration < time.Second:
		return nil, errors.New("-duration and -latency-duration must be at least 1s")
	case c.serverCPU == c.loadCPU:
		return nil, errors.New("-server-cpu and -load-cpu must differ")
	}
	return c, nil
}
