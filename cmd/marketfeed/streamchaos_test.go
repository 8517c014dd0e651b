package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/promtext"
	"marketfeed/internal/venuetruth"
	"marketfeed/internal/wire"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// The stream fault matrix: marketfeed in process on the Binance adapter,
// its market streams and REST calls both on venuesim, under the chaos
// traffic and its checks (no 500, no venue byte, no 502 while a young
// enough snapshot existed). Each fault is made, then the venue heals, and
// the test measures how long until the hot pair's book is fresh again.
// Throughout, every book the API serves is checked against the venue's
// true book at the heartbeat it was built from: the simulated world is
// deterministic, so the test computes the truth with the same seed.

// streamArgs are marketfeed's flags for a stream run on venuesim.
func streamArgs(venueURL string, maxStale time.Duration) []string {
	ws := "ws" + strings.TrimPrefix(venueURL, "http")
	return append(chaosArgs(venueURL, maxStale), "-venue-streams", "on", "-venue-ws-url", ws)
}

// truthChecker compares served books with the simulated venue's own.
type truthChecker struct {
	t     *testing.T
	api   string
	world *sim.Venue
	// checked counts the books compared, short those with a side holding
	// fewer levels than the venue's top 100 (each also an error).
	checked, short int
}

// check reads one pair's full book and compares it, level for level, with
// the venue's true top 100 at the book's heartbeat.
func (c *truthChecker) check(id, symbol string) {
	resp, body := apptest.Get(c.t, c.api+"/api/public/orderbook?ticker_id="+id)
	if resp.StatusCode != http.StatusOK {
		return // the traffic's checks judge non-200 answers
	}
	var got wire.Book
	apptest.Decode(c.t, body, &got)
	c.compare(id, symbol, got)
}

// compare compares a served book with the venue's true top 100 at the
// book's heartbeat: each side must hold min(100, the venue's levels)
// levels, each the venue's. A side that is an exact prefix but shorter is
// as wrong as a level that differs: an aggregator would publish a thinner
// market than the venue's.
func (c *truthChecker) compare(id, symbol string, got wire.Book) {
	k := sim.Heartbeat(time.UnixMilli(got.Timestamp))
	u, err := c.world.UpdateID(symbol, k)
	if err != nil {
		c.t.Fatal(err)
	}
	want, err := c.world.BookAt(symbol, u, snapshot.MaxDepth)
	if err != nil {
		c.t.Fatal(err)
	}
	side := func(levels []venue.Level) []venuetruth.Level {
		out := make([]venuetruth.Level, len(levels))
		for i, l := range levels {
			out[i] = venuetruth.Level{l.Price, l.Size}
		}
		return out
	}
	v := venuetruth.Compare(got.Bids, got.Asks, side(want.Bids), side(want.Asks), snapshot.MaxDepth)
	if v != venuetruth.Equal {
		c.t.Errorf("%s at %d: the served book is not the venue's book at that heartbeat (%s: %d bids and %d asks served, the venue's %d and %d)",
			id, got.Timestamp, v, len(got.Bids), len(got.Asks), len(want.Bids), len(want.Asks))
	}
	if v == venuetruth.Short {
		c.short++
	}
	c.checked++
}

// allStreamed waits until every listed pair's book and trades are kept by
// the streams, and returns how long that took.
func allStreamed(t *testing.T, a *app, limit time.Duration) time.Duration {
	start := time.Now()
	if !apptest.WaitFor(limit, func() bool {
		src := a.poller().Status().Sources
		return src != nil && src.Pairs[snapshot.StreamBook]["syncing"] == 0 && src.Pairs[snapshot.StreamBook]["rest"] == 0 && src.Pairs[snapshot.StreamBook]["stream"] > 0 &&
			src.Pairs[snapshot.StreamBook]["budget"] == 0 && src.Pairs[snapshot.StreamTrades]["budget"] == 0 &&
			src.Pairs[snapshot.StreamTrades]["syncing"] == 0 && src.Pairs[snapshot.StreamTrades]["rest"] == 0
	}) {
		t.Fatalf("pairs not all stream-fed after %s: %+v", limit, a.poller().Status().Sources)
	}
	return time.Since(start)
}

