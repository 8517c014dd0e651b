package binance

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

var presets = []Preset{Binance, Aster}

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		p    Preset
		name string
		url  string
		w    [5]int // catalog, stats, quotes, book, trades
	}{
		{Binance, "binance", "https://fapi.binance.com", [5]int{1, 40, 5, 5, 20}},
		{Aster, "aster", "https://fapi.asterdex.com", [5]int{1, 40, 2, 5, 20}},
	} {
		p, ok := PresetByName(tc.name)
		if !ok || !reflect.DeepEqual(p, tc.p) {
			t.Errorf("PresetByName(%q) = %+v, %v", tc.name, p, ok)
		}
		if p.URL != tc.url {
			t.Errorf("%s URL = %q, want %q", tc.name, p.URL, tc.url)
		}
		c := New(p, Options{})
		if c.Name() != tc.name {
			t.Errorf("Name() = %q, want %q", c.Name(), tc.name)
		}
		for i, k := range []venue.Call{venue.CallCatalog, venue.CallStats, venue.CallQuotes, venue.CallBook, venue.CallTrades} {
			if got := c.Weight(k); got != tc.w[i] {
				t.Errorf("%s Weight(%s) = %d, want %d", tc.name, k, got, tc.w[i])
			}
		}
		if got := c.Weight(venue.Call(99)); got != 0 {
			t.Errorf("%s Weight(unknown) = %d, want 0", tc.name, got)
		}
		for _, bw := range []struct{ depth, weight int }{
			{1, 2}, {5, 2}, {20, 2}, {50, 2}, {51, 5}, {100, 5}, {101, 10}, {500, 10}, {501, 20}, {1000, 20}, {5000, 20},
		} {
			if got := c.BookWeight(bw.depth); got != bw.weight {
				t.Errorf("%s BookWeight(%d) = %d, want %d", tc.name, bw.depth, got, bw.weight)
			}
		}
	}
	for _, name := range []string{"sim", "Binance", "", "binance-perp"} {
		if _, ok := PresetByName(name); ok {
			t.Errorf("PresetByName(%q) found a preset", name)
		}
	}
}

// call is one Client method as the tests drive it.
type call struct {
	name    string
	path    string
	query   string // exactly as the client must send it
	fixture string
	do      func(ctx context.Context, c *Client) (any, error)
	decode  func([]byte) (any, error)
	// priceBody is a one-item body whose price (or last price, or bid) is
	// the given JSON token; nil for the catalog, which has no decimals.
	priceBody func(token string) string
	// missingBody lacks a required field; extraBody adds unknown fields
	// and must still decode.
	missingBody, extraBody string
}

