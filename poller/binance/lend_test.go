package binance

import (
	"strconv"
	"testing"

	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
)

// A connection decodes every frame into the same buffer and the same
// level slices, so the events it hands to the book are lent: a book that
// keeps events (waiting for its snapshot, or holding one that came early)
// must keep what they said, not what the buffer holds after the next frame.
func TestLentEventsKeptByTheBookSurviveTheNextFrame(t *testing.T) {
	frameOf := func(first, last, prev int64, bid, ask string) string {
		return `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1,"T":1,"s":"BTCUSDT",` +
			`"U":` + strconv.FormatInt(first, 10) + `,"u":` + strconv.FormatInt(last, 10) + `,"pu":` + strconv.FormatInt(prev, 10) +
			`,"b":[["` + bid + `","1.5"]],"a":[["` + ask + `","2.5"]]}}`
	}
	var (
		buf  []byte
		lend lender
		book = orderbook.New()
	)
	feed := func(body string) {
		t.Helper()
		buf = append(buf[:0], body...)
		f, err := decodeLent(buf, nil, &lend)
		if err != nil {
			t.Fatal(err)
		}
		if err := book.Apply(f.depth); err != nil {
			t.Fatal(err)
		}
	}
	// Buffered before the snapshot, then overwritten by the next frames,
	// the second of which arrives before the one it follows.
	feed(frameOf(11, 12, 10, "100.1", "100.9"))
	feed(frameOf(13, 13, 12, "100.2", "100.8"))
	snap := venue.Book{LastUpdateID: 10,
		Bids: []venue.Level{{Price: "99", Size: "1"}}, Asks: []venue.Level{{Price: "101", Size: "1"}}}
	if err := book.Sync(snap, 0); err != nil {
		t.Fatal(err)
	}
	feed(frameOf(16, 16, 15, "100.4", "100.6")) // ahead: 14..15 is missing
	feed(frameOf(14, 15, 13, "100.3", "100.7"))
	bids, asks := book.Top(10)
	want := func(side []venue.Level, prices ...string) {
		t.Helper()
		if len(side) != len(prices) {
			t.Fatalf("side %v, want prices %v", side, prices)
		}
		for i, p := range prices {
			if side[i].Price != p {
				t.Fatalf("side %v, want prices %v", side, prices)
			}
		}
	}
	want(bids, "100.4", "100.3", "100.2", "100.1", "99")
	want(asks, "100.6", "100.7", "100.8", "100.9", "101")
	if book.LastUpdateID() != 16 {
		t.Fatalf("book at %d, want 16", book.LastUpdateID())
	}
}
