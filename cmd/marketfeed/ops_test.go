package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/apispec"
	"marketfeed/internal/promtext"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// launchApp runs the program on loopback like startApp, without waiting for
// it to be ready: what /readyz says before that is under test.
func launchApp(t *testing.T, src venue.Venue, args ...string) (api, ops string, a *app) {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0"}, args...)
	cfg, err := parseConfig(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err = newApp(cfg, slog.New(slog.DiscardHandler), src)
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, a)
	return "http://" + a.api.Addr().String(), "http://" + a.ops.Addr().String(), a
}

// opsVenue is the simulated venue, held before its first catalog read until
// released, and refusing the region (HTTP 451) when told.
type opsVenue struct {
	venue.Venue
	release chan struct{}
	refuse  atomic.Bool
}

func (v *opsVenue) err() error {
	if v.refuse.Load() {
		return &venue.StatusError{Status: http.StatusUnavailableForLegalReasons}
	}
	return nil
}

func (v *opsVenue) Catalog(ctx context.Context) (venue.Catalog, error) {
	select {
	case <-v.release:
	case <-ctx.Done():
		return venue.Catalog{}, ctx.Err()
	}
	if err := v.err(); err != nil {
		return venue.Catalog{}, err
	}
	return v.Venue.Catalog(ctx)
}

func (v *opsVenue) Stats(ctx context.Context) ([]venue.Stat, error) {
	if err := v.err(); err != nil {
		return nil, err
	}
	return v.Venue.Stats(ctx)
}

func (v *opsVenue) Quotes(ctx context.Context) ([]venue.Quote, error) {
	if err := v.err(); err != nil {
		return nil, err
	}
	return v.Venue.Quotes(ctx)
}

// opsSpec checks the operator endpoints' answers against
// docs/openapi-ops.yaml (see apispec).
type opsSpec struct{ spec *apispec.Spec }

func loadOpsSpec(t *testing.T) *opsSpec {
	t.Helper()
	return &opsSpec{spec: apispec.Load(t, filepath.Join("..", "..", "docs", "openapi-ops.yaml"))}
}

// get fetches url and checks the answer; it returns the status and body.
func (s *opsSpec) get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, body := apptest.Get(t, url)
	s.spec.Check(t, url, resp.Request, resp, body)
	return resp.StatusCode, body
}

// unseen returns the documented operator answers no request produced.
func (s *opsSpec) unseen() []string {
	var missing []string
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		missing = append(missing, s.spec.Unseen(path, nil)...)
	}
	return missing
}

// pollReadyz polls /readyz until cond holds for its status and body, or
// fails after 10 s.
func pollReadyz(t *testing.T, spec *opsSpec, ops string, cond func(status int, body string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := spec.get(t, ops+"/readyz")
		if cond(status, string(body)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s after 10 s", status, body)
		}
		time.Sleep(20 * time.Millisecond) // polling a running program, not synchronising the test
	}
}