var calls = []call{
	{
		name: "catalog", path: "/fapi/v1/exchangeInfo", fixture: "exchangeInfo.json",
		do:          func(ctx context.Context, c *Client) (any, error) { return c.Catalog(ctx) },
		decode:      func(b []byte) (any, error) { return decodeCatalog(b) },
		missingBody: `{"symbols":[{"symbol":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","quoteAsset":"USDT"}]}`,
		extraBody:   `{"newTop":[{"x":1}],"symbols":[{"symbol":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT","newField":{"a":null}}]}`,
	},
	{
		name: "stats", path: "/fapi/v1/ticker/24hr", fixture: "ticker_24hr.json",
		do:     func(ctx context.Context, c *Client) (any, error) { return c.Stats(ctx) },
		decode: func(b []byte) (any, error) { return decodeStats(b) },
		priceBody: func(p string) string {
			return `[{"symbol":"BTCUSDT","lastPrice":` + p + `,"highPrice":"2","lowPrice":"1","volume":"1","quoteVolume":"1"}]`
		},
		missingBody: `[{"symbol":"BTCUSDT","highPrice":"2","lowPrice":"1","volume":"1","quoteVolume":"1"}]`,
		extraBody:   `[{"symbol":"BTCUSDT","lastPrice":"1.5","highPrice":"2","lowPrice":"1","volume":"1","quoteVolume":"1","newField":[1,{"b":2}]}]`,
	},
	{
		name: "quotes", path: "/fapi/v1/ticker/bookTicker", fixture: "bookTicker.json",
		do:     func(ctx context.Context, c *Client) (any, error) { return c.Quotes(ctx) },
		decode: func(b []byte) (any, error) { return decodeQuotes(b) },
		priceBody: func(p string) string {
			return `[{"symbol":"BTCUSDT","bidPrice":` + p + `,"bidQty":"1","askPrice":"2","askQty":"1"}]`
		},
		missingBody: `[{"bidPrice":"1","bidQty":"1","askPrice":"2","askQty":"1"}]`,
		extraBody:   `[{"symbol":"BTCUSDT","bidPrice":"1","bidQty":"1","askPrice":"2","askQty":"1","pair":"BTCUSDT","newField":{}}]`,
	},
	{
		name: "book", path: "/fapi/v1/depth", query: "symbol=BTCUSDT&limit=100", fixture: "depth.json",
		do:     func(ctx context.Context, c *Client) (any, error) { return c.Book(ctx, "BTCUSDT", 100) },
		decode: func(b []byte) (any, error) { return decodeBook(b) },
		priceBody: func(p string) string {
			return `{"T":1767225600450,"bids":[[` + p + `,"1"]],"asks":[["2","1"]]}`
		},
		missingBody: `{"T":1767225600450,"bids":[["1"]],"asks":[["2","1"]]}`,
		extraBody:   `{"T":1767225600450,"newField":[{"x":"y"}],"bids":[["1","1"]],"asks":[["2","1"]]}`,
	},
	{
		name: "trades", path: "/fapi/v1/aggTrades", query: "symbol=BTCUSDT&limit=100", fixture: "trades.json",
		do:     func(ctx context.Context, c *Client) (any, error) { return c.Trades(ctx, "BTCUSDT", 100) },
		decode: func(b []byte) (any, error) { return decodeAggTrades(b) },
		priceBody: func(p string) string {
			return `[{"a":1,"p":` + p + `,"q":"1","f":1,"l":1,"T":1767225600450,"m":false}]`
		},
		missingBody: `[{"a":1,"q":"1","f":1,"l":1,"T":1767225600450,"m":false}]`,
		extraBody:   `[{"a":1,"p":"1","q":"1","f":1,"l":1,"T":1767225600450,"m":false,"M":true,"newField":[]}]`,
	},
}

// request is what the fake venue saw.
type request struct {
	method, path, query, accept string
}

// fakeVenue serves the fixtures at the venue's paths, records every
// request and stamps every answer with a fresh X-MBX-USED-WEIGHT-1M.
type fakeVenue struct {
	t      *testing.T
	srv    *httptest.Server
	weight atomic.Int64

	mu   sync.Mutex
	reqs []request
}

func newFakeVenue(t *testing.T) *fakeVenue {
	f := &fakeVenue{t: t}
	files := map[string][]byte{}
	for _, c := range calls {
		files[c.path] = readFixture(t, c.fixture)
	}
	// Aster serves aggregate trades under another path.
	files[Aster.AggTradesPath] = files[Binance.AggTradesPath]
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
		f.mu.Unlock()
		w.Header().Set("X-MBX-USED-WEIGHT-1M", strconv.FormatInt(f.weight.Add(7), 10))
		body, ok := files[strings.TrimPrefix(r.URL.Path, "/prefix")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeVenue) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func TestClientReadsFixtures(t *testing.T) {
	for _, p := range presets {
		t.Run(p.Name, func(t *testing.T) {
			f := newFakeVenue(t)
			c := New(p, Options{BaseURL: f.srv.URL})
			if w, ok := c.UsedWeight(); ok {
				t.Errorf("UsedWeight before any call = %d, true", w)
			}
			for i, cl := range calls {
				got, err := cl.do(context.Background(), c)
				if err != nil {
					t.Fatalf("%s: %v", cl.name, err)
				}
				want, err := cl.decode(readFixture(t, cl.fixture))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %+v, want %+v", cl.name, got, want)
				}
				// The used weight follows every answer.
				if w, ok := c.UsedWeight(); !ok || w != 7*(i+1) {
					t.Errorf("%s: UsedWeight = %d, %v; want %d", cl.name, w, ok, 7*(i+1))
				}
				reqs := f.requests()
				last := reqs[len(reqs)-1]
				path := cl.path
				if cl.name == "trades" {
					path = p.AggTradesPath
				}
				if want := (request{"GET", path, cl.query, "application/json"}); last != want {
					t.Errorf("%s: request %+v, want %+v", cl.name, last, want)
				}
			}
		})
	}
}

