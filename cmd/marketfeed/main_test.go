package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/wire"
	"marketfeed/poller"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// poller returns the poller the app's role runs; nil while a cluster
// member follows.
func (a *app) poller() *poller.Poller {
	return a.role.(interface{ Poller() *poller.Poller }).Poller()
}

// countingVenue counts the catalog reads and the per-pair reads that reach
// the venue.
type countingVenue struct {
	venue.Venue
	catalogs      atomic.Int64
	books, trades sync.Map // symbol → *atomic.Int64
	// contracts counts the contract data reads (marks and open interest)
	// of a venue that has them (see streamingVenue).
	contracts atomic.Int64
	hidden    sync.Map // symbol → struct{}: left out of the catalog, as a delisting does
	// bookDepths counts the book reads by depth: a sync reads the poller's
	// sync depth, a refresh under a book in sequence its refresh depth.
	bookDepths sync.Map // depth → *atomic.Int64
}

// bookReads returns how many book reads of depth reached the venue.
func (c *countingVenue) bookReads(depth int) int64 {
	if v, ok := c.bookDepths.Load(depth); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (c *countingVenue) Catalog(ctx context.Context) (venue.Catalog, error) {
	c.catalogs.Add(1)
	cat, err := c.Venue.Catalog(ctx)
	cat.Markets = slices.DeleteFunc(slices.Clone(cat.Markets), func(m venue.Market) bool {
		_, hidden := c.hidden.Load(m.Symbol)
		return hidden
	})
	return cat, err
}

// perPair returns how many per-pair reads reached the venue, and contract
// data reads: every read but the catalog's that only a leader makes.
func (c *countingVenue) perPair() int64 {
	n := c.contracts.Load()
	for _, m := range []*sync.Map{&c.books, &c.trades} {
		m.Range(func(_, v any) bool { n += v.(*atomic.Int64).Load(); return true })
	}
	return n
}

// reads returns how many book and trades reads reached the venue.
func (c *countingVenue) reads() (books, trades int64) {
	sum := func(m *sync.Map) (n int64) {
		m.Range(func(_, v any) bool { n += v.(*atomic.Int64).Load(); return true })
		return n
	}
	return sum(&c.books), sum(&c.trades)
}

func (c *countingVenue) counter(m *sync.Map, symbol string) *atomic.Int64 {
	v, _ := m.LoadOrStore(symbol, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (c *countingVenue) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	c.counter(&c.books, symbol).Add(1)
	v, _ := c.bookDepths.LoadOrStore(depth, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return c.Venue.Book(ctx, symbol, depth)
}

func (c *countingVenue) Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error) {
	c.counter(&c.trades, symbol).Add(1)
	return c.Venue.Trades(ctx, symbol, limit)
}

// startApp runs the program on loopback with args and returns the API and
// ops base URLs; it stops when the test ends.
func startApp(t *testing.T, src venue.Venue, args ...string) (api, ops string, a *app, reload chan os.Signal) {
	t.Helper()
	return startAppLogged(t, src, nil, slog.DiscardHandler, args...)
}

// startAppLogged is startApp with the MARKETFEED_* variables environ and
// a logger writing to log.
func startAppLogged(t *testing.T, src venue.Venue, environ []string, log slog.Handler, args ...string) (api, ops string, a *app, reload chan os.Signal) {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0"}, args...)
	cfg, err := parseConfig(args, environ, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if src == nil {
		if src, err = newVenue(cfg); err != nil {
			t.Fatal(err)
		}
	}
	a, err = newApp(cfg, slog.New(log), src)
	if err != nil {
		t.Fatal(err)
	}
	reload = runApp(t, a)
	api = "http://" + a.api.Addr().String()
	ops = "http://" + a.ops.Addr().String()
	apptest.WaitReady(t, ops)
	return api, ops, a, reload
}

// runApp runs a until the test ends, when run must return nil, and returns
// the channel that stands for SIGHUP.
func runApp(t *testing.T, a *app) chan os.Signal {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, reload) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return reload
}

func TestEveryRouteAnswersOverHTTPOnTheSimulatedVenue(t *testing.T) {
	api, ops, _, _ := startApp(t, nil)
	base := api + "/api/public"

	resp, body := apptest.Get(t, base+"/pairs")
	apptest.CheckOK(t, resp)
	var pairs []wire.Pair
	apptest.Decode(t, body, &pairs)
	kinds := map[string]string{}
	for _, p := range pairs {
		kinds[p.TickerID] = p.Kind
		if p.PriceSource != "sim-perp" {
			t.Errorf("%s price_source = %q", p.TickerID, p.PriceSource)
		}
	}
	if kinds["BTC_USDT"] != "spot" || kinds["1000PEPE_USDT"] != "perp" {
		t.Errorf("BTC_USDT kind %q, 1000PEPE_USDT kind %q: want spot and perp", kinds["BTC_USDT"], kinds["1000PEPE_USDT"])
	}
	if _, ok := kinds["PEPE_USDT"]; ok {
		t.Error("PEPE_USDT is published though the venue only has 1000PEPEUSDT")
	}

	resp, body = apptest.Get(t, base+"/tickers")
	apptest.CheckOK(t, resp)
	var tickers []wire.Ticker
	apptest.Decode(t, body, &tickers)
	if len(tickers) == 0 {
		t.Fatal("no tickers")
	}
	for _, tk := range tickers {
		if kinds[tk.TickerID] != "spot" {
			t.Errorf("ticker for %s, which is not a spot pair", tk.TickerID)
		}
		if tk.Bid != tk.Ask {
			t.Errorf("%s bid %s != ask %s: both are the mid", tk.TickerID, tk.Bid, tk.Ask)
		}
	}

	for _, route := range []string{"/trades", "/historical_trades"} {
		resp, body = apptest.Get(t, base+route+"?ticker_id=BTC_USDT&limit=7&type=buy")
		apptest.CheckOK(t, resp)
		var trades []wire.Trade
		apptest.Decode(t, body, &trades)
		if len(trades) == 0 || len(trades) > 7 {
			t.Fatalf("%s limit=7 gave %d trades", route, len(trades))
		}
		for i, tr := range trades {
			if tr.Type != "buy" {
				t.Errorf("%s type=buy gave a %s trade", route, tr.Type)
			}
			if i > 0 && tr.TradeTimestamp > trades[i-1].TradeTimestamp {
				t.Errorf("%s trades not newest first", route)
			}
		}
	}

	resp, body = apptest.Get(t, base+"/orderbook?ticker_id=1000PEPE_USDT&depth=5")
	apptest.CheckOK(t, resp)
	var book wire.Book
	apptest.Decode(t, body, &book)
	if book.TickerID != "1000PEPE_USDT" || len(book.Bids) != 5 || len(book.Asks) != 5 {
		t.Fatalf("depth=5 book: %s with %d bids, %d asks", book.TickerID, len(book.Bids), len(book.Asks))
	}
	resp, body = apptest.Get(t, base+"/orderbook?ticker_id=BTC_USDT")
	apptest.CheckOK(t, resp)
	apptest.Decode(t, body, &book)
	if len(book.Bids) != 100 || len(book.Asks) != 100 {
		t.Fatalf("default depth gave %d bids, %d asks; want 100", len(book.Bids), len(book.Asks))
	}

	// One contract per pair, and its specification in the other list. Read
	// last: the first contracts follow readiness by up to a second, and the
	// books above are read at once.
	contracts, specs := apptest.WaitContracts(t, base, apptest.ListedIDs(t, api), 10*time.Second)
	if len(specs) != len(contracts) {
		t.Errorf("%d specifications of %d contracts", len(specs), len(contracts))
	}

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/orderbook?ticker_id=btc_usdt", 400},
		{"/orderbook?ticker_id=PEPE_USDT", 404},
		{"/trades?ticker_id=BTC_USDT&type=BUY", 400},
		{"/fees", 404},
	} {
		resp, _ := apptest.Get(t, base+tc.path)
		if resp.StatusCode != tc.status || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %q, want %d no-store", tc.path, resp.StatusCode, resp.Header.Get("Cache-Control"), tc.status)
		}
	}

	resp, body = apptest.Get(t, ops+"/healthz")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("/healthz: %d %s", resp.StatusCode, body)
	}
	resp, body = apptest.Get(t, ops+"/readyz")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ready":true`) {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
}

