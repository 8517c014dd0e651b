package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"marketfeed/internal/golden"
	"marketfeed/snapshot"
)

// Freshness and failures (docs/api.md): a missing or too old snapshot is a
// 502, never a 500; a cold pair makes one venue read and waits for it.

func TestNoCatalogIs502(t *testing.T) {
	srv := New(Config{Store: snapshot.NewStore()})
	for uri, want := range map[string]*apiError{
		"/api/public/pairs":                             errNoCatalog,
		"/api/public/tickers":                           errNoTickers,
		"/api/public/contracts":                         errNoContracts,
		"/api/public/contract_specs":                    errNoContracts,
		"/api/public/orderbook?ticker_id=BTC_USDT":      errNoCatalog,
		"/api/public/trades?ticker_id=BTC_USDT":         errNoCatalog,
		"/api/public/historical_trades?ticker_id=AB_CD": errNoCatalog,
	} {
		resp := serveOne(srv, request{uri: uri})
		checkResponse(t, uri, resp)
		wantError(t, resp, want)
	}
	golden.Check(t, "error_no_catalog", serveOne(srv, request{uri: "/api/public/pairs"}).Body())
}

func TestPairsOlderThanPairsMaxStaleIs502(t *testing.T) {
	f := newFixture(t, nil)
	f.clock.Advance(DefaultPairsMaxStale)
	wantStatus(t, f.get(t, "/api/public/pairs"), 200) // exactly max-stale old is still served
	f.clock.Advance(time.Nanosecond)
	wantError(t, f.get(t, "/api/public/pairs"), errCatalogStale)
	golden.Check(t, "error_catalog_stale", f.get(t, "/api/public/pairs").Body())

	f = newFixture(t, func(c *Config) { c.PairsMaxStale = time.Minute })
	f.clock.Advance(time.Minute + time.Nanosecond)
	wantError(t, f.get(t, "/api/public/pairs"), errCatalogStale)
	f.store.PutDoc(snapshot.NewPairs(fixtureMarkets, fixturePairsConfig, f.clock.Now()), t0)
	wantStatus(t, f.get(t, "/api/public/pairs"), 200)
}

func TestTickersMissingOrOlderThanMaxStaleIs502(t *testing.T) {
	f := newFixture(t, nil)
	f.clock.Advance(DefaultMaxStale)
	wantStatus(t, f.get(t, "/api/public/tickers"), 200)
	f.clock.Advance(time.Nanosecond)
	wantError(t, f.get(t, "/api/public/tickers"), errNoTickers)
	golden.Check(t, "error_tickers_unavailable", f.get(t, "/api/public/tickers").Body())
	if n := f.feed.loads.Load(); n != 0 {
		t.Errorf("%d loads for tickers, want none: tickers are polled in bulk", n)
	}

	store := snapshot.NewStore()
	store.PutDoc(snapshot.NewPairs(fixtureMarkets, fixturePairsConfig, t0), t0)
	srv := New(Config{Store: store, Now: newClock().Now})
	wantError(t, serveOne(srv, request{uri: "/api/public/tickers"}), errNoTickers)
}

// /contracts and /contract_specs are one publication: both are served
// while it is within max-stale, both are 502 once it is older, and neither
// asks the venue for anything.
func TestContractsMissingOrOlderThanMaxStaleIs502(t *testing.T) {
	f := newFixture(t, nil)
	f.clock.Advance(DefaultMaxStale)
	for _, uri := range []string{"/api/public/contracts", "/api/public/contract_specs"} {
		wantStatus(t, f.get(t, uri), 200)
	}
	f.clock.Advance(time.Nanosecond)
	for _, uri := range []string{"/api/public/contracts", "/api/public/contract_specs"} {
		wantError(t, f.get(t, uri), errNoContracts)
	}
	golden.Check(t, "error_contracts_unavailable", f.get(t, "/api/public/contracts").Body())
	if n := f.feed.loads.Load(); n != 0 {
		t.Errorf("%d loads for contracts, want none: they are published in bulk", n)
	}
}

