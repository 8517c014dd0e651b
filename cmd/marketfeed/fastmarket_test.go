package main

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/wire"
	"marketfeed/poller/sim"
)

// venueBook is venuesim's true book at an update id (/_control/book).
type venueBook struct {
	LastUpdateID int64       `json:"lastUpdateId"`
	E, T         int64       //nolint:revive // the venue's field names
	Bids         [][2]string `json:"bids"`
	Asks         [][2]string `json:"asks"`
}

// trueBook reads venuesim's book of symbol at update id u, depth levels a
// side: the venue's own answer, which follows its fast markets.
func trueBook(t *testing.T, v *apptest.VenueSim, symbol string, u int64, depth int) venueBook {
	t.Helper()
	resp, body := apptest.Get(t, v.URL+"/_control/book?symbol="+symbol+"&update_id="+strconv.FormatInt(u, 10)+"&depth="+strconv.Itoa(depth))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("true book of %s at %d: %d %s", symbol, u, resp.StatusCode, body)
	}
	var b venueBook
	apptest.Decode(t, body, &b)
	return b
}

// A liquidation cascade: venuesim's BTCUSDT top takes 200 bid levels a
// second for 8 s, far past the books' snapshots, and every venue read
// takes 800 ms, while a
// client reads the book at the default depth and at 20 levels. Every 200
// is the venue's book at its timestamp, level for level, each side as deep
// as asked (a short side counts as unequal), the book was read deeper as
// its sides ran dry, and the answers were 200 or 502 only.
func TestFastMarketServesEveryBookWholeOrNot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about half a minute")
	}
	const maxStale = 3 * time.Second
	venue := apptest.StartVenueSim(t)
	api, a, _ := startLoggedApp(t, streamArgs(venue.URL, maxStale)...)
	allStreamed(t, a, 30*time.Second)
	world := sim.New(sim.Config{Seed: 1}) // venuesim's update ids, which no fast market moves

	const id, symbol = "BTC_USDT", "BTCUSDT"
	read := func(depth int) (status int, levels [2]int) {
		uri := api + "/api/public/orderbook?ticker_id=" + id
		if depth != 100 {
			uri += "&depth=" + strconv.Itoa(depth)
		}
		resp, body := apptest.Get(t, uri)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, levels
		}
		var got wire.Book
		apptest.Decode(t, body, &got)
		u, err := world.UpdateID(symbol, sim.Heartbeat(time.UnixMilli(got.Timestamp)))
		if err != nil {
			t.Fatal(err)
		}
		want := trueBook(t, venue, symbol, u, depth)
		for _, side := range []struct {
			name      string
			got, want [][2]string
		}{{"bids", got.Bids, want.Bids}, {"asks", got.Asks, want.Asks}} {
			if len(side.got) != len(side.want) {
				t.Errorf("depth %d at %d: %d %s served, the venue's %d", depth, got.Timestamp, len(side.got), side.name, len(side.want))
				continue
			}
			for i := range side.got {
				if side.got[i] != side.want[i] {
					t.Errorf("depth %d at %d: %s level %d is %v, the venue's %v", depth, got.Timestamp, side.name, i+1, side.got[i], side.want[i])
					break
				}
			}
		}
		return resp.StatusCode, [2]int{len(got.Bids), len(got.Asks)}
	}

	before := opsMetrics(t, a)
	// Every venue read takes 800 ms meanwhile, as under a cascade's load:
	// the snapshots laid under the book land well behind its top.
	venue.Fault("delay=800ms")
	venue.Control(http.MethodPost, "/_control/fast?symbol="+symbol+"&levels=200&for=8s")
	statuses := map[int]int{}
	end := time.Now().Add(10 * time.Second) // the move, and the books catching up after it
	for i := 0; time.Now().Before(end); i++ {
		depth := 100
		if i%2 == 1 {
			depth = 20
		}
		status, _ := read(depth)
		statuses[status]++
		time.Sleep(20 * time.Millisecond) // a client's pace, not a wait for anything
	}
	venue.Heal()
	after := opsMetrics(t, a)
	delta := func(name string) float64 { return after[name] - before[name] }
	requested := delta(`marketfeed_book_depth_reads_total{reason="request"}`)
	dry := delta(`marketfeed_book_depth_reads_total{reason="dry"}`)
	refreshed := delta(`marketfeed_book_depth_reads_total{reason="short"}`)
	loads := delta(`marketfeed_cold_loads_total{stream="book",outcome="ok"}`) + delta(`marketfeed_cold_loads_total{stream="book",outcome="failed"}`)
	t.Logf("during the fast market: answers %v; requests that waited for their book %v; depth reads for requests %v, of sides run dry %v, refreshes %v",
		statuses, loads, requested, dry, refreshed)
	for status := range statuses {
		if status != http.StatusOK && status != http.StatusBadGateway {
			t.Errorf("%d answers %d", statuses[status], status)
		}
	}
	if statuses[http.StatusOK] < 20 {
		t.Errorf("%d answers 200 in 10 s of a fast market, want most of them", statuses[http.StatusOK])
	}
	if requested+dry+refreshed == 0 {
		t.Error("the book was never read deeper, though the top ran through 1,600 levels")
	}
	// Whether a request found the book short depends on how the refreshes
	// raced the move: the answers above are the judge (a short book served
	// fails them), and server's depth tests pin down that a short book is
	// read for the request that needs it.
	if loads == 0 {
		t.Log("no request found the book short: the refreshes kept it deep enough")
	}
	// After the move, the book serves the full depth again.
	if !apptest.WaitFor(10*time.Second, func() bool { status, n := read(100); return status == http.StatusOK && n == [2]int{100, 100} }) {
		t.Error("the book did not serve 100 levels a side again after the move")
	}
}
