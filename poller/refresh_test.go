package poller

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/internal/promtext"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
)

// newRefreshWorld is a stream world of n books on a venue with a limit of
// 1000 a minute, snapshots of 20 and the given refresh share, every book
// synced from 200 levels and refreshed from 300.
func newRefreshWorld(t *testing.T, n int, share float64) *streamWorld {
	w := newStreamWorld(t, n, Config{Budget: 0.5, SyncDepth: 200, RefreshDepth: 300, RefreshShare: share})
	w.goLive(1000, 20)
	time.Sleep(time.Second)
	synctest.Wait()
	return w
}

// Refreshes keep to their share of the venue's limit: books that wait are
// published with the levels they can vouch for, serving requests for no
// more (see snapshot.Book.Serves), and the book nearest to running out of
// them is refreshed first.
func TestRefreshesKeepToTheirShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6
		// A share of 5 %: 50 weight a minute, two refreshes of 20.
		w := newRefreshWorld(t, n, 0.05)
		defer w.stop()
		if synced := w.v.count(venue.CallBook, ""); synced != n {
			t.Fatalf("%d snapshot reads, want every book synced once", synced)
		}
		before := len(w.v.log())
		// Buyers take 110 to 115 asks of each book: 90 down to 85 of the
		// 200 the snapshots vouched for remain, the last book the fewest.
		for i, m := range w.models {
			w.src.Depth(m.takeAsks(110 + i))
		}
		refreshed := func() []string { return w.v.symbolsOf(venue.CallBook, before) }
		// No events for three seconds: the model's events put asks back.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		// The two start in one round: in either order.
		if got, want := slices.Sorted(slices.Values(refreshed())), []string{w.symbols[4], w.symbols[5]}; !slices.Equal(got, want) {
			t.Fatalf("refreshed %v in the first seconds, want %v: two fit the share, fewest levels first", got, want)
		}
		if short := w.src.ShortBooks(); short != n-2 {
			t.Fatalf("%d books short, want the %d still waiting", short, n-2)
		}
		for i := 0; i < n-2; i++ {
			b := w.book(i)
			if _, asks := b.Levels(); asks != 90-i || b.Serves(100) || !b.Serves(90-i) {
				t.Fatalf("book %d publishes %d asks while its refresh waits (serves 100: %v), want the %d it vouches for and no more served",
					i, asks, b.Serves(100), 90-i)
			}
		}
		for range 600 { // a minute: two more
			w.tick()
		}
		if got := refreshed(); len(got) != 4 {
			t.Fatalf("refreshed %v after a minute, want four", got)
		}
		for range 600 {
			w.tick()
		}
		if got := refreshed(); len(got) != n {
			t.Fatalf("refreshed %v after two minutes, want every book once", got)
		}
		if short := w.src.ShortBooks(); short != 0 {
			t.Fatalf("%d books still short", short)
		}
		time.Sleep(400 * time.Millisecond) // the last events' publication
		synctest.Wait()
		for i, m := range w.models {
			if got, want := string(w.book(i).Body()), m.body(pairID(i+1)); got != want {
				t.Fatalf("book %d after its refresh: published\n%s\nwant\n%s", i, got, want)
			}
		}
		if got := w.p.metrics.weight[budget.PurposeRefresh].Get(); got != n*20 {
			t.Fatalf("refresh weight %d, want %d", got, n*20)
		}
		if got := w.p.metrics.weight[budget.PurposeSnapshot].Get(); got != n*20 {
			t.Fatalf("sync snapshot weight %d, want %d", got, n*20)
		}
	})
}

// A share smaller than one refresh still lets one through a minute: the
// books are not left short for good.
func TestRefreshShareBelowOneRefreshStillRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newRefreshWorld(t, 2, 0.01) // a share of 10, a refresh of 20
		defer w.stop()
		for _, m := range w.models {
			w.src.Depth(m.takeAsks(110))
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, ""); n != 3 {
			t.Fatalf("%d snapshot reads, want two syncs and one refresh", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, ""); n != 4 {
			t.Fatalf("%d snapshot reads after a minute, want the second refresh", n)
		}
	})
}

// A refresh that waits its turn is given up if the price turns back and the
// book vouches for enough levels again: the share goes to books that need it.
func TestWaitingRefreshIsGivenUpWhenThePriceTurnsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newRefreshWorld(t, 2, 0.01) // a share of one refresh a minute
		defer w.stop()
		// Both books run short; the second, with fewer asks, is refreshed
		// and the first waits.
		w.src.Depth(w.models[0].takeAsks(110))
		w.src.Depth(w.models[1].takeAsks(120))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, w.symbols[0]); n != 1 {
			t.Fatalf("%d snapshot reads of the first book, want its refresh waiting", n)
		}
		// Sellers come back: the first book vouches for 150 asks again.
		w.src.Depth(w.models[0].giveAsks(60))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, w.symbols[0]); n != 1 {
			t.Fatalf("%d snapshot reads of the first book: a refresh no longer needed was made", n)
		}
		if got, want := string(w.book(0).Body()), w.models[0].body(pairID(1)); got != want {
			t.Fatalf("published\n%s\nwant\n%s", got, want)
		}
	})
}