func TestStaleSnapshotTriesOneLoadThen502(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxStale = 3 * time.Second })
	f.clock.Advance(3*time.Second + time.Nanosecond)
	resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	wantError(t, resp, errNoBook)
	if n := f.feed.loads.Load(); n != 1 {
		t.Fatalf("%d loads, want exactly 1", n)
	}
	golden.Check(t, "error_book_unavailable", resp.Body())

	resp = f.get(t, "/api/public/trades?ticker_id=BTC_USDT")
	wantError(t, resp, errNoTrades)
	golden.Check(t, "error_trades_unavailable", resp.Body())
	if n := f.feed.loads.Load(); n != 2 {
		t.Fatalf("%d loads, want 2", n)
	}
}

func TestStaleSnapshotRefreshedByLoadIs200(t *testing.T) {
	f := newFixture(t, nil)
	f.feed.load = f.publish
	f.clock.Advance(time.Hour)
	f.store.PutDoc(snapshot.NewPairs(fixtureMarkets, fixturePairsConfig, f.clock.Now()), t0)
	resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	wantStatus(t, resp, 200)
	if bids, _, _ := bookLevels(t, resp.Body()); len(bids) != 1 || bids[0][0] != "10" {
		t.Fatalf("bids %v, want the freshly loaded book", bids)
	}
	wantStatus(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT"), 200)
	if n := f.feed.loads.Load(); n != 2 {
		t.Fatalf("%d loads, want 2", n)
	}
	// Now fresh: no further load.
	wantStatus(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT"), 200)
	if n := f.feed.loads.Load(); n != 2 {
		t.Fatalf("%d loads after a fresh hit, want still 2", n)
	}
}

func TestColdPairLoadSuccessIs200(t *testing.T) {
	f := newFixture(t, nil)
	var mu sync.Mutex
	var got []string
	f.feed.load = func(ctx context.Context, id string, s snapshot.Stream) error {
		mu.Lock()
		got = append(got, id+" "+s.String())
		mu.Unlock()
		return f.publish(ctx, id, s)
	}
	wantStatus(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT&depth=1"), 200)
	wantStatus(t, f.get(t, "/api/public/historical_trades?ticker_id=SOL_USDT&type=buy"), 200)
	wantStatus(t, f.get(t, "/api/public/trades?ticker_id=SOL_USDT"), 200)
	if want := []string{"SOL_USDT book", "SOL_USDT trades"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("loads %q, want %q", got, want)
	}
}

func TestColdPairLoadFailureIs502WithoutVenueText(t *testing.T) {
	f := newFixture(t, nil)
	for uri, want := range map[string]*apiError{
		"/api/public/orderbook?ticker_id=SOL_USDT":         errNoBook,
		"/api/public/trades?ticker_id=SOL_USDT":            errNoTrades,
		"/api/public/historical_trades?ticker_id=SOL_USDT": errNoTrades,
	} {
		resp := f.get(t, uri)
		wantError(t, resp, want)
		if bytes.Contains(resp.Body(), []byte("SECRET")) || bytes.Contains(resp.Body(), []byte("teapot")) {
			t.Fatalf("venue error text in the response: %s", resp.Body())
		}
	}
	if n := f.feed.loads.Load(); n != 3 {
		t.Fatalf("%d loads, want one per request", n)
	}
}

func TestColdLoadReturnsButPublishesNothingIs502(t *testing.T) {
	f := newFixture(t, nil)
	f.feed.load = func(context.Context, string, snapshot.Stream) error { return nil }
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT"), errNoBook)
}

func TestColdLoadWaitsAtMostColdTimeout(t *testing.T) {
	const timeout = 20 * time.Millisecond
	f := newFixture(t, func(c *Config) { c.ColdTimeout = timeout })
	var deadline time.Time
	var hasDeadline bool
	f.feed.load = func(ctx context.Context, _ string, _ snapshot.Stream) error {
		deadline, hasDeadline = ctx.Deadline()
		<-ctx.Done() // a venue that never answers
		return ctx.Err()
	}
	start := time.Now()
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT"), errNoBook)
	end := time.Now()
	if !hasDeadline || deadline.Before(start.Add(timeout)) || deadline.After(end) {
		t.Fatalf("Load's deadline %v after the request's start (request took %v), want the ColdTimeout %v",
			deadline.Sub(start), end.Sub(start), timeout)
	}
	if n := f.feed.loads.Load(); n != 1 {
		t.Fatalf("%d loads, want 1", n)
	}
}

func TestColdLoadDefaultTimeoutIsTwoSeconds(t *testing.T) {
	f := newFixture(t, nil)
	var left time.Duration
	f.feed.load = func(ctx context.Context, _ string, _ snapshot.Stream) error {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return errVenue
	}
	f.get(t, "/api/public/trades?ticker_id=SOL_USDT")
	if left <= DefaultColdTimeout-time.Second || left > DefaultColdTimeout {
		t.Fatalf("Load had %v left, want about %v", left, DefaultColdTimeout)
	}
}

// A pair delisted while its first read is under way is still answered,
// with the 502 of a read that published nothing, until caches have let go
// of the /pairs that listed it; then it is unknown.
func TestPairDelistedWhileLoadingIsAnsweredUntilCachesForgetIt(t *testing.T) {
	f := newFixture(t, nil)
	f.feed.load = func(context.Context, string, snapshot.Stream) error {
		f.store.PutDoc(snapshot.NewPairs(fixtureMarkets[:1], fixturePairsConfig, t0), f.clock.Now())
		return nil
	}
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT"), errNoBook)
	f.clock.Advance(snapshot.CacheMaxAge)
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT"), errUnknownTicker)
}

// A delisted pair leaves /pairs at once, and /orderbook and the trade
// routes answer it as before for as long as a cache may serve the /pairs
// that listed it (its max-age), then 404.
func TestDelistedPairAnsweredForTheCacheMaxAge(t *testing.T) {
	f := newFixture(t, nil)
	uris := []string{"/api/public/orderbook?ticker_id=ETH_USDT", "/api/public/trades?ticker_id=ETH_USDT",
		"/api/public/historical_trades?ticker_id=ETH_USDT&type=buy"}
	before := map[string]string{}
	for _, uri := range uris {
		before[uri] = string(f.get(t, uri).Body())
	}
	var without []snapshot.Market
	for _, m := range fixtureMarkets {
		if m.Symbol != "ETHUSDT" {
			without = append(without, m)
		}
	}
	f.store.PutDoc(snapshot.NewPairs(without, fixturePairsConfig, f.clock.Now()), f.clock.Now())
	if body := string(f.get(t, "/api/public/pairs").Body()); strings.Contains(body, "ETH_USDT") {
		t.Fatalf("/pairs still lists the delisted pair: %s", body)
	}
	for _, tc := range []struct {
		after time.Duration
		ok    bool
	}{{0, true}, {snapshot.CacheMaxAge - time.Millisecond, true}, {snapshot.CacheMaxAge, false}} {
		f.clock.Advance(tc.after - (f.clock.Now().Sub(t0)))
		for _, uri := range uris {
			resp := f.get(t, uri)
			if !tc.ok {
				wantError(t, resp, errUnknownTicker)
				continue
			}
			if resp.StatusCode() != 200 || string(resp.Body()) != before[uri] {
				t.Fatalf("%s %v after the delisting: status %d, body %s", uri, tc.after, resp.StatusCode(), resp.Body())
			}
		}
	}
}

func TestNilFeedServesWhatIsFreshAnd502Otherwise(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Feed = nil })
	wantStatus(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT"), 200)
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=SOL_USDT"), errNoBook)
	wantError(t, f.get(t, "/api/public/trades?ticker_id=SOL_USDT"), errNoTrades)
	f.clock.Advance(time.Minute)
	wantError(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT"), errNoTrades)
}

func TestWantMarksEveryRequestForAListedPair(t *testing.T) {
	f := newFixture(t, nil)
	f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=3")
	if id, s := f.feed.lastWanted(); id != "BTC_USDT" || s != snapshot.StreamBook {
		t.Fatalf("Want(%q, %v), want BTC_USDT book", id, s)
	}
	// Marked at the request's time, the server's clock: the feed reads
	// none of its own.
	f.clock.Advance(3 * time.Second)
	f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=3")
	if at, want := f.feed.lastWantedAt(), f.clock.Now(); !at.Equal(want) {
		t.Fatalf("Want given %v, want the request's time %v", at, want)
	}
	f.get(t, "/api/public/historical_trades?ticker_id=ETH_USDT")
	if id, s := f.feed.lastWanted(); id != "ETH_USDT" || s != snapshot.StreamTrades {
		t.Fatalf("Want(%q, %v), want ETH_USDT trades", id, s)
	}
	for range 10 {
		f.get(t, "/api/public/trades?ticker_id=BTC_USDT")
	}
	f.get(t, "/api/public/trades?ticker_id=SOL_USDT") // cold, and wanted before it loads
	if n := f.feed.wants.Load(); n != 14 {
		t.Fatalf("%d wants, want 14", n)
	}
	// Not for unlisted or invalid ids, nor routes without a pair.
	for _, uri := range []string{
		"/api/public/trades?ticker_id=NOPE_USDT", "/api/public/trades?ticker_id=x", "/api/public/pairs", "/api/public/tickers",
	} {
		f.get(t, uri)
	}
	if n := f.feed.wants.Load(); n != 14 {
		t.Fatalf("%d wants after unlisted requests, want still 14", n)
	}
}

func TestHandlerPanicIs500AndServingContinues(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	f := newFixture(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	})
	f.feed.panicOnWant.Store(true)
	resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=2")
	wantError(t, resp, errInternal)
	golden.Check(t, "error_internal", resp.Body())

	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	for _, want := range []string{"panic in handler", "want exploded", "component=server", "goroutine", "server.(*Server).book"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}

	f.feed.panicOnWant.Store(false)
	wantStatus(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=2"), 200)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestVenueFailureIsNever500(t *testing.T) {
	f := newFixture(t, nil)
	f.clock.Advance(time.Hour)
	for _, uri := range []string{
		"/api/public/pairs", "/api/public/tickers", "/api/public/orderbook?ticker_id=BTC_USDT",
		"/api/public/trades?ticker_id=SOL_USDT", "/api/public/historical_trades?ticker_id=ETH_USDT",
	} {
		wantStatus(t, f.get(t, uri), 502)
	}
}

// TestColdLoadFailureIsLoggedByPair logs a failed cold load under the keys
// the rest of the service uses for the same things (pair, stream, err), so
// one log query finds a pair's failures wherever they were written, and
// says why the pair needed the load: what the store held could not answer.
func TestColdLoadFailureIsLoggedByPair(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	f := newFixture(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		out := logs.String()
		logs.Reset()
		return out
	}
	for _, c := range []struct {
		name, uri string
		advance   time.Duration
		wantErr   *apiError
		want      []string
	}{
		{"never read", "/api/public/trades?ticker_id=SOL_USDT", 0, errNoTrades,
			[]string{"cold load failed", "component=server", "pair=SOL_USDT", "stream=trades", "held=nothing", `err="venue said: SECRET-418 teapot"`}},
		{"short", "/api/public/orderbook?ticker_id=1000PEPE_USDT", 0, errNoBook,
			[]string{"pair=1000PEPE_USDT", "stream=book", `held="short of the depth asked"`}},
		{"stale", "/api/public/orderbook?ticker_id=BTC_USDT", time.Hour, errNoBook,
			[]string{"pair=BTC_USDT", "stream=book", `held="stale, read 1h0m0s before"`}},
	} {
		f.clock.Advance(c.advance)
		wantError(t, f.get(t, c.uri), c.wantErr)
		got := logged()
		for _, want := range c.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: log lacks %q:\n%s", c.name, want, got)
			}
		}
	}
}