// streamFault makes a fault at once and measures how long until BTC_USDT's
// book is fresh again, from a venue time after the fault.
func (c *chaos) streamFault(name, method, path string, limit time.Duration) time.Duration {
	c.traffic.setPhase(name)
	at := time.Now()
	c.venue.Control(method, path)
	fresh := c.untilFresh("BTC_USDT", at.Add(100*time.Millisecond), limit)
	if fresh.IsZero() {
		c.t.Fatalf("%s: BTC_USDT not fresh within %s", name, limit)
	}
	d := fresh.Sub(at)
	c.figure("%-28s book fresh again %s after the fault", name, d.Round(time.Millisecond))
	return d
}

// streamRun is a stream fault run: marketfeed in process on venuesim,
// every pair stream-fed, under the chaos traffic until stop.
type streamRun struct {
	*chaos
	truth *truthChecker
	stop  context.CancelFunc
	wait  func()
}

// startStreamRun starts venuesim and marketfeed with the stream flags and
// args, waits until every pair is stream-fed, and starts the traffic, for
// at most limit.
func startStreamRun(t *testing.T, limit time.Duration, args ...string) *streamRun {
	const maxStale = 3 * time.Second
	venue := apptest.StartVenueSim(t)
	api, a, logs := startLoggedApp(t, append(streamArgs(venue.URL, maxStale), args...)...)
	c := &chaos{t: t, venue: venue, api: api, app: a, logs: logs, traffic: newTraffic(t, api, a.store, maxStale)}
	r := &streamRun{chaos: c, truth: &truthChecker{t: t, api: api, world: sim.New(sim.Config{Seed: 1})}}
	ctx, stop := context.WithTimeout(context.Background(), limit)
	t.Cleanup(stop)
	c.traffic.setPhase("cold start")
	synced := allStreamed(t, a, 30*time.Second)
	c.figure("%-28s every pair stream-fed after %s", "cold start", synced.Round(time.Millisecond))
	r.stop, r.wait = stop, c.traffic.run(ctx, 4, 5*time.Millisecond, 1_000_000, chaosTargets)
	r.checkAll()
	return r
}

// checkAll compares the served books of four pairs with the venue's.
func (r *streamRun) checkAll() {
	for _, id := range []string{"BTC_USDT", "ETH_USDT", "SOL_USDT", "DOGE_USDT"} {
		r.truth.check(id, strings.ReplaceAll(id, "_", ""))
	}
}

func TestStreamFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about half a minute")
	}
	r := startStreamRun(t, 3*time.Minute)
	c, a, api, truth, checkAll := r.chaos, r.app, r.api, r.truth, r.checkAll

	// Every connection cut: every book is suspended; one whose first event
	// after the reconnect continues its chain goes on, the others resync.
	before := opsMetrics(t, a)
	c.streamFault("connections dropped", http.MethodPost, "/_control/drop", 10*time.Second)
	checkAll()
	after := opsMetrics(t, a)
	suspended := after["marketfeed_books_suspended_total"] - before["marketfeed_books_suspended_total"]
	lost := after[`marketfeed_book_resyncs_total{cause="lost"}`] - before[`marketfeed_book_resyncs_total{cause="lost"}`]
	c.figure("%-28s %v books suspended, %v of them resynced for updates missed", "connections dropped", suspended, lost)
	if suspended == 0 || lost > suspended {
		t.Errorf("%v books suspended and %v resynced for a lost stream after every connection was cut", suspended, lost)
	}
	// A lost depth event: that book resyncs from a new snapshot.
	c.streamFault("sequence gap", http.MethodPost, "/_control/gap?symbol=BTCUSDT", 5*time.Second)
	checkAll()
	// A depth event with a price in exponent notation: refused, never
	// applied or published; the stream is subscribed again and the book
	// resyncs.
	c.streamFault("unusable depth event", http.MethodPost, "/_control/garble?symbol=BTCUSDT", 5*time.Second)
	checkAll()
	// A 429 met by the resync's snapshot read: the pause is obeyed, then
	// the book resyncs.
	c.traffic.setPhase("429 during a resync")
	c.venue.Fault("status=429&retry_after=2s&count=1")
	c.streamFault("gap with a 429 on the resync", http.MethodPost, "/_control/gap?symbol=BTCUSDT", 15*time.Second)
	c.venue.Heal()
	checkAll()
	// A depth stream acknowledged but silent while its market trades: it is
	// resubscribed, then the pair is served by REST until it delivers.
	c.traffic.setPhase("silent depth stream")
	c.venue.Control(http.MethodPost, "/_control/silence?stream=ethusdt@depth@100ms&for=20s")
	if !apptest.WaitFor(20*time.Second, func() bool { return a.poller().Status().Sources.Pairs[snapshot.StreamBook]["rest"] >= 1 }) {
		t.Fatalf("a silent depth stream was never given up for REST: %+v", a.poller().Status().Sources)
	}
	c.figure("%-28s pair served by REST after the watchdog gave up on it", "silent depth stream")
	back := allStreamed(t, a, 40*time.Second)
	c.figure("%-28s stream-fed again %s after that", "silent depth stream", back.Round(time.Millisecond))
	checkAll()

	c.finish(r.stop, r.wait)
	// /tickers is kept by the ticker stream and the spot pairs' local
	// books, the bulk quotes standing in while one resyncs; a 502 is
	// allowed only as the traffic's checks allow it (no snapshot young
	// enough), which a 2 s venue pause against a 3 s max-stale can leave
	// on a loaded machine. Counted, and /tickers answers after the run.
	for key, n := range c.traffic.unavailable {
		if strings.HasSuffix(key, " /tickers") || strings.HasSuffix(key, " /pairs") {
			c.figure("%-28s %d × 502 for %s", "tickers", n, key)
		}
	}
	resp, err := http.Get(api + "/api/public/tickers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/tickers after the run: %s", resp.Status)
	}
	if truth.checked < 10 {
		t.Fatalf("only %d books compared with the venue's", truth.checked)
	}
	t.Logf("%d served books equal the venue's true book at their heartbeat", truth.checked)
}

