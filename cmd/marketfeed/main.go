// Command marketfeed serves the public market-data API (pairs, tickers, order
// books and trades) from snapshots a background poller keeps fresh from a
// perpetual-futures venue: the embedded simulated venue by default, or a
// Binance-compatible REST API.
//
// Every flag can also be set as MARKETFEED_<NAME>, the flag's name in upper
// case with dashes as underscores. Every value is validated before anything
// starts: a bad one exits with status 2 and one line on stderr naming the
// flag (and the variable it came from). SIGHUP re-reads -spot-file; SIGINT and
// SIGTERM stop accepting connections, drain the requests in flight, then stop
// the poller.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/nats-io/nats.go"

	"marketfeed/cluster"
	"marketfeed/internal/logkey"
	"marketfeed/internal/promdoc"
	"marketfeed/poller"
	"marketfeed/poller/binance"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
	"marketfeed/role"
	"marketfeed/server"
	"marketfeed/server/pages"
	"marketfeed/snapshot"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The metrics library writes a TYPE line for each family it writes; the
// operator listener's /metrics completes them with help text (promdoc).
func init() { metrics.ExposeMetadata(true) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "marketfeed:", err)
		}
		os.Exit(2)
	}
}

// run is the whole program: parse, wire, serve until ctx is done, shut down.
// environ is the environment as os.Environ gives it.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, environ, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "marketfeed", buildVersion())
		return nil
	}
	venue, err := newVenue(cfg)
	if err != nil {
		return err
	}
	a, err := newApp(cfg, newLogger(cfg, stderr), venue)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return a.run(ctx, hup)
}

// buildVersion is the version this binary reports: the one given at build
// time, else what the build recorded of the module (see versionOf).
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(version, info)
}

