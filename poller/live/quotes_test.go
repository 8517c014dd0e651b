package live

import (
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// A book whose side runs dry while its refresh is read has no best level
// it can vouch for on that side: the spot ticker's mid and the contract's
// bid and ask stay the top it last published, as old as it is, instead of
// a quote with an empty side, which would take the pair out of /tickers
// and /contracts until the refresh lands.
func TestABookRunDryQuotesItsLastPublishedTop(t *testing.T) {
	s, rest, _ := newSourceOf(t, Config{SyncDepth: 2, RefreshDepth: 4}, perpetual(testSymbol, "BTC"))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	event := func(first, last int64, bids, asks []venue.Level) {
		s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: first, Last: last, Prev: first - 1, Bids: bids, Asks: asks})
	}
	event(100, 102, nil, nil)
	s.Sync()
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its snapshot")
	}
	pr, ok := s.cfg.Store.(*hookStore).Pairs().Lookup(testID)
	if !ok {
		t.Fatal("no pair listed")
	}
	spot := []snapshot.Pair{pr}
	quotes, at, all := s.Quotes(spot, time.Now())
	want := venue.Quote{Symbol: testSymbol, Bid: "99", Ask: "101"}
	if len(quotes) != 1 || quotes[0] != want || !all {
		t.Fatalf("in sequence: quotes %v (all %v), want [%v]", quotes, all, want)
	}
	published := at[0]

	// A bid moves up while the book vouches for both sides: the quote is
	// the book's current top, and it is published.
	event(103, 103, []venue.Level{{Price: "100", Size: "1"}}, nil)
	if quotes, _, _ = s.Quotes(spot, time.Now()); len(quotes) != 1 || quotes[0].Bid != "100" {
		t.Fatalf("after a higher bid: quotes %v, want the bid 100", quotes)
	}
	s.publishPeriod()
	lp := s.byID(testID)
	lp.mu.Lock()
	lastAt := lp.lastQuoteAt
	lp.mu.Unlock()

	// Buyers take both asks the snapshot vouched for, and an ask arrives
	// beyond its edge: the venue may hold asks between.
	event(104, 104, nil, []venue.Level{{Price: "101", Size: "0"}, {Price: "102", Size: "0"}, {Price: "105", Size: "1"}})
	quotes, at, _ = s.Quotes(spot, time.Now())
	if len(quotes) != 1 {
		t.Fatalf("run dry: quotes %v, want the last published top", quotes)
	}
	if quotes[0].Ask == "" || quotes[0].Ask == "105" {
		t.Fatalf("run dry: quote %v, want the last published top, not an empty ask or one beyond the snapshot's edge", quotes[0])
	}
	if quotes[0].Bid != "100" || quotes[0].Ask != "101" {
		t.Fatalf("run dry: quote %v, want the top last published (bid 100, ask 101)", quotes[0])
	}
	if !at[0].Equal(lastAt) || at[0].Before(published) {
		t.Fatalf("run dry: quote current at %v, want when it was last published or confirmed (%v)", at[0], lastAt)
	}
}
