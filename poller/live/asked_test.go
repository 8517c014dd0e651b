package live

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// deepSnapshot is a venue snapshot at update id 101 of n bids from 10000
// down and n asks from 10001 up.
func deepSnapshot(n int) venue.Book {
	snap := venue.Book{LastUpdateID: 101}
	for i := range n {
		snap.Bids = append(snap.Bids, venue.Level{Price: strconv.Itoa(10000 - i), Size: "1"})
		snap.Asks = append(snap.Asks, venue.Level{Price: strconv.Itoa(10001 + i), Size: "1"})
	}
	return snap
}

// A book in sequence whose top ran towards the edge of its snapshot is
// published with that side open, serving requests for no more levels than
// it vouches for; a request for more has it read for the request (at the
// sync depth, at budget.Serving as a served book that stops answering,
// ahead of the refresh share and of cold loads) and gets a book that
// serves every level it asked for.
//
// A shallow book (see bookState.shallow: synced from 100 levels, or
// started from the last leader's 100) is read for the request at
// budget.Requested, as a cold load is: such books run short all at once,
// and the serving reserve is the depleted books'.
func TestShortBookIsReadForTheRequestThatWaits(t *testing.T) {
	for _, shallow := range []bool{false, true} {
		want := startedRead{budget.PurposeDepleted, budget.Serving}
		if shallow {
			want.prio = budget.Requested
		}
		t.Run(fmt.Sprintf("shallow=%v", shallow), func(t *testing.T) { testShortBookIsReadForTheRequestThatWaits(t, shallow, want) })
	}
}

func testShortBookIsReadForTheRequestThatWaits(t *testing.T, shallow bool, want startedRead) {
	s, rest, _ := newTestSource(t)
	rest.book = deepSnapshot(500)
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its snapshot")
	}
	lp := s.byID(testID)
	lp.mu.Lock()
	lp.shallow = shallow
	lp.mu.Unlock()
	// The top 430 bids are taken: the bids vouch for 70 levels.
	taken := venue.DepthUpdate{Symbol: testSymbol, First: 103, Last: 103, Prev: 102}
	for i := range 430 {
		taken.Bids = append(taken.Bids, venue.Level{Price: strconv.Itoa(10000 - i), Size: "0"})
	}
	s.Depth(taken)
	s.publishPeriod()
	b := s.servedBook(t)
	if b.Open() != (snapshot.Open{Bids: true, Asks: true}) || !b.Serves(70) || b.Serves(71) {
		t.Fatalf("published open %+v, serves 70: %v, 71: %v; want both sides open, 70 levels and no more", b.Open(), b.Serves(70), b.Serves(71))
	}

	// A request for 20 levels is answered from it, with no read.
	if handled, err := s.Load(t.Context(), testID, snapshot.StreamBook, 20); !handled || err != nil {
		t.Fatalf("a request for 20 levels: %v, %v", handled, err)
	}
	if n := len(rest.depths); n != 1 {
		t.Fatalf("%d reads, want only the sync", n)
	}

	// A request for 100 waits for a read of the book at the sync depth.
	// The venue's bids go on past the 500 levels of the sync.
	rest.book = deepSnapshot(930)
	rest.book.LastUpdateID = 103
	rest.book.Bids, rest.book.Asks = rest.book.Bids[430:], rest.book.Asks[:500]
	select {
	case <-s.wake: // the wake-up of the first event, before its sync
	default:
	}
	done := make(chan error)
	go func() {
		_, err := s.Load(t.Context(), testID, snapshot.StreamBook, snapshot.MaxDepth)
		done <- err
	}()
	select {
	case <-s.wake: // the request asked for a round
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request asked for no read")
	}
	rest.mu.Lock()
	rest.starts = nil
	rest.mu.Unlock()
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rest.mu.Lock()
	starts, depths := rest.starts, rest.depths
	rest.mu.Unlock()
	if len(starts) != 1 || starts[0] != want || depths[len(depths)-1] != 500 {
		t.Fatalf("reads %+v of depths %v; want one %+v, of the sync depth", starts, depths, want)
	}
	b = s.servedBook(t)
	if bids, asks := b.Levels(); !b.Serves(snapshot.MaxDepth) || bids != snapshot.MaxDepth || asks != snapshot.MaxDepth {
		t.Fatalf("after the read: %d bids, %d asks, serves 100: %v", bids, asks, b.Serves(snapshot.MaxDepth))
	}
	if got := s.metrics.depthReads[tierAsked].Get(); got != 1 {
		t.Errorf("%d depth reads for requests counted, want 1", got)
	}
}
