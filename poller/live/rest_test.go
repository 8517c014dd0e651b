package live

import (
	"slices"
	"testing"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// A depleted book's refresh goes first, ahead even of a book a request
// waits for, and within a class of the budget reads go in queue order. The
// refresh weighs more than a sync (Binance: 20 at 1000 levels, 10 at 500):
// were the syncs behind it let through when the budget refused it, they
// would take the weight of a cold start's window as it frees, 10 at a time,
// and the book, which has been answering, would age out to 502 for as
// long as the cold start lasts.
func TestARefusedDepletedRefreshIsNotOvertakenBySyncs(t *testing.T) {
	const eth = "ETHUSDT"
	// Snapshots of two levels a side: the book vouches for those alone.
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 2, RefreshDepth: 4}, perpetual(testSymbol, "BTC"), perpetual(eth, "ETH"))
	event := func(symbol string, first, last int64, asks ...venue.Level) {
		s.Depth(venue.DepthUpdate{Symbol: symbol, First: first, Last: last, Prev: first - 1,
			Bids: []venue.Level{{Price: "99", Size: "3"}}, Asks: asks})
	}

	// BTC is synced, then buyers take both asks it vouched for.
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event(testSymbol, 100, 102)
	s.Sync()
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the first book is not in sequence after its snapshot")
	}
	event(testSymbol, 103, 103, venue.Level{Price: "101", Size: "0"}, venue.Level{Price: "102", Size: "0"})
	s.askRefreshes()
	// ETH's stream comes in later: its book waits for its sync, and a
	// request for it waits too.
	s.Live(snapshot.StreamBook, []string{eth})
	event(eth, 100, 102)
	s.byID("ETH_USDT").books.waiting.Store(time.Now().UnixNano())

	rest.mu.Lock()
	rest.refuse = func(p budget.Purpose) bool { return p == budget.PurposeDepleted }
	rest.starts = nil
	rest.mu.Unlock()
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if !slices.Equal(rest.refused, []budget.Purpose{budget.PurposeDepleted}) || len(rest.starts) != 0 {
		t.Fatalf("refused %v and started %v, want the depleted refresh refused and the sync behind it, a request's though it is, not started",
			rest.refused, rest.starts)
	}

	rest.mu.Lock()
	rest.refuse = nil
	rest.mu.Unlock()
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	want := []startedRead{{budget.PurposeDepleted, budget.Waiting}, {budget.PurposeSnapshot, budget.Waiting}}
	if !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v once the weight was there, want the depleted refresh first, then the sync the request waits for, both at budget.Waiting", rest.starts)
	}
}