func TestHealthzAndReadyzSayWhy(t *testing.T) {
	spec := loadOpsSpec(t)
	venue := &opsVenue{Venue: sim.New(sim.Config{Seed: 1}), release: make(chan struct{})}
	_, ops, _ := launchApp(t, venue)

	status, body := spec.get(t, ops+"/healthz")
	if status != 200 || !strings.Contains(string(body), `"status":"ok"`) || !strings.Contains(string(body), `"reason":"the process is running"`) {
		t.Errorf("/healthz: %d %s", status, body)
	}
	// Nothing read yet: every whole-market route answers 502, and says so.
	status, body = spec.get(t, ops+"/readyz")
	if want := `{"ready":false,"reason":"pairs not loaded","unavailable":["pairs","tickers","contracts","contract_specs"]}`; status != 503 || strings.TrimSpace(string(body)) != want {
		t.Errorf("/readyz before the first catalog read: %d %s, want 503 %s", status, body, want)
	}

	// Ready; this venue reads no contracts (opsVenue hides the simulator's),
	// so /contracts and /contract_specs answer 502, and /readyz lists them.
	close(venue.release)
	pollReadyz(t, spec, ops, func(status int, body string) bool {
		return status == 200 && strings.TrimSpace(body) == `{"ready":true,"reason":"ok","unavailable":["contracts","contract_specs"]}`
	})

	// A venue that refuses this region is a permanent failure: not ready,
	// and the reason says so. The process itself is alive.
	venue.refuse.Store(true)
	pollReadyz(t, spec, ops, func(status int, body string) bool {
		return status == 503 && strings.Contains(body, `"ready":false`) && strings.Contains(body, "451")
	})
	if status, body := spec.get(t, ops+"/healthz"); status != 200 {
		t.Errorf("/healthz while the venue refuses us: %d %s, want 200", status, body)
	}
	if status, body := spec.get(t, ops+"/metrics"); status != 200 ||
		!strings.Contains(string(body), "\nmarketfeed_venue_permanent_failure 1\n") ||
		!strings.Contains(string(body), "\nmarketfeed_ready 0\n") {
		t.Errorf("/metrics does not show the permanent failure: %d", status)
	}
	if missing := spec.unseen(); len(missing) > 0 {
		t.Errorf("documented operator answers not seen: %v", missing)
	}
}

// metricNames are the service's metrics, as docs/operations.md lists them.
var metricNames = []string{
	"marketfeed_build_info",
	"marketfeed_http_requests_total",
	"marketfeed_http_request_duration_seconds_bucket",
	"marketfeed_http_request_duration_seconds_sum",
	"marketfeed_http_request_duration_seconds_count",
	"marketfeed_ratelimit_clients",
	"marketfeed_venue_calls_total",
	"marketfeed_venue_call_duration_seconds_bucket",
	"marketfeed_venue_weight_limit",
	"marketfeed_venue_weight_budget",
	"marketfeed_venue_weight_spent",
	"marketfeed_venue_reads_deferred_total",
	"marketfeed_venue_pauses_total",
	"marketfeed_venue_paused",
	"marketfeed_venue_permanent_failure",
	"marketfeed_snapshot_age_seconds",
	"marketfeed_hot_pairs",
	"marketfeed_cold_loads_total",
	"marketfeed_cold_load_wait_seconds_bucket",
	"marketfeed_tickers_omitted",
	"marketfeed_contracts_omitted",
	"marketfeed_ready",
	"marketfeed_spot_reloads_total",
}