// TestClientBaseURL: a trailing slash is dropped and a path prefix kept.
func TestClientBaseURL(t *testing.T) {
	f := newFakeVenue(t)
	for _, base := range []string{f.srv.URL + "/", f.srv.URL + "/prefix", f.srv.URL + "/prefix/"} {
		c := New(Binance, Options{BaseURL: base})
		if _, err := c.Book(context.Background(), "BTCUSDT", 100); err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		reqs := f.requests()
		want := "/fapi/v1/depth"
		if strings.Contains(base, "prefix") {
			want = "/prefix" + want
		}
		if got := reqs[len(reqs)-1].path; got != want {
			t.Errorf("%s: path %q, want %q", base, got, want)
		}
	}
}

// roundTripFunc lets a test stand in for the network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientPresetURL: without BaseURL the preset's URL is used, through
// the HTTP client given in Options.
func TestClientPresetURL(t *testing.T) {
	for _, p := range presets {
		var got string
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return &http.Response{
				StatusCode: http.StatusOK,
				Header:     http.Header{"X-Mbx-Used-Weight-1m": {"12"}},
				Body:       io.NopCloser(bytes.NewReader(readFixture(t, "exchangeInfo.json"))),
				Request:    r,
			}, nil
		})}
		c := New(p, Options{HTTPClient: hc})
		if _, err := c.Catalog(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := p.URL + "/fapi/v1/exchangeInfo"; got != want {
			t.Errorf("%s: URL %q, want %q", p.Name, got, want)
		}
		if w, ok := c.UsedWeight(); !ok || w != 12 {
			t.Errorf("%s: UsedWeight = %d, %v", p.Name, w, ok)
		}
	}
}

func TestClientInvalidBaseURL(t *testing.T) {
	c := New(Binance, Options{BaseURL: "http://bad host\x7f"})
	_, err := c.Catalog(context.Background())
	if !errors.Is(err, errInvalidBaseURL) {
		t.Errorf("error %v, want errInvalidBaseURL", err)
	}
}

