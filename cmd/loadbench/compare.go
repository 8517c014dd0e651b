package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// bench is one comparison run in progress: the processes it started and
// what it measured so far.
type bench struct {
	cfg    *config
	dir    string
	vegeta string
	procs  []*proc           // every process started, stopped at the end
	mfs    []*proc           // marketfeed instances, paused while others run
	urls   map[string]string // server name → base URL
	ops    map[string]string // marketfeed name → base URL of its ops endpoints
	owners map[string]*proc  // server name → its process
	routes []route
	res    results
	waited time.Duration // spent in quiet so far
}

// compare runs the whole comparison and prints the report.
func compare(ctx context.Context, cfg *config) (err error) {
	b := &bench{cfg: cfg, urls: map[string]string{}, ops: map[string]string{}, owners: map[string]*proc{}, routes: benchRoutes(cfg.ticker)}
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
			p.stop()
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
		p.stop()
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

// ensureTools installs wrk and nginx from Debian's packages when missing.
// apt-get's own policy keeps the package from starting a system nginx.
func ensureTools(ctx context.Context, install bool) error {
	if _, err := exec.LookPath("taskset"); err != nil {
		return errors.New("taskset (util-linux) is required")
	}
	var missing []string
	for _, tool := range []string{"wrk", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("missing %s (run without -install=false to apt-get install them)", strings.Join(missing, ", "))
	}
	logf("installing %s", strings.Join(missing, " "))
	if err := runQuiet(ctx, "apt-get", "update"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install: %w\n%s", err, out)
	}
	return nil
}

// describeMachine records what the report must say about the machine.
func describeMachine(ctx context.Context, cfg *config) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, cfg.goCmd, "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "nginx", "-v").CombinedOutput(); err == nil {
		m.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	// wrk -v prints its version and exits 1.
	out, _ := exec.CommandContext(ctx, "wrk", "-v").CombinedOutput()
	if line, _, _ := strings.Cut(string(out), "\n"); line != "" {
		m.Wrk, _, _ = strings.Cut(line, " [")
		m.Wrk = strings.TrimSpace(m.Wrk)
	}
	if out, err := exec.CommandContext(ctx, cfg.goCmd, "list", "-m", "-f", "{{.Version}}", "github.com/tsenart/vegeta/v12").Output(); err == nil {
		m.Vegeta = strings.TrimSpace(string(out))
	}
	return m
}

// startMarketfeed starts one marketfeed on the server core and waits until
// it is ready.
func (b *bench) startMarketfeed(ctx context.Context, name string, args ...string) (*proc, error) {
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ops, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logName := strings.NewReplacer(" ", "_", "-", "").Replace(name) + ".log"
	argv := append([]string{filepath.Join(b.dir, "marketfeed"), "-listen", api, "-ops-listen", ops, "-log-level", "warn"}, args...)
	p, err := startPinned(name, b.cfg.serverCPU, []string{"GOMAXPROCS=1"}, filepath.Join(b.dir, logName), argv...)
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, p)
	b.mfs = append(b.mfs, p)
	if err := waitHTTP(ctx, p, "http://"+ops+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	b.urls[name] = "http://" + api
	b.ops[name] = "http://" + ops
	b.owners[name] = p
	return p, nil
}

// capture reads marketfeed's answer on every benchmarked route, identity and
// gzip. The two must be the same snapshot (the gzip form decompresses to
// the identity body), so a pair of reads that straddles a refresh is read
// again.
func (b *bench) capture(ctx context.Context, base string) ([]captured, error) {
	var caps []captured
	for _, rt := range b.routes {
		var c captured
		ok := false
		for try := 0; try < 50 && !ok; try++ {
			body, h, err := get(ctx, base+rt.URI, nil)
			if err != nil {
				return nil, err
			}
			c = captured{Key: rt.Key, URI: rt.URI, Body: body, Header: h}
			gz, gh, err := get(ctx, base+rt.URI, map[string]string{"Accept-Encoding": "gzip"})
			if err != nil {
				return nil, err
			}
			if gh.Get("Content-Encoding") != "gzip" {
				ok = bytes.Equal(gz, body)
				continue
			}
			plain, err := gunzip(gz)
			if err != nil {
				return nil, fmt.Errorf("%s: gzip answer: %w", rt.URI, err)
			}
			c.Gzip, c.GzipHeader = gz, gh
			ok = bytes.Equal(plain, body)
		}
		if !ok {
			return nil, fmt.Errorf("%s: identity and gzip answers never came from one snapshot", rt.URI)
		}
		if ct := c.Header.Get("Content-Type"); ct != "application/json" {
			return nil, fmt.Errorf("%s: Content-Type %q", rt.URI, ct)
		}
		caps = append(caps, c)
	}
	return caps, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// httpClient does not ask for gzip on its own, so that what get returns is
// what the server sent.
var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
}