// versionOf is the version given at build time (-X main.version) when there
// is one. Otherwise it is the module's version when it was built as a
// release (go install marketfeed@v1.2.3), or the commit a build from a clone
// recorded (vcs.revision, its first 12 digits, with -dirty when the tree had
// changes, as git describe --dirty says), so that an ordinary go build tells
// which code runs; "dev" only when the build recorded none (go run, a git
// worktree, or -buildvcs=false).
func versionOf(given string, info *debug.BuildInfo) string {
	if given != "dev" || info == nil {
		return given
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return given
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// app is the wired program: one store, the role that reads the venue into
// it or applies a cluster leader's values to it, the public server and the
// operator endpoints.
type app struct {
	cfg     *Config
	log     *slog.Logger
	store   *snapshot.Store
	venue   venue.Venue
	role    player
	srv     *server.Server
	metrics *metrics.Set // the server's, the cluster's and the program's own
	spotOK  *metrics.Counter
	spotBad *metrics.Counter
	api     net.Listener
	ops     net.Listener // nil when -ops-listen is empty

	// rotation reports how the market streams replace their connections,
	// for /readyz; nil without streams that say.
	rotation atomic.Pointer[func() binance.Rotation]
}

// player is the part the process plays, built once: a role.Standalone, or a
// role.Cluster that plays the leader, a follower or alone as its member
// says. Everything else asks it, never which it is.
type player interface {
	server.Feed
	Readiness() role.Readiness
	WriteMetrics(w io.Writer)
	Spot() []string
	SetSpot(ids []string)
	WarnSpot()
	// ShareRateLimit hands it the server's rate limiter, before it serves.
	ShareRateLimit(srv role.RateLimiter)
	// Run plays the part until ctx is done and all it started has
	// returned.
	Run(ctx context.Context)
}

// keepRotation keeps what st reports of how it replaces its connections,
// when it does (the Binance-compatible venues' streams).
func (a *app) keepRotation(st venue.Streams) {
	if r, ok := st.(interface{ Rotation() binance.Rotation }); ok {
		f := r.Rotation
		a.rotation.Store(&f)
	}
}

func newVenue(cfg *Config) (venue.Venue, error) {
	kind, ok := venueKindOf(cfg.venue)
	if !ok {
		return nil, fmt.Errorf("unknown venue %q", cfg.venue)
	}
	return kind.open(cfg), nil
}

// newStreams returns the venue's market streams when cfg asks for them and
// the venue has them, and nil otherwise: the poller then reads REST only.
func newStreams(cfg *Config, src venue.Venue, log *slog.Logger, set *metrics.Set) venue.Streams {
	kind, ok := venueKindOf(cfg.venue)
	if !cfg.VenueStreams || !ok {
		return nil
	}
	return kind.streams(cfg, src, log, set)
}

// streamURL is the base URL of the venue's market streams: -venue-ws-url;
// without it, a -venue-url's host (a proxy or a simulator serves both);
// without either, "" for the venue's public stream URL.
func streamURL(cfg *Config) string {
	switch {
	case cfg.VenueWSURL != "":
		return cfg.VenueWSURL
	case cfg.venueURL != "":
		u, err := url.Parse(cfg.venueURL)
		if err != nil {
			return "" // validated before anything starts
		}
		u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
		u.Path, u.RawQuery, u.Fragment = "", "", ""
		return u.String()
	}
	return ""
}

// newApp wires the program around venue and opens its listeners.
func newApp(cfg *Config, log *slog.Logger, src venue.Venue) (*app, error) {
	spot := cfg.spot
	if !cfg.spotSet && cfg.venue == simVenue {
		spot = sim.DefaultSpot
	}
	store := snapshot.NewStore()
	// One set per app rather than the library's global registry: tests run
	// several apps in one process, and each must scrape only its own.
	set := metrics.NewSet()
	a := &app{
		cfg: cfg, log: log, store: store, venue: src, metrics: set,
		spotOK:  set.NewCounter(`marketfeed_spot_reloads_total{outcome="ok"}`),
		spotBad: set.NewCounter(`marketfeed_spot_reloads_total{outcome="rejected"}`),
	}
	rc := role.Config{Metrics: set, Poller: poller.Config{
		Venue:  src,
		Store:  store,
		Logger: log,
		Spot:   slices.Clone(spot),
		Quotes: cfg.quotes,
		// The simulator's built-in list holds PEPE_USDT on purpose, to show
		// the publication rules; only an operator's ids are worth a warning.
		WarnUnlistedSpot: cfg.spotSet,
		Budget:           cfg.venueBudget,
		MaxStale:         cfg.maxStale,
		RefreshShare:     cfg.refreshShare,
	}}
	var err error
	if len(cfg.ClusterURLs) == 0 {
		a.role = role.NewStandalone(rc, func(set *metrics.Set) venue.Streams {
			st := newStreams(cfg, src, log, set)
			a.keepRotation(st)
			return st
		})
	} else if a.role, err = a.joinCluster(rc); err != nil {
		return nil, err
	}
	var site server.Pages
	if cfg.Pages {
		site = pages.New()
	}
	a.srv = server.New(server.Config{
		Store:           store,
		Feed:            a.role,
		Pages:           site,
		Logger:          log,
		Metrics:         set,
		MaxStale:        cfg.maxStale,
		ColdTimeout:     cfg.coldTimeout,
		RateLimit:       cfg.rateLimit,
		RateLimitExempt: cfg.rateLimitExempt,
		TrustedProxies:  cfg.trustedProxies,
		ClientIPHeader:  cfg.clientIPHeader,
		MaxConns:        cfg.MaxConns,
	})
	// One rate limit for a cluster: each member charges the others'
	// clients' requests (see cluster.Member.ShareRateLimit).
	a.role.ShareRateLimit(a.srv)
	// The build as a series of constant 1, so that a dashboard can join it
	// to any other metric and see which version produced it.
	set.NewGauge(`marketfeed_build_info{version="`+labelValue(buildVersion())+`",goversion="`+labelValue(runtime.Version())+`"}`,
		func() float64 { return 1 })
	if a.api, err = net.Listen("tcp", cfg.listen); err != nil {
		return nil, cfg.invalid("listen", cfg.listen, "%v", err)
	}
	if cfg.opsListen != "" {
		if a.ops, err = net.Listen("tcp", cfg.opsListen); err != nil {
			a.api.Close()
			return nil, cfg.invalid("ops-listen", cfg.opsListen, "%v", err)
		}
	}
	return a, nil
}

// shutdownGrace bounds how long in-flight requests may take to drain.
const shutdownGrace = 10 * time.Second

// run serves until ctx is done, re-reading the spot file on every value from
// reload, then shuts down in order: stop accepting and drain the API, stop
// the poller, close the operator endpoints.
func (a *app) run(ctx context.Context, reload <-chan os.Signal) error {
	a.warnConfig() // before anything serves, so that the warnings lead the log
	pollCtx, stopPoll := context.WithCancel(context.Background())
	defer stopPoll()
	var wg sync.WaitGroup
	wg.Go(func() { a.role.Run(pollCtx) })

	errc := make(chan error, 2)
	wg.Go(func() {
		if err := a.srv.Serve(a.api); err != nil {
			errc <- fmt.Errorf("serve api: %w", err)
		}
	})
	var ops *http.Server
	if a.ops != nil {
		ops = &http.Server{Handler: a.opsHandler(), ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() {
			if err := ops.Serve(a.ops); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve ops: %w", err)
			}
		})
	}
	a.log.Info("serving", logkey.URL, "http://"+a.api.Addr().String()+"/api/public/pairs",
		logkey.Venue, a.cfg.venue, logkey.Ops, a.opsAddr(), logkey.Version, buildVersion())

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			runErr = err
			break loop
		case <-reload:
			a.reload()
		}
	}
	a.log.Info("shutting down: draining requests")
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := a.srv.Shutdown(shutCtx); err != nil {
		a.log.Warn("api drain", logkey.Err, err)
	}
	stopPoll()
	if ops != nil {
		_ = ops.Shutdown(shutCtx)
	}
	wg.Wait()
	a.log.Info("stopped")
	return runErr
}