// scrapeOps fetches /metrics and returns series → value.
func scrapeOps(t *testing.T, spec *opsSpec, ops string) map[string]float64 {
	t.Helper()
	status, body := spec.get(t, ops+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	return promtext.Must(t, string(body))
}

func TestMetricsEndpointShowsTheService(t *testing.T) {
	spec := loadOpsSpec(t)
	file := filepath.Join(t.TempDir(), "spot.txt")
	if err := os.WriteFile(file, []byte("BTC_USDT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api, ops, a, _ := startApp(t, nil, "-spot-file", file)
	for _, path := range []string{
		"/api/public/pairs", "/api/public/orderbook?ticker_id=BTC_USDT&depth=5",
		"/api/public/trades?ticker_id=ETH_USDT", "/api/public/fees",
	} {
		apptest.Get(t, api+path)
	}
	a.reloadSpot()
	if err := os.WriteFile(file, []byte("not a ticker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.reloadSpot()

	got := scrapeOps(t, spec, ops)
	for _, name := range metricNames {
		found := false
		for series := range got {
			if series == name || strings.HasPrefix(series, name+"{") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("metric %s is not exposed", name)
		}
	}
	info := `marketfeed_build_info{version="` + buildVersion() + `",goversion="` + runtime.Version() + `"}`
	for series, want := range map[string]float64{
		info: 1,
		`marketfeed_http_requests_total{route="pairs",status="200"}`:        1,
		`marketfeed_http_requests_total{route="orderbook",status="200"}`:    1,
		`marketfeed_http_requests_total{route="trades",status="200"}`:       1,
		`marketfeed_http_requests_total{route="other",status="404"}`:        1,
		`marketfeed_http_request_duration_seconds_count{route="orderbook"}`: 1,
		`marketfeed_hot_pairs{stream="book"}`:                               1,
		`marketfeed_hot_pairs{stream="trades"}`:                             1,
		`marketfeed_cold_loads_total{stream="book",outcome="ok"}`:           1,
		`marketfeed_cold_load_wait_seconds_count{stream="trades"}`:          1,
		`marketfeed_spot_reloads_total{outcome="ok"}`:                       1,
		`marketfeed_spot_reloads_total{outcome="rejected"}`:                 1,
		`marketfeed_ready`:                   1,
		`marketfeed_venue_permanent_failure`: 0,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	if got[`marketfeed_venue_calls_total{call="catalog",outcome="ok"}`] < 1 ||
		got[`marketfeed_venue_calls_total{call="book",outcome="ok"}`] < 1 {
		t.Error("venue calls are not counted")
	}
	for _, kind := range []string{"pairs", "tickers", "books", "trades"} {
		age := got[`marketfeed_snapshot_age_seconds{kind="`+kind+`"}`]
		if age < 0 || age > 10 {
			t.Errorf("%s are %v s old on a healthy venue", kind, age)
		}
	}
	for _, series := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds", "go_goroutines"} {
		if _, ok := got[series]; !ok {
			t.Errorf("process metric %s is not exposed", series)
		}
	}
}

// While the venue fails, /readyz keeps saying ready (every member would fail
// alike, and a cluster all unready at once is an outage) but its body lists
// the whole-market routes answering 502, as they do; once the venue
// answers again, the list is gone. It once said ready with nothing else
// while /tickers and /contracts answered 502.
func TestReadyzListsTheWholeMarketRoutesAnswering502(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim")
	}
	venue := apptest.StartVenueSim(t)
	api, ops, _, _ := startAppLogged(t, nil, nil, slog.DiscardHandler, chaosArgs(venue.URL, 3*time.Second)...)
	readyz := func() readiness {
		resp, body := apptest.Get(t, ops+"/readyz")
		var r readiness
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, body)
		}
		if (resp.StatusCode == http.StatusOK) != r.Ready {
			t.Fatalf("/readyz answered %d with ready %v", resp.StatusCode, r.Ready)
		}
		return r
	}
	// Readiness waits for the pairs and the tickers only: the contracts
	// may land a moment after it, and a loaded machine shows that moment.
	if !apptest.WaitFor(10*time.Second, func() bool { r := readyz(); return r.Ready && len(r.Unavailable) == 0 }) {
		t.Fatalf("before the fault: %+v, want ready with no route unavailable", readyz())
	}
	venue.Fault("status=503")
	if !apptest.WaitFor(20*time.Second, func() bool {
		resp, _ := apptest.Get(t, api+"/api/public/tickers")
		return resp.StatusCode == http.StatusBadGateway
	}) {
		t.Fatal("/tickers never answered 502 while the venue failed")
	}
	r := readyz()
	if !r.Ready {
		t.Errorf("a venue failure made the member unready: %+v", r)
	}
	for _, route := range []string{"tickers", "contracts", "contract_specs"} {
		resp, _ := apptest.Get(t, api+"/api/public/"+route)
		if listed := slices.Contains(r.Unavailable, route); listed != (resp.StatusCode == http.StatusBadGateway) {
			t.Errorf("/%s answers %d and /readyz lists it unavailable: %v (%v)", route, resp.StatusCode, listed, r.Unavailable)
		}
	}
	if !slices.Contains(r.Unavailable, "tickers") {
		t.Errorf("/readyz does not list /tickers, which answers 502: %+v", r)
	}
	venue.Heal()
	if !apptest.WaitFor(30*time.Second, func() bool { return len(readyz().Unavailable) == 0 }) {
		t.Errorf("routes still unavailable after the venue healed: %+v", readyz())
	}
}
