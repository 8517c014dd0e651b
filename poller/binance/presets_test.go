package binance

import (
	"context"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"marketfeed/poller/venue"
)

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		p    Preset
		name string
		url  string
		w    [6]int // catalog, stats, quotes, book, trades, newest trade id
	}{
		{Binance, "binance", "https://fapi.binance.com", [6]int{1, 40, 5, 5, 20, 5}},
		{Aster, "aster", "https://fapi.asterdex.com", [6]int{1, 40, 2, 5, 20, 1}},
	} {
		p, ok := presetByName(tc.name)
		if !ok || !reflect.DeepEqual(p, tc.p) {
			t.Errorf("presetByName(%q) = %+v, %v", tc.name, p, ok)
		}
		if p.URL != tc.url {
			t.Errorf("%s URL = %q, want %q", tc.name, p.URL, tc.url)
		}
		c := New(p, Options{})
		if c.Name() != tc.name {
			t.Errorf("Name() = %q, want %q", c.Name(), tc.name)
		}
		for i, k := range []venue.Call{venue.CallCatalog, venue.CallStats, venue.CallQuotes, venue.CallBook, venue.CallTrades, venue.CallTradeID} {
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
		if _, ok := presetByName(name); ok {
			t.Errorf("presetByName(%q) found a preset", name)
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
	{
		// The newest single trade's id, from Binance's own recent-trades
		// body: five trades, the newest 229020340.
		name: "trade id", path: "/fapi/v1/trades", query: "symbol=BTCUSDT&limit=1",
		fixture:     "recorded/binance-trades-gocryptotrader-BTCUSDT-limit5-20201016.json",
		do:          func(ctx context.Context, c *Client) (any, error) { return c.NewestTradeID(ctx, "BTCUSDT") },
		decode:      func(b []byte) (any, error) { return decodeNewestTradeID(b) },
		missingBody: `[{"price":"1","qty":"1","quoteQty":"1","time":1767225600450,"isBuyerMaker":true}]`,
		extraBody:   `[{"id":1,"price":"1","qty":"1","quoteQty":"1","time":1767225600450,"isBuyerMaker":true,"isBestMatch":true,"newField":{}}]`,
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
