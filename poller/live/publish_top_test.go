package live

import (
	"strconv"
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// A book is built again for publication only when its published levels,
// the best snapshot.MaxDepth a side, changed: an event below them leaves
// the publication as it was, confirmed (the same bytes and version, read
// later), until the venue time it carries would lag the book's by
// confirmSlack; an event among them is published.
func TestEventsBelowThePublishedLevelsAreConfirmed(t *testing.T) {
	const levels = snapshot.MaxDepth + 50
	s, _, _ := deepBookSource(t, levels)
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

// A book's publication takes its top under the pair's lock and reads the
// levels' bytes once the lock is released, while the stream goes on
// applying events under it: what is published is the book as it was taken,
// whatever the events between the take and the build wrote (every event
// here gives the best 20 levels a side one new size, its number, so that
// the texts the sides write them into are compacted again and again).
func TestBookPublishedAsTakenWhileEventsArrive(t *testing.T) {
	const shaken = 20
	s, bids, asks := deepBookSource(t, snapshot.MaxDepth+50)
	lp := s.pair(testSymbol)
	id := int64(102)
	event := func() {
		size := strconv.FormatInt(id, 10) + ".5"
		u := venue.DepthUpdate{Symbol: testSymbol, First: id + 1, Last: id + 1, Prev: id, Time: 1000 + id}
		for i := range shaken {
			u.Bids = append(u.Bids, venue.Level{Price: bids[i].Price, Size: size})
			u.Asks = append(u.Asks, venue.Level{Price: asks[i].Price, Size: size})
		}
		s.Depth(u)
		id++
	}
	for round := range 50 {
		event()
		taken, seq := strconv.FormatInt(id-1, 10)+".5", id
		lp.mu.Lock()
		build := lp.bookState.publish(s, lp, time.Now())
		lp.mu.Unlock()
		if build == nil {
			t.Fatalf("round %d: nothing to publish", round)
		}
		for range 1 + round*7 {
			event()
		}
		build()
		book := s.servedBook(t)
		gotBids, gotAsks := book.Sides()
		if book.Seq() != seq || len(gotBids) != snapshot.MaxDepth || len(gotAsks) != snapshot.MaxDepth {
			t.Fatalf("round %d: published at update %d (want %d) %d bids, %d asks", round, book.Seq(), seq, len(gotBids), len(gotAsks))
		}
		for i := range snapshot.MaxDepth {
			want := taken
			if i >= shaken {
				want = "1"
			}
			if gotBids[i] != (venue.Level{Price: bids[i].Price, Size: want}) || gotAsks[i] != (venue.Level{Price: asks[i].Price, Size: want}) {
				t.Fatalf("round %d, level %d: published bid %+v, ask %+v; want size %s", round, i+1, gotBids[i], gotAsks[i], want)
			}
		}
	}
}

// deepBookSource is a source whose pair's book is in sequence from a
// snapshot of levels a side (bids from 10000 down, asks from 10001 up, each
// of size 1), returned.
func deepBookSource(t *testing.T, levels int) (s *Source, bids, asks []venue.Level) {
	t.Helper()
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 500, RefreshDepth: 1000}, perpetual(testSymbol, "BTC"))
	for i := range levels {
		bids = append(bids, venue.Level{Price: strconv.Itoa(10000 - i), Size: "1"})
		asks = append(asks, venue.Level{Price: strconv.Itoa(10001 + i), Size: "1"})
	}
	rest.book = venue.Book{LastUpdateID: 101, Time: 1000, Bids: bids, Asks: asks}
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 100, Last: 102, Prev: 99, Time: 1000})
	s.Sync()
	rest.wait()
	return s, bids, asks
}