// TestClientLimits: the limit sent is one the venue accepts and covers the
// request; the answer is cut to what was asked for.
func TestClientLimits(t *testing.T) {
	var levels []string
	for i := range 120 {
		levels = append(levels, `["`+strconv.Itoa(1000-i)+`","1"]`)
	}
	deepBook := `{"T":1767225600450,"bids":[` + strings.Join(levels, ",") + `],"asks":[["2000","1"]]}`
	var query atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query.Store(r.URL.RawQuery)
		if r.URL.Path == "/fapi/v1/depth" {
			_, _ = io.WriteString(w, deepBook)
			return
		}
		_, _ = w.Write(readFixture(t, "trades.json"))
	}))
	defer srv.Close()
	c := New(Binance, Options{BaseURL: srv.URL})
	ctx := context.Background()

	for _, tc := range []struct {
		depth int
		query string
		bids  int
	}{
		{1, "symbol=BTCUSDT&limit=5", 1},
		{5, "symbol=BTCUSDT&limit=5", 5},
		{30, "symbol=BTCUSDT&limit=50", 30},
		{100, "symbol=BTCUSDT&limit=100", 100},
		{101, "symbol=BTCUSDT&limit=500", 101},
		{5000, "symbol=BTCUSDT&limit=1000", 120},
	} {
		book, err := c.Book(ctx, "BTCUSDT", tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("depth %d: query %q, want %q", tc.depth, got, tc.query)
		}
		if len(book.Bids) != tc.bids || len(book.Asks) != 1 {
			t.Errorf("depth %d: %d bids, %d asks; want %d, 1", tc.depth, len(book.Bids), len(book.Asks), tc.bids)
		}
	}

	for _, tc := range []struct {
		limit  int
		query  string
		trades int
	}{
		{3, "symbol=ETHUSDT&limit=3", 3},
		{100, "symbol=ETHUSDT&limit=100", 5},
		{5000, "symbol=ETHUSDT&limit=1000", 5},
	} {
		trades, err := c.Trades(ctx, "ETHUSDT", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("limit %d: query %q, want %q", tc.limit, got, tc.query)
		}
		if len(trades) != tc.trades {
			t.Fatalf("limit %d: %d trades, want %d", tc.limit, len(trades), tc.trades)
		}
		// The most recent ones, still oldest first.
		if last := trades[len(trades)-1]; last.Time != 1767225600011 {
			t.Errorf("limit %d: last trade at %d", tc.limit, last.Time)
		}
	}

	// A read from an id asks for exactly the ids wanted and keeps the
	// oldest ones, those right after the id, if the venue sends more.
	for _, tc := range []struct {
		from   int64
		limit  int
		query  string
		trades int
	}{
		{6102345671, 2, "symbol=ETHUSDT&fromId=6102345671&limit=2", 2},
		{6102345671, 100, "symbol=ETHUSDT&fromId=6102345671&limit=100", 5},
		{0, 5000, "symbol=ETHUSDT&fromId=0&limit=1000", 5},
	} {
		trades, err := c.TradesFrom(ctx, "ETHUSDT", tc.from, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("from %d limit %d: query %q, want %q", tc.from, tc.limit, got, tc.query)
		}
		if len(trades) != tc.trades || trades[0].ID != 6102345671 {
			t.Fatalf("from %d limit %d: %d trades from id %d, want %d from 6102345671", tc.from, tc.limit, len(trades), trades[0].ID, tc.trades)
		}
	}

	// A symbol is escaped in the query and arrives intact.
	if _, err := c.Trades(ctx, "币安人生USDT", 10); err != nil {
		t.Fatal(err)
	}
	if got, want := query.Load(), "symbol=%E5%B8%81%E5%AE%89%E4%BA%BA%E7%94%9FUSDT&limit=10"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
}

