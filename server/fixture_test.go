package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"marketfeed/snapshot"
)

// t0 is the fixtures' read time and the fake clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is the injected clock: time moves only when a test says so.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := new(fakeClock)
	c.ns.Store(t0.UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }

// fakeFeed counts Want and Load. Load runs the test's load function, which
// can publish into the store, fail or block on ctx. Want records what it was
// given without allocating, as the real one must.
type fakeFeed struct {
	wants       atomic.Int64
	loads       atomic.Int64
	panicOnWant atomic.Bool
	load        func(ctx context.Context, id string, s snapshot.Stream) error
	lastDepth   atomic.Int64 // the depth the last Load was given

	mu         sync.Mutex
	lastWant   [32]byte
	lastWantN  int
	lastStream snapshot.Stream
	lastWantAt int64 // the time the last Want was given, Unix ns
}

func (f *fakeFeed) Want(id []byte, s snapshot.Stream, now int64) {
	if f.panicOnWant.Load() {
		panic("want exploded")
	}
	f.wants.Add(1)
	f.mu.Lock()
	f.lastWantN = copy(f.lastWant[:], id)
	f.lastStream = s
	f.lastWantAt = now
	f.mu.Unlock()
}

// lastWantedAt returns the time the last Want was given.
func (f *fakeFeed) lastWantedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Unix(0, f.lastWantAt)
}

// lastWanted returns the last pair and stream Want was given.
func (f *fakeFeed) lastWanted() (string, snapshot.Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.lastWant[:f.lastWantN]), f.lastStream
}

func (f *fakeFeed) Load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	f.loads.Add(1)
	f.lastDepth.Store(int64(depth))
	if f.load == nil {
		return errVenue
	}
	return f.load(ctx, id, s)
}

// errVenue stands for a venue failure; its text must never reach a response.
var errVenue = venueError("venue said: SECRET-418 teapot")

type venueError string

func (e venueError) Error() string { return string(e) }

// The fixture venue: BTC_USDT is a spot pair, ETH_USDT and 1000PEPE_USDT are
// perps (1000PEPE_USDT's book a local one whose bids vouch for 78 levels), SOL_USDT is listed but has nothing read yet. PEPE_USDT is configured
// as spot but not published (the venue only has 1000PEPEUSDT).
var fixtureMarkets = []snapshot.Market{
	{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true},
	{Symbol: "ETHUSDT", Base: "ETH", Quote: "USDT", Perpetual: true, Trading: true},
	{Symbol: "1000PEPEUSDT", Base: "1000PEPE", Quote: "USDT", Perpetual: true, Trading: true},
	{Symbol: "SOLUSDT", Base: "SOL", Quote: "USDT", Perpetual: true, Trading: true},
	{Symbol: "LUNAUSDT", Base: "LUNA", Quote: "USDT", Perpetual: true, Trading: false},
}

var fixturePairsConfig = snapshot.PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT", "PEPE_USDT"}}

