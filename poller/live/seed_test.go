package live

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// seedOf is a seed as another process published it: a book current at
// update id 200 with n levels a side, and trades with venue ids 51..60.
func seedOf(t *testing.T, n int) Seed {
	t.Helper()
	bids, asks := make([]venue.Level, n), make([]venue.Level, n)
	for i := range n {
		bids[i] = venue.Level{Price: fmt.Sprint(99 - i), Size: "1"}
		asks[i] = venue.Level{Price: fmt.Sprint(101 + i), Size: "1"}
	}
	trades := make([]venue.Trade, 10)
	for i := range trades {
		trades[i] = venue.Trade{ID: int64(51 + i), Time: int64(1000 + i), Price: "100", Size: "0.5", Sell: i%2 == 0}
	}
	tr, err := snapshot.NewTrades(testID, trades, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Through the wire, as a member holds what the leader put.
	book, err := snapshot.DecodeBook(snapshot.NewCheckedBook(testID, 1234, 200, bids, asks, time.Now()).AppendWire(nil))
	if err != nil {
		t.Fatal(err)
	}
	if tr, err = snapshot.DecodeTrades(tr.AppendWire(nil)); err != nil {
		t.Fatal(err)
	}
	return Seed{Values: [snapshot.NumStreams]snapshot.PairValue{snapshot.StreamBook: book, snapshot.StreamTrades: tr}}
}

func seeded(seed Seed) func(string) Seed {
	return func(id string) Seed {
		if id != testID {
			return Seed{}
		}
		return seed
	}
}

// A book started from a seed is served as soon as its own diff stream's
// first event continues the seed's update id, with no snapshot read: what
// a member taking over the ingest saves on every book. Its first read is
// the refresh that deepens it, from the book share.
func TestSeededBookGoesOnWithoutASnapshot(t *testing.T) {
	s, rest, store := newListedSource(t, seeded(seedOf(t, 3)))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	if s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the seeded book is current before its stream said it goes on")
	}
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 195, Last: 199, Prev: 190}) // already in the seed
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 201, Last: 204, Prev: 200, Time: 1300,
		Bids: []venue.Level{{Price: "99", Size: "7"}}})
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the seeded book is not current after an event that continues it")
	}
	rest.withBudget(0)
	s.publishPeriod()
	b, _ := store.Book([]byte(testID), time.Now().UnixNano())
	if b == nil {
		t.Fatal("no book published")
	}
	const want = `{"ticker_id":"BTC_USDT","timestamp":1300,"bids":[["99","7"],["98","1"],["97","1"]],"asks":[["101","1"],["102","1"],["103","1"]]}`
	if string(b.Body()) != want || b.Seq() != 204 {
		t.Fatalf("published %s at update id %d, want %s at 204", b.Body(), b.Seq(), want)
	}
	s.Sync()
	rest.wait()
	if got := rest.refused; !slices.Equal(got, []budget.Purpose{budget.PurposeDeepen}) {
		t.Fatalf("reads asked: %v, want only the refresh, from the book share", got)
	}

	// A seed of the published depth is deepened within the refresh share
	// until it serves fewer levels.
	s, rest, _ = newListedSource(t, seeded(seedOf(t, snapshot.MaxDepth)))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 201, Last: 204, Prev: 200})
	rest.withBudget(0)
	s.publishPeriod()
	s.Sync()
	rest.wait()
	if got := rest.refused; !slices.Equal(got, []budget.Purpose{budget.PurposeRefresh}) {
		t.Fatalf("reads asked of a seed of %d levels: %v, want its refresh from the refresh share", snapshot.MaxDepth, got)
	}
}