func (a *app) opsAddr() string {
	if a.ops == nil {
		return ""
	}
	return a.ops.Addr().String()
}

// warnConfig logs, at start and on every SIGHUP, each part of the
// configuration that would otherwise do nothing and say nothing: a
// MARKETFEED_* variable that sets no flag, and an empty spot list (tickers
// are for spot pairs only, so /tickers answers []). The poller warns of
// each spot id the venue has no tradable market of, once it has read the
// venue's catalog, and again on SIGHUP (see reloadSpot).
func (a *app) warnConfig() {
	for _, name := range a.cfg.unknownEnv {
		if meant := nearEnv(name, a.cfg.flagNames); meant != "" {
			a.log.Warn("environment variable ignored: it sets no flag", logkey.Var, name, logkey.Meant, meant)
		} else {
			a.log.Warn("environment variable ignored: it sets no flag", logkey.Var, name)
		}
	}
	if len(a.role.Spot()) == 0 {
		a.log.Warn("no spot pairs: /tickers answers [] (tickers are for spot pairs only); set -spot or -spot-file",
			logkey.Venue, a.cfg.venue)
	}
}

// reload is what SIGHUP does: re-read -spot-file, and say again what in
// the configuration does nothing (see warnConfig).
func (a *app) reload() {
	a.reloadSpot()
	a.warnConfig()
}

// reloadSpot re-reads -spot-file; a bad file is rejected and the list in use
// is kept.
func (a *app) reloadSpot() {
	if a.cfg.spotFile == "" {
		a.log.Warn("SIGHUP ignored: no -spot-file to re-read")
		a.role.WarnSpot()
		return
	}
	ids, err := readSpotFile(a.cfg.spotFile)
	if err != nil {
		a.spotBad.Inc()
		a.log.Error("spot file rejected; keeping the current spot list", logkey.Err, err)
		a.role.WarnSpot()
		return
	}
	a.spotOK.Inc()
	spot := append(slices.Clip(a.cfg.spotFlag), ids...)
	a.role.SetSpot(spot)
	a.log.Info("spot list reloaded", logkey.File, a.cfg.spotFile, logkey.Pairs, len(ids))
}