// With two lines, dropping either line's connections costs nothing: no book
// is suspended or resynced, and the hot pair's book stays fresh throughout,
// its every event brought by the other line. Only a drop of both lines
// suspends books.
func TestStreamTwoLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about twenty seconds")
	}
	r := startStreamRun(t, 2*time.Minute, "-venue-ws-lines", "2")
	c, a, checkAll := r.chaos, r.app, r.checkAll

	var stale time.Duration
	for _, line := range []string{"B", "A"} {
		name := "line " + line + " dropped"
		c.traffic.setPhase(name)
		before := opsMetrics(t, a)
		at := time.Now()
		c.venue.Control(http.MethodPost, "/_control/drop?line="+line)
		// Fresh means a book built from an event after the drop; with the
		// other line carrying every event that takes a heartbeat, not a
		// reconnection and a resync.
		for range 10 {
			from := time.Now()
			fresh := c.untilFresh("BTC_USDT", from.Add(100*time.Millisecond), 5*time.Second)
			if fresh.IsZero() {
				t.Fatalf("%s: BTC_USDT not fresh within 5 s", name)
			}
			stale = max(stale, fresh.Sub(from))
			time.Sleep(100 * time.Millisecond) // sampling the book's age across the reconnection
		}
		if !apptest.WaitFor(10*time.Second, func() bool {
			return opsMetrics(t, a)["marketfeed_stream_connections"] == before["marketfeed_stream_connections"]
		}) {
			t.Fatalf("%s: the line did not come back", name)
		}
		after := opsMetrics(t, a)
		delta := func(k string) float64 { return after[k] - before[k] }
		c.figure("%-28s line back within %s; books suspended %v, resynced %v; BTC_USDT fresh within %s at every sample",
			name, time.Since(at).Round(time.Millisecond), delta("marketfeed_books_suspended_total"),
			delta(`marketfeed_book_resyncs_total{cause="lost"}`), stale.Round(time.Millisecond))
		if n := delta("marketfeed_books_suspended_total"); n != 0 {
			t.Errorf("%s: %v books suspended, want none", name, n)
		}
		for _, cause := range []string{"lost", "gap"} {
			if n := delta(`marketfeed_book_resyncs_total{cause="` + cause + `"}`); n != 0 {
				t.Errorf("%s: %v books resynced for %s, want none", name, n, cause)
			}
		}
		if delta("marketfeed_stream_duplicates_total") == 0 {
			t.Errorf("%s: no copy dropped: the two lines do not both carry the streams", name)
		}
		checkAll()
	}

	c.traffic.setPhase("both lines dropped")
	before := opsMetrics(t, a)
	c.streamFault("both lines dropped", http.MethodPost, "/_control/drop", 10*time.Second)
	if n := opsMetrics(t, a)["marketfeed_books_suspended_total"] - before["marketfeed_books_suspended_total"]; n == 0 {
		t.Error("no book suspended when every connection of both lines was cut")
	}
	checkAll()
	c.finish(r.stop, r.wait)
}

