package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"marketfeed/snapshot"
)

// These tests go through a real fasthttp.Server over an in-memory listener:
// what reaches the wire, the error handler, and shutdown.

// serving starts srv on an in-memory listener and returns it with the
// function of serveOn that shuts the server down.
func serving(t *testing.T, srv *Server) (*fasthttputil.InmemoryListener, func()) {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	return ln, serveOn(t, srv, ln)
}

// dialFrom opens a connection to ln from peer ("host:port"), the address
// the server sees as the connection's TCP peer.
func dialFrom(tb testing.TB, ln *fasthttputil.InmemoryListener, peer string) net.Conn {
	tb.Helper()
	addr, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ln.DialWithLocalAddr(addr)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// serveOn serves srv on ln until the returned function (also run at cleanup)
// shuts it down; Shutdown and then Serve must return nil.
func serveOn(t testing.TB, srv *Server, ln net.Listener) func() {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// raw sends raw request bytes on a new connection and returns the response
// as read from the wire.
func raw(t *testing.T, ln *fasthttputil.InmemoryListener, request string) (*fasthttp.Response, string) {
	t.Helper()
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	resp := new(fasthttp.Response)
	br := bufio.NewReader(io.TeeReader(c, &sb))
	if strings.HasPrefix(request, "HEAD") {
		resp.SkipBody = true
	}
	if err := resp.Read(br); err != nil {
		t.Fatalf("read response: %v (got %q)", err, sb.String())
	}
	return resp, sb.String()
}

func TestServeOverHTTP(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	client := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}

	for _, uri := range []string{
		"/api/public/pairs", "/api/public/tickers", "/api/public/orderbook?ticker_id=BTC_USDT&depth=3",
		"/api/public/trades?ticker_id=BTC_USDT&type=sell&limit=2", "/api/public/historical_trades?ticker_id=ETH_USDT",
	} {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://marketfeed" + uri)
		if err := client.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			t.Fatalf("%s: %d %s", uri, resp.StatusCode(), resp.Body())
		}
		checkResponse(t, uri, resp)
		if len(resp.Header.Peek("Server")) != 0 {
			t.Errorf("%s: Server header %q", uri, resp.Header.Peek("Server"))
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
}

// TestServeHeaderNamesInAnyCase: the request headers the server reads are
// found whatever the case a client writes their names in (the server looks
// them up by their canonical form, the one fasthttp stores).
func TestServeHeaderNamesInAnyCase(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	const book = "GET /api/public/orderbook?ticker_id=BTC_USDT HTTP/1.1\r\nHost: x\r\n"
	resp, _ := raw(t, ln, book+"accept-encoding: GZIP\r\n\r\n")
	if resp.StatusCode() != 200 || string(resp.Header.Peek("Content-Encoding")) != "gzip" {
		t.Fatalf("accept-encoding: GZIP: status %d, Content-Encoding %q", resp.StatusCode(), resp.Header.Peek("Content-Encoding"))
	}
	etag := string(resp.Header.Peek("ETag"))
	resp, _ = raw(t, ln, book+"ACCEPT-ENCODING: gzip\r\nif-none-match: "+etag+"\r\n\r\n")
	if resp.StatusCode() != 304 {
		t.Errorf("IF-NONE-MATCH of the current tag: status %d, want 304", resp.StatusCode())
	}
	resp, _ = raw(t, ln, "OPTIONS /api/public/trades HTTP/1.1\r\nHost: x\r\naccess-control-request-headers: x-b3-traceid\r\n\r\n")
	if got := string(resp.Header.Peek("Access-Control-Allow-Headers")); got != "x-b3-traceid" {
		t.Errorf("access-control-request-headers echoed as %q", got)
	}
}

func TestServePreflightHasNoBodyNoContentType(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	resp, wire := raw(t, ln, "OPTIONS /api/public/trades?ticker_id=BTC_USDT HTTP/1.1\r\nHost: x\r\n"+
		"Origin: https://example.org\r\nAccess-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: x-b3-traceid\r\n\r\n")
	if resp.StatusCode() != 204 {
		t.Fatalf("status %d", resp.StatusCode())
	}
	head := strings.ToLower(wire)
	for _, absent := range []string{"content-type", "content-length: ", "server:"} {
		if strings.Contains(head, absent) {
			t.Errorf("204 carries %q:\n%s", absent, wire)
		}
	}
	for _, present := range []string{
		"access-control-allow-origin: *\r\n", "access-control-allow-methods: get\r\n",
		"access-control-allow-headers: x-b3-traceid\r\n", "access-control-max-age: 86400\r\n",
	} {
		if !strings.Contains(head, present) {
			t.Errorf("204 lacks %q:\n%s", present, wire)
		}
	}
	if !strings.HasSuffix(wire, "\r\n\r\n") {
		t.Errorf("204 has a body:\n%q", wire)
	}
}

func TestServeHeadIs405WithoutBody(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	resp, wire := raw(t, ln, "HEAD /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode() != 405 || header(resp, "Allow") != "GET, OPTIONS" {
		t.Fatalf("HEAD: %d, Allow %q:\n%s", resp.StatusCode(), header(resp, "Allow"), wire)
	}
}

func TestServeUnreadableRequestsGetJSONErrors(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	for _, tc := range []struct {
		name, request string
		want          *apiError
	}{
		{"garbage", "BLAH\r\n\r\n", errBadRequest},
		{"headers too large", "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", maxHeaderSize) + "\r\n\r\n", errHeaderTooLarge},
		{"body too large", "POST /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("a", 100000), errBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := raw(t, ln, tc.request)
			if resp.StatusCode() != tc.want.status || string(resp.Body()) != string(tc.want.body) {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode(), resp.Body(), tc.want.status, tc.want.body)
			}
			if header(resp, "Access-Control-Allow-Origin") != "*" || header(resp, "Cache-Control") != "no-store" ||
				string(resp.Header.ContentType()) != "application/json" {
				t.Errorf("headers: %s", resp.Header.String())
			}
			var v map[string]any
			if err := json.Unmarshal(resp.Body(), &v); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestServeReadTimeoutAnswersSlowClient(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ReadTimeout = 50 * time.Millisecond })
	ln, _ := serving(t, f.srv)
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /api/public/pairs HTTP/1.1\r\nHo"); err != nil { // and nothing more
		t.Fatal(err)
	}
	resp := new(fasthttp.Response)
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("no answer to a slow client: %v", err)
	}
	if resp.StatusCode() != 408 || string(resp.Body()) != string(errRequestTimeout.body) {
		t.Fatalf("%d %s, want 408", resp.StatusCode(), resp.Body())
	}
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	f := newFixture(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	f.feed.load = func(ctx context.Context, id string, s snapshot.Stream) error {
		close(entered)
		<-release
		return f.publish(ctx, id, s)
	}
	ln, stop := serving(t, f.srv)

	type result struct {
		status int
		err    error
	}
	answered := make(chan result, 1)
	go func() {
		c, err := ln.Dial()
		if err != nil {
			answered <- result{err: err}
			return
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /api/public/orderbook?ticker_id=SOL_USDT HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			answered <- result{err: err}
			return
		}
		resp := new(fasthttp.Response)
		err = resp.Read(bufio.NewReader(c))
		answered <- result{resp.StatusCode(), err}
	}()
	<-entered // the request is in flight, waiting on the venue

	// While it is in flight, Shutdown does not report the server drained: a
	// context that is already done makes it give up and say so.
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.srv.Shutdown(canceled); err != context.Canceled {
		t.Fatalf("Shutdown with a request in flight: %v, want context.Canceled", err)
	}
	if _, err := ln.Dial(); err == nil {
		t.Error("new connections accepted after Shutdown began")
	}
	// The request in flight is still answered in full.
	close(release)
	if r := <-answered; r.err != nil || r.status != 200 {
		t.Fatalf("in-flight request: %+v, want 200", r)
	}
	stop() // Serve has returned nil
}

