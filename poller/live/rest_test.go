package live

import (
	"slices"
	"testing"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// newDepletedBehindSync is a source of two pairs: BTC's book synced and then
// depleted (buyers took both asks its snapshot vouched for), its refresh
// asked for; ETH's book waiting for its sync, and a request for it waiting
// too.
func newDepletedBehindSync(t *testing.T) (*Source, *fakeREST) {
	t.Helper()
	const eth = "ETHUSDT"
	// Snapshots of two levels a side: the book vouches for those alone.
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 2, RefreshDepth: 4}, perpetual(testSymbol, "BTC"), perpetual(eth, "ETH"))
	event := func(symbol string, first, last int64, asks ...venue.Level) {
		s.Depth(venue.DepthUpdate{Symbol: symbol, First: first, Last: last, Prev: first - 1,
			Bids: []venue.Level{{Price: "99", Size: "3"}}, Asks: asks})
	}
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(testSymbol, 100, 102)
	s.Sync()
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the first book is not in sequence after its snapshot")
	}
	// Two levels stand in for a book synced deeper than the published
	// levels: a shallow one that runs dry is read again as a resync.
	s.byID(testID).shallow = false
	event(testSymbol, 103, 103, venue.Level{Price: "101", Size: "0"}, venue.Level{Price: "102", Size: "0"})
	s.askRefreshes()
	s.Live(snapshot.StreamBook, []string{eth})
	event(eth, 100, 102)
	s.byID("ETH_USDT").books.waiting.Store(time.Now().UnixNano())
	// What a round that saw ETH's book waiting leaves (see Sync): the
	// round above may have seen BTC's snapshot land before it looked.
	s.booksBehind.Store(s.booksWaiting(time.Now()))
	if !s.booksBehind.Load() {
		t.Fatal("no book waits for its sync")
	}
	rest.mu.Lock()
	rest.starts = nil
	rest.mu.Unlock()
	return s, rest
}

// refuseDepleted has the budget refuse depleted books' refreshes, as it
// refuses a read heavier than the weight it has free; none: no longer.
func (f *fakeREST) refuseDepleted(refuse bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = nil
	if refuse {
		f.refuse = func(p budget.Purpose) bool { return p == budget.PurposeDepleted }
	}
}

// A depleted book's refresh goes first, ahead even of a book a request
// waits for, and within a class of the budget reads go in queue order. The
// refresh weighs more than a sync (Binance: 20 at 1000 levels, 10 at 500):
// were the syncs behind it let through when the budget refused it, they
// would take the weight of a cold start's window as it frees, 10 at a time,
// and the book, which has been answering, would age out to 502 for as
// long as the cold start lasts.
func TestARefusedDepletedRefreshIsNotOvertakenBySyncs(t *testing.T) {
	s, rest := newDepletedBehindSync(t)
	rest.refuseDepleted(true)
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if !slices.Equal(rest.refused, []budget.Purpose{budget.PurposeDepleted}) || len(rest.starts) != 0 {
		t.Fatalf("refused %v and started %v, want the depleted refresh refused and the sync behind it, a request's though it is, not started",
			rest.refused, rest.starts)
	}
	if rest.deferred != 2 {
		t.Fatalf("%d reads reported deferred, want 2: the refused refresh and the sync held behind it", rest.deferred)
	}

	rest.refuseDepleted(false)
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	want := []startedRead{{budget.PurposeDepleted, budget.Serving}, {budget.PurposeSnapshot, budget.Requested}}
	if !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v once the weight was there, want the depleted refresh first at budget.Serving, then the sync the request waits for at budget.Requested", rest.starts)
	}
}

// The schedule and a waiting request's wake-up both dispatch. One that ran
// while the other had claimed the depleted book's refresh would leave the
// book out of its queue and start the sync behind it, with the weight the
// refresh waits for: dispatches run one at a time, the second as a round
// more of the first.
func TestADispatchMeanwhileDoesNotOvertakeARefusedRefresh(t *testing.T) {
	s, rest := newDepletedBehindSync(t)
	rest.refuseDepleted(true)
	rest.mu.Lock()
	rest.onStart = func() { s.dispatch(snapshot.StreamBook) } // the other dispatcher, between claim and budget
	rest.mu.Unlock()
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	want := []budget.Purpose{budget.PurposeDepleted, budget.PurposeDepleted}
	if !slices.Equal(rest.refused, want) || len(rest.starts) != 0 {
		t.Fatalf("refused %v and started %v, want the depleted refresh refused in both rounds and nothing started",
			rest.refused, rest.starts)
	}
}

// A book that fell out of sequence while it was being served answers its
// last publication until max-stale, then 502: its resync goes ahead of the
// books nobody can read yet, at budget.Serving.
func TestAServedBookOutOfSequenceIsSyncedFirst(t *testing.T) {
	const eth = "ETHUSDT"
	s, rest, store := newSourceOf(t, Config{SyncDepth: 500, RefreshDepth: 1000}, perpetual(testSymbol, "BTC"), perpetual(eth, "ETH"))
	event := func(symbol string, first, last int64) {
		s.Depth(venue.DepthUpdate{Symbol: symbol, First: first, Last: last, Prev: first - 1,
			Bids: []venue.Level{{Price: "99", Size: "3"}}})
	}
	// ETH is synced and published; then its stream is lost, and comes back
	// past updates the book missed.
	s.Live(snapshot.StreamBook, []string{eth})
	event(eth, 100, 102)
	s.Sync()
	rest.wait()
	if b, _ := store.Book([]byte("ETH_USDT"), time.Now().UnixNano()); b == nil {
		t.Fatal("ETH's book was not published after its sync")
	}
	s.Lost(snapshot.StreamBook, []string{eth})
	s.Live(snapshot.StreamBook, []string{eth})
	event(eth, 110, 112)
	if s.Current("ETH_USDT", snapshot.StreamBook) {
		t.Fatal("ETH's book is still in sequence after missing updates")
	}
	// BTC's stream comes in: its book, never published, waits for its
	// sync; by symbol it would go first.
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(testSymbol, 100, 102)

	rest.withBudget(1)
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if want := []startedRead{{budget.PurposeSnapshot, budget.Serving}}; !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v with the budget for one read, want ETH's resync at budget.Serving (BTC's sync would be at budget.Sync)", rest.starts)
	}
}