// opsMetrics scrapes the app's /metrics.
func opsMetrics(t *testing.T, a *app) map[string]float64 {
	t.Helper()
	_, body := apptest.Get(t, "http://"+a.ops.Addr().String()+"/metrics")
	return promtext.Must(t, string(body))
}

// TestStreamVenueLimits runs against a venue stricter than documented: it
// closes a connection that carries more than 30 streams, and every
// connection after 8 s. The client halves its streams per connection until
// the venue keeps them, and replaces each connection at 3 s, before the
// venue's close, with no stream lost and no book resynced for it; the
// traffic meanwhile gets no 502 and no stale book.
func TestStreamVenueLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about half a minute")
	}
	const maxStale = 3 * time.Second
	venue := apptest.StartVenueSim(t, "-ws-max-streams", "30", "-ws-max-age", "8s")
	api, a, logs := startLoggedApp(t, append(streamArgs(venue.URL, maxStale), "-venue-ws-max-age", "3s")...)
	c := &chaos{t: t, venue: venue, api: api, app: a, logs: logs, traffic: newTraffic(t, api, a.store, maxStale)}
	c.traffic.setPhase("cold start over the venue's limits")
	synced := allStreamed(t, a, 60*time.Second)
	m := opsMetrics(t, a)
	c.figure("%-28s every pair stream-fed after %s, at %v streams a connection", "stricter venue",
		synced.Round(time.Millisecond), m["marketfeed_stream_per_connection"])
	if got := m["marketfeed_stream_per_connection"]; got > 30 {
		t.Fatalf("%v streams a connection on a venue that allows 30", got)
	}
	lostBefore := m[`marketfeed_book_resyncs_total{cause="lost"}`]
	rotatedBefore := m[`marketfeed_stream_reconnects_total{reason="rotated"}`]

	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	c.traffic.setPhase("replacements before the venue's close")
	wait := c.traffic.run(ctx, 4, 5*time.Millisecond, 1_000_000, chaosTargets)
	time.Sleep(12 * time.Second) // four replacement periods under traffic: nothing to wait for
	m = opsMetrics(t, a)
	rotated := m[`marketfeed_stream_reconnects_total{reason="rotated"}`] - rotatedBefore
	lost := m[`marketfeed_book_resyncs_total{cause="lost"}`] - lostBefore
	stats := venueConnections(t, venue)
	c.figure("%-28s %v connections replaced in 12 s, %v books resynced for a lost stream, venue closes by reason %v",
		"rotation", rotated, lost, stats.Closes)
	if rotated < 4 {
		t.Errorf("%v connections replaced in 12 s at a 3 s age, want several", rotated)
	}
	if lost != 0 {
		t.Errorf("%v books resynced for a lost stream during replacements, want 0", lost)
	}
	if stats.Closes["max age"] != 0 {
		t.Errorf("the venue closed %d connections for their age: replacements came too late", stats.Closes["max age"])
	}
	c.finish(stop, wait)
}

// A depth event the adapter cannot use (a price in exponent notation) is
// refused and its stream subscribed again; the book, whose chain that event
// broke, resyncs for bad data, as the metric and the log say, not for a
// lost connection. One line, so that no other connection brings a good
// copy of the event.
func TestAnUnusableStreamEventResyncsForBadData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim")
	}
	venue := apptest.StartVenueSim(t)
	logs := newLogRecorder()
	_, _, a, _ := startAppLogged(t, nil, nil, logs, append(streamArgs(venue.URL, 3*time.Second), "-venue-ws-lines", "1")...)
	allStreamed(t, a, 30*time.Second)
	mark := logs.mark()
	before := opsMetrics(t, a)
	venue.Control(http.MethodPost, "/_control/garble?symbol=BTCUSDT")
	logs.waitFor(t, mark, "order book resyncs pair=BTC_USDT cause=bad_data", 10*time.Second)
	allStreamed(t, a, 30*time.Second)
	after := opsMetrics(t, a)
	for cause, want := range map[string]float64{"bad_data": 1, "lost": 0} {
		series := `marketfeed_book_resyncs_total{cause="` + cause + `"}`
		if got := after[series] - before[series]; got != want {
			t.Errorf("%s rose by %v, want %v", series, got, want)
		}
	}
}
