package server

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"marketfeed/internal/golden"
	"marketfeed/internal/wire"
	"marketfeed/snapshot"
)

// The tests in this file follow docs/api.md rule by rule; each is named
// after the rule it checks.

func wantStatus(t *testing.T, resp *fasthttp.Response, status int) {
	t.Helper()
	if got := resp.StatusCode(); got != status {
		t.Fatalf("status %d, want %d; body %s", got, status, resp.Body())
	}
}

// wantError checks status and that the body is exactly the error e.
func wantError(t *testing.T, resp *fasthttp.Response, e *apiError) {
	t.Helper()
	wantStatus(t, resp, e.status)
	if !bytes.Equal(resp.Body(), e.body) {
		t.Fatalf("body %s, want %s", resp.Body(), e.body)
	}
}

func bookLevels(t *testing.T, body []byte) (bids, asks [][2]string, ts int64) {
	t.Helper()
	var b wire.Book
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bids, b.Asks, b.Timestamp
}

func tradeItems(t *testing.T, body []byte) []wire.Trade {
	t.Helper()
	var items []wire.Trade
	if err := json.Unmarshal(body, &items); err != nil {
		t.Fatal(err)
	}
	return items
}

func TestPairsServesEveryPublishedPair(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.get(t, "/api/public/pairs")
	wantStatus(t, resp, 200)
	if !bytes.Equal(resp.Body(), f.store.Pairs().Body()) {
		t.Fatalf("body is not the snapshot's")
	}
	golden.Check(t, "pairs", resp.Body())
}

// /contracts and /contract_specs serve the published bytes as they are,
// from one publication: the same contracts, in the same order.
func TestContractsServeThePublishedContracts(t *testing.T) {
	f := newFixture(t, nil)
	c := f.store.Contracts()
	for uri, want := range map[string][]byte{"/api/public/contracts": c.Body(), "/api/public/contract_specs": c.Specs().Body()} {
		resp := f.get(t, uri)
		wantStatus(t, resp, 200)
		if !bytes.Equal(resp.Body(), want) {
			t.Fatalf("%s: body %s is not the publication's", uri, resp.Body())
		}
		if got := header(resp, "Cache-Control"); got != "public, max-age=5" {
			t.Errorf("%s: Cache-Control %q", uri, got)
		}
	}
	var items []map[string]any
	if err := json.Unmarshal(f.get(t, "/api/public/contracts").Body(), &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0]["ticker_id"] != "BTC_USDT" || items[0]["bid"] != "50000.5" || items[0]["ask"] != "50001.5" ||
		items[0]["funding_rate"] != "0.012" || items[0]["open_interest_usd"] != "406180923.456" {
		t.Fatalf("contracts %v, want BTC_USDT's with its book's two sides, funding in percent and its open interest in dollars", items)
	}
	golden.Check(t, "contracts", f.get(t, "/api/public/contracts").Body())
	golden.Check(t, "contract_specs", f.get(t, "/api/public/contract_specs").Body())
}

func TestTickersServesSpotPairsOnly(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.get(t, "/api/public/tickers")
	wantStatus(t, resp, 200)
	var items []map[string]any
	if err := json.Unmarshal(resp.Body(), &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0]["ticker_id"] != "BTC_USDT" {
		t.Fatalf("tickers %v, want only the spot pair BTC_USDT", items)
	}
	if items[0]["bid"] != items[0]["ask"] {
		t.Errorf("bid %v and ask %v differ; both are the mid", items[0]["bid"], items[0]["ask"])
	}
	golden.Check(t, "tickers", resp.Body())
}

func TestOrderbookDepthDefaultsToCeiling(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	wantStatus(t, resp, 200)
	bids, asks, _ := bookLevels(t, resp.Body())
	if len(bids) != snapshot.MaxDepth || len(asks) != snapshot.MaxDepth {
		t.Fatalf("%d bids, %d asks, want %d each", len(bids), len(asks), snapshot.MaxDepth)
	}
	b, _ := f.store.Book([]byte("BTC_USDT"), t0.UnixNano())
	if !bytes.Equal(resp.Body(), b.Body()) {
		t.Fatal("full depth is not the snapshot's body")
	}
}

