package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"marketfeed/apptest"
)

// venueWS is what venuesim's /_control/ws reports of its stream
// connections.
type venueWS struct {
	Closes   map[string]int64 `json:"closes"` // connections closed, by reason
	MaxAgeMs int64            `json:"max_age_ms"`
}

// venueConnections reads v's report of its stream connections.
func venueConnections(t *testing.T, v *apptest.VenueSim) venueWS {
	t.Helper()
	resp, err := http.Get(v.URL + "/_control/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st venueWS
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A venue that closes every connection at an age of its own, shorter than
// -venue-ws-max-age (a proxy in front of it, or a venue with a shorter
// limit), costs nothing once its first closes have taught the client that
// age: each connection is then replaced before it, the replacement
// subscribed before the old one goes, and the two lines' replacements
// never fall together. Scaled down: the venue closes at 3 s, the client's
// own rotation age is the default (hours).
func TestStreamVenueClosesOnItsSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about forty seconds")
	}
	const age = 3 * time.Second
	const limitOf = 0.8 // the max age is four fifths of the venue's (see poller/binance/rotation.go)
	r := startStreamRun(t, 2*time.Minute)
	c, a := r.chaos, r.app

	// Connections older than the age are closed at once, both lines
	// together: what that costs is what cannot be stitched, and it is not
	// what is measured. Then the venue's closes teach the age.
	c.traffic.setPhase("venue closes at 3 s: first closes")
	c.venue.Control(http.MethodPost, "/_control/max-age?age="+age.String()+"&for=2m")
	time.Sleep(3 * age) // three of the venue's periods: nothing to wait for on the old code

	c.traffic.setPhase("venue closes at 3 s")
	before, closes := opsMetrics(t, a), venueConnections(t, c.venue).Closes
	const window = 7 * age
	var stale time.Duration
	for end := time.Now().Add(window); time.Now().Before(end); {
		from := time.Now()
		fresh := c.untilFresh("BTC_USDT", from.Add(100*time.Millisecond), 5*time.Second)
		if fresh.IsZero() {
			t.Fatalf("BTC_USDT not fresh within 5 s while the venue closes connections at %s", age)
		}
		stale = max(stale, fresh.Sub(from))
		time.Sleep(200 * time.Millisecond) // sampling the book's age across the venue's closes
	}
	after, closesAfter := opsMetrics(t, a), venueConnections(t, c.venue).Closes
	delta := func(k string) float64 { return after[k] - before[k] }
	c.figure("%-28s over %s: %v connections replaced, %v closed by the venue (%d for their age); books suspended %v, resynced for lost events %v, for a gap %v; BTC_USDT fresh within %s at every sample; learned closing age %vs",
		"venue closes at 3 s", window, delta(`marketfeed_stream_reconnects_total{reason="rotated"}`),
		delta(`marketfeed_stream_reconnects_total{reason="closed"}`), closesAfter["max age"]-closes["max age"],
		delta("marketfeed_books_suspended_total"), delta(`marketfeed_book_resyncs_total{cause="lost"}`),
		delta(`marketfeed_book_resyncs_total{cause="gap"}`), stale.Round(time.Millisecond),
		after["marketfeed_stream_venue_close_age_seconds"])
	if n := delta("marketfeed_books_suspended_total"); n != 0 {
		t.Errorf("%v books suspended: both lines lost a stream at once", n)
	}
	for _, cause := range []string{"lost", "gap"} {
		if n := delta(`marketfeed_book_resyncs_total{cause="` + cause + `"}`); n != 0 {
			t.Errorf("%v books resynced for %s, want none", n, cause)
		}
	}
	if n := delta(`marketfeed_stream_reconnects_total{reason="rotated"}`); n < float64(window/age) {
		t.Errorf("%v connections replaced in %s, want them replaced before the venue's %s", n, window, age)
	}
	// The closes of the connections older than the age when it was set
	// come at their ages then, which can be longer than the venue's: what
	// the client learns must only have its connections go before it.
	if got := after["marketfeed_stream_venue_close_age_seconds"]; got <= 0 || limitOf*got >= age.Seconds() {
		t.Errorf("learned closing age %vs, want one whose four fifths are under the venue's %s", got, age)
	}
	// /readyz says so too.
	_, body := loadOpsSpec(t).get(t, "http://"+a.ops.Addr().String()+"/readyz")
	var ready readiness
	apptest.Decode(t, body, &ready)
	if st := ready.Streams; st == nil || st.VenueCloseAge != after["marketfeed_stream_venue_close_age_seconds"] || st.MaxAge > limitOf*st.VenueCloseAge {
		t.Errorf("/readyz streams %+v, want the learned closing age and a max age four fifths of it: %s", st, body)
	}
	c.traffic.mu.Lock()
	unavailable := c.traffic.byPhase["venue closes at 3 s"][http.StatusBadGateway]
	c.traffic.mu.Unlock()
	if unavailable != 0 {
		t.Errorf("%d answers 502 while the venue closed connections on its schedule", unavailable)
	}
	r.checkAll()
	c.finish(r.stop, r.wait)
}