// depthOf is a depth as a leader published it: n levels a side of size 2,
// current at update id 180, older than seedOf's book.
func depthOf(t *testing.T, n int) *snapshot.Depth {
	t.Helper()
	bids, asks := make([]venue.Level, n), make([]venue.Level, n)
	for i := range n {
		bids[i] = venue.Level{Price: fmt.Sprint(1000 - i), Size: "2"}
		asks[i] = venue.Level{Price: fmt.Sprint(1001 + i), Size: "2"}
	}
	d, err := snapshot.DecodeDepth(snapshot.NewDepth(testID, 1200, 180, bids, asks, time.Now()).AppendWire(nil))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A book is seeded from the depth rather than the published book when
// both are there: the events since the depth's update id bring it up to
// date, and its 300 levels a side need no deepening read at all, where a
// seed of the published 100 asks for one.
func TestDepthSeedNeedsNoRead(t *testing.T) {
	seed := seedOf(t, 3)
	seed.Depth = depthOf(t, 300)
	s, rest, store := newListedSource(t, seeded(seed))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 181, Last: 190, Prev: 180, Time: 1250,
		Asks: []venue.Level{{Price: "1001", Size: "0"}}})
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book seeded from the depth is not current after the event that continues it")
	}
	rest.withBudget(0)
	s.publishPeriod()
	b, _ := store.Book([]byte(testID), time.Now().UnixNano())
	if b == nil {
		t.Fatal("no book published")
	}
	bids, asks := b.Sides()
	if b.Seq() != 190 || len(bids) != snapshot.MaxDepth || len(asks) != snapshot.MaxDepth ||
		bids[0] != (venue.Level{Price: "1000", Size: "2"}) || asks[0] != (venue.Level{Price: "1002", Size: "2"}) {
		t.Fatalf("published %d bids from %v and %d asks from %v at update id %d; want %d a side of the depth, its best ask gone, at 190",
			len(bids), bids[:min(1, len(bids))], len(asks), asks[:min(1, len(asks))], b.Seq(), snapshot.MaxDepth)
	}
	s.Sync()
	rest.wait()
	if len(rest.refused) != 0 || rest.started != 0 {
		t.Fatalf("reads asked of a book seeded from 300 levels: %v (%d started), want none", rest.refused, rest.started)
	}
}

// A book seeded from a depth deeper than the published levels is as deep
// as one refreshed: a side that runs dry is refreshed like any deep book's,
// not read again from 100 levels as a book that was synced from them, and
// a member taking over reads no snapshot to sync a book it was seeded.
func TestDeepSeedRunDryIsRefreshedNotResynced(t *testing.T) {
	seed := seedOf(t, 3)
	seed.Depth = depthOf(t, 300)
	s, rest, _ := newListedSource(t, seeded(seed))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	gone := make([]venue.Level, 300)
	for i := range gone {
		gone[i] = venue.Level{Price: fmt.Sprint(1001 + i), Size: "0"}
	}
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 181, Last: 190, Prev: 180, Time: 1250, Asks: gone})
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book seeded from the depth is not in sequence after the event that continues it")
	}
	s.askRefreshes()
	s.Sync()
	rest.wait()
	if want := []startedRead{{budget.PurposeDepleted, budget.Serving}}; !slices.Equal(rest.starts, want) {
		t.Fatalf("started %v for a deep seed whose asks ran dry, want its refresh %v", rest.starts, want)
	}
}

// A depth whose chain the stream does not continue (its events are no
// longer held) is not served, even though the book seed would have gone
// on: the book syncs from REST, as any book whose seed broke.
func TestDepthSeedTheStreamDoesNotContinueIsSyncedFromREST(t *testing.T) {
	seed := seedOf(t, 3)
	seed.Depth = depthOf(t, 300)
	s, _, store := newListedSource(t, seeded(seed))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 201, Last: 204, Prev: 200})
	s.publishPeriod()
	if b, _ := store.Book([]byte(testID), time.Now().UnixNano()); b != nil {
		t.Fatalf("published %s from a depth its stream did not continue", b.Body())
	}
	if lp := s.byID(testID); lp.book.Synced() {
		t.Fatal("the book is in sequence after an event that skips past its depth")
	}
}

// A seed the stream does not continue (updates were missed between the
// seed and the first event) is never served: the book syncs from REST.
func TestSeedTheStreamDoesNotContinueIsSyncedFromREST(t *testing.T) {
	s, rest, store := newListedSource(t, seeded(seedOf(t, 3)))
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 211, Last: 214, Prev: 210})
	s.publishPeriod()
	if b, _ := store.Book([]byte(testID), time.Now().UnixNano()); b != nil {
		t.Fatalf("published %s from a seed its stream did not continue", b.Body())
	}
	rest.book = venue.Book{LastUpdateID: 212, Bids: []venue.Level{{Price: "90", Size: "1"}}, Asks: []venue.Level{{Price: "110", Size: "1"}}}
	rest.withBudget(1)
	s.Sync()
	rest.wait()
	if got := rest.purposesStarted(); !slices.Equal(got, []budget.Purpose{budget.PurposeSnapshot}) {
		t.Fatalf("reads started: %v, want the snapshot that syncs the book", got)
	}
	if b := s.servedBook(t); !strings.Contains(string(b.Body()), `"bids":[["90","1"]]`) {
		t.Fatalf("served %s, want the snapshot's levels", b.Body())
	}
}

