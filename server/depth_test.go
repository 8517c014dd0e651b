package server

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/snapshot"
)

// shortBook is a fresh book of BTC_USDT whose bids hold 78 levels and may
// go on at the venue (an open side: a local book whose top moved towards
// its snapshot's edge), and whose asks hold 120.
func shortBook(readAt time.Time, bids int) *snapshot.Book {
	var b, a []snapshot.Level
	for i := range bids {
		b = append(b, snapshot.Level{Price: strconv.Itoa(50000-i) + ".5", Size: "0." + strconv.Itoa(i+1)})
	}
	for i := range 120 {
		a = append(a, snapshot.Level{Price: strconv.Itoa(50001+i) + ".5", Size: strconv.Itoa(i + 1)})
	}
	return snapshot.NewLocalBook("BTC_USDT", readAt.UnixMilli(), 1, b, a, snapshot.Open{Bids: true}, readAt)
}

// A book that vouches for fewer levels than a request asks, on a side the
// venue may hold more of, is not served short: the request has it read
// for its depth (one load, given that depth) and answers 200 with every
// level it asked for once the load published them.
func TestShortBookIsReadForTheDepthAsked(t *testing.T) {
	for _, c := range []struct {
		uri   string
		depth int
	}{
		{"/api/public/orderbook?ticker_id=BTC_USDT", snapshot.MaxDepth},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=0", snapshot.MaxDepth},
		{"/api/public/orderbook?ticker_id=BTC_USDT&depth=79", 79},
	} {
		f := newFixture(t, nil)
		f.store.PutBook(shortBook(t0, 78))
		f.feed.load = func(_ context.Context, id string, s snapshot.Stream) error {
			if id != "BTC_USDT" || s != snapshot.StreamBook {
				t.Errorf("load of %s %s", id, s)
			}
			f.store.PutBook(btcBook(t, f.clock.Now()))
			return nil
		}
		resp := f.get(t, c.uri)
		wantStatus(t, resp, 200)
		bids, asks, _ := bookLevels(t, resp.Body())
		if len(bids) != c.depth || len(asks) != c.depth {
			t.Errorf("%s: %d bids and %d asks, want %d a side", c.uri, len(bids), len(asks), c.depth)
		}
		if n, d := f.feed.loads.Load(), f.feed.lastDepth.Load(); n != 1 || d != int64(c.depth) {
			t.Errorf("%s: %d loads, the last for depth %d; want 1 for %d", c.uri, n, d, c.depth)
		}
	}
}

// A short book whose read fails, or publishes a book no deeper, or does
// not come within the cold timeout, answers 502 (the book's), never the
// levels it holds.
func TestShortBookNotReadDeeperIs502(t *testing.T) {
	for name, load := range map[string]func(f *fixture) func(context.Context, string, snapshot.Stream) error{
		"failed": func(*fixture) func(context.Context, string, snapshot.Stream) error { return nil },
		"as short": func(f *fixture) func(context.Context, string, snapshot.Stream) error {
			return func(context.Context, string, snapshot.Stream) error {
				f.store.PutBook(shortBook(f.clock.Now(), 78))
				return nil
			}
		},
		"timed out": func(*fixture) func(context.Context, string, snapshot.Stream) error {
			return func(ctx context.Context, _ string, _ snapshot.Stream) error {
				<-ctx.Done()
				return ctx.Err()
			}
		},
	} {
		f := newFixture(t, func(c *Config) { c.ColdTimeout = 10 * time.Millisecond })
		f.store.PutBook(shortBook(t0, 78))
		f.feed.load = load(f)
		wantError(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT"), errNoBook)
		if n := f.feed.loads.Load(); n != 1 {
			t.Errorf("%s: %d loads, want 1", name, n)
		}
	}
}

// A request for no more levels than a short book vouches for is answered
// from it at once, with no read; so is any depth of a book whose short
// side is the venue's whole side (closed), and any depth of a book whose
// open side holds MaxDepth levels.
func TestBookThatVouchesForTheDepthIsServedWithoutARead(t *testing.T) {
	f := newFixture(t, nil)
	var loads atomic.Int64
	f.feed.load = func(context.Context, string, snapshot.Stream) error { loads.Add(1); return nil }
	f.store.PutBook(shortBook(t0, 78))
	for _, depth := range []int{1, 20, 78} {
		resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT&depth="+strconv.Itoa(depth))
		wantStatus(t, resp, 200)
		if bids, asks, _ := bookLevels(t, resp.Body()); len(bids) != depth || len(asks) != depth {
			t.Errorf("depth %d: %d bids, %d asks", depth, len(bids), len(asks))
		}
	}
	closed := shortBook(t0, 78)
	bids, asks := closed.Sides()
	f.store.PutBook(snapshot.NewLocalBook("BTC_USDT", t0.UnixMilli(), 1, bids, asks, snapshot.Open{}, t0))
	resp := f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	wantStatus(t, resp, 200)
	if b, a, _ := bookLevels(t, resp.Body()); len(b) != 78 || len(a) != 100 {
		t.Errorf("a closed side of 78 levels: %d bids, %d asks; want 78 and 100", len(b), len(a))
	}
	f.store.PutBook(shortBook(t0, 100))
	wantStatus(t, f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT"), 200)
	if n := loads.Load(); n != 0 {
		t.Errorf("%d loads, want none", n)
	}
}