func TestOrderbookDepthSlicesBestFirst(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		depth string
		want  int
	}{
		{"1", 1}, {"5", 5}, {"99", 99}, {"100", 100}, {"101", 100},
		{"0", 100}, {"000", 100}, {"-0", 100}, {"007", 7},
		{"99999999999999999999999", 100},
		{"000000000000000000000000000000000000000000000000000000000005", 5},
	} {
		t.Run(tc.depth, func(t *testing.T) {
			resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth="+tc.depth)
			wantStatus(t, resp, 200)
			bids, asks, _ := bookLevels(t, resp.Body())
			if len(bids) != tc.want || len(asks) != tc.want {
				t.Fatalf("%d bids, %d asks, want %d each", len(bids), len(asks), tc.want)
			}
			if bids[0][0] != "50000.5" || asks[0][0] != "50001.5" {
				t.Errorf("best levels %v %v, want best price first", bids[0], asks[0])
			}
			for i := range bids {
				if want := strconv.Itoa(50000-i) + ".5"; bids[i][0] != want {
					t.Fatalf("bid %d is %v, want price %s", i, bids[i], want)
				}
				if want := strconv.Itoa(50001+i) + ".5"; asks[i][0] != want {
					t.Fatalf("ask %d is %v, want price %s", i, asks[i], want)
				}
			}
		})
	}
}

func TestOrderbookDepthLargerThanBookServesWholeBook(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.get(t, "/api/public/orderbook?ticker_id=ETH_USDT&depth=4")
	wantStatus(t, resp, 200)
	b, _ := f.store.Book([]byte("ETH_USDT"), t0.UnixNano())
	if !bytes.Equal(resp.Body(), b.Body()) {
		t.Fatalf("body %s, want the whole book", resp.Body())
	}
	golden.Check(t, "orderbook_eth", resp.Body())

	resp = f.get(t, "/api/public/orderbook?ticker_id=ETH_USDT&depth=2")
	wantStatus(t, resp, 200)
	golden.Check(t, "orderbook_eth_depth2", resp.Body())
}

func TestOrderbookTimestampIsVenueClock(t *testing.T) {
	f := newFixture(t, nil)
	_, _, ts := bookLevels(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=1").Body())
	if want := t0.UnixMilli() - 7; ts != want {
		t.Fatalf("timestamp %d, want the venue's %d", ts, want)
	}
}

func TestTradesLimitSlicesNewestFirst(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		limit string
		want  int
	}{
		{"", 100}, {"1", 1}, {"5", 5}, {"100", 100}, {"101", 100}, {"0", 100},
		{"99999999999999999999999", 100}, {"0005", 5},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			uri := "/api/public/trades?ticker_id=BTC_USDT"
			if tc.limit != "" {
				uri += "&limit=" + tc.limit
			}
			resp := f.get(t, uri)
			wantStatus(t, resp, 200)
			items := tradeItems(t, resp.Body())
			if len(items) != tc.want {
				t.Fatalf("%d trades, want %d", len(items), tc.want)
			}
			if items[0].TradeTimestamp != t0.UnixMilli()-1000 {
				t.Errorf("first trade at %d, want the newest", items[0].TradeTimestamp)
			}
			for i := 1; i < len(items); i++ {
				if items[i].TradeTimestamp >= items[i-1].TradeTimestamp {
					t.Fatalf("trades not newest first at %d", i)
				}
			}
		})
	}
}