// TestClientInvalidRequest: a request the venue cannot answer is refused
// before it is sent, with an error that is not a venue failure.
func TestClientInvalidRequest(t *testing.T) {
	f := newFakeVenue(t)
	c := New(Binance, Options{BaseURL: f.srv.URL})
	ctx := context.Background()
	for name, do := range map[string]func() error{
		"book depth 0":   func() error { _, err := c.Book(ctx, "BTCUSDT", 0); return err },
		"book no symbol": func() error { _, err := c.Book(ctx, "", 100); return err },
		"trades limit 0": func() error { _, err := c.Trades(ctx, "BTCUSDT", 0); return err },
		"trades -1":      func() error { _, err := c.Trades(ctx, "BTCUSDT", -1); return err },
		"trades no sym":  func() error { _, err := c.Trades(ctx, "", 100); return err },
		"from limit 0":   func() error { _, err := c.TradesFrom(ctx, "BTCUSDT", 1, 0); return err },
		"from id -1":     func() error { _, err := c.TradesFrom(ctx, "BTCUSDT", -1, 10); return err },
	} {
		err := do()
		var se *venue.StatusError
		if err == nil || errors.Is(err, venue.ErrBadData) || errors.As(err, &se) {
			t.Errorf("%s: error %v, want a request error", name, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// TestUsedWeightEveryStatus: the header is read from error answers too, and
// a value that is not a count leaves the last one in place.
func TestUsedWeightEveryStatus(t *testing.T) {
	var status atomic.Int64
	var header atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A lowercase name on the wire is the same header.
		w.Header()["x-mbx-used-weight-1m"] = []string{header.Load().(string)}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	c := New(Aster, Options{BaseURL: srv.URL})
	for _, tc := range []struct {
		status int
		header string
		want   int
		ok     bool
	}{
		{http.StatusTeapot, "junk", 0, false},
		{http.StatusTooManyRequests, "2401", 2401, true},
		{http.StatusServiceUnavailable, "", 2401, true},
		{http.StatusForbidden, "-3", 2401, true},
		{http.StatusTeapot, " 2500 ", 2500, true},
		{http.StatusOK, "0", 0, true},
	} {
		status.Store(int64(tc.status))
		header.Store(tc.header)
		_, _ = c.Book(context.Background(), "BTCUSDT", 100)
		if w, ok := c.UsedWeight(); w != tc.want || ok != tc.ok {
			t.Errorf("status %d header %q: UsedWeight = %d, %v; want %d, %v", tc.status, tc.header, w, ok, tc.want, tc.ok)
		}
	}
}

// expectation checks one failed call.
type expectation func(t *testing.T, err error)

func wantStatus(status int, retryAfter time.Duration) expectation {
	return func(t *testing.T, err error) {
		t.Helper()
		var se *venue.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("error %v, want a StatusError", err)
		}
		if se.Status != status || se.RetryAfter != retryAfter {
			t.Errorf("StatusError{%d, %s}, want {%d, %s}", se.Status, se.RetryAfter, status, retryAfter)
		}
		if errors.Is(err, venue.ErrBadData) {
			t.Errorf("error %v is also bad data", err)
		}
	}
}

func wantBadData(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, venue.ErrBadData) {
		t.Fatalf("error %v, want ErrBadData", err)
	}
	var se *venue.StatusError
	if errors.As(err, &se) {
		t.Errorf("error %v is also a StatusError", err)
	}
}

// wantTransport: neither a venue answer nor bad data; the poller backs off.
func wantTransport(t *testing.T, err error) {
	t.Helper()
	var se *venue.StatusError
	if err == nil || errors.As(err, &se) || errors.Is(err, venue.ErrBadData) {
		t.Fatalf("error %v, want a transport error", err)
	}
}

func wantDeadline(t *testing.T, err error) {
	t.Helper()
	wantTransport(t, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want context.DeadlineExceeded", err)
	}
}

// fault is one way the venue, or what stands in its place, misbehaves.
type fault struct {
	name    string
	status  int
	header  map[string]string
	body    string
	handler http.HandlerFunc // replaces status, header and body
	want    expectation
	ok      bool // the call must succeed
	slow    bool // the answer is slower than the call timeout
}

const (
	htmlBody = `<!DOCTYPE html><html><head><title>ERROR: The request could not be satisfied</title></head>` +
		`<body><h1>403 ERROR</h1><p>Request blocked. Generated by cloudfront (CloudFront) ZQXMARKER</p></body></html>`
	html5xx   = `<html><head><title>502 Bad Gateway</title></head><body><center>nginx ZQXMARKER</center></body></html>`
	json429   = `{"code":-1003,"msg":"Too many requests; current limit of IP(203.0.113.9) is 2400 requests per minute. ZQXMARKER"}`
	json418   = `{"code":-1003,"msg":"Way too many requests; IP(203.0.113.9) banned until 1767232800000. ZQXMARKER"}`
	json451   = `{"code":0,"msg":"Service unavailable from a restricted location according to 'b. Eligibility'. ZQXMARKER"}`
	jsonError = `{"code":-1121,"msg":"Invalid symbol. ZQXMARKER"}`
)

// faults lists the failure matrix for one call.
func faults(t *testing.T, cl call) []fault {
	fixture := string(readFixture(t, cl.fixture))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// block answers nothing until the client gives up.
	block := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	oversize := func(limit int, withLength bool) http.HandlerFunc {
		// Valid JSON up to the cap and beyond it: only the size is wrong.
		body := append([]byte(fixture[:1]), bytes.Repeat([]byte(" "), limit)...)
		return func(w http.ResponseWriter, r *http.Request) {
			if withLength {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			_, _ = w.Write(body)
		}
	}
	limit := maxBody
	if cl.name == "catalog" {
		limit = maxCatalogBody
	}
	fs := []fault{
		{name: "500", status: 500, body: html5xx, want: wantStatus(500, 0)},
		{name: "502", status: 502, body: html5xx, want: wantStatus(502, 0)},
		{name: "503 html", status: 503, body: html5xx, want: wantStatus(503, 0)},
		{name: "503 retry-after", status: 503, header: map[string]string{"Retry-After": "30"}, want: wantStatus(503, 30*time.Second)},
		{name: "429 retry-after", status: 429, header: map[string]string{"Retry-After": "7"}, body: json429, want: wantStatus(429, 7*time.Second)},
		{name: "429 no retry-after", status: 429, body: json429, want: wantStatus(429, 0)},
		{name: "429 bad retry-after", status: 429, header: map[string]string{"Retry-After": "soon"}, body: json429, want: wantStatus(429, 0)},
		{name: "429 date retry-after", status: 429, header: map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, want: wantStatus(429, 0)},
		{name: "429 huge retry-after", status: 429, header: map[string]string{"Retry-After": "99999999999999999"}, want: wantStatus(429, maxRetryAfter)},
		{name: "418 retry-after", status: 418, header: map[string]string{"Retry-After": "7200"}, body: json418, want: wantStatus(418, 2*time.Hour)},
		{name: "403 html", status: 403, body: htmlBody, want: wantStatus(403, 0)},
		{name: "451", status: 451, body: json451, want: wantStatus(451, 0)},
		{name: "400 error object", status: 400, body: jsonError, want: wantStatus(400, 0)},
		{name: "204", status: 204, want: wantStatus(204, 0)},
		{name: "200 html", status: 200, body: htmlBody, want: wantBadData},
		{name: "200 empty", status: 200, body: "", want: wantBadData},
		{name: "200 truncated", status: 200, body: fixture[:len(fixture)/2], want: wantBadData},
		{name: "200 error object", status: 200, body: jsonError, want: wantBadData},
		{name: "200 array of numbers", status: 200, body: `[1,2,3]`, want: wantBadData},
		{name: "200 array of strings", status: 200, body: `["ZQXMARKER"]`, want: wantBadData},
		{name: "200 null", status: 200, body: `null`, want: wantBadData},
		{name: "200 trailing garbage", status: 200, body: fixture + "ZQXMARKER", want: wantBadData},
		{name: "200 missing field", status: 200, body: cl.missingBody, want: wantBadData},
		{name: "200 extra fields", status: 200, body: cl.extraBody, ok: true},
		{name: "200 oversize", handler: oversize(limit, false), want: wantBadData},
		{name: "200 oversize with length", handler: oversize(limit, true), want: wantBadData},
		{name: "slower than timeout", handler: block, want: wantDeadline, slow: true},
		{name: "body slower than timeout", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, fixture[:len(fixture)/2])
			w.(http.Flusher).Flush()
			block(w, r)
		}, want: wantDeadline, slow: true},
		{name: "connection reset", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0) // close with RST
			}
			_ = conn.Close()
		}, want: wantTransport},
		{name: "truncated transfer", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
			_, _ = buf.WriteString(fixture[:len(fixture)/2])
			_ = buf.Flush()
			_ = conn.Close()
		}, want: wantTransport},
	}
	if cl.priceBody != nil {
		for _, v := range []struct{ name, token string }{
			{"exponent", `"1e3"`},
			{"exponent with fraction", `"6.4820e4"`},
			{"quoted quotes", `"\"64820.30\""`},
			{"leading space", `" 64820.30"`},
			{"trailing space", `"64820.30 "`},
			{"empty string", `""`},
			{"NaN", `"NaN"`},
			{"number", `64820.30`},
			{"negative", `"-64820.30"`},
		} {
			f := fault{name: "200 price " + v.name, status: 200, body: cl.priceBody(v.token), want: wantBadData}
			if cl.name == "quotes" && v.name == "empty string" {
				f.want, f.ok = nil, true // an empty side, kept without a mid
			}
			fs = append(fs, f)
		}
		zero := fault{name: "200 zero price", status: 200, body: cl.priceBody(`"0.00"`), want: wantBadData}
		if cl.name == "stats" || cl.name == "quotes" {
			// Stats may be all zeros; a zero quote side is an empty side.
			zero.want, zero.ok = nil, true
		}
		fs = append(fs, zero)
	}
	if cl.name == "book" {
		fs = append(fs,
			fault{name: "200 empty book", status: 200, body: `{"T":1767225600450,"bids":[],"asks":[]}`, want: wantBadData},
			fault{name: "200 no asks", status: 200, body: `{"T":1767225600450,"bids":[["1","1"]],"asks":[]}`, want: wantBadData},
			fault{name: "200 no time", status: 200, body: `{"lastUpdateId":5,"bids":[["1","1"]],"asks":[["2","1"]]}`, want: wantBadData},
		)
	}
	return fs
}

