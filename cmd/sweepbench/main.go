// Command sweepbench reads every pair as a market-data aggregator would and
// reports how current marketfeed keeps them all at once, against venuesim
// with Binance's REST limits (2,400 weight a minute).
//
// For each -extra count of synthetic markets, and with market streams on and
// then off, it builds and starts venuesim and marketfeed (-venue binance) on
// free loopback ports and:
//
//   - waits for /readyz, then times the cold start: until every pair's
//     /orderbook has answered 200, asking each pair at most once a round;
//   - for -duration, reads every pair's book and trades once a -round, spread
//     evenly over it, beside a hot client reading one pair at -hot-rate;
//   - reports the share of 200 answers, the age of the books and of the
//     newest trades, the REST weight a minute from venuesim's call log,
//     and marketfeed's CPU and memory, each against its target;
//   - judges one served book in -truth-every against venuesim's true book
//     at the book's venue time, level for level to the depth asked: a side
//     shorter than the venue's is not equal.
//
// With -recovery it runs the faults instead (see recovery.go), each phase
// judged against the venue's bound on the reads its recovery must make; with
// -ingest, what the ingest costs with no client (see ingest.go).
//
// A missed target is printed as MISSED; the exit status is non-zero only
// when the sweep could not run. Run it from the module root (make sweep
// does): it builds ./cmd/venuesim and ./cmd/marketfeed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"marketfeed/poller"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sweepbench:", err)
		}
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	extras         []int
	duration       time.Duration
	round          time.Duration
	hotRate        int
	hotPair        string
	compareOff     bool
	streamsFlags   bool
	marketfeedArgs []string
	weightLimit    int
	depthWindow    int
	coldTimeout    time.Duration
	coldInterval   time.Duration
	workers        int
	venuesimBin    string
	marketfeedBin  string
	keep           bool
	recovery       bool
	ingest         bool
	wsMaxAge       time.Duration
	lines          int
	outage         time.Duration
	settle         time.Duration
	gaps           int
	syncDepth      int
	truthEvery     int

	workDir string
	stdout  io.Writer
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	var extras, mfArgs string
	fs := flag.NewFlagSet("sweepbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&extras, "extra", "400,800", "extra synthetic `markets` on the venue, one configuration per count, comma separated")
	fs.DurationVar(&c.duration, "duration", 3*time.Minute, "measured run per configuration, after the cold start")
	fs.DurationVar(&c.round, "round", time.Minute, "the aggregator reads every pair's book and trades once per `period`")
	fs.IntVar(&c.hotRate, "hot-rate", 50, "reads a second of the hot client, book and trades in turn; 0: no hot client")
	fs.StringVar(&c.hotPair, "hot-pair", "", "`ticker_id` the hot client reads (default: the first pair listed)")
	fs.BoolVar(&c.compareOff, "compare-off", true, "run each configuration again with -venue-streams off, for comparison")
	fs.BoolVar(&c.streamsFlags, "streams-flags", true, "pass -venue-ws-url and -venue-streams to marketfeed; false: REST only, one run per count")
	fs.StringVar(&mfArgs, "marketfeed-args", "", "more `flags` for marketfeed, space separated, after the sweep's own")
	fs.IntVar(&c.weightLimit, "weight-limit", 2400, "venuesim's request weight a minute (Binance's)")
	fs.IntVar(&c.depthWindow, "depth-window", 0, "venuesim's -depth-window in `ticks` (50: diffs shaped as the venue's recorded ones); 0: venuesim's default")
	// A cold start is bound by the venue's budget: 846 books at 10 weight
	// each take about 7.5 minutes of a 1,200-a-minute budget.
	fs.DurationVar(&c.coldTimeout, "cold-timeout", 12*time.Minute, "give up waiting for every book after this long from marketfeed's start")
	fs.DurationVar(&c.coldInterval, "cold-interval", 3*time.Second, "ask each waiting pair's book at most once per `period` during the cold start")
	fs.IntVar(&c.workers, "workers", 16, "aggregator reads in flight at most")
	fs.StringVar(&c.venuesimBin, "venuesim-bin", "", "venuesim `binary` to run instead of building ./cmd/venuesim")
	fs.StringVar(&c.marketfeedBin, "marketfeed-bin", "", "marketfeed `binary` to run instead of building ./cmd/marketfeed")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory with the binaries and both processes' logs")
	fs.BoolVar(&c.recovery, "recovery", false, "measure recovery instead: cold start, a rotation of every connection, every connection dropped, the venue closing every connection young, a sequence gap (streams on; -round defaults to 10s, -duration to 2m30s)")
	fs.BoolVar(&c.ingest, "ingest", false, "measure the ingest instead: no client, one line and then two, every book stream-fed; CPU share, CPU per depth event, allocations per event, RSS (-duration defaults to 1m)")
	fs.DurationVar(&c.wsMaxAge, "ws-max-age", 2*time.Minute, "with -recovery: marketfeed's -venue-ws-max-age, so that every connection is replaced within -duration")
	fs.IntVar(&c.lines, "lines", 2, "with -recovery: marketfeed's -venue-ws-lines, `1|2` (its default, 2); with 2, one line's connections are also dropped")
	fs.DurationVar(&c.settle, "settle", time.Minute, "with -recovery: wait this long after one venue-wide fault's recovery before the next, so that each starts from the steady state's window rather than the last one's syncs")
	fs.DurationVar(&c.outage, "outage", 0, "with -recovery: also cut every connection and have venuesim refuse new ones this long, so that every market misses events (0: not)")
	fs.IntVar(&c.gaps, "gaps", 10, "with -recovery: also skip an event in this many books' diff streams, each then synced again (0: not)")
	fs.IntVar(&c.syncDepth, "sync-depth", poller.DefaultSyncDepth, "with -recovery: the snapshot `depth` marketfeed syncs books at (its default; set it to what -marketfeed-args gives it), which the least weight of a recovery is counted in")
	fs.IntVar(&c.truthEvery, "truth-every", 10, "judge one in this many served books against the venue's true book at its update id")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.ingest && c.recovery {
		return nil, errors.New("-ingest and -recovery: choose one")
	}
	if c.ingest {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["duration"] {
			c.duration = time.Minute
		}
	}
	if c.recovery {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["round"] {
			c.round = 10 * time.Second
		}
		if !given["duration"] {
			c.duration = 150 * time.Second
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	var err error
	if c.extras, err = parseExtras(extras); err != nil {
		errs = append(errs, err)
	}
	c.marketfeedArgs = strings.Fields(mfArgs)
	// Bounds keep the load this program makes, all of it on loopback, small
	// and finite whatever the flags say.
	if c.depthWindow < 0 {
		errs = append(errs, errors.New("-depth-window: want 0 (venuesim's default) or more"))
	}
	if c.duration <= 0 || c.duration > time.Hour {
		errs = append(errs, errors.New("-duration: want more than 0 and at most 1h"))
	}
	if c.round < time.Second || c.round > 10*time.Minute {
		errs = append(errs, errors.New("-round: want 1s to 10m"))
	}
	if c.hotRate < 0 || c.hotRate > 1000 {
		errs = append(errs, errors.New("-hot-rate: want 0 to 1000"))
	}
	if c.workers < 1 || c.workers > 256 {
		errs = append(errs, errors.New("-workers: want 1 to 256"))
	}
	if c.coldInterval < 100*time.Millisecond {
		errs = append(errs, errors.New("-cold-interval: want at least 100ms"))
	}
	if c.coldTimeout <= 0 {
		errs = append(errs, errors.New("-cold-timeout: want more than 0"))
	}
	if c.wsMaxAge < time.Second {
		errs = append(errs, errors.New("-ws-max-age: want at least 1s"))
	}
	if c.outage < 0 {
		errs = append(errs, errors.New("-outage: want 0 or more"))
	}
	if c.settle < 0 {
		errs = append(errs, errors.New("-settle: want 0 or more"))
	}
	if c.gaps < 0 {
		errs = append(errs, errors.New("-gaps: want 0 or more"))
	}
	if c.syncDepth < 1 || c.syncDepth > 1000 {
		errs = append(errs, errors.New("-sync-depth: want 1 to 1000"))
	}
	if c.truthEvery < 1 {
		errs = append(errs, errors.New("-truth-every: want 1 or more"))
	}
	if c.lines != 1 && c.lines != 2 {
		errs = append(errs, errors.New("-lines: want 1 or 2"))
	}
	if c.weightLimit < 0 {
		errs = append(errs, errors.New("-weight-limit: want 0 or more"))
	}
	return c, errors.Join(errs...)
}

// modes are the stream settings each count runs with.
func (c *config) modes() []streamMode {
	switch {
	case !c.streamsFlags:
		return []streamMode{streamsOmitted}
	case c.compareOff:
		return []streamMode{streamsOn, streamsOff}
	default:
		return []streamMode{streamsOn}
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg.stdout = stdout
	cfg.workDir, err = os.MkdirTemp("", "sweepbench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(stdout, "work directory: %s\n", cfg.workDir)
	} else {
		defer os.RemoveAll(cfg.workDir)
	}
	bins, err := build(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.recovery {
		return runRecovery(ctx, cfg, bins)
	}
	if cfg.ingest {
		return runIngest(ctx, cfg, bins)
	}
	var results []result
	for _, extra := range cfg.extras {
		for _, mode := range cfg.modes() {
			fmt.Fprintf(stdout, "\nsweep: extra %d, streams %s\n", extra, mode)
			r, err := sweepOne(ctx, cfg, bins, extra, mode)
			if err != nil {
				return fmt.Errorf("extra %d, streams %s: %w", extra, mode, err)
			}
			writeTable(stdout, title(r), rows(r, cfg.weightLimit))
			results = append(results, r)
		}
	}
	writeSummary(stdout, results, cfg.weightLimit)
	return nil
}

// build compiles the two commands into the work directory, unless binaries
// were given.
func build(ctx context.Context, cfg *config) (binaries, error) {
	bins := binaries{venuesim: cfg.venuesimBin, marketfeed: cfg.marketfeedBin}
	for _, b := range []struct {
		into *string
		pkg  string
	}{{&bins.venuesim, "./cmd/venuesim"}, {&bins.marketfeed, "./cmd/marketfeed"}} {
		if *b.into != "" {
			continue
		}
		out := filepath.Join(cfg.workDir, filepath.Base(b.pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, b.pkg)
		cmd.Dir = moduleRoot()
		if msg, err := cmd.CombinedOutput(); err != nil {
			return bins, fmt.Errorf("go build %s: %w\n%s", b.pkg, err, msg)
		}
		*b.into = out
	}
	return bins, nil
}

// moduleRoot is the directory of the go.mod that holds the working
// directory, so that the sweep builds the same tree from any directory in
// it (go test runs in the package's own).
func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if mod := strings.TrimSpace(string(out)); err == nil && mod != "" && mod != os.DevNull {
		return filepath.Dir(mod)
	}
	return "."
}