// A book whose top has run through every level a side vouched for is not
// published with that side empty: its last publication stands, and its
// refresh does not wait its turn in the refresh share.
func TestDepletedBookIsRefreshedBeyondTheShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newRefreshWorld(t, 3, 0.01) // a share of one refresh a minute
		defer w.stop()
		w.src.Depth(w.models[0].takeAsks(110)) // 90 asks left of 200
		w.src.Depth(w.models[1].takeAsks(115)) // 85: refreshed first
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if a, b := w.v.count(venue.CallBook, w.symbols[0]), w.v.count(venue.CallBook, w.symbols[1]); a != 1 || b != 2 {
			t.Fatalf("snapshot reads %d and %d, want the second book refreshed and the first waiting", a, b)
		}
		before := string(w.book(2).Body())
		w.v.mu.Lock()
		w.v.gate = make(chan struct{}) // hold the refresh's snapshot read
		w.v.mu.Unlock()
		w.src.Depth(w.models[2].takeAsks(200)) // every ask it vouched for
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, w.symbols[2]); n != 2 {
			t.Fatalf("%d snapshot reads of the depleted book, want its refresh at once", n)
		}
		if n := w.v.count(venue.CallBook, w.symbols[0]); n != 1 {
			t.Fatalf("%d snapshot reads of the first book, want it still waiting its turn", n)
		}
		if got := string(w.book(2).Body()); got != before {
			t.Fatalf("a depleted book was published:\n%s\nwant the last publication\n%s", got, before)
		}
		w.v.mu.Lock()
		close(w.v.gate)
		w.v.gate = nil
		w.v.mu.Unlock()
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		if got := promtext.Scrape(t, w.metrics.WritePrometheus)[`marketfeed_book_resyncs_total{cause="depleted"}`]; got != 1 {
			t.Fatalf("%v depleted refreshes counted, want 1", got)
		}
		if got, want := string(w.book(2).Body()), w.models[2].body(pairID(3)); got != want {
			t.Fatalf("the depleted book after its refresh: published\n%s\nwant\n%s", got, want)
		}
	})
}

// A cold start's syncs spend the whole book share for as long as they
// last. A book already synced that runs dry meanwhile must not wait behind
// them: it has been answering, and would answer 502 once its last
// publication passed max-stale. Its refresh is the next read the budget
// allows, ahead of the books still to sync.
func TestDepletedBookIsRefreshedBeforeTheColdStartsSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40 // 800 weight of syncs: more than a minute's book share
		w := newStreamWorld(t, n, Config{Budget: 0.5, SyncDepth: 200, RefreshDepth: 300, RefreshShare: 0.01})
		defer w.stop()
		w.goLive(1000, 20)
		time.Sleep(time.Second)
		synctest.Wait()
		synced := w.v.count(venue.CallBook, "")
		if synced == 0 || synced >= n {
			t.Fatalf("%d of %d books synced in the first second, want the budget to stop the cold start part way", synced, n)
		}
		if w.book(0) == nil {
			t.Fatal("the first book in the queue was not synced")
		}
		before := len(w.v.log())
		w.src.Depth(w.models[0].takeAsks(200)) // every ask it vouched for
		// Reads started in one round reach the venue in any order: the
		// refresh must be among the first round's.
		var reads []string
		for i := range 1200 { // two minutes: the window slides on, and the rest sync
			// The others' events go on; the dry book's market is quiet,
			// so that nothing but its refresh gives it levels back.
			for _, m := range w.models[1:] {
				w.src.Depth(m.next())
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			first := len(reads) == 0
			reads = w.v.symbolsOf(venue.CallBook, before)
			if first && len(reads) > 0 && !slices.Contains(reads, w.symbols[0]) {
				t.Fatalf("after %v the first snapshot reads since the book ran dry are %v, want its refresh (%s) among them",
					time.Duration(i+1)*100*time.Millisecond, reads, w.symbols[0])
			}
		}
		if len(reads) != n-synced+1 {
			t.Fatalf("%d snapshot reads after the book ran dry, want its refresh and the %d syncs left", len(reads), n-synced)
		}
		if got, want := string(w.book(0).Body()), w.models[0].body(pairID(1)); got != want {
			t.Fatalf("the depleted book after its refresh: published\n%s\nwant\n%s", got, want)
		}
	})
}