func TestTradesTypeFiltersByAggressorSide(t *testing.T) {
	f := newFixture(t, nil)
	for _, side := range []string{"buy", "sell"} {
		t.Run(side, func(t *testing.T) {
			for _, limit := range []string{"", "&limit=3", "&limit=100"} {
				items := tradeItems(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&type="+side+limit).Body())
				if len(items) == 0 {
					t.Fatal("no trades")
				}
				for _, it := range items {
					if it.Type != side {
						t.Fatalf("type=%s returned a %s trade", side, it.Type)
					}
				}
				if limit == "&limit=3" && len(items) != 3 {
					t.Fatalf("%d trades, want 3", len(items))
				}
			}
		})
	}
	both := tradeItems(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT").Body())
	seen := map[string]bool{}
	for _, it := range both {
		seen[it.Type] = true
	}
	if !seen["buy"] || !seen["sell"] {
		t.Fatalf("no type: want both sides, saw %v", seen)
	}
	resp := f.get(t, "/api/public/trades?ticker_id=ETH_USDT&type=sell")
	golden.Check(t, "trades_eth_sell", resp.Body())
	golden.Check(t, "trades_eth", f.get(t, "/api/public/trades?ticker_id=ETH_USDT").Body())
	golden.Check(t, "trades_eth_limit1", f.get(t, "/api/public/trades?ticker_id=ETH_USDT&limit=1").Body())
}

func TestHistoricalTradesSameAsTrades(t *testing.T) {
	f := newFixture(t, nil)
	for _, q := range []string{
		"?ticker_id=BTC_USDT", "?ticker_id=BTC_USDT&type=sell&limit=7", "?ticker_id=BTC_USDT&limit=x",
		"?ticker_id=NOPE_USDT", "?ticker_id=bad", "",
	} {
		a := f.get(t, "/api/public/trades"+q)
		b := f.get(t, "/api/public/historical_trades"+q)
		if a.StatusCode() != b.StatusCode() || !bytes.Equal(a.Body(), b.Body()) {
			t.Errorf("%s: trades %d %s, historical_trades %d %s", q, a.StatusCode(), a.Body(), b.StatusCode(), b.Body())
		}
	}
	if f.feed.loads.Load() != 0 {
		t.Errorf("%d loads, want none: both routes share one cache", f.feed.loads.Load())
	}
}

func TestTrailingSlashIsTheSameRoute(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{
		"/api/public/pairs", "/api/public/tickers", "/api/public/orderbook?ticker_id=BTC_USDT&depth=3",
		"/api/public/trades?ticker_id=BTC_USDT&limit=2", "/api/public/historical_trades?ticker_id=ETH_USDT",
	} {
		slashed := strings.Replace(uri, "?", "/?", 1)
		if !strings.Contains(uri, "?") {
			slashed = uri + "/"
		}
		a, b := f.get(t, uri), f.get(t, slashed)
		if b.StatusCode() != 200 || !bytes.Equal(a.Body(), b.Body()) {
			t.Errorf("%s: %d %s, want the same as %s", slashed, b.StatusCode(), b.Body(), uri)
		}
	}
}

func TestUnknownPathIsNotFound(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{
		"/", "/api", "/api/public", "/api/public/", "/api/public/fees", "/api/public/fees/",
		"/api/public/Pairs", "/api/public/pairs//x", "/api/public/pairs/x", "/api/public/pairsx",
		"/api/public/orderbook.json", "/api/private/pairs", "/pairs", "/API/PUBLIC/PAIRS",
	} {
		wantError(t, f.get(t, uri), errNotFound)
	}
	golden.Check(t, "error_not_found", f.get(t, "/api/public/fees").Body())
}

func TestFeesIsNotServed(t *testing.T) {
	f := newFixture(t, nil)
	wantError(t, f.get(t, "/api/public/fees"), errNotFound)
	wantError(t, f.get(t, "/api/public/fees?ticker_id=BTC_USDT"), errNotFound)
}

func TestOptionsIsCORSPreflight(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do(t, request{method: "OPTIONS", uri: "/api/public/orderbook?ticker_id=BTC_USDT",
		headers: []string{"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-requested-with, x-custom"}})
	wantStatus(t, resp, 204)
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET",
		"Access-Control-Allow-Headers": "x-requested-with, x-custom",
		"Access-Control-Max-Age":       "86400",
	} {
		if got := header(resp, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	resp = f.do(t, request{method: "OPTIONS", uri: "/api/public/pairs"})
	wantStatus(t, resp, 204)
	if got := header(resp, "Access-Control-Allow-Headers"); got != "" {
		t.Errorf("Access-Control-Allow-Headers = %q without a request for any", got)
	}
}

func TestOtherMethodsAreNotAllowed(t *testing.T) {
	f := newFixture(t, nil)
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "TRACE", "CONNECT", "BREW"} {
		resp := f.do(t, request{method: m, uri: "/api/public/pairs"})
		wantError(t, resp, errMethod)
		if got := header(resp, "Allow"); got != "GET, OPTIONS" {
			t.Errorf("%s: Allow = %q", m, got)
		}
	}
	golden.Check(t, "error_method_not_allowed", f.do(t, request{method: "POST", uri: "/api/public/trades"}).Body())
}

func TestTickerIDMissingOrEmptyIs400(t *testing.T) {
	f := newFixture(t, nil)
	for _, route := range []string{"orderbook", "trades", "historical_trades"} {
		wantError(t, f.get(t, "/api/public/"+route), errTickerMissing)
		wantError(t, f.get(t, "/api/public/"+route+"?depth=5&limit=5"), errTickerMissing)
		wantError(t, f.get(t, "/api/public/"+route+"?ticker_id="), errTickerEmpty)
		wantError(t, f.get(t, "/api/public/"+route+"?ticker_id"), errTickerEmpty)
	}
	golden.Check(t, "error_ticker_missing", f.get(t, "/api/public/orderbook").Body())
	golden.Check(t, "error_ticker_empty", f.get(t, "/api/public/orderbook?ticker_id=").Body())
}

func TestTickerIDFormIsExact(t *testing.T) {
	f := newFixture(t, nil)
	for _, id := range []string{
		"btc_usdt", "BTC_usdt", "BTCUSDT", "B_USDT", "BTC_U", "ABCDEFGHIJKLMNOP_USDT", "BTC_ABCDEFGHIJKLMNOP",
		"BTC-USDT", "BTC__USDT", "BTC_USDT_X", "_BTCUSDT", "BTCUSDT_", "BTC%20_USDT", "BTC_USDT%20", "%20BTC_USDT",
		"BTC%00_USDT", "BTC%C3%A9_USDT", "BTC.USDT", "%E2%80%8BBTC_USDT", "B%C3%84_USDT",
	} {
		t.Run(id, func(t *testing.T) {
			wantError(t, f.get(t, "/api/public/orderbook?ticker_id="+id), errTickerForm)
			wantError(t, f.get(t, "/api/public/trades?ticker_id="+id), errTickerForm)
		})
	}
	golden.Check(t, "error_ticker_form", f.get(t, "/api/public/orderbook?ticker_id=btc_usdt").Body())
	// The longest sides that fit are well-formed: unlisted, so 404, not 400.
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=ABCDEFGHIJKLMNO_ABCDEFGHIJKLMNO"), errUnknownTicker)
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=AB_CD"), errUnknownTicker)
}

func TestTickerIDFormIsCheckedBeforePairsGate(t *testing.T) {
	f := newFixture(t, nil)
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=nope_usdt"), errTickerForm)
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=NOPE_USDT"), errUnknownTicker)
	// and before the catalog: a malformed id is 400 even with no pairs loaded
	empty := New(Config{Store: snapshot.NewStore()})
	wantError(t, serveOne(empty, request{uri: "/api/public/trades?ticker_id=x"}), errTickerForm)
	wantError(t, serveOne(empty, request{uri: "/api/public/trades?ticker_id=NOPE_USDT"}), errNoCatalog)
}

func TestRepeatedParameterIs400(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		uri  string
		want *apiError
	}{
		{"/api/public/orderbook?ticker_id=BTC_USDT&ticker_id=ETH_USDT", errTickerRepeated},
		{"/api/public/orderbook?ticker_id=BTC_USDT&ticker_id=BTC_USDT", errTickerRepeated},
		{"/api/public/trades?ticker_id=BTC_USDT&ticker%5Fid=ETH_USDT", errTickerRepeated},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=5&depth=5", errDepthRepeated},
		{"/api/public/orderbook?depth=1&ticker_id=BTC_USDT&depth=", errDepthRepeated},
		{"/api/public/trades?ticker_id=BTC_USDT&limit=1&limit=2", errLimitRepeated},
		{"/api/public/trades?ticker_id=BTC_USDT&type=buy&type=sell", errTypeRepeated},
		{"/api/public/historical_trades?ticker_id=BTC_USDT&type=buy&type=buy", errTypeRepeated},
	} {
		wantError(t, f.get(t, tc.uri), tc.want)
	}
	golden.Check(t, "error_ticker_repeated", f.get(t, "/api/public/orderbook?ticker_id=A_B&ticker_id=C_D").Body())
}

func TestUnknownParametersAreIgnored(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{
		"/api/public/orderbook?ticker_id=BTC_USDT&depth=3&_=1767323045&page=2&page=3",
		"/api/public/trades?cb=x&ticker_id=BTC_USDT&limit=3&Ticker_ID=nope&LIMIT=-1",
		"/api/public/pairs?page=9&page=10",
		"/api/public/tickers?ticker_id=&x",
	} {
		wantStatus(t, f.get(t, uri), 200)
	}
}

func TestCountSyntaxIsSignAndDigitsOnly(t *testing.T) {
	f := newFixture(t, nil)
	// Values as they arrive after percent-decoding; a literal '+' in a query
	// decodes to a space, so both spellings of "+5" are refused.
	for _, v := range []string{
		"%2B5", "+5", "5.0", "1e2", "%205", "5%20", "0x10", "", "-", "--5", "5-", "1_000",
		"%EF%BC%95", "abc", "5abc", "0.5", "NaN", "Infinity", "%00", "-%205", "1,000",
	} {
		t.Run(v, func(t *testing.T) {
			wantError(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth="+v), errDepthSyntax)
			wantError(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit="+v), errLimitSyntax)
		})
	}
	wantError(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth"), errDepthSyntax)
	golden.Check(t, "error_depth_syntax", f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=1e2").Body())
	golden.Check(t, "error_limit_syntax", f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit=5.0").Body())
}

func TestCountZeroMeansCeiling(t *testing.T) {
	f := newFixture(t, nil)
	bids, asks, _ := bookLevels(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=0").Body())
	if len(bids) != 100 || len(asks) != 100 {
		t.Fatalf("depth=0: %d/%d levels, want 100", len(bids), len(asks))
	}
	if n := len(tradeItems(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit=0").Body())); n != 100 {
		t.Fatalf("limit=0: %d trades, want 100", n)
	}
}

func TestCountNegativeIs400(t *testing.T) {
	f := newFixture(t, nil)
	for _, v := range []string{"-1", "-100", "-0001", "-99999999999999999999999"} {
		wantError(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth="+v), errDepthNegative)
		wantError(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit="+v), errLimitNegative)
	}
	golden.Check(t, "error_depth_negative", f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth=-1").Body())
	golden.Check(t, "error_limit_negative", f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit=-1").Body())
}

func TestCountAboveCeilingIsClamped(t *testing.T) {
	f := newFixture(t, nil)
	for _, v := range []string{"101", "1000", "9223372036854775807", "9223372036854775808", "99999999999999999999999", strings.Repeat("9", 5000)} {
		resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth="+v)
		wantStatus(t, resp, 200)
		if bids, _, _ := bookLevels(t, resp.Body()); len(bids) != 100 {
			t.Errorf("depth=%.30s: %d levels, want 100", v, len(bids))
		}
		resp = f.get(t, "/api/public/trades?ticker_id=BTC_USDT&limit="+v)
		wantStatus(t, resp, 200)
		if n := len(tradeItems(t, resp.Body())); n != 100 {
			t.Errorf("limit=%.30s: %d trades, want 100", v, n)
		}
	}
}

func TestTypeIsExactlyBuyOrSell(t *testing.T) {
	f := newFixture(t, nil)
	for _, v := range []string{"BUY", "Buy", "SELL", "", "buys", "sell%20", "%20buy", "all", "both", "b", "buy%00", "1"} {
		wantError(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&type="+v), errType)
	}
	wantError(t, f.get(t, "/api/public/trades?ticker_id=BTC_USDT&type"), errType)
	golden.Check(t, "error_type", f.get(t, "/api/public/trades?ticker_id=BTC_USDT&type=BUY").Body())
}

func TestParamsOnRoutesThatDoNotTakeThemAreIgnored(t *testing.T) {
	f := newFixture(t, nil)
	for _, uri := range []string{
		"/api/public/orderbook?ticker_id=BTC_USDT&type=BUY&limit=x&limit=y",
		"/api/public/trades?ticker_id=BTC_USDT&depth=-1&depth=1e2",
		"/api/public/pairs?ticker_id=bad&depth=-1&type=x&limit=x",
		"/api/public/tickers?ticker_id=bad&ticker_id=worse&type=x",
	} {
		wantStatus(t, f.get(t, uri), 200)
	}
}

func TestQueryIsPercentDecoded(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.get(t, "/api/public/orderbook?ticker%5Fid=BTC%5FUSDT&depth=%35")
	wantStatus(t, resp, 200)
	if bids, _, _ := bookLevels(t, resp.Body()); len(bids) != 5 {
		t.Fatalf("%d levels, want 5", len(bids))
	}
	wantStatus(t, f.get(t, "/api/public/trades?ticker_id=ETH_USDT&type=%73ell"), 200)
}

func TestValidationOrderFirstFailingRuleAnswers(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		uri  string
		want *apiError
	}{
		{"/api/public/orderbook?depth=x", errTickerMissing},
		{"/api/public/orderbook?ticker_id=bad&depth=x", errTickerForm},
		{"/api/public/orderbook?ticker_id=NOPE_USDT&depth=x", errDepthSyntax},
		{"/api/public/trades?ticker_id=NOPE_USDT&type=x&limit=x", errType},
		{"/api/public/trades?ticker_id=NOPE_USDT&limit=x", errLimitSyntax},
		{"/api/public/trades?ticker_id=NOPE_USDT&limit=-1", errLimitNegative},
		{"/api/public/trades?ticker_id=NOPE_USDT&limit=1", errUnknownTicker},
	} {
		wantError(t, f.get(t, tc.uri), tc.want)
	}
}

func TestPairsGateUnlistedTickerIs404(t *testing.T) {
	f := newFixture(t, nil)
	for _, route := range []string{"orderbook", "trades", "historical_trades"} {
		// PEPE_USDT is a configured spot pair the venue only has as 1000PEPEUSDT.
		for _, id := range []string{"PEPE_USDT", "NOPE_USDT", "LUNA_USDT"} {
			wantError(t, f.get(t, "/api/public/"+route+"?ticker_id="+id), errUnknownTicker)
		}
	}
	if n := f.feed.wants.Load() + f.feed.loads.Load(); n != 0 {
		t.Errorf("unlisted pairs reached the feed %d times", n)
	}
	golden.Check(t, "error_unknown_ticker", f.get(t, "/api/public/orderbook?ticker_id=PEPE_USDT").Body())
}

func TestListedPairIsAnswerableImmediately(t *testing.T) {
	f := newFixture(t, nil)
	f.feed.load = f.publish
	var pairs []struct {
		TickerID string `json:"ticker_id"`
	}
	if err := json.Unmarshal(f.get(t, "/api/public/pairs").Body(), &pairs); err != nil {
		t.Fatal(err)
	}
	if len(pairs) == 0 {
		t.Fatal("no pairs")
	}
	for _, p := range pairs {
		for _, route := range []string{"orderbook", "trades", "historical_trades"} {
			wantStatus(t, f.get(t, "/api/public/"+route+"?ticker_id="+p.TickerID), 200)
		}
	}
}

// The 404 body lists the API's routes: every path of docs/openapi.yaml, and
// only names that are routes. It once left out contracts and contract_specs.
func TestNotFoundListsEveryRoute(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`(?m)^  /api/public/([a-z_]+):$`).FindAllStringSubmatch(string(spec), -1)
	if len(paths) == 0 {
		t.Fatal("no /api/public/ path in docs/openapi.yaml")
	}
	var body struct{ Message string }
	if err := json.Unmarshal(errNotFound.body, &body); err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(body.Message, "the routes are /api/public/")
	if !ok {
		t.Fatalf("the 404 message %q lists no routes", body.Message)
	}
	named := strings.FieldsFunc(strings.ReplaceAll(list, " and ", ","), func(r rune) bool { return r == ',' || r == ' ' })
	for _, p := range paths {
		if !slices.Contains(named, p[1]) {
			t.Errorf("the 404 message leaves out %s: %q", p[1], body.Message)
		}
	}
	for _, name := range named {
		if routeOf([]byte("/api/public/"+name)) == routeNone {
			t.Errorf("the 404 message names %q, which is no route", name)
		}
	}
}
