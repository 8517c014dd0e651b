package server

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func gunzipBody(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("body is not gzip: %v", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The default bodies of every route go out compressed, from the form built
// with the snapshot, when the client accepts gzip; they decompress to the
// identity answer byte for byte.
func TestGzipServedForDefaultBodiesWhenAccepted(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{
		"/api/public/pairs", "/api/public/tickers", "/api/public/contracts", "/api/public/contract_specs",
		"/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/orderbook?ticker_id=BTC_USDT&depth=100",
		"/api/public/trades?ticker_id=BTC_USDT", "/api/public/historical_trades?ticker_id=BTC_USDT&limit=0",
	} {
		plain := serveOne(f.srv, request{uri: uri})
		gz := serveOne(f.srv, request{uri: uri, headers: []string{"Accept-Encoding", "br, gzip;q=0.8, deflate"}})
		if gz.StatusCode() != 200 || header(gz, "Content-Encoding") != "gzip" {
			t.Fatalf("%s: status %d, Content-Encoding %q; want a gzip 200", uri, gz.StatusCode(), header(gz, "Content-Encoding"))
		}
		if got := gunzipBody(t, gz.Body()); !bytes.Equal(got, plain.Body()) {
			t.Errorf("%s: gzip body decompresses to other bytes than the identity body", uri)
		}
		for _, resp := range []*fasthttp.Response{plain, gz} {
			if header(resp, "Vary") != "Accept-Encoding" {
				t.Errorf("%s: Vary = %q, want Accept-Encoding", uri, header(resp, "Vary"))
			}
		}
		if header(plain, "ETag") == header(gz, "ETag") {
			t.Errorf("%s: identity and gzip answers share the strong tag %s", uri, header(gz, "ETag"))
		}
	}
}

func TestGzipNotServedWhenRefusedOrForOtherVariants(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ uri, accept string }{
		{"/api/public/pairs", ""},
		{"/api/public/pairs", "gzip;q=0"},
		{"/api/public/pairs", "gzip; q=0.000, identity"},
		{"/api/public/pairs", "*"},
		{"/api/public/pairs", "br, deflate"},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=5", "gzip"},
		{"/api/public/trades?ticker_id=BTC_USDT&limit=10", "gzip"},
		{"/api/public/trades?ticker_id=BTC_USDT&type=buy", "gzip"},
	} {
		var headers []string
		if tc.accept != "" {
			headers = []string{"Accept-Encoding", tc.accept}
		}
		resp := f.do(t, request{uri: tc.uri, headers: headers})
		if resp.StatusCode() != 200 || header(resp, "Content-Encoding") != "" {
			t.Errorf("%s with Accept-Encoding %q: status %d, Content-Encoding %q; want identity",
				tc.uri, tc.accept, resp.StatusCode(), header(resp, "Content-Encoding"))
		}
		if header(resp, "Vary") != "Accept-Encoding" {
			t.Errorf("%s: Vary = %q", tc.uri, header(resp, "Vary"))
		}
	}
}

func TestGzipAcceptedSpellings(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"gzip", true}, {"GZIP", true}, {"x-gzip", true}, {"deflate, gzip", true}, {" gzip ; q=1", true},
		{"gzip;q=0.5", true}, {"gzip;q=0", false}, {"gzip;Q=0.0", false}, {"identity", false}, {"", false},
		{"gzipx", false}, {"*", false}, {"br;q=1, gzip;q=0", false},
	} {
		if got := acceptsGzip([]byte(tc.header)); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// Every 200 carries an ETag naming its variant; sending it back in
// If-None-Match answers 304 with the same CORS and cache headers and no body,
// so a CDN revalidates for free.
func TestIfNoneMatchAnswers304WithTheSameHeaders(t *testing.T) {
	f := newFixture(t, nil)
	seen := map[string]string{}
	for _, uri := range append(hotCaseURIs(), "/api/public/trades?ticker_id=BTC_USDT&type=sell") {
		for _, accept := range []string{"", "gzip"} {
			first := serveOne(f.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept}})
			etag := header(first, "ETag")
			if first.StatusCode() != 200 || !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) {
				t.Fatalf("%s: status %d, ETag %q", uri, first.StatusCode(), etag)
			}
			if prev, ok := seen[etag]; ok && prev != string(first.Body()) {
				t.Fatalf("%s: ETag %s names two different bodies", uri, etag)
			}
			seen[etag] = string(first.Body())
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				resp := serveOne(f.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept, "If-None-Match", inm}})
				if resp.StatusCode() != fasthttp.StatusNotModified {
					t.Fatalf("%s If-None-Match %s: status %d, want 304", uri, inm, resp.StatusCode())
				}
				for h, want := range map[string]string{
					"ETag": etag, "Cache-Control": "public, max-age=5", "Access-Control-Allow-Origin": "*", "Vary": "Accept-Encoding",
				} {
					if got := header(resp, h); got != want {
						t.Errorf("%s 304: %s = %q, want %q", uri, h, got, want)
					}
				}
				if len(resp.Body()) != 0 {
					t.Errorf("%s 304 has a body", uri)
				}
			}
			stale := serveOne(f.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept, "If-None-Match", `"old-tag"`}})
			if stale.StatusCode() != 200 {
				t.Errorf("%s with a stale tag: status %d, want 200", uri, stale.StatusCode())
			}
		}
	}
}

