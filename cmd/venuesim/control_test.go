package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

func TestCountedFaultHealsAfterItsHits(t *testing.T) {
	_, c, url := newTestVenue(t, 0)
	postControl(t, url+"/_control/fault?status=429&retry_after=3s&count=2")
	var se *venue.StatusError
	for i := range 2 {
		if _, err := c.Book(t.Context(), "BTCUSDT", 100); !errors.As(err, &se) || se.Status != 429 {
			t.Fatalf("call %d: %v, want 429", i+1, err)
		}
	}
	if _, err := c.Book(t.Context(), "BTCUSDT", 100); err != nil {
		t.Fatalf("third call, after two hits: %v", err)
	}
}

func TestFlappingFaultAlternates(t *testing.T) {
	vs, c, _ := newTestVenue(t, 0)
	vs.setFault(fault{Status: 503, Flap: time.Hour}, time.Time{})
	var se *venue.StatusError
	if _, err := c.Quotes(t.Context()); !errors.As(err, &se) || se.Status != 503 {
		t.Fatalf("in the on phase: %v, want 503", err)
	}
	// Move the start of the flapping one period back: the off phase.
	vs.mu.Lock()
	vs.since = vs.since.Add(-time.Hour)
	vs.mu.Unlock()
	if _, err := c.Quotes(t.Context()); err != nil {
		t.Fatalf("in the off phase: %v", err)
	}
	vs.mu.Lock()
	vs.since = vs.since.Add(-time.Hour)
	vs.mu.Unlock()
	if _, err := c.Quotes(t.Context()); !errors.As(err, &se) || se.Status != 503 {
		t.Fatalf("on again: %v, want 503", err)
	}
}

func TestDelistedMarketDisappearsAndReturns(t *testing.T) {
	_, c, url := newTestVenue(t, 0)
	has := func() (catalog, stats, quotes bool) {
		cat, err := c.Catalog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cat.Markets {
			catalog = catalog || m.Symbol == "ETHUSDT"
		}
		st, err := c.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			stats = stats || s.Symbol == "ETHUSDT"
		}
		qs, err := c.Quotes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			quotes = quotes || q.Symbol == "ETHUSDT"
		}
		return
	}
	postControl(t, url+"/_control/market?symbol=ETHUSDT&listed=false")
	if a, b, c := has(); a || b || c {
		t.Fatalf("delisted ETHUSDT still in exchangeInfo %v, 24hr %v, bookTicker %v", a, b, c)
	}
	var se *venue.StatusError
	if _, err := c.Book(t.Context(), "ETHUSDT", 100); !errors.As(err, &se) || se.Status != 400 {
		t.Fatalf("book of a delisted market: %v, want 400", err)
	}
	if _, err := c.Trades(t.Context(), "ETHUSDT", 100); !errors.As(err, &se) || se.Status != 400 {
		t.Fatalf("trades of a delisted market: %v, want 400", err)
	}
	resp, err := http.Get(url + "/fapi/v1/depth?symbol=ETHUSDT&limit=5")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "-1121") {
		t.Fatalf("depth of a delisted market: %d %s, want Binance's 400 -1121", resp.StatusCode, body)
	}
	if _, err := c.Book(t.Context(), "BTCUSDT", 100); err != nil {
		t.Fatalf("another market while ETHUSDT is delisted: %v", err)
	}

	postControl(t, url+"/_control/market?symbol=ETHUSDT&listed=true")
	if a, b, c := has(); !a || !b || !c {
		t.Fatalf("listed again, ETHUSDT in exchangeInfo %v, 24hr %v, bookTicker %v", a, b, c)
	}
	if _, err := c.Book(t.Context(), "ETHUSDT", 100); err != nil {
		t.Fatalf("book after listing again: %v", err)
	}
}

