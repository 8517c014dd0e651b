package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"marketfeed/internal/wire"
)

// The contract's promises through the venue faults that venuesim's happy
// path does not show: every listed pair answerable at once over REST alone,
// and never a 200 older than max-stale from a subscription gone silent.

// listedIDs returns the ticker ids /pairs lists.
func listedIDs(t *testing.T, api string) []string {
	t.Helper()
	resp, body := get(t, api+"/api/public/pairs")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/pairs: %d", resp.StatusCode)
	}
	var pairs []wire.Pair
	decode(t, body, &pairs)
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = p.TickerID
	}
	return ids
}

// Rule 1 over REST alone: on a venue whose stream paths answer 404 (streams
// on, refused), the first request for every listed pair's book and then
// its trades answers 200. The budget's classes split the minute by the
// demand the last rounds saw: once the books were polled and no trades
// read yet, the trades class had no cap at all, and the first request for
// a pair's trades answered 502 within a millisecond, the minute all but
// unspent.
func TestRESTOnlyVenueAnswersEveryListedPairAtOnce(t *testing.T) {
	venue := startVenueSim(t, "-streams=false", "-weight-limit", "2400")
	api, _, _ := startLoggedApp(t, append(streamArgs(venue.url, 10*time.Second), "-quotes", "USDC")...)
	ids := listedIDs(t, api)
	if len(ids) < 5 {
		t.Fatalf("%d pairs listed, want the spot pairs and the USDC perpetuals", len(ids))
	}
	start := time.Now()
	for _, id := range ids {
		if resp, body := get(t, api+"/api/public/orderbook?ticker_id="+id); resp.StatusCode != http.StatusOK {
			t.Fatalf("first /orderbook of %s: %d %s", id, resp.StatusCode, body)
		}
	}
	// A round of polls of the books now hot has run.
	if !waitFor(5*time.Second, func() bool {
		n := 0
		for _, c := range venue.calls(start) {
			if strings.HasPrefix(c.Path, "/fapi/v1/depth") {
				n++
			}
		}
		return n > len(ids)
	}) {
		t.Fatal("the hot books were not polled")
	}
	for _, id := range ids {
		resp, body := get(t, api+"/api/public/trades?ticker_id="+id)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("first /trades of %s after /pairs: %d %s", id, resp.StatusCode, body)
			continue
		}
		var trades []wire.Trade
		decode(t, body, &trades)
	}
}