// A tag names bytes: a book with other bytes gets another tag, and a new
// value with the same bytes keeps it, so a cache revalidates with 304.
func TestNewSnapshotChangesTheETagOnlyWithItsBytes(t *testing.T) {
	f := newFixture(t, nil)
	uri := "/api/public/orderbook?ticker_id=BTC_USDT&depth=5"
	before := header(f.get(t, uri), "ETag")
	if !f.store.PutBook(btcBook(t, t0)) {
		t.Fatal("not listed")
	}
	resp := serveOne(f.srv, request{uri: uri, headers: []string{"If-None-Match", before}})
	if resp.StatusCode() != fasthttp.StatusNotModified {
		t.Fatalf("the same bytes read again: status %d, want 304", resp.StatusCode())
	}
	f.clock.Advance(time.Millisecond) // the venue's time is in the body
	if !f.store.PutBook(btcBook(t, f.clock.Now())) {
		t.Fatal("not listed")
	}
	resp = serveOne(f.srv, request{uri: uri, headers: []string{"If-None-Match", before}})
	if resp.StatusCode() != 200 || header(resp, "ETag") == before {
		t.Fatalf("after a refresh: status %d, ETag %s (was %s); want 200 with a new tag", resp.StatusCode(), header(resp, "ETag"), before)
	}
}

// Two processes that hold the same snapshots (a restarted one, or another
// replica behind the same load balancer) answer every variant of every
// route with the same bytes and the same tag, so a cache revalidating with
// either gets a 304 from the other.
func TestETagIsTheSameOnEveryProcessForTheSameBytes(t *testing.T) {
	a, b := newFixture(t, nil), newFixture(t, nil)
	uris := append(hotCaseURIs(),
		"/api/public/trades?ticker_id=ETH_USDT&type=buy",
		"/api/public/orderbook?ticker_id=ETH_USDT&depth=2")
	for _, uri := range uris {
		for _, accept := range []string{"", "gzip"} {
			ra := serveOne(a.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept}})
			rb := serveOne(b.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept}})
			tag := header(ra, "ETag")
			if ra.StatusCode() != 200 || tag == "" || tag != header(rb, "ETag") || !bytes.Equal(ra.Body(), rb.Body()) {
				t.Fatalf("%s (gzip %q): status %d, ETags %s and %s, bodies equal %v",
					uri, accept, ra.StatusCode(), tag, header(rb, "ETag"), bytes.Equal(ra.Body(), rb.Body()))
			}
			resp := serveOne(b.srv, request{uri: uri, headers: []string{"Accept-Encoding", accept, "If-None-Match", tag}})
			if resp.StatusCode() != fasthttp.StatusNotModified {
				t.Errorf("%s (gzip %q): the other process answers %d to its tag, want 304", uri, accept, resp.StatusCode())
			}
		}
	}
}