// TestThousandClientsCauseBoundedVenueReads hammers one pair's book and
// trades from 1,000 concurrent clients for 3 s: the venue must see no more
// reads than the refresh cadences allow, whatever the number of callers.
func TestThousandClientsCauseBoundedVenueReads(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s of load")
	}
	venue := &countingVenue{Venue: sim.New(sim.Config{Seed: 1})}
	api, _, _, _ := startApp(t, venue, "-rate-limit", "0")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 1000}}
	const clients = 1000
	const period = 3 * time.Second
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(period)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			url := api + "/api/public/orderbook?ticker_id=BTC_USDT&depth=10"
			if i%2 == 1 {
				url = api + "/api/public/trades?ticker_id=BTC_USDT&limit=10"
			}
			for time.Now().Before(stop) {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	books := venue.counter(&venue.books, "BTCUSDT").Load()
	trades := venue.counter(&venue.trades, "BTCUSDT").Load()
	maxBooks := int64(elapsed/(350*time.Millisecond)) + 1
	maxTrades := int64(elapsed/time.Second) + 1
	t.Logf("%d clients, %s: %d answers 200, %d failed; venue reads: %d books (bound %d), %d trades (bound %d)",
		clients, elapsed.Round(time.Millisecond), ok.Load(), failed.Load(), books, maxBooks, trades, maxTrades)
	if books > maxBooks || trades > maxTrades {
		t.Fatalf("venue reads: %d books (bound %d), %d trades (bound %d)", books, maxBooks, trades, maxTrades)
	}
	if books == 0 || trades == 0 || ok.Load() == 0 {
		t.Fatal("the load did not reach the venue or got no answers")
	}
	if failed.Load() > 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
}