func TestCallLogReportsEachCall(t *testing.T) {
	vs, c, url := newTestVenue(t, 0)
	start := time.Now()
	if _, err := c.Book(t.Context(), "BTCUSDT", 100); err != nil {
		t.Fatal(err)
	}
	vs.setFault(fault{Status: 503, Count: 1}, time.Time{})
	_, _ = c.Trades(t.Context(), "BTCUSDT", 100)
	resp, err := http.Get(url + "/_control/calls?since_us=" + strconv.FormatInt(start.UnixMicro(), 10))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Calls []call }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Calls) != 2 || got.Calls[0].Path != "/fapi/v1/depth" || got.Calls[0].Fault ||
		got.Calls[1].Path != "/fapi/v1/aggTrades" || !got.Calls[1].Fault || got.Calls[0].At < start.UnixMicro() {
		t.Fatalf("calls = %+v, want a healthy depth then a faulted trades call", got.Calls)
	}
	if got.Calls[0].Weight != 5 || got.Calls[1].Weight != 20 {
		t.Fatalf("weights %d, %d; want 5 (depth at limit 100) and 20 (aggTrades)", got.Calls[0].Weight, got.Calls[1].Weight)
	}
	if calls := vs.callsSince(time.Now().Add(time.Hour)); len(calls) != 0 {
		t.Fatalf("%d calls in the future", len(calls))
	}
}

func TestCallLogKeepsTheLatestCalls(t *testing.T) {
	vs := newVenueServer(nil, 0)
	vs.mu.Lock()
	for i := range callLogSize + 10 {
		vs.log(call{At: int64(i), Path: "p"})
	}
	vs.mu.Unlock()
	calls := vs.callsSince(time.UnixMicro(0))
	if len(calls) != callLogSize || calls[0].At != 10 || calls[len(calls)-1].At != callLogSize+9 {
		t.Fatalf("%d calls from %d to %d, want the last %d in order", len(calls), calls[0].At, calls[len(calls)-1].At, callLogSize)
	}
}

func TestControlMarketNeedsSymbolAndListed(t *testing.T) {
	_, _, url := newTestVenue(t, 0)
	for _, q := range []string{"", "?symbol=BTCUSDT", "?listed=false", "?symbol=BTCUSDT&listed=maybe"} {
		wantPostStatus(t, url+"/_control/market"+q, http.StatusBadRequest)
	}
}

// wantPostStatus posts a control request and checks its status.
func wantPostStatus(t *testing.T, url string, status int) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Errorf("POST %s: %d, want %d", url, resp.StatusCode, status)
	}
}

func postControl(t *testing.T, url string) {
	t.Helper()
	sendControl(t, http.MethodPost, url)
}

// sendControl sends a control request and fails the test unless it is
// answered 204.
func sendControl(t *testing.T, method, url string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s %s: %d", method, url, resp.StatusCode)
	}
}

// POST /_control/fast makes a market fast: its top takes that many levels
// a second of the side named (bids by default), which the true book shows
// at the update ids that follow; a request without a symbol, a positive
// count, a duration or a known side is refused.
func TestControlFastMarketTakesTheLevelsOfASide(t *testing.T) {
	vs, _, url := newTestVenue(t, 0)
	calm := sim.New(sim.Config{Seed: 1}) // the same venue, without the fast market
	k := sim.Heartbeat(time.Now()) + 30  // 3 s on
	at := func(v *sim.Venue) venue.Book {
		id, err := v.UpdateID("BTCUSDT", k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := v.BookAt("BTCUSDT", id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	postControl(t, url+"/_control/fast?symbol=BTCUSDT&levels=100&for=1m")
	fast, before := at(vs.venue), at(calm)
	// The levels of the calm book above the fast one's best bid: that price
	// need not hold a level in the calm book (the best tick always holds
	// one, any other only now and then), so it is compared, not looked up.
	best, err := strconv.ParseFloat(fast.Bids[0].Price, 64)
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, l := range before.Bids {
		if p, err := strconv.ParseFloat(l.Price, 64); err == nil && p > best {
			taken++
		}
	}
	if taken < 250 || taken > 350 {
		t.Errorf("3 s into a fast market of 100 levels a second, the best bid is %d levels below the calm market's, want about 300", taken)
	}
	for _, q := range []string{"", "?symbol=BTCUSDT&for=1s", "?symbol=BTCUSDT&levels=0&for=1s", "?symbol=BTCUSDT&levels=5",
		"?levels=5&for=1s", "?symbol=BTCUSDT&levels=5&for=1s&side=both"} {
		wantPostStatus(t, url+"/_control/fast"+q, http.StatusBadRequest)
	}
	wantPostStatus(t, url+"/_control/fast?symbol=NOPEUSDT&levels=5&for=1s", http.StatusNotFound)
}