// get fetches url and requires a 200.
func get(ctx context.Context, url string, headers map[string]string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	return body, resp.Header, nil
}

// startNginx writes the captured bodies and the configuration, and starts
// one nginx (one worker) with the static and the from-memory server.
func (b *bench) startNginx(ctx context.Context, caps []captured) error {
	root := filepath.Join(b.dir, "static")
	for _, d := range []string{root, filepath.Join(b.dir, "nginx", "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, c := range caps {
		if err := os.WriteFile(filepath.Join(root, c.Key+".json"), c.Body, 0o644); err != nil {
			return err
		}
		if c.Gzip != nil {
			if err := os.WriteFile(filepath.Join(root, c.Key+".json.gz"), c.Gzip, 0o644); err != nil {
				return err
			}
		}
	}
	static, err := freeAddr()
	if err != nil {
		return err
	}
	memory, err := freeAddr()
	if err != nil {
		return err
	}
	prefix := filepath.Join(b.dir, "nginx")
	conf, err := nginxConfig(nginxSpec{Prefix: prefix, StaticRoot: root, StaticAddr: static, MemoryAddr: memory, Routes: caps})
	if err != nil {
		return err
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := runQuiet(ctx, "nginx", "-t", "-q", "-p", prefix, "-c", confPath, "-e", filepath.Join(prefix, "error.log")); err != nil {
		return err
	}
	p, err := startPinned("nginx", b.cfg.serverCPU, nil, filepath.Join(b.dir, "nginx.log"),
		"nginx", "-p", prefix, "-c", confPath, "-e", filepath.Join(prefix, "error.log"))
	if err != nil {
		return err
	}
	b.procs = append(b.procs, p)
	b.urls[srvStatic], b.urls[srvMemory] = "http://"+static, "http://"+memory
	b.owners[srvStatic], b.owners[srvMemory] = p, p
	for _, name := range []string{srvStatic, srvMemory} {
		if err := waitHTTP(ctx, p, b.urls[name]+b.routes[0].URI, 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// startPeer starts the plain Go peer (this program's peer subcommand),
// reading its data from the running marketfeed.
func (b *bench) startPeer(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	p, err := startPinned(srvPeer, b.cfg.serverCPU, []string{"GOMAXPROCS=1"}, filepath.Join(b.dir, "peer.log"),
		self, "peer", "-listen", addr, "-from", b.urls[srvMarketfeed], "-ticker", b.cfg.ticker)
	if err != nil {
		return err
	}
	b.procs = append(b.procs, p)
	b.urls[srvPeer], b.owners[srvPeer] = "http://"+addr, p
	return waitHTTP(ctx, p, b.urls[srvPeer]+"/api/public/pairs", 30*time.Second)
}

// verify checks that the references answer what marketfeed answered: nginx
// the very bytes and headers, the peer the same headers and the same JSON
// shape (it read its data a moment later, so prices may differ).
func (b *bench) verify(ctx context.Context, caps []captured) error {
	for _, c := range caps {
		for _, name := range []string{srvStatic, srvMemory} {
			body, h, err := get(ctx, b.urls[name]+c.URI, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if !bytes.Equal(body, c.Body) {
				return fmt.Errorf("%s %s: body differs from marketfeed's", name, c.URI)
			}
			if err := sameHeaders(c.Header, h); err != nil {
				return fmt.Errorf("%s %s: %w", name, c.URI, err)
			}
		}
		if c.Gzip != nil {
			body, h, err := get(ctx, b.urls[srvStatic]+c.URI, map[string]string{"Accept-Encoding": "gzip"})
			if err != nil {
				return err
			}
			if !bytes.Equal(body, c.Gzip) || h.Get("Content-Encoding") != "gzip" {
				return fmt.Errorf("nginx static %s: gzip answer differs from marketfeed's", c.URI)
			}
			if err := sameHeaders(c.GzipHeader, h); err != nil {
				return fmt.Errorf("nginx static %s, gzip: %w", c.URI, err)
			}
		}
		body, h, err := get(ctx, b.urls[srvPeer]+c.URI, nil)
		if err != nil {
			return fmt.Errorf("Go peer: %w", err)
		}
		for _, name := range []string{"Content-Type", "Cache-Control", "Access-Control-Allow-Origin"} {
			if h.Get(name) != c.Header.Get(name) {
				return fmt.Errorf("Go peer %s: %s %q, marketfeed %q", c.URI, name, h.Get(name), c.Header.Get(name))
			}
		}
		if err := sameShape(body, c.Body); err != nil {
			return fmt.Errorf("Go peer %s: %w", c.URI, err)
		}
	}
	return nil
}

// sameShape reports whether two JSON documents have the same structure:
// the same object keys in every object and the same array lengths, with
// any scalar values. The peer reads its data a moment after the capture,
// so its numbers may differ while its shape may not.
func sameShape(a, b []byte) error {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if !reflect.DeepEqual(shape(x), shape(y)) {
		return errors.New("JSON shape differs from marketfeed's")
	}
	return nil
}

// shape replaces every scalar with its kind, keeping structure.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = shape(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = shape(e)
		}
		return out
	default:
		return fmt.Sprintf("%T", v)
	}
}

// sameHeaders checks that got carries every header of want that nginx is
// told to copy, with the same value, and the same Content-Type.
func sameHeaders(want, got http.Header) error {
	for name, vals := range want {
		if !copiedHeader(name) && name != "Content-Type" && name != "Content-Encoding" {
			continue
		}
		if g := strings.Join(got.Values(name), ", "); g != strings.Join(vals, ", ") {
			return fmt.Errorf("header %s: %q, marketfeed %q", name, g, strings.Join(vals, ", "))
		}
	}
	return nil
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
			p.resume()
		} else {
			p.pause()
		}
	}
}

// wrk runs wrk on the load core against one server and route.
func (b *bench) wrk(ctx context.Context, c cell, d time.Duration) (wrkResult, error) {
	url := b.urls[c.Server] + b.route(c.Route).URI
	args := []string{"-c", strconv.Itoa(b.cfg.loadCPU), "wrk", "-t1", "-c", strconv.Itoa(b.cfg.connections),
		"-d", fmt.Sprintf("%ds", int(math.Ceil(d.Seconds()))), "--latency"}
	var extra []string
	switch c.Variant {
	case varGzip:
		args = append(args, "-H", "Accept-Encoding: gzip")
	case varXFF:
		script := filepath.Join(b.dir, "xff.lua")
		if err := os.WriteFile(script, []byte(xffScript), 0o644); err != nil {
			return wrkResult{}, err
		}
		args = append(args, "-s", script)
		extra = []string{"--", strconv.Itoa(xffRing)}
	}
	args = append(append(args, url), extra...)
	pgid := b.owners[c.Server].pid()
	before, err := groupCPU(pgid)
	if err != nil {
		return wrkResult{}, err
	}
	out, err := exec.CommandContext(ctx, "taskset", args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", url, err, out)
	}
	after, err := groupCPU(pgid)
	if err != nil {
		return wrkResult{}, err
	}
	res, err := parseWrk(string(out))
	res.ServerCPU = after - before
	return res, err
}

// warm prepares a server for a measured run, uncounted. In the first round
// every server gets a -warmup wrk run (new processes, cold caches, new
// connections). Later, a marketfeed that was paused gets a few requests:
// its snapshots went stale while it was stopped, and the first request
// reads the pair again and makes it hot.
func (b *bench) warm(ctx context.Context, c cell, round int) error {
	if round == 0 {
		_, err := b.wrk(ctx, c, b.cfg.warmup)
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
				res, err := b.wrk(ctx, c, b.cfg.duration)
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
			res, err := b.attack(ctx, b.urls[x.c.Server]+rt.URI, x.rate)
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

// attack runs one vegeta attack on the load core with one worker thread.
// Workers and connections are capped well below the servers' connection
// limits; a server that falls behind then shows as a lower rate sent.
func (b *bench) attack(ctx context.Context, url string, rate float64) (latencyResult, error) {
	targets := filepath.Join(b.dir, "targets.txt")
	if err := os.WriteFile(targets, []byte("GET "+url+"\n"), 0o644); err != nil {
		return latencyResult{}, err
	}
	results := filepath.Join(b.dir, "vegeta.bin")
	if err := runQuiet(ctx, "taskset", "-c", strconv.Itoa(b.cfg.loadCPU), b.vegeta, "-cpus", "1", "attack",
		"-targets", targets, "-rate", fmt.Sprintf("%d/1s", int(rate)), "-duration", b.cfg.latencyDuration.String(),
		"-max-workers", "1024", "-max-connections", "1024", "-max-body", "0", "-timeout", "5s", "-output", results); err != nil {
		return latencyResult{}, err
	}
	out, err := exec.CommandContext(ctx, b.vegeta, "report", "-type", "json", results).Output()
	if err != nil {
		return latencyResult{}, fmt.Errorf("vegeta report: %w", err)
	}
	return parseVegeta(out, float64(int(rate)))
}