// A book seed without an update id, or with a side empty, is not used.
func TestUnusableBookSeedIsIgnored(t *testing.T) {
	seed := seedOf(t, 3)
	for name, b := range map[string]*snapshot.Book{
		"no update id": snapshot.NewCheckedBook(testID, 1, 0, []venue.Level{{Price: "1", Size: "1"}}, []venue.Level{{Price: "2", Size: "1"}}, time.Now()),
		"no asks":      snapshot.NewCheckedBook(testID, 1, 200, []venue.Level{{Price: "1", Size: "1"}}, nil, time.Now()),
	} {
		seed.Values[snapshot.StreamBook] = b
		s, _, _ := newListedSource(t, seeded(seed))
		if lp := s.byID(testID); lp.book.LastUpdateID() != 0 || lp.shallow {
			t.Errorf("%s: the book started from the seed", name)
		}
	}
}

// A trade window started from a seed answers once its stream's first trade
// says nothing was missed, and numbers the trades it shares with the seed
// as the seed did; a first trade further on opens a hole, read by id.
func TestSeededTradesGoOnFromTheSeed(t *testing.T) {
	seed := seedOf(t, 3)
	s, rest, store := newListedSource(t, seeded(seed))
	s.Live(snapshot.StreamTrades, []string{testSymbol})
	if s.Current(testID, snapshot.StreamTrades) {
		t.Fatal("the seeded window answers before its stream said it missed nothing")
	}
	s.Trade(testSymbol, venue.Trade{ID: 61, Time: 2000, Price: "100.5", Size: "1"})
	if !s.Current(testID, snapshot.StreamTrades) {
		t.Fatal("the seeded window does not answer after the trade right after its newest")
	}
	s.publishPeriod()
	got, _ := store.Trades([]byte(testID), time.Now().UnixNano())
	if got == nil {
		t.Fatal("no trades published")
	}
	body, seedBody := string(got.Body(snapshot.SideAll)), string(seed.Values[snapshot.StreamTrades].(*snapshot.Trades).Body(snapshot.SideAll))
	if !strings.HasSuffix(body, seedBody[1:]) || strings.Count(body, `"trade_id"`) != 11 {
		t.Fatalf("published %s; want the new trade before the seed's items as they were: %s", body, seedBody)
	}
	if rest.started != 0 {
		t.Fatalf("%d reads for a window its seed and stream kept", rest.started)
	}

	s2, _, _ := newListedSource(t, seeded(seed))
	s2.Live(snapshot.StreamTrades, []string{testSymbol})
	s2.Trade(testSymbol, venue.Trade{ID: 65, Time: 2000, Price: "100.5", Size: "1"})
	if h := s2.byID(testID).window.hole; h != (idRange{61, 65}) {
		t.Fatalf("hole %+v after a first trade 65 on a seed ending at 60, want 61..65", h)
	}
}

// SeedFrom starts a pair from what the store holds of it: the depth only
// while the events since its update id are held, the book and trades
// while they may be served.
func TestSeedFromTakesTheDepthOnlyWhereTheEventsContinueIt(t *testing.T) {
	store := snapshot.NewStore()
	store.PutDoc(snapshot.NewPairs([]venue.Market{{Symbol: testSymbol, Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
		snapshot.PairsConfig{Venue: "sim"}, time.Now()), time.Now())
	held := seedOf(t, 3)
	for _, v := range held.Values {
		store.Put(v)
	}
	store.PutDepth(depthOf(t, 3))
	var asked int64
	continues := true
	seed := SeedFrom(store, func(id string, seq int64) bool {
		if id != testID {
			t.Errorf("continues asked of %s", id)
		}
		asked = seq
		return continues
	}, time.Minute)

	got := seed(testID)
	if got.Depth == nil || asked != 180 {
		t.Errorf("depth %v (continues asked from %d), want the store's at 180", got.Depth, asked)
	}
	for k, v := range got.Values {
		if v == nil {
			t.Errorf("no %s seeded", snapshot.Stream(k))
		}
	}
	continues = false
	if got := seed(testID); got.Depth != nil || got.Values[snapshot.StreamBook] == nil {
		t.Errorf("a depth the events do not continue is seeded: %+v", got)
	}
	if got := seed("ETH_USDT"); got != (Seed{}) {
		t.Errorf("a pair the store does not hold is seeded: %+v", got)
	}
	if got := SeedFrom(store, func(string, int64) bool { return true }, -time.Second)(testID); got.Values != [snapshot.NumStreams]snapshot.PairValue{} {
		t.Errorf("values too old to serve are seeded: %+v", got.Values)
	}
}
