package server

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"marketfeed/snapshot"
)

// Pure parsing, tested without a request.

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in       string
		n        int
		neg, ok  bool
		describe string
	}{
		{"0", 0, false, true, "zero"},
		{"1", 1, false, true, ""},
		{"100", 100, false, true, ""},
		{"101", 100, false, true, "clamped"},
		{"0000000100", 100, false, true, "leading zeros"},
		{"-0", 0, false, true, "minus zero is zero"},
		{"-7", 7, true, true, "negative"},
		{"-99999999999999999999999", 100, true, true, "negative, huge"},
		{"99999999999999999999999", 100, false, true, "huge"},
		{"18446744073709551616", 100, false, true, "past uint64"},
		{"", 0, false, false, "empty"},
		{"-", 0, false, false, "sign alone"},
		{"+5", 0, false, false, "plus"},
		{" 5", 0, false, false, "space"},
		{"5.0", 0, false, false, "fraction"},
		{"1e2", 0, false, false, "exponent"},
		{"0x10", 0, false, false, "hex"},
		{"٥", 0, false, false, "non-ASCII digit"},
	} {
		n, neg, ok := parseCount([]byte(tc.in), 100)
		if n != tc.n || neg != tc.neg || ok != tc.ok {
			t.Errorf("parseCount(%q) = %d, %v, %v; want %d, %v, %v (%s)", tc.in, n, neg, ok, tc.n, tc.neg, tc.ok, tc.describe)
		}
	}
}

// queryOf reads the query of a request for "/x?"+query, as the handler
// does; an error for a URI fasthttp refuses before any handler runs.
func queryOf(query string) (rawQuery, error) {
	var u fasthttp.URI
	if err := u.Parse(nil, []byte("/x?"+query)); err != nil {
		return rawQuery{}, err
	}
	return readQuery(&u), nil
}

// mustQuery is queryOf for a query fasthttp takes.
func mustQuery(t *testing.T, query string) rawQuery {
	t.Helper()
	q, err := queryOf(query)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// argsQuery reads query through fasthttp's Args, which decodes every key
// and value: what readQuery must agree with.
func argsQuery(query string) rawQuery {
	var args fasthttp.Args
	args.Parse(query)
	return readArgs(&args)
}

// sameQuery reports whether two reads of a query found the same counts and
// first values.
func sameQuery(a, b rawQuery) bool {
	for i := range numParams {
		if a.count[i] != b.count[i] || string(a.value[i]) != string(b.value[i]) {
			return false
		}
	}
	return true
}

func TestReadQueryCountsRepeatsAfterDecoding(t *testing.T) {
	q := mustQuery(t, "ticker_id=A_B&ticker%5Fid=C_D&depth=1&x=1&x=2&type=buy&limit&%74ype=sell")
	if q.count[paramTicker] != 2 || string(q.value[paramTicker]) != "A_B" {
		t.Errorf("ticker_id: %d × first %q", q.count[paramTicker], q.value[paramTicker])
	}
	if q.count[paramDepth] != 1 || q.count[paramType] != 2 || q.count[paramLimit] != 1 || len(q.value[paramLimit]) != 0 {
		t.Errorf("counts %v", q.count)
	}
}

// A query with nothing to decode is read in place; it must read as
// fasthttp's Args read it, whatever its shape.
func TestReadQueryInPlaceAsArgs(t *testing.T) {
	for _, query := range []string{
		"", "ticker_id=BTC_USDT", "ticker_id=BTC_USDT&depth=5", "depth=5&ticker_id=BTC_USDT&depth=6",
		"ticker_id", "ticker_id=", "=BTC_USDT", "&", "&&ticker_id=A_B&&", "ticker_id=A=B", "ticker_id==",
		"type=buy&type=sell&limit=10&limit", "x=1&ticker_id=A_B&y", "ticker_id=A_B&limit=-3&type=",
		"TICKER_ID=A_B", "ticker_id =A_B", "ticker_id=A_B;depth=5", "_=1767323045&ticker_id=BTC_USDT&depth=99",
	} {
		if got, want := mustQuery(t, query), argsQuery(query); !sameQuery(got, want) {
			t.Errorf("%q: read %+v, Args read %+v", query, got, want)
		}
	}
}

func TestParseTradesSides(t *testing.T) {
	for in, want := range map[string]snapshot.Side{"": snapshot.SideAll, "&type=buy": snapshot.SideBuy, "&type=sell": snapshot.SideSell} {
		q := mustQuery(t, "ticker_id=AB_CD"+in)
		got, e := parseTrades(&q)
		if e != nil || got.side != want || got.limit != snapshot.MaxTrades || string(got.id) != "AB_CD" {
			t.Errorf("%q: %+v %v", in, got, e)
		}
	}
}

func TestRouteOf(t *testing.T) {
	for path, want := range map[string]route{
		"/api/public/pairs": routePairs, "/api/public/pairs/": routePairs,
		"/api/public/tickers": routeTickers, "/api/public/tickers/": routeTickers,
		"/api/public/orderbook": routeBook, "/api/public/orderbook/": routeBook,
		"/api/public/trades": routeTrades, "/api/public/historical_trades/": routeTrades,
		"/api/public/pairs//": routeNone, "/api/public/fees": routeNone, "/api/public/": routeNone,
		"/api/public": routeNone, "": routeNone, "/api/public/PAIRS": routeNone, "api/public/pairs": routeNone,
	} {
		if got := routeOf([]byte(path)); got != want {
			t.Errorf("routeOf(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestParseIP(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.9": "203.0.113.9", " 203.0.113.9 ": "203.0.113.9", "203.0.113.9:80": "203.0.113.9",
		"2001:db8::1": "2001:db8::1", "[2001:db8::1]": "2001:db8::1", "[2001:db8::1]:443": "2001:db8::1",
		"::ffff:203.0.113.9": "203.0.113.9", "2001:DB8::A": "2001:db8::a",
		"": "", "unknown": "", "203.0.113.9:": "", "203.0.113.9:x": "", "[2001:db8::1]x": "",
		"fe80::1%eth0": "", "ff02::1": "", "0.0.0.0": "", "::": "", "1.2.3": "", "1.2.3.4.5": "",
		"[203.0.113.9]:1:2": "", strings.Repeat("1", 100): "", "_": "",
	} {
		a, ok := parseIP([]byte(in))
		got := ""
		if ok {
			got = a.String()
		}
		if got != want {
			t.Errorf("parseIP(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizePrefixes(t *testing.T) {
	got := normalizePrefixes([]netip.Prefix{
		netip.MustParsePrefix("::ffff:10.0.0.0/104"), netip.MustParsePrefix("192.0.2.77/24"), {},
	})
	if len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "192.0.2.0/24" {
		t.Fatalf("normalizePrefixes: %v", got)
	}
}

func TestNormalizeHeaderName(t *testing.T) {
	for in, want := range map[string]string{
		"CF-Connecting-IP": "Cf-Connecting-Ip", "x-forwarded-for": "X-Forwarded-For", "X-REAL-IP": "X-Real-Ip",
	} {
		b := []byte(in)
		normalizeHeaderName(b)
		if string(b) != want {
			t.Errorf("%s → %s, want %s", in, b, want)
		}
	}
}
