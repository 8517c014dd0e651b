package live

import (
	"strconv"
	"testing"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// A book is built again for publication only when its published levels,
// the best snapshot.MaxDepth a side, changed: an event below them leaves
// the publication as it was, confirmed (the same bytes and version, read
// later), until the venue time it carries would lag the book's by
// confirmSlack; an event among them is published.
func TestEventsBelowThePublishedLevelsAreConfirmed(t *testing.T) {
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 500, RefreshDepth: 1000}, perpetual(testSymbol, "BTC"))
	const levels = snapshot.MaxDepth + 50
	var bids, asks []venue.Level
	for i := range levels {
		bids = append(bids, venue.Level{Price: strconv.Itoa(10000 - i), Size: "1"})
		asks = append(asks, venue.Level{Price: strconv.Itoa(10001 + i), Size: "1"})
	}
	rest.book = venue.Book{LastUpdateID: 101, Time: 1000, Bids: bids, Asks: asks}
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 100, Last: 102, Prev: 99, Time: 1000})
	s.Sync()
	rest.wait()
	first := s.servedBook(t)

	id := int64(102)
	event := func(time int64, bids, asks []venue.Level) {
		s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: id + 1, Last: id + 1, Prev: id, Time: time, Bids: bids, Asks: asks})
		id++
		s.publishPeriod()
	}
	deep := strconv.Itoa(10000 - snapshot.MaxDepth - 10) // the 111th bid
	event(1300, []venue.Level{{Price: deep, Size: "5"}}, []venue.Level{{Price: strconv.Itoa(10001 + levels - 1), Size: "0"}})
	if b := s.servedBook(t); b.Version() != first.Version() || b.ReadAt() <= first.ReadAt() {
		t.Fatalf("after a change below the published levels: version %d read at %d; want version %d confirmed after %d",
			b.Version(), b.ReadAt(), first.Version(), first.ReadAt())
	}
	// A second later by the venue's clock the book is built again, to
	// carry the book's time.
	event(2000, []venue.Level{{Price: deep, Size: "6"}}, nil)
	again := s.servedBook(t)
	if again.Version() == first.Version() || again.Time() != 2000 {
		t.Fatalf("a second after its publication: version %d at %d; want a new one at 2000 (first %d)", again.Version(), again.Time(), first.Version())
	}
	// The 100th ask is published.
	event(2100, nil, []venue.Level{{Price: strconv.Itoa(10001 + snapshot.MaxDepth - 1), Size: "9"}})
	if b := s.servedBook(t); b.Version() == again.Version() || b.Time() != 2100 {
		t.Fatalf("after the 100th ask changed: version %d at %d; want a new one at 2100", b.Version(), b.Time())
	}
}
