package server

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzQuery sends arbitrary query strings to the routes that take
// parameters. Whatever arrives, the answer is 200, 400 or 404 with a body of
// the right shape, never a panic, a 500 or a 502 (every listed pair can be
// loaded), and the two trade routes agree.
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{
		"", "ticker_id=BTC_USDT", "ticker_id=BTC_USDT&depth=5", "ticker_id=ETH_USDT&type=sell&limit=2",
		"ticker_id=btc_usdt", "ticker_id=A_B&ticker_id=C_D", "ticker_id=BTC_USDT&depth=99999999999999999999999",
		"ticker_id=BTC_USDT&depth=-1", "ticker_id=BTC_USDT&limit=%2B5", "ticker%5Fid=SOL%5FUSDT&type=buy",
		"ticker_id=PEPE_USDT", "ticker_id=1000PEPE_USDT&depth=0", "&&&=&=", "ticker_id=%ZZ", "depth=1e2&ticker_id",
		"ticker_id=BTC_USDT&type=BUY", "ticker_id=BTC_USDT&limit=5.0&limit=1",
	} {
		f.Add(seed)
	}
	fx := newFixture(f, nil)
	fx.feed.load = fx.publish
	f.Fuzz(func(t *testing.T, query string) {
		if strings.ContainsAny(query, "#\r\n") {
			t.Skip("not part of a query string on the wire")
		}
		for _, route := range []string{"orderbook", "trades"} {
			uri := "/api/public/" + route + "?" + query
			resp := fx.do(t, request{uri: uri})
			switch st := resp.StatusCode(); st {
			case 200, 400, 404:
			default:
				t.Fatalf("%s: status %d %s", uri, st, resp.Body())
			}
		}
		a := serveOne(fx.srv, request{uri: "/api/public/trades?" + query})
		b := serveOne(fx.srv, request{uri: "/api/public/historical_trades?" + query})
		if a.StatusCode() != b.StatusCode() || !bytes.Equal(a.Body(), b.Body()) {
			t.Fatalf("trades and historical_trades differ for %q", query)
		}
	})
}

// FuzzReadQuery: whatever the query string, readQuery finds what fasthttp's
// Args, which decode it, find.
func FuzzReadQuery(f *testing.F) {
	for _, seed := range []string{
		"ticker_id=BTC_USDT&depth=5", "ticker%5Fid=A_B&ticker_id=C_D", "&&&=&=", "type=buy&type", "limit=+5", "a=%ZZ&depth=1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if strings.ContainsAny(query, "#\r\n ") {
			t.Skip("not part of a query string on the wire")
		}
		got, err := queryOf(query)
		if err != nil {
			t.Skip("a URI fasthttp refuses: no handler sees it")
		}
		if want := argsQuery(query); !sameQuery(got, want) {
			t.Fatalf("%q: read %+v, Args read %+v", query, got, want)
		}
	})
}

// FuzzRoute sends arbitrary paths, with any method. A path the router
// accepts is one of the seven routes with at most one trailing slash; every
// other path is 404; no path panics.
func FuzzRoute(f *testing.F) {
	for _, seed := range []string{
		"/api/public/pairs", "/api/public/pairs/", "/api/public/fees", "/api/public//tickers", "/api/public/../public/pairs",
		"/api/public/%70airs", "/api/public/orderbook/?ticker_id=BTC_USDT", "/", "", "//", "/api/public/trades/x",
		"http://host/api/public/pairs", "/api/public/historical_trades%2F",
	} {
		f.Add(seed, "GET")
		f.Add(seed, "OPTIONS")
	}
	f.Add("/api/public/pairs", "POST")
	fx := newFixture(f, nil)
	fx.feed.load = fx.publish
	f.Fuzz(func(t *testing.T, path, method string) {
		r := routeOf([]byte(path))
		if r != routeNone {
			name, _ := strings.CutPrefix(path, "/api/public/")
			name = strings.TrimSuffix(name, "/")
			switch name {
			case "pairs", "tickers", "orderbook", "trades", "historical_trades", "contracts", "contract_specs":
			default:
				t.Fatalf("routeOf(%q) = %v", path, r)
			}
		}
		if !strings.HasSuffix(path, "/") && routeOf([]byte(path+"/")) != r {
			t.Fatalf("%q and %q route differently", path, path+"/")
		}

		if strings.ContainsAny(method, " \t\r\n:") || strings.ContainsAny(path, " \t\r\n#") {
			t.Skip("not a request line")
		}
		resp := fx.do(t, request{method: method, uri: path})
		switch st := resp.StatusCode(); st {
		case 200, 204, 400, 404, 405:
		default:
			t.Fatalf("%s %q: status %d %s", method, path, st, resp.Body())
		}
	})
}

// FuzzClientIP sends arbitrary X-Forwarded-For and CF-Connecting-IP values
// through a trusted proxy. An address taken from them is valid and never
// multicast, unspecified or IPv4-mapped; nothing panics, and the request is
// answered.
func FuzzClientIP(f *testing.F) {
	for _, seed := range []string{
		"203.0.113.9", "198.51.100.7, 203.0.113.9, 10.0.0.2", "[2001:db8::1]:443", "fe80::1%eth0", "unknown", "", ",,,",
		"::ffff:10.0.0.1", "1.2.3.4:5:6", "[", "]",
	} {
		f.Add(seed)
	}
	xffFixture := newFixture(f, behind(func(c *Config) { c.RateLimit = 1 << 30 }))
	cfFixture := newFixture(f, behind(func(c *Config) { c.RateLimit = 1 << 30; c.ClientIPHeader = "CF-Connecting-IP" }))
	f.Fuzz(func(t *testing.T, value string) {
		if a, ok := parseIP([]byte(value)); ok && (!a.IsValid() || a.IsMulticast() || a.IsUnspecified() || a.Is4In6()) {
			t.Fatalf("parseIP(%q) = %v", value, a)
		}
		if strings.ContainsAny(value, "\r\n") {
			t.Skip("not a header value")
		}
		for _, fx := range []*fixture{xffFixture, cfFixture} {
			resp := fx.do(t, request{uri: "/api/public/pairs", peer: "10.0.0.1:1",
				headers: []string{"X-Forwarded-For", value, "CF-Connecting-IP", value}})
			wantStatus(t, resp, 200)
		}
	})
}