func TestErrorsCarryNoETag(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{"/api/public/orderbook?ticker_id=btc", "/api/public/orderbook?ticker_id=NOPE_USDT", "/api/public/fees"} {
		resp := serveOne(f.srv, request{uri: uri, headers: []string{"If-None-Match", "*", "Accept-Encoding", "gzip"}})
		if resp.StatusCode() < 400 || header(resp, "ETag") != "" || header(resp, "Content-Encoding") != "" {
			t.Errorf("%s: status %d, ETag %q, Content-Encoding %q; want an uncompressed error without a tag",
				uri, resp.StatusCode(), header(resp, "ETag"), header(resp, "Content-Encoding"))
		}
	}
}

// On the wire a 304 has no body and no Content-Length a client would wait on.
func Test304OnTheWire(t *testing.T) {
	f := newFixture(t, nil)
	ln, _ := serving(t, f.srv)
	resp, _ := raw(t, ln, "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
	etag := string(resp.Header.Peek("ETag"))
	resp, wire := raw(t, ln, "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: "+etag+"\r\n\r\n")
	if resp.StatusCode() != 304 || len(resp.Body()) != 0 {
		t.Fatalf("status %d, body %q", resp.StatusCode(), resp.Body())
	}
	if strings.Contains(wire, "Content-Type") {
		t.Errorf("304 carries a Content-Type: %q", wire)
	}
}

func hotCaseURIs() []string {
	var out []string
	for _, hc := range hotCases {
		out = append(out, hc.uri)
	}
	return out
}

// The default bodies of books and trades are sent gzipped to a client that
// accepts gzip from the first request for a new snapshot (the form is built
// then, once per snapshot), and decompress to the identity body; the other
// variants, and clients that do not accept gzip, get the identity body.
func TestGzipFormFromTheFirstRequest(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		uri    string
		accept string
		gzip   bool
	}{
		{"/api/public/orderbook?ticker_id=BTC_USDT", "gzip", true},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=0", "gzip", true},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=500", "gzip", true},
		{"/api/public/orderbook?ticker_id=BTC_USDT", "", false},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=5", "gzip", false},
		{"/api/public/trades?ticker_id=BTC_USDT", "deflate, gzip", true},
		{"/api/public/trades?ticker_id=BTC_USDT&limit=10", "gzip", false},
		{"/api/public/trades?ticker_id=BTC_USDT&type=sell", "gzip", false},
		{"/api/public/trades?ticker_id=BTC_USDT", "gzip;q=0", false},
	} {
		// A new snapshot for every case: nothing was compressed before.
		f.store.PutBook(btcBook(t, f.clock.Now()))
		f.store.PutTrades(btcTrades(t, f.clock.Now()))
		plain := f.do(t, request{uri: tc.uri})
		resp := serveOne(f.srv, request{uri: tc.uri, headers: []string{"Accept-Encoding", tc.accept}})
		if resp.StatusCode() != 200 || (header(resp, "Content-Encoding") == "gzip") != tc.gzip {
			t.Errorf("%s with Accept-Encoding %q: status %d, Content-Encoding %q, want gzip %v",
				tc.uri, tc.accept, resp.StatusCode(), header(resp, "Content-Encoding"), tc.gzip)
			continue
		}
		body := resp.Body()
		if tc.gzip {
			body = gunzipBody(t, body)
		}
		if !bytes.Equal(body, plain.Body()) {
			t.Errorf("%s with Accept-Encoding %q: the body is not the identity body", tc.uri, tc.accept)
		}
	}
}