// opsHandler serves the operator endpoints: metrics, liveness, readiness
// and pprof.
func (a *app) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var scrape bytes.Buffer
		a.metrics.WritePrometheus(&scrape)
		a.role.WriteMetrics(&scrape)
		metrics.WriteProcessMetrics(&scrape)
		// The descriptors in use against the limit: what runs out first
		// when connections pile up (LimitNOFILE in docs/deploy.md).
		metrics.WriteFDMetrics(&scrape)
		// Each family under its help and type, for promtool, Grafana's
		// metric browser and every tool that reads the metadata.
		_ = promdoc.Write(w, scrape.Bytes(), promdoc.Families)
	})
	// Liveness says only that the process answers: restarting it would not
	// bring back a venue that fails, which is what /readyz reports.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, liveness{Status: "ok", Reason: "the process is running", Version: buildVersion()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ready := a.readiness()
		status := http.StatusOK
		if !ready.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, ready)
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// liveness is the /healthz body.
type liveness struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Version string `json:"version"`
}

// readiness is the /readyz body.
type readiness struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
	// Sources says where books, trades and tickers come from while the
	// venue's market streams are read.
	Sources *poller.Sources `json:"sources,omitempty"`
	// Streams says how the market streams' connections are replaced,
	// while they are read.
	Streams *streamRotation `json:"streams,omitempty"`
	// Cluster says this member's part, with -cluster.
	Cluster *clusterRole `json:"cluster,omitempty"`
	// Unavailable lists the whole-market routes answering 502 now, their
	// data older than -max-stale. It does not make the member unready: a
	// venue failing fails every member alike, and a cluster all unready at
	// once would turn the venue's hiccup into an outage.
	Unavailable []string `json:"unavailable,omitempty"`
}

// streamRotation is how the market streams replace their connections, in
// /readyz.
type streamRotation struct {
	// MaxAge is the oldest a connection grows before it is replaced:
	// -venue-ws-max-age, or less before the venue's own close.
	MaxAge float64 `json:"max_age_seconds"`
	// VenueCloseAge is the age at which the venue was seen closing
	// connections on its own schedule; 0 when it was not, lately.
	VenueCloseAge float64 `json:"venue_close_age_seconds"`
}

// clusterRole is a cluster member's part in /readyz.
type clusterRole = role.ClusterStatus

// readiness says whether the process should get traffic: the verdict of
// the role it plays, and how its market streams replace their connections.
func (a *app) readiness() readiness {
	rr := a.role.Readiness()
	r := readiness{Ready: rr.Ready, Reason: rr.Reason, Sources: rr.Sources, Cluster: rr.Cluster,
		Unavailable: a.srv.Unavailable(time.Now())}
	if f := a.rotation.Load(); f != nil {
		rot := (*f)()
		r.Streams = &streamRotation{MaxAge: rot.MaxAge.Seconds(), VenueCloseAge: rot.VenueCloseAge.Seconds()}
	}
	return r
}

// joinTimeout bounds how long a member waits for NATS at start.
const joinTimeout = 10 * time.Second

// joinCluster connects to -cluster's NATS servers and joins the cluster
// as a member whose role is rc's. The connection reconnects for ever:
// while it is away, the member serves what it holds.
func (a *app) joinCluster(rc role.Config) (*role.Cluster, error) {
	cfg := a.cfg
	nc, err := nats.Connect(strings.Join(cfg.ClusterURLs, ","),
		nats.Name("marketfeed "+cfg.ClusterMember),
		nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond),
		// A dead TCP path is noticed in seconds, not the client's default
		// of minutes.
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(3),
		nats.Timeout(joinTimeout))
	if err != nil {
		return nil, cfg.invalid("cluster", strings.Join(cfg.ClusterURLs, ","), "connect: %v", err)
	}
	streams := newStreams(cfg, a.venue, a.log, a.metrics)
	a.keepRotation(streams)
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	c, err := role.Join(ctx, rc, cluster.Config{
		Conn: nc, Name: cfg.ClusterName, Member: cfg.ClusterMember, Replicas: cfg.ClusterReplicas, Store: a.store,
		Logger: a.log, Metrics: a.metrics,
	}, streams)
	if err != nil {
		nc.Close()
		return nil, cfg.invalid("cluster", nil, "%v", err)
	}
	return c, nil
}

// labelValue escapes a Prometheus label value: the version comes from the
// build and may hold anything.
func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
