package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/wire"
	"marketfeed/poller/sim"
	"marketfeed/snapshot"
)

// The contract's promises through the venue faults that venuesim's happy
// path does not show: every listed pair answerable at once over REST alone,
// and never a 200 older than max-stale from a subscription gone silent.

// Rule 1 over REST alone: on a venue whose stream paths answer 404 (streams
// on, refused), the first request for every listed pair's book and then
// its trades answers 200. The budget's classes split the minute by the
// demand the last rounds saw: once the books were polled and no trades
// read yet, the trades class had no cap at all, and the first request for
// a pair's trades answered 502 within a millisecond, the minute all but
// unspent.
func TestRESTOnlyVenueAnswersEveryListedPairAtOnce(t *testing.T) {
	venue := apptest.StartVenueSim(t, "-streams=false", "-weight-limit", "2400")
	api, _, _ := startLoggedApp(t, append(streamArgs(venue.URL, 10*time.Second), "-quotes", "USDC")...)
	ids := apptest.ListedIDs(t, api)
	if len(ids) < 5 {
		t.Fatalf("%d pairs listed, want the spot pairs and the USDC perpetuals", len(ids))
	}
	start := time.Now()
	for _, id := range ids {
		if resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+id); resp.StatusCode != http.StatusOK {
			t.Fatalf("first /orderbook of %s: %d %s", id, resp.StatusCode, body)
		}
	}
	// A round of polls of the books now hot has run.
	if !apptest.WaitFor(5*time.Second, func() bool {
		n := 0
		for _, c := range venue.Calls(start) {
			if strings.HasPrefix(c.Path, "/fapi/v1/depth") {
				n++
			}
		}
		return n > len(ids)
	}) {
		t.Fatal("the hot books were not polled")
	}
	for _, id := range ids {
		resp, body := apptest.Get(t, api+"/api/public/trades?ticker_id="+id)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("first /trades of %s after /pairs: %d %s", id, resp.StatusCode, body)
			continue
		}
		var trades []wire.Trade
		apptest.Decode(t, body, &trades)
	}
}

// A subscription gone silent is never served as current: every /orderbook
// 200 for a symbol whose every stream the venue silences (its connections
// carrying every other symbol, its book moving on) carries a venue time
// within max-stale and is the venue's true book at that time; the pair
// answers from REST meanwhile, and the stream keeps it again once it
// delivers. A probe finds the silence (the venue's update id past the
// book's), and the trade window's check finds the trade stream silent too.
// Before probes, the book answered 200 on every read, ever older, for as
// long as the silence lasted.
func TestSilentSymbolIsNeverServedStale(t *testing.T) {
	const maxStale = 3 * time.Second
	venue := apptest.StartVenueSim(t)
	api, a, _ := startLoggedApp(t, streamArgs(venue.URL, maxStale)...)
	allStreamed(t, a, time.Minute)
	truth := &truthChecker{t: t, api: api, world: sim.New(sim.Config{Seed: 1})}
	const id, symbol = "BTC_USDT", "BTCUSDT"
	if resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+id); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the silence: %d %s", resp.StatusCode, body)
	}
	const silence = 4 * maxStale
	venue.Control(http.MethodPost, "/_control/silence?symbol="+symbol+"&for="+silence.String())
	start := time.Now()
	var answered, failed int
	var oldest time.Duration
	for time.Since(start) < silence {
		resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+id)
		switch resp.StatusCode {
		case http.StatusOK:
			var b wire.Book
			apptest.Decode(t, body, &b)
			// The venue's clock and ours are this machine's; a 200 is
			// judged when it is answered, so a little slack for the
			// answer's own way back.
			age := time.Since(time.UnixMilli(b.Timestamp))
			oldest = max(oldest, age)
			if age > maxStale+250*time.Millisecond {
				t.Errorf("%s into the silence: a 200 whose book is %s old, past max-stale %s", time.Since(start).Round(time.Millisecond), age.Round(time.Millisecond), maxStale)
			}
			truth.compare(id, symbol, b)
			answered++
		case http.StatusBadGateway:
			failed++
		default:
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond) // an aggregator's pace, not a wait for anything
	}
	t.Logf("during the silence: %d answered 200 (oldest book %s; %d with a side under 100 levels), %d 502",
		answered, oldest.Round(time.Millisecond), truth.short, failed)
	if answered == 0 {
		t.Error("the silent pair never answered from REST")
	}
	m := opsMetrics(t, a)
	if m[`marketfeed_book_probes_total{outcome="behind"}`] < 1 || m[`marketfeed_book_resyncs_total{cause="silent"}`] < 1 {
		t.Errorf("no probe found the silence: %v behind, %v silent resyncs",
			m[`marketfeed_book_probes_total{outcome="behind"}`], m[`marketfeed_book_resyncs_total{cause="silent"}`])
	}
	if m[`marketfeed_stream_silences_total{stream="trades",action="rest"}`] < 1 {
		t.Error("the trade window's check did not find the trade stream silent")
	}
	if !apptest.WaitFor(30*time.Second, func() bool { return a.poller().Status().Sources.Pairs[snapshot.StreamBook]["rest"] == 0 }) {
		t.Fatalf("the stream does not keep the book again after the silence: %+v", a.poller().Status().Sources)
	}
}
