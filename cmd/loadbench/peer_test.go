package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Answers in marketfeed's exact encoding.
const (
	testPairs     = `[{"ticker_id":"BTC_USDT","base":"BTC","target":"USDT","kind":"spot","price_source":"sim-perp"}]`
	testTickers   = `[{"ticker_id":"BTC_USDT","base_currency":"BTC","target_currency":"USDT","last_price":"64660.30","base_volume":"10.5","target_volume":"678933.15","bid":"64660.30","ask":"64660.40","high":"65000.00","low":"64000.00","timestamp":1795240282097}]`
	testContracts = `[{"ticker_id":"BTC_USDT","base_currency":"BTC","target_currency":"USDT","last_price":"64660.30","base_volume":"10.5","target_volume":"678933.15","bid":"64660.30","ask":"64660.40","high":"65000.00","low":"64000.00","product_type":"Perpetual",` +
		`"open_interest":"81234.567","open_interest_usd":"5252547837.2601","open_interest_timestamp":1795240282000,"index_price":"64651.1234","index_name":"BTC-USDT","index_currency":"USDT","start_timestamp":1569398400000,"end_timestamp":null,` +
		`"funding_rate":"0.01","next_funding_rate":"0.01","next_funding_rate_timestamp":1795248000000,"contract_type":"Vanilla","contract_price":"64660.3","contract_price_currency":"USDT","timestamp":1795240282097},` +
		`{"ticker_id":"ETH_USDT","base_currency":"ETH","target_currency":"USDT","last_price":"3215.12","base_volume":"1","target_volume":"3215.12","bid":"3215.11","ask":"3215.13","high":"3300","low":"3100","product_type":"Perpetual",` +
		`"open_interest":null,"open_interest_usd":null,"open_interest_timestamp":null,"index_price":"3214.9","index_name":"ETH-USDT","index_currency":"USDT","start_timestamp":null,"end_timestamp":null,` +
		`"funding_rate":"-0.0025","next_funding_rate":"-0.0025","next_funding_rate_timestamp":1795248000000,"contract_type":"Vanilla","contract_price":"3215.12","contract_price_currency":"USDT","timestamp":1795240282097}]`
	testSpecs = `[{"ticker_id":"BTC_USDT","contract_type":"Vanilla","contract_price":"64660.3","contract_price_currency":"USDT"},` +
		`{"ticker_id":"ETH_USDT","contract_type":"Vanilla","contract_price":"3215.12","contract_price_currency":"USDT"}]`
	testBook   = `{"ticker_id":"BTC_USDT","timestamp":1795240283774,"bids":[["64660.30","1.434"],["64660.20","1.663"],["64660.10","0.100"]],"asks":[["64660.40","1.207"],["64660.70","1.266"]]}`
	testTrades = `[{"trade_id":"a1","price":"1.5","base_volume":"2","target_volume":"3.0","trade_timestamp":3,"type":"buy"},` +
		`{"trade_id":"a2","price":"1.4","base_volume":"1","target_volume":"1.4","trade_timestamp":2,"type":"sell"},` +
		`{"trade_id":"a3","price":"1.3","base_volume":"1","target_volume":"1.3","trade_timestamp":1,"type":"buy"}]`
)

func fakeMarketfeed(t *testing.T, book string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	serve := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("ticker_id") && r.URL.Query().Get("ticker_id") != "BTC_USDT" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(body))
		})
	}
	serve("/api/public/pairs", testPairs)
	serve("/api/public/tickers", testTickers)
	serve("/api/public/contracts", testContracts)
	serve("/api/public/contract_specs", testSpecs)
	serve("/api/public/orderbook", book)
	serve("/api/public/trades", testTrades)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestPeer(t *testing.T) {
	up := fakeMarketfeed(t, testBook)
	data, err := loadPeerData(context.Background(), up.Client(), up.URL, []string{"BTC_USDT"})
	if err != nil {
		t.Fatal(err)
	}
	h := data.handler()
	for _, c := range []struct {
		uri, want string
		status    int
	}{
		{"/api/public/pairs", testPairs, 200},
		{"/api/public/tickers", testTickers, 200},
		{"/api/public/contracts", testContracts, 200},
		{"/api/public/contract_specs", testSpecs, 200},
		{"/api/public/orderbook?ticker_id=BTC_USDT", testBook, 200},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=0", testBook, 200},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=1", `{"ticker_id":"BTC_USDT","timestamp":1795240283774,"bids":[["64660.30","1.434"]],"asks":[["64660.40","1.207"]]}`, 200},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=2", `{"ticker_id":"BTC_USDT","timestamp":1795240283774,"bids":[["64660.30","1.434"],["64660.20","1.663"]],"asks":[["64660.40","1.207"],["64660.70","1.266"]]}`, 200},
		{"/api/public/trades?ticker_id=BTC_USDT", testTrades, 200},
		{"/api/public/trades?ticker_id=BTC_USDT&limit=1&type=buy", `[{"trade_id":"a1","price":"1.5","base_volume":"2","target_volume":"3.0","trade_timestamp":3,"type":"buy"}]`, 200},
		{"/api/public/historical_trades?ticker_id=BTC_USDT&type=sell", `[{"trade_id":"a2","price":"1.4","base_volume":"1","target_volume":"1.4","trade_timestamp":2,"type":"sell"}]`, 200},
		{"/api/public/trades?ticker_id=BTC_USDT&type=buy&limit=10", `[{"trade_id":"a1","price":"1.5","base_volume":"2","target_volume":"3.0","trade_timestamp":3,"type":"buy"},{"trade_id":"a3","price":"1.3","base_volume":"1","target_volume":"1.3","trade_timestamp":1,"type":"buy"}]`, 200},
		{"/api/public/orderbook?ticker_id=ETH_USDT", "", 404},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=x", "", 400},
		{"/api/public/trades?ticker_id=BTC_USDT&limit=-1", "", 400},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.uri, nil))
		if rec.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.uri, rec.Code, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		if got := rec.Body.String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.uri, got, c.want)
		}
		for name, want := range map[string]string{
			"Content-Type": "application/json", "Cache-Control": "public, max-age=5", "Access-Control-Allow-Origin": "*",
		} {
			if got := rec.Header().Get(name); got != want {
				t.Errorf("%s: %s %q, want %q", c.uri, name, got, want)
			}
		}
	}
}

// TestPeerRefusesLossyStructs: data the structs cannot carry exactly (here
// a field they lack) would make the peer answer different bytes.
func TestPeerRefusesLossyStructs(t *testing.T) {
	up := fakeMarketfeed(t, `{"ticker_id":"BTC_USDT","timestamp":1,"sequence":7,"bids":[],"asks":[]}`)
	if _, err := loadPeerData(context.Background(), up.Client(), up.URL, []string{"BTC_USDT"}); err == nil {
		t.Error("a book with a field the structs lack was accepted")
	}
	if _, err := loadPeerData(context.Background(), up.Client(), up.URL, []string{"ETH_USDT"}); err == nil {
		t.Error("an unknown pair was accepted")
	}
}

func TestSameShape(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"a":"1","b":[["1","2"]]}`, `{"b":[["3","4"]],"a":"9"}`, true},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":"1"}`, `{"b":"1"}`, false},
		{`[1,2]`, `[1,2,3]`, false},
		{`[1,2]`, `not json`, false},
	} {
		if err := sameShape([]byte(c.a), []byte(c.b)); (err == nil) != c.same {
			t.Errorf("sameShape(%s, %s) = %v, want same %v", c.a, c.b, err, c.same)
		}
	}
}