// btcBook has 120 levels a side, more than MaxDepth.
func btcBook(t testing.TB, readAt time.Time) *snapshot.Book {
	var bids, asks []snapshot.Level
	for i := range 120 {
		bids = append(bids, snapshot.Level{Price: strconv.Itoa(50000-i) + ".5", Size: "0." + strconv.Itoa(i+1)})
		asks = append(asks, snapshot.Level{Price: strconv.Itoa(50001+i) + ".5", Size: strconv.Itoa(i + 1)})
	}
	b, err := snapshot.NewBook("BTC_USDT", readAt.UnixMilli()-7, bids, asks, readAt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ethBook is small, for golden files: 3 bids, 4 asks.
func ethBook(t testing.TB, readAt time.Time) *snapshot.Book {
	b, err := snapshot.NewBook("ETH_USDT", 1767323045123,
		[]snapshot.Level{{Price: "3000.10", Size: "1.5"}, {Price: "3000.05", Size: "0.25"}, {Price: "2999", Size: "10"}},
		[]snapshot.Level{{Price: "3000.20", Size: "2"}, {Price: "3000.3", Size: "0.001"}, {Price: "3001", Size: "7"}, {Price: "3050", Size: "1"}},
		readAt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pepeBook is 1000PEPE_USDT's book: its bids vouch for 78 levels of a side
// the venue may hold more of (see shortBook).
func pepeBook(readAt time.Time) *snapshot.Book {
	bids, asks := shortBook(readAt, 78).Sides()
	return snapshot.NewLocalBook("1000PEPE_USDT", readAt.UnixMilli(), 1, bids, asks, snapshot.Open{Bids: true}, readAt)
}

func btcTrades(t testing.TB, readAt time.Time) *snapshot.Trades {
	var trades []snapshot.Trade
	for i := range 150 { // oldest first, as venues send them
		trades = append(trades, snapshot.Trade{
			Time:  readAt.UnixMilli() - int64(150-i)*1000,
			Price: strconv.Itoa(50000+i) + ".25",
			Size:  "0.0" + strconv.Itoa(i%9+1),
			Sell:  i%3 == 0,
		})
	}
	tr, err := snapshot.NewTrades("BTC_USDT", trades, readAt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func ethTrades(t testing.TB, readAt time.Time) *snapshot.Trades {
	tr, err := snapshot.NewTrades("ETH_USDT", []snapshot.Trade{
		{Time: 1767323040000, Price: "3000.1", Size: "0.5", QuoteQty: "1500.05", Sell: false},
		{Time: 1767323041000, Price: "3000.2", Size: "0.1", Sell: true},
		{Time: 1767323042000, Price: "3000.3", Size: "2", Sell: false},
		{Time: 1767323042000, Price: "3000.3", Size: "2", Sell: false},
	}, readAt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func fixtureTickers(p *snapshot.Pairs, readAt time.Time) *snapshot.Tickers {
	tk, _ := snapshot.NewTickers(p,
		[]snapshot.Stat{{Symbol: "BTCUSDT", LastPrice: "50000.5", High: "51000", Low: "49000.25", BaseVolume: "1234.5", QuoteVolume: "61728000.75"}},
		[]snapshot.Quote{{Symbol: "BTCUSDT", Bid: "50000.5", Ask: "50001.5"}},
		readAt)
	return tk
}

// fixtureContracts holds BTC_USDT's contract: the only pair of the fixture
// with statistics; the others are left out.
func fixtureContracts(p *snapshot.Pairs, readAt time.Time) *snapshot.Contracts {
	c, _ := snapshot.NewContracts(p, snapshot.ContractsInput{
		Stats: []snapshot.Stat{{Symbol: "BTCUSDT", LastPrice: "50000.5", High: "51000", Low: "49000.25", BaseVolume: "1234.5", QuoteVolume: "61728000.75"}},
		Books: []snapshot.Quote{{Symbol: "BTCUSDT", Bid: "50000.5", Ask: "50001.5"}},
		Marks: []snapshot.Contract{{Symbol: "BTCUSDT", MarkPrice: "50001", IndexPrice: "49998.7", FundingRate: "0.00012",
			NextFunding: 1767340800000, Time: 1767323045000}},
		Interest: []snapshot.OpenInterest{{Symbol: "BTCUSDT", Amount: "8123.456", Time: 1767323040000}},
		Onboard:  map[string]int64{"BTCUSDT": 1569398400000},
		ReadAt:   readAt,
	})
	return c
}

// fixture is a server over a fully loaded store, a fake feed and a fake
// clock.
type fixture struct {
	store *snapshot.Store
	feed  *fakeFeed
	clock *fakeClock
	srv   *Server
	cfg   Config
}

// newFixture builds the fixture; mod may change the config before New.
func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{store: snapshot.NewStore(), feed: new(fakeFeed), clock: newClock()}
	pairs := snapshot.NewPairs(fixtureMarkets, fixturePairsConfig, t0)
	f.store.PutDoc(pairs, t0)
	f.store.PutDoc(fixtureTickers(pairs, t0), t0)
	f.store.PutDoc(fixtureContracts(pairs, t0), t0)
	for _, ok := range []bool{
		f.store.PutBook(btcBook(t, t0)),
		f.store.PutBook(ethBook(t, t0)),
		f.store.PutBook(pepeBook(t0)),
		f.store.PutTrades(btcTrades(t, t0)),
		f.store.PutTrades(ethTrades(t, t0)),
	} {
		if !ok {
			t.Fatal("fixture pair not listed")
		}
	}
	f.cfg = Config{Store: f.store, Feed: f.feed, Now: f.clock.Now}
	if mod != nil {
		mod(&f.cfg)
	}
	f.srv = New(f.cfg)
	return f
}

// publish is a load function that publishes a fresh one-level book or a
// one-trade list for the pair, read at the fake clock's now.
func (f *fixture) publish(_ context.Context, id string, s snapshot.Stream) error {
	now := f.clock.Now()
	if s == snapshot.StreamBook {
		b, err := snapshot.NewBook(id, now.UnixMilli(),
			[]snapshot.Level{{Price: "10", Size: "1"}}, []snapshot.Level{{Price: "11", Size: "1"}}, now)
		if err != nil {
			panic(err)
		}
		f.store.PutBook(b)
		return nil
	}
	tr, err := snapshot.NewTrades(id, []snapshot.Trade{{Time: now.UnixMilli(), Price: "10.5", Size: "3"}}, now)
	if err != nil {
		panic(err)
	}
	f.store.PutTrades(tr)
	return nil
}

// request is one request to the handler.
type request struct {
	method  string
	uri     string
	peer    string // host:port; default 192.0.2.1:40000
	headers []string
}

func (f *fixture) get(t testing.TB, uri string) *fasthttp.Response {
	t.Helper()
	return f.do(t, request{uri: uri})
}

// do runs one request through Handler and checks what every response must
// carry: CORS, Content-Type, Cache-Control by status, a body that decodes as
// JSON with the shape of its route or error.
func (f *fixture) do(t testing.TB, r request) *fasthttp.Response {
	t.Helper()
	resp := serveOne(f.srv, r)
	checkResponse(t, r.uri, resp)
	return resp
}

func serveOne(srv *Server, r request) *fasthttp.Response {
	var req fasthttp.Request
	if r.method != "" {
		req.Header.SetMethod(r.method)
	}
	req.SetRequestURI(r.uri)
	for i := 0; i+1 < len(r.headers); i += 2 {
		req.Header.Add(r.headers[i], r.headers[i+1])
	}
	peer := r.peer
	if peer == "" {
		peer = "192.0.2.1:40000"
	}
	addr, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		panic(err)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, addr, nil)
	srv.Handler(ctx)
	return &ctx.Response
}

// header returns a response header by name, compared without case as HTTP
// does: fasthttp's Peek normalises "ETag" to "Etag" and would miss it.
func header(resp *fasthttp.Response, name string) string {
	var v string
	for k, val := range resp.Header.All() {
		if strings.EqualFold(string(k), name) {
			v = string(val)
		}
	}
	return v
}

func checkResponse(t testing.TB, uri string, resp *fasthttp.Response) {
	t.Helper()
	status := resp.StatusCode()
	if got := header(resp, "Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("%s: Access-Control-Allow-Origin = %q, want *", uri, got)
	}
	if status == fasthttp.StatusNoContent {
		if ct := resp.Header.ContentType(); len(ct) != 0 {
			t.Errorf("%s: 204 has Content-Type %q", uri, ct)
		}
		if len(resp.Body()) != 0 {
			t.Errorf("%s: 204 has a body %q", uri, resp.Body())
		}
	} else if ct := string(resp.Header.ContentType()); ct != "application/json" {
		t.Errorf("%s: Content-Type = %q, want application/json", uri, ct)
	}
	wantCache := "no-store"
	if status >= 200 && status < 300 {
		wantCache = "public, max-age=5"
	}
	if got := header(resp, "Cache-Control"); got != wantCache {
		t.Errorf("%s: status %d Cache-Control = %q, want %q", uri, status, got, wantCache)
	}
	if status != fasthttp.StatusNoContent {
		checkShape(t, uri, status, resp.Body())
	}
}

var (
	plainDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	hexID        = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// decode decodes body with numbers kept as json.Number, so that a test can
// tell an integer from a float and a string from a number.
func decode(t testing.TB, body []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("body is not JSON: %v: %q", err, body)
	}
	if dec.More() {
		t.Fatalf("trailing data after JSON: %q", body)
	}
	return v
}

// checkShape checks a body's meaning: field names, that numbers are decimal
// strings and times integers, and the error body of the status.
func checkShape(t testing.TB, uri string, status int, body []byte) {
	t.Helper()
	v := decode(t, body)
	if status != fasthttp.StatusOK {
		checkErrorShape(t, uri, status, v)
		return
	}
	var u fasthttp.URI // the path as the server saw it: decoded, normalised
	if err := u.Parse(nil, []byte(uri)); err != nil {
		t.Fatalf("%s: %v", uri, err)
	}
	switch routeOf(u.Path()) {
	case routePairs:
		for _, it := range array(t, v) {
			fields(t, it, map[string]string{"ticker_id": "id", "base": "string", "target": "string", "kind": "kind", "price_source": "string"})
		}
	case routeTickers:
		for _, it := range array(t, v) {
			fields(t, it, map[string]string{
				"ticker_id": "id", "base_currency": "string", "target_currency": "string",
				"last_price": "decimal", "base_volume": "decimal", "target_volume": "decimal",
				"bid": "decimal", "ask": "decimal", "high": "decimal", "low": "decimal", "timestamp": "int",
			})
		}
	case routeContracts:
		for _, it := range array(t, v) {
			fields(t, it, map[string]string{
				"ticker_id": "id", "base_currency": "string", "target_currency": "string",
				"last_price": "decimal", "base_volume": "decimal", "target_volume": "decimal",
				"bid": "decimal", "ask": "decimal", "high": "decimal", "low": "decimal", "product_type": "string",
				"open_interest": "decimal?", "open_interest_usd": "decimal?", "open_interest_timestamp": "int?",
				"index_price": "decimal", "index_name": "string", "index_currency": "string",
				"start_timestamp": "int?", "end_timestamp": "int?", "funding_rate": "decimal",
				"next_funding_rate": "decimal", "next_funding_rate_timestamp": "int", "contract_type": "string",
				"contract_price": "decimal", "contract_price_currency": "string", "timestamp": "int",
			})
		}
	case routeContractSpecs:
		for _, it := range array(t, v) {
			fields(t, it, map[string]string{"ticker_id": "id", "contract_type": "string", "contract_price": "decimal",
				"contract_price_currency": "string"})
		}
	case routeBook:
		obj := fields(t, v, map[string]string{"ticker_id": "id", "timestamp": "int", "bids": "array", "asks": "array"})
		for _, side := range []string{"bids", "asks"} {
			for _, lvl := range array(t, obj[side]) {
				pair := array(t, lvl)
				if len(pair) != 2 {
					t.Fatalf("%s: level %v is not [price, size]", uri, lvl)
				}
				for _, x := range pair {
					checkField(t, "level", x, "decimal")
				}
			}
		}
	case routeTrades:
		for _, it := range array(t, v) {
			fields(t, it, map[string]string{
				"trade_id": "hex", "price": "decimal", "base_volume": "decimal", "target_volume": "decimal",
				"trade_timestamp": "int", "type": "side",
			})
		}
	default:
		t.Fatalf("%s: 200 on no route", uri)
	}
}

func checkErrorShape(t testing.TB, uri string, status int, v any) {
	t.Helper()
	codes := map[int]string{400: "VALIDATION_ERROR", 405: "METHOD_NOT_ALLOWED", 500: "INTERNAL", 502: "UPSTREAM_UNAVAILABLE"}
	switch status {
	case 404:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: 404 body is %T", uri, v)
		}
		if _, isTicker := obj["error"]; isTicker {
			fields(t, v, map[string]string{"error": "UNKNOWN_TICKER", "message": "string"})
		} else {
			fields(t, v, map[string]string{"code": "NOT_FOUND", "message": "string"})
		}
	case 429:
		fields(t, v, map[string]string{"statusCode": "429", "code": "RATE_LIMITED", "message": "string"})
	default:
		code, ok := codes[status]
		if !ok {
			t.Fatalf("%s: unexpected status %d", uri, status)
		}
		fields(t, v, map[string]string{"code": code, "message": "string"})
	}
}

func array(t testing.TB, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("want an array, got %T", v)
	}
	return a
}

// fields checks that v is an object with exactly these fields, each of the
// given kind: "string", "decimal", "int", "id", "hex", "kind", "side",
// "array", "429", or a literal string value.
func fields(t testing.TB, v any, want map[string]string) map[string]any {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want an object, got %T", v)
	}
	if len(obj) != len(want) {
		t.Errorf("object has fields %v, want %v", keys(obj), want)
	}
	for name, kind := range want {
		x, ok := obj[name]
		if !ok {
			t.Errorf("field %s missing in %v", name, obj)
			continue
		}
		checkField(t, name, x, kind)
	}
	return obj
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func checkField(t testing.TB, name string, x any, kind string) {
	t.Helper()
	if k, nullable := strings.CutSuffix(kind, "?"); nullable { // "decimal?": a decimal or null
		if x == nil {
			return
		}
		kind = k
	}
	switch kind {
	case "int", "429":
		n, ok := x.(json.Number)
		if !ok || !regexp.MustCompile(`^-?[0-9]+$`).MatchString(string(n)) {
			t.Errorf("%s = %#v, want a JSON integer", name, x)
		}
		if kind == "429" && n != "429" {
			t.Errorf("%s = %v, want 429", name, n)
		}
	case "array":
		if _, ok := x.([]any); !ok {
			t.Errorf("%s = %#v, want an array", name, x)
		}
	default:
		s, ok := x.(string)
		if !ok {
			t.Errorf("%s = %#v, want a string", name, x)
			return
		}
		var good bool
		switch kind {
		case "string":
			good = s != ""
		case "decimal":
			good = plainDecimal.MatchString(s)
		case "id":
			good = snapshot.ValidTickerID(s)
		case "hex":
			good = hexID.MatchString(s)
		case "kind":
			good = s == "spot" || s == "perp"
		case "side":
			good = s == "buy" || s == "sell"
		default:
			good = s == kind
		}
		if !good {
			t.Errorf("%s = %q, want %s", name, s, kind)
		}
	}
}