// A book that holds no more than the published levels (synced from 100)
// and runs dry is read again from as few, at the priority of a served book
// out of sequence, not from a deep refresh's weight: it deepens after the
// syncs.
func TestAShallowBookRunDryIsReadAgainFromAsFewLevels(t *testing.T) {
	s, rest := newDepletedBehindSync(t)
	lp := s.byID(testID)
	lp.mu.Lock()
	lp.shallow = true
	lp.mu.Unlock()
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	want := []startedRead{{budget.PurposeSnapshot, budget.Serving}, {budget.PurposeSnapshot, budget.Requested}}
	if !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v, want the dry book's read as a served book's resync first, then the sync a request waits for", rest.starts)
	}
	if depth := s.snapshotDepth(tierResync); depth != s.cfg.SyncDepth {
		t.Fatalf("a served book's resync reads %d levels, want the sync's %d", depth, s.cfg.SyncDepth)
	}
}

// A shallow book that runs dry once no book waits for its sync has shown
// that its market runs through the synced levels quickly: it is read at
// the deepening depth, at a served book's priority, and is no longer
// shallow, instead of being read from as few levels again each time.
func TestAShallowBookRunDryWithNoSyncWaitingDeepens(t *testing.T) {
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 2, RefreshDepth: 1000}, perpetual(testSymbol, "BTC"))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event := func(first, last int64, asks ...venue.Level) {
		s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: first, Last: last, Prev: first - 1,
			Bids: []venue.Level{{Price: "99", Size: "3"}}, Asks: asks})
	}
	event(100, 102)
	s.Sync()
	rest.wait()
	s.Sync() // a round that sees no book waiting for its sync
	rest.wait()
	lp := s.byID(testID)
	lp.mu.Lock()
	shallow := lp.shallow
	lp.mu.Unlock()
	if !s.Current(testID, snapshot.StreamBook) || !shallow {
		t.Fatalf("after a sync from 2 levels: in sequence %v, shallow %v; want both", s.Current(testID, snapshot.StreamBook), shallow)
	}
	// Both asks the snapshot vouched for are taken: the side runs dry.
	event(103, 103, venue.Level{Price: "101", Size: "0"}, venue.Level{Price: "102", Size: "0"})
	s.askRefreshes()
	rest.mu.Lock()
	rest.starts, rest.depths = nil, nil
	// The venue's book now, deeper than the published levels.
	rest.book = venue.Book{LastUpdateID: 103, Bids: []venue.Level{{Price: "99", Size: "3"}},
		Asks: []venue.Level{{Price: "103", Size: "1"}, {Price: "104", Size: "1"}}}
	rest.mu.Unlock()
	s.Sync()
	rest.wait()
	if want := []startedRead{{budget.PurposeDepleted, budget.Serving}}; !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v, want the dry book's read as a served book's refresh", rest.starts)
	}
	if want := []int{deepenDepth}; !slices.Equal(rest.depths, want) {
		t.Fatalf("read depths %v, want %v (the deepening depth, not the sync's 2)", rest.depths, want)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.shallow {
		t.Error("the book is still shallow after a read of the deepening depth")
	}
}

// A depth event that could not be used (the adapter refused its price)
// loses the stream; when the stream is back and the book's chain does not
// continue, the book resyncs for bad data, not for a lost connection. A
// break after a loss with no spoiled event is a lost stream still.
func TestASpoiledEventResyncsForBadData(t *testing.T) {
	s, rest, _ := newListedSource(t, nil)
	event := func(first, last int64) {
		s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: first, Last: last, Prev: first - 1,
			Bids: []venue.Level{{Price: "99", Size: "3"}}})
	}
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(100, 102)
	s.Sync()
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its sync")
	}
	resyncs := func(cause string) uint64 { return s.metrics.resyncs[cause].Get() }

	s.Spoiled(snapshot.StreamBook, []string{testSymbol}) // the event 103..105 is refused
	s.Lost(snapshot.StreamBook, []string{testSymbol})
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(106, 108)
	if bad, lost := resyncs(causeBadData), resyncs(causeLost); bad != 1 || lost != 0 {
		t.Fatalf("after a spoiled event: resyncs bad_data %d, lost %d; want 1 and 0", bad, lost)
	}

	rest.mu.Lock()
	rest.book.LastUpdateID = 107 // a snapshot the buffered 106..108 continues
	rest.mu.Unlock()
	rest.withBudget(1)
	s.Sync()
	rest.wait()
	event(109, 111)
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its resync")
	}
	s.Lost(snapshot.StreamBook, []string{testSymbol})
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(120, 122)
	if bad, lost := resyncs(causeBadData), resyncs(causeLost); bad != 1 || lost != 1 {
		t.Fatalf("after a plain loss: resyncs bad_data %d, lost %d; want 1 and 1", bad, lost)
	}
}
