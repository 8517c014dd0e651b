package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"marketfeed/internal/process"
)

// bench is one comparison run in progress: the processes it started and
// what it measured so far.
type bench struct {
	cfg    *config
	dir    string
	vegeta string
	procs  []*process.Proc          // every process started, stopped at the end
	mfs    []*process.Proc          // marketfeed instances, paused while others run
	urls   map[string]string        // server name → base URL
	ops    map[string]string        // marketfeed name → base URL of its ops endpoints
	owners map[string]*process.Proc // server name → its process
	routes []route
	res    results
	waited time.Duration // spent in quiet so far
}

// compare runs the whole comparison and prints the report.
func compare(ctx context.Context, cfg *config) (err error) {
	b := &bench{cfg: cfg, urls: map[string]string{}, ops: map[string]string{}, owners: map[string]*process.Proc{}, routes: benchRoutes(cfg.ticker)}
	b.res = results{
		Rounds: cfg.rounds, Duration: cfg.duration, Connections: cfg.connections, Routes: b.routes,
		Groups:     benchGroups(!cfg.skipLimiter, !cfg.skipGzip),
		Throughput: map[cell][]wrkResult{}, Latency: map[cell][]latencyResult{},
	}
	if cfg.skipThroughput {
		b.res.Groups = nil
	}
	if err := ensureTools(ctx, cfg.install); err != nil {
		return err
	}
	if b.dir, err = os.MkdirTemp("", "loadbench-"); err != nil {
		return err
	}
	// nginx's worker runs as nobody and must read the files here.
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return err
	}
	defer func() {
		for _, p := range b.procs {
			p.Stop()
		}
		if cfg.keep || err != nil {
			fmt.Fprintln(os.Stderr, "loadbench: logs and configs kept in", b.dir)
		} else {
			os.RemoveAll(b.dir)
		}
	}()

	b.res.Machine = describeMachine(ctx, cfg)
	logf("building marketfeed and vegeta")
	mfBin := filepath.Join(b.dir, "marketfeed")
	if err := runQuiet(ctx, cfg.goCmd, "build", "-o", mfBin, "./cmd/marketfeed"); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, cfg.goCmd, "tool", "-n", "vegeta").Output()
	if err != nil {
		return fmt.Errorf("go tool -n vegeta: %w", err)
	}
	b.vegeta = strings.TrimSpace(string(out))

	// Before this program pins itself to the load core: the benchmarks use
	// both cores, as they do under make bench.
	if !cfg.skipBench {
		logf("go test -run=^$ -bench=. -benchmem ./server/")
		out, err := exec.CommandContext(ctx, cfg.goCmd, "test", "-run=^$", "-bench=.", "-benchmem", "./server/").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go test -bench ./server/: %w\n%s", err, out)
		}
		if b.res.Bench, err = parseGoBench(string(out)); err != nil {
			return err
		}
	}

	// This program's own work (the hot-pairs client, parsing) stays off
	// the server core.
	if err := runQuiet(ctx, "taskset", "-a", "-p", "-c", strconv.Itoa(cfg.loadCPU), strconv.Itoa(os.Getpid())); err != nil {
		return err
	}

	if _, err := b.startMarketfeed(ctx, srvMarketfeed, "-rate-limit", "0"); err != nil {
		return err
	}
	caps, err := b.capture(ctx, b.urls[srvMarketfeed])
	if err != nil {
		return err
	}
	b.res.Sizes = map[string][2]int{}
	for _, c := range caps {
		b.res.Sizes[c.Key] = [2]int{len(c.Body), len(c.Gzip)}
	}
	if err := b.startNginx(ctx, caps); err != nil {
		return err
	}
	if err := b.startPeer(ctx); err != nil {
		return err
	}
	if err := b.verify(ctx, caps); err != nil {
		return err
	}
	if !cfg.skipLimiter {
		if err := b.startLimiters(ctx); err != nil {
			return err
		}
	}

	if !cfg.skipThroughput {
		if b.res.Idle, err = b.idle(ctx, srvMarketfeed, idleWindow); err != nil {
			return err
		}
		if err := b.throughput(ctx); err != nil {
			return err
		}
	}
	if !cfg.skipThroughput && !cfg.skipLatency {
		if err := b.latency(ctx); err != nil {
			return err
		}
	}
	// The hot-pairs run has the server core to itself.
	for _, p := range b.mfs {
		p.Stop()
	}
	if !cfg.skipHot {
		if b.res.Hot, err = b.hot(ctx); err != nil {
			return err
		}
	}

	rows := evaluate(&b.res)
	report := markdown(&b.res, rows)
	fmt.Println()
	fmt.Print(report)
	if cfg.mdPath != "" {
		if err := os.WriteFile(cfg.mdPath, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if cfg.svgPath != "" {
		if err := os.WriteFile(cfg.svgPath, []byte(chartSVG(&b.res, rows)), 0o644); err != nil {
			return err
		}
		logf("chart written to %s", cfg.svgPath)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadbench: "+format+"\n", args...)
}

// runQuiet runs a command and returns its output as part of the error when
// it fails.
func runQuiet(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// startMarketfeed starts one marketfeed on the server core and waits until
// it is ready.
func (b *bench) startMarketfeed(ctx context.Context, name string, args ...string) (*process.Proc, error) {
	api, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	ops, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	logName := strings.NewReplacer(" ", "_", "-", "").Replace(name) + ".log"
	argv := append([]string{filepath.Join(b.dir, "marketfeed"), "-listen", api, "-ops-listen", ops, "-log-level", "warn"}, args...)
	p, err := process.Start(name, filepath.Join(b.dir, logName), process.Options{Pinned: true, CPU: b.cfg.serverCPU, Env: []string{"GOMAXPROCS=1"}}, argv...)
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, p)
	b.mfs = append(b.mfs, p)
	if err := process.WaitHTTP(ctx, p, "http://"+ops+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	b.urls[name] = "http://" + api
	b.ops[name] = "http://" + ops
	b.owners[name] = p
	return p, nil
}

// startLimiters starts the two marketfeeds of the rate-limiter comparison:
// both believe X-Forwarded-For from loopback, one limits and one does not,
// and checks that the limit really applies per forwarded address.
func (b *bench) startLimiters(ctx context.Context) error {
	for _, s := range []struct {
		name, limit string
	}{{srvLimitOff, "0"}, {srvLimitOn, "600"}} {
		if _, err := b.startMarketfeed(ctx, s.name, "-rate-limit", s.limit, "-trusted-proxies", "127.0.0.1/32"); err != nil {
			return err
		}
	}
	uri := b.urls[srvLimitOn] + b.route(limiterRoute).URI
	status := func(xff string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// 600 a minute, all of which may be spent at once: the 601st request
	// from one address is refused, and another address still passes.
	limited := false
	for range 700 {
		code, err := status("192.0.2.1")
		if err != nil {
			return err
		}
		if code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	code, err := status("192.0.2.2")
	if err != nil {
		return err
	}
	if !limited || code != http.StatusOK {
		return fmt.Errorf("%s does not limit by X-Forwarded-For (limited %v, other address %d)", srvLimitOn, limited, code)
	}
	return nil
}

func (b *bench) route(key string) route {
	for _, r := range b.routes {
		if r.Key == key {
			return r
		}
	}
	panic("no route " + key)
}

// focus lets only server's own marketfeed run: every other marketfeed is
// paused, so that its poller does not take the server core from the
// server being measured.
func (b *bench) focus(server string) {
	owner := b.owners[server]
	for _, p := range b.mfs {
		if p == owner {
			p.Resume()
		} else {
			p.Pause()
		}
	}
}

// warm prepares a server for a measured run, uncounted. In the first round
// every server gets a -warmup wrk run (new processes, cold caches, new
// connections). Later, a marketfeed that was paused gets a few requests:
// its snapshots went stale while it was stopped, and the first request
// reads the pair again and makes it hot.
func (b *bench) warm(ctx context.Context, c cell, round int) error {
	if round == 0 {
		_, err := b.runWrk(ctx, c, b.cfg.warmup)
		return err
	}
	if !slices.Contains(b.mfs, b.owners[c.Server]) {
		return nil
	}
	headers := map[string]string{}
	if c.Variant == varXFF {
		headers["X-Forwarded-For"] = "192.0.2.3"
	}
	for range 20 {
		if _, _, err := get(ctx, b.urls[c.Server]+b.route(c.Route).URI, headers); err != nil {
			return err
		}
	}
	return nil
}

// idleWindow is how long marketfeed's own work is measured with no client:
// its poller takes about 1–2% of a core, a few clock ticks of /proc's 10 ms
// a second.
const idleWindow = 5 * time.Second

// idle measures the CPU time server's process uses with no client over d,
// every other marketfeed paused: the feed's own work, which every answer's
// CPU time measured under load also carries.
func (b *bench) idle(ctx context.Context, server string, d time.Duration) (*idleResult, error) {
	b.focus(server)
	pgid := b.owners[server].Pid()
	user0, total0, err := groupCPU(pgid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := process.Sleep(ctx, d); err != nil {
		return nil, err
	}
	user1, total1, err := groupCPU(pgid)
	if err != nil {
		return nil, err
	}
	r := &idleResult{Window: time.Since(start), User: user1 - user0, CPU: total1 - total0}
	logf("%s with no client: %.1f%% of a core, %.1f%% in user space", server, 100*r.CPU.Seconds()/r.Window.Seconds(), 100*r.UserShare())
	return r, nil
}

// idleBusy is how busy the machine may be, as a share of both cores, for
// it to count as idle: the servers not under test (one marketfeed's poller,
// this program) take a few percent.
const idleBusy = 0.12

// quiet waits, at most -quiet-wait and -quiet-budget over the whole run,
// until the machine is idle, so that a run does not start while other work
// shares the cores. It returns false when the wait ran out; the run then
// goes ahead and is counted as noisy.
func (b *bench) quiet(ctx context.Context) (bool, error) {
	start := time.Now()
	defer func() { b.waited += time.Since(start) }()
	wait := min(b.cfg.quietWait, b.cfg.quietBudget-b.waited)
	deadline := start.Add(wait)
	for {
		busy, err := machineBusy(ctx, 200*time.Millisecond)
		if err != nil {
			return false, err
		}
		if busy <= idleBusy {
			return true, nil
		}
		if time.Now().After(deadline) {
			if wait > 0 {
				logf("machine still %.0f%% busy after %s: measuring anyway", 100*busy, wait.Round(time.Millisecond))
			}
			b.res.Noisy++
			return false, nil
		}
	}
}

// throughput runs every group's servers back to back, round after round.
func (b *bench) throughput(ctx context.Context) error {
	for r := range b.cfg.rounds {
		for _, g := range b.res.Groups {
			for _, s := range rotate(g.Servers, r) {
				c := cell{s, g.Route, g.Variant}
				b.focus(s)
				if err := b.warm(ctx, c, r); err != nil {
					return err
				}
				if _, err := b.quiet(ctx); err != nil {
					return err
				}
				res, err := b.runWrk(ctx, c, b.cfg.duration)
				if err != nil {
					return err
				}
				logf("round %d/%d  %-26s %-28s %-22s %9.0f req/s  p99 %s  failed %d",
					r+1, b.cfg.rounds, s, b.route(g.Route).Label, g.Variant, res.ReqPerSec, ms(res.LatencyP99), res.Errors())
				b.res.Throughput[c] = append(b.res.Throughput[c], res)
			}
		}
	}
	return nil
}

// latency runs vegeta, open loop, at half of marketfeed's measured maximum
// on each route, and at the fixed -latency-rate on the full book. nginx
// from memory gets the same rates on the full book, as a control for what
// the load generator and the host add on their own.
func (b *bench) latency(ctx context.Context) error {
	type run struct {
		c    cell
		rate float64
	}
	for r := range b.cfg.rounds {
		var runs []run
		for _, rt := range b.routes {
			rate, _, _ := b.res.rate(cell{srvMarketfeed, rt.Key, varPlain})
			if rate <= 0 {
				continue
			}
			servers := []string{srvMarketfeed}
			if rt.Key == "book" {
				servers = rotate([]string{srvMarketfeed, srvMemory}, r)
			}
			for _, s := range servers {
				runs = append(runs, run{cell{s, rt.Key, varHalf}, rate / 2})
			}
		}
		if b.cfg.latencyRate > 0 {
			for _, s := range rotate([]string{srvMarketfeed, srvMemory}, r) {
				runs = append(runs, run{cell{s, "book", varFixed}, b.cfg.latencyRate})
			}
		}
		for _, x := range runs {
			b.focus(x.c.Server)
			if err := b.warm(ctx, cell{x.c.Server, x.c.Route, varPlain}, r); err != nil {
				return err
			}
			if _, err := b.quiet(ctx); err != nil {
				return err
			}
			rt := b.route(x.c.Route)
			res, err := b.runVegeta(ctx, b.urls[x.c.Server]+rt.URI, x.rate)
			if err != nil {
				return err
			}
			logf("round %d/%d  %-26s %-28s vegeta %6.0f of %6.0f req/s  p50 %s  p99 %s  max %s  %s",
				r+1, b.cfg.rounds, x.c.Server, rt.Label, res.Rate, res.Target, ms(res.P50), ms(res.P99), ms(res.Max), res.Statuses)
			b.res.Latency[x.c] = append(b.res.Latency[x.c], res)
		}
	}
	return nil
}