func TestSIGHUPReloadsTheSpotFileAndKeepsTheListOnABadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "spot.txt")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# platform coins\nBTC_USDT\n")
	api, _, a, reload := startApp(t, nil, "-spot-file", file)
	kind := func(id string) string {
		_, body := apptest.Get(t, api+"/api/public/pairs")
		var pairs []wire.Pair
		apptest.Decode(t, body, &pairs)
		for _, p := range pairs {
			if p.TickerID == id {
				return p.Kind
			}
		}
		return ""
	}
	if kind("BTC_USDT") != "spot" || kind("ETH_USDT") != "perp" {
		t.Fatalf("at start: BTC_USDT %q, ETH_USDT %q", kind("BTC_USDT"), kind("ETH_USDT"))
	}
	write("BTC_USDT\nETH_USDT # added\n")
	reload <- syscall.SIGHUP
	// The reload runs on the app's goroutine; poll the public route, as an
	// operator would, until it shows or the deadline passes.
	deadline := time.Now().Add(5 * time.Second)
	for kind("ETH_USDT") != "spot" {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP ETH_USDT is %q, want spot", kind("ETH_USDT"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	write("BTC_USDT\nnot a ticker\n")
	a.reloadSpot() // the same call the signal makes, synchronously: nothing to wait for
	if kind("ETH_USDT") != "spot" {
		t.Fatal("a bad spot file replaced the list in use")
	}
}

func TestEnvironmentSetsFlagsAndFlagsWin(t *testing.T) {
	env := map[string]string{
		"MARKETFEED_RATE_LIMIT":      "42",
		"MARKETFEED_VENUE":           "aster",
		"MARKETFEED_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1",
		"MARKETFEED_MAX_STALE":       "3s",
	}
	cfg, err := parseConfig([]string{"-rate-limit", "7"}, environ(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rateLimit != 7 || cfg.venue != "aster" || cfg.maxStale != 3*time.Second || len(cfg.trustedProxies) != 2 {
		t.Fatalf("config = %+v", cfg)
	}
	if cfg.trustedProxies[1].String() != "192.0.2.1/32" {
		t.Fatalf("bare address became %s, want a /32", cfg.trustedProxies[1])
	}
}

func TestBadConfigurationIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-venue", "kraken"},
		{"-venue-url", "http://127.0.0.1:1"},
		{"-spot", "btc_usdt"},
		{"-trusted-proxies", "10.0.0.0/33"},
		{"-venue-budget", "1.5"},
		{"-rate-limit", "-1"},
		{"-spot-file", "/nonexistent/spot.txt"},
		{"extra-argument"},
	} {
		if _, err := parseConfig(args, nil, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestRunPrintsTheVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-version"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "marketfeed ") {
		t.Fatalf("-version printed %q", out.String())
	}
}

// An ordinary build reports the commit it was built from, and whether the
// tree had changes, instead of "dev"; a version given at build time wins.
func TestVersionOfTheBuild(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "marketfeed", Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		given string
		info  *debug.BuildInfo
		want  string
	}{
		{"dev", vcs("cefb372d33379d375d218733ec69de25f3f4a2b1", "false"), "cefb372d3337"},
		{"dev", vcs("cefb372d33379d375d218733ec69de25f3f4a2b1", "true"), "cefb372d3337-dirty"},
		{"v1.4.0", vcs("cefb372d33379d375d218733ec69de25f3f4a2b1", "true"), "v1.4.0"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Path: "marketfeed", Version: "v1.3.2"}}, "v1.3.2"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Path: "marketfeed", Version: "(devel)"}}, "dev"},
		{"dev", nil, "dev"},
	} {
		if got := versionOf(tc.given, tc.info); got != tc.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", tc.given, tc.info, got, tc.want)
		}
	}
}