func (f fault) serve(w http.ResponseWriter, r *http.Request) {
	if f.handler != nil {
		f.handler(w, r)
		return
	}
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func TestClientFaults(t *testing.T) {
	for _, p := range presets {
		t.Run(p.Name, func(t *testing.T) {
			for _, cl := range calls {
				t.Run(cl.name, func(t *testing.T) {
					for _, f := range faults(t, cl) {
						t.Run(f.name, func(t *testing.T) {
							t.Parallel()
							srv := httptest.NewServer(http.HandlerFunc(f.serve))
							t.Cleanup(srv.Close)
							// A short timeout only where the timeout is the fault:
							// elsewhere a loaded test machine must not turn a slow
							// answer into a false failure.
							timeout := 10 * time.Second
							if f.slow {
								timeout = 100 * time.Millisecond
							}
							c := New(p, Options{BaseURL: srv.URL, Timeout: timeout})
							_, err := cl.do(context.Background(), c)
							if f.ok {
								if err != nil {
									t.Fatalf("error %v, want success", err)
								}
								return
							}
							if err == nil {
								t.Fatal("no error")
							}
							f.want(t, err)
							if f.body != "" || f.handler == nil {
								assertNoBody(t, err, []byte(f.body), "BTCUSDT", strconv.Itoa(f.status))
							}
							if strings.Contains(err.Error(), "ZQXMARKER") {
								t.Errorf("error %q quotes the body", err)
							}
							t.Logf("%s", err)
						})
					}
				})
			}
		})
	}
}

// TestClientCancel: the caller's cancellation ends a call at once and stays
// recognisable.
func TestClientCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := New(Binance, Options{BaseURL: srv.URL})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := c.Trades(ctx, "BTCUSDT", 100)
	wantTransport(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}

	// Already cancelled: no request at all.
	_, err = c.Catalog(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestClientConcurrent runs every call at once, for the race detector.
func TestClientConcurrent(t *testing.T) {
	f := newFakeVenue(t)
	c := New(Binance, Options{BaseURL: f.srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		for _, cl := range calls {
			wg.Go(func() {
				if _, err := cl.do(context.Background(), c); err != nil {
					t.Errorf("%s: %v", cl.name, err)
				}
				c.UsedWeight()
			})
		}
	}
	wg.Wait()
	if w, ok := c.UsedWeight(); !ok || w <= 0 {
		t.Errorf("UsedWeight = %d, %v", w, ok)
	}
}

// The caller's deadline owns a call: the client's own timeout does not
// shorten a call the caller bounded, and bounds only a caller that set no
// deadline.
func TestCallersDeadlineOwnsTheCall(t *testing.T) {
	var seen []time.Time
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		d, ok := r.Context().Deadline()
		if !ok {
			t.Error("a call without any deadline")
		}
		seen = append(seen, d)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	c := New(Binance, Options{BaseURL: "http://venue.invalid", Timeout: 50 * time.Millisecond, HTTPClient: &http.Client{Transport: rt}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	want, _ := ctx.Deadline()
	_, _ = c.Catalog(ctx)
	before := time.Now()
	_, _ = c.Catalog(context.Background())
	after := time.Now()
	if len(seen) != 2 {
		t.Fatalf("%d calls, want 2", len(seen))
	}
	if !seen[0].Equal(want) {
		t.Fatalf("deadline %v, want the caller's %v", seen[0], want)
	}
	if seen[1].Before(before.Add(50*time.Millisecond)) || seen[1].After(after.Add(50*time.Millisecond)) {
		t.Fatalf("without a caller's deadline the call's deadline was %v after it began, want the client's 50ms", seen[1].Sub(before))
	}
}
