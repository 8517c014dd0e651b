package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"marketfeed/internal/apispec"
)

// specCheck sends raw requests to a server and checks every answer
// against docs/openapi.yaml (see apispec).
type specCheck struct {
	t    *testing.T
	spec *apispec.Spec
}

func loadSpec(t *testing.T) *specCheck {
	t.Helper()
	return &specCheck{t: t, spec: apispec.Load(t, filepath.Join("..", "docs", "openapi.yaml"))}
}

// specRequest sends one raw request on a new connection and reads the answer.
type specRequest struct {
	method  string
	uri     string
	headers []string // name, value, ...
	body    string
	partial bool // stop writing after the request line and wait for the server's timeout
}

func (e specRequest) String() string { return e.method + " " + e.uri }

func (c *specCheck) do(ln *fasthttputil.InmemoryListener, e specRequest) (*http.Response, []byte) {
	c.t.Helper()
	if e.method == "" {
		e.method = http.MethodGet
	}
	var w strings.Builder
	fmt.Fprintf(&w, "%s %s HTTP/1.1\r\nHost: marketfeed\r\n", e.method, e.uri)
	if !e.partial {
		for i := 0; i+1 < len(e.headers); i += 2 {
			fmt.Fprintf(&w, "%s: %s\r\n", e.headers[i], e.headers[i+1])
		}
		if e.body != "" {
			fmt.Fprintf(&w, "Content-Length: %d\r\n", len(e.body))
		}
		w.WriteString("\r\n" + e.body)
	}
	conn, err := ln.Dial()
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, w.String()); err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequest(e.method, "http://marketfeed"+e.uri, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(e.headers); i += 2 {
		req.Header.Add(e.headers[i], e.headers[i+1])
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		c.t.Fatalf("%s: read response: %v", e, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s: read body: %v", e, err)
	}
	resp.Body.Close()
	c.spec.Check(c.t, e.String(), req, resp, body)
	return resp, body
}

// check sends e and requires the status.
func (c *specCheck) check(ln *fasthttputil.InmemoryListener, e specRequest, status int) *http.Response {
	c.t.Helper()
	resp, body := c.do(ln, e)
	if resp.StatusCode != status {
		c.t.Errorf("%s: status %d, want %d: %.200s", e, resp.StatusCode, status, body)
	}
	return resp
}

// The data routes, and how each is asked for with a valid query.
var specRoutes = []struct{ path, query string }{
	{"/api/public/pairs", ""},
	{"/api/public/tickers", ""},
	{"/api/public/contracts", ""},
	{"/api/public/contract_specs", ""},
	{"/api/public/orderbook", "?ticker_id=BTC_USDT"},
	{"/api/public/trades", "?ticker_id=BTC_USDT"},
	{"/api/public/historical_trades", "?ticker_id=ETH_USDT"},
}

// TestResponsesMatchTheOpenAPIDocument sends every kind of request the API
// answers differently, over a real fasthttp server, and validates each
// answer (status, headers, body) against docs/openapi.yaml with
// kin-openapi: a GET against its operation, any other method and path
// against what its prose says of them. Then every response the document
// lists must have been seen.
func TestResponsesMatchTheOpenAPIDocument(t *testing.T) {
	c := loadSpec(t)

	f := newFixture(t, func(cfg *Config) { cfg.ReadTimeout = 100 * time.Millisecond })
	ln, _ := serving(t, f.srv)
	for _, r := range specRoutes {
		uri := r.path + r.query
		resp := c.check(ln, specRequest{uri: uri}, 200)
		c.check(ln, specRequest{uri: uri, headers: []string{"If-None-Match", resp.Header.Get("ETag")}}, 304)
		if gz := c.check(ln, specRequest{uri: uri, headers: []string{"Accept-Encoding", "gzip"}}, 200); gz.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s: the default body is not sent gzipped", uri)
		}
		c.check(ln, specRequest{method: "OPTIONS", uri: uri, headers: []string{
			"Origin", "https://example.org", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-requested-with",
		}}, 204)
		for _, m := range []string{"HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			c.check(ln, specRequest{method: m, uri: uri}, 405)
		}
		// Requests the server cannot read, on every operation.
		for _, m := range []string{"GET", "OPTIONS", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			c.check(ln, specRequest{method: m, uri: uri, headers: []string{"X-Padding", strings.Repeat("x", maxHeaderSize)}}, 431)
		}
		c.check(ln, specRequest{method: "POST", uri: uri, body: strings.Repeat("x", 2*maxBodySize)}, 413)
		c.check(ln, specRequest{uri: uri, partial: true}, 408)
		for _, m := range []string{"GET", "OPTIONS"} {
			c.check(ln, specRequest{method: m, uri: uri, headers: []string{"Content-Length", "ten"}}, 400)
		}
	}
	for _, uri := range []string{
		"/api/public/orderbook?ticker_id=BTC_USDT&depth=3",
		"/api/public/trades?ticker_id=BTC_USDT&type=sell&limit=2",
		"/api/public/historical_trades?ticker_id=BTC_USDT&type=buy&limit=0",
		"/api/public/orderbook?ticker_id=BTC_USDT&depth=99999999999999999999999&_=1",
	} {
		c.check(ln, specRequest{uri: uri}, 200)
	}
	for _, uri := range []string{
		"/api/public/orderbook", "/api/public/orderbook?ticker_id=btc_usdt", "/api/public/orderbook?ticker_id=BTC_USDT&depth=-1",
		"/api/public/orderbook?ticker_id=BTC_USDT&depth=1e2", "/api/public/trades?ticker_id=BTC_USDT&ticker_id=ETH_USDT",
		"/api/public/trades?ticker_id=BTC_USDT&type=BUY", "/api/public/historical_trades?ticker_id=BTC_USDT&limit=+5",
	} {
		c.check(ln, specRequest{uri: uri}, 400)
	}
	for _, uri := range []string{
		"/api/public/orderbook?ticker_id=PEPE_USDT", "/api/public/trades?ticker_id=NOPE_USDT",
		"/api/public/historical_trades?ticker_id=LUNA_USDT",
	} {
		c.check(ln, specRequest{uri: uri}, 404)
	}
	c.check(ln, specRequest{uri: "/api/public/fees"}, 404)
	c.check(ln, specRequest{uri: "/api/public/fees", headers: []string{"X-Padding", strings.Repeat("x", maxHeaderSize)}}, 431)
	// A pair listed but never read, whose venue read fails: 502.
	c.check(ln, specRequest{uri: "/api/public/orderbook?ticker_id=SOL_USDT"}, 502)
	f.feed.panicOnWant.Store(true)
	for _, r := range specRoutes[4:] { // the per-pair routes
		c.check(ln, specRequest{uri: r.path + r.query}, 500)
	}

	// The venue has failed for longer than any snapshot may be served.
	stale := newFixture(t, nil)
	stale.clock.Advance(DefaultPairsMaxStale + time.Second)
	ln, _ = serving(t, stale.srv)
	for _, r := range specRoutes {
		c.check(ln, specRequest{uri: r.path + r.query}, 502)
	}

	// One request a minute: everything after the first is 429, whatever the
	// route and method, except a preflight.
	limited := newFixture(t, func(cfg *Config) { cfg.RateLimit = 1 })
	ln, _ = serving(t, limited.srv)
	c.check(ln, specRequest{uri: "/api/public/pairs"}, 200)
	for _, r := range specRoutes {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			c.check(ln, specRequest{method: m, uri: r.path + r.query}, 429)
		}
		c.check(ln, specRequest{method: "OPTIONS", uri: r.path + r.query}, 204)
	}
	c.check(ln, specRequest{uri: "/api/public/fees"}, 429)

	// One connection at most: while one is open, every other is refused
	// with 503, whatever it asks.
	capped := newFixture(t, func(cfg *Config) { cfg.MaxConns = 1 })
	ln, _ = serving(t, capped.srv)
	held, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := io.WriteString(held, goodRequest); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(held), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the connection within the cap: %v", err)
	}
	for _, r := range specRoutes {
		for _, m := range []string{"GET", "OPTIONS", "POST"} {
			c.check(ln, specRequest{method: m, uri: r.path + r.query}, 503)
		}
	}
	c.check(ln, specRequest{uri: "/api/public/fees"}, 503)

	if missing := c.spec.Unseen("/api/public/", map[string]string{
		"GET /api/public/pairs 500":          "no fault to inject: the route calls nothing that can fail",
		"GET /api/public/tickers 500":        "no fault to inject: the route calls nothing that can fail",
		"GET /api/public/contracts 500":      "no fault to inject: the route calls nothing that can fail",
		"GET /api/public/contract_specs 500": "no fault to inject: the route calls nothing that can fail",
	}); len(missing) > 0 {
		t.Errorf("documented responses no request produced (document them out, or test them):\n%s", strings.Join(missing, "\n"))
	}
}