func TestShutdownBeforeServe(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	if err := f.srv.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown: %v, want nil", err)
	}
	if _, err := ln.Dial(); err == nil {
		t.Error("the listener still accepts after Serve returned")
	}
}

// TestShutdownWaitsForRefusals: a connection over MaxConns is answered by a
// goroutine that then drains what the client sends, for up to
// refusalTimeout. Shutdown must not leave it behind: it closes the
// connection and returns only once that goroutine has.
func TestShutdownWaitsForRefusals(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConns = 1 })
	ln, stop := serving(t, f.srv)
	held, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// An answer on the held connection shows it was accepted within the
	// cap; keep-alive keeps its place taken.
	if status, _ := sendRaw(held, []byte("GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"), "GET"); status != 200 {
		t.Fatalf("held connection: status %d, want 200", status)
	}
	refused, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	// The client reads the 503 and keeps its side open, so the refusal
	// goroutine stays in its drain until the timeout, or Shutdown.
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(refused)); err != nil || resp.StatusCode() != 503 {
		t.Fatalf("over the cap: %v, status %d, want 503", err, resp.StatusCode())
	}
	f.srv.mu.Lock()
	capped := f.srv.caps[0]
	f.srv.mu.Unlock()
	if n := len(capped.refusing); n != 1 {
		t.Fatalf("%d refusals in progress before Shutdown, want 1", n)
	}

	stop()
	if n := len(capped.refusing); n != 0 {
		t.Errorf("Shutdown returned with %d refusal goroutines running", n)
	}
	_ = refused.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := refused.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("refused connection after Shutdown: read %v, want it closed", err)
	}
}
