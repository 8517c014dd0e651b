package live

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// publishPeriod does at once what the schedule does over a period: asks
// the refreshes books need, then publishes every book and trade window.
func (s *Source) publishPeriod() {
	s.askRefreshes()
	s.publish(time.Now(), 0, 1, func(lp *pair, now time.Time) func() { return lp.bookState.publish(s, lp, now) })
	s.publish(time.Now(), 0, 1, func(lp *pair, now time.Time) func() { return lp.tradesState.publish(s, lp, now) })
}

// jobs is a Scheduler that runs nothing by itself: the test runs the jobs,
// and the goroutines it was asked to start.
type jobs struct {
	every map[time.Duration][]func(context.Context)
	goes  []func(context.Context)
}

func (j *jobs) Every(d time.Duration, f func(context.Context)) {
	j.every[d] = append(j.every[d], f)
}
func (j *jobs) Go(f func(context.Context)) { j.goes = append(j.goes, f) }

// spreadSource is a source of n listed pairs whose books are in sequence at
// update id 102, published every 350 ms and their depths every
// depthEvery, and the publication step it schedules.
func spreadSource(t *testing.T, n int, depthEvery time.Duration) (s *Source, store *hookStore, symbols []string, step func(context.Context)) {
	s, store, symbols, sch := spreadSourceJobs(t, n, depthEvery)
	steps := sch.every[publishStep]
	if len(steps) != 1 {
		t.Fatalf("%d jobs every %v, want the one publication step; jobs: %v", len(steps), publishStep, sch.every)
	}
	return s, store, symbols, steps[0]
}

// spreadSourceJobs is spreadSource, with what the source scheduled.
func spreadSourceJobs(t *testing.T, n int, depthEvery time.Duration) (s *Source, store *hookStore, symbols []string, sch *jobs) {
	t.Helper()
	store = &hookStore{Store: snapshot.NewStore()}
	s = New(Config{
		Streams: quietStreams{}, REST: &fakeREST{book: venue.Book{
			LastUpdateID: 101,
			Bids:         []venue.Level{{Price: "99", Size: "1"}},
			Asks:         []venue.Level{{Price: "101", Size: "1"}},
		}}, Store: store, Demand: noDemand{},
		Log:      func(slog.Level, string, string, ...any) {},
		MaxStale: 10 * time.Second, Fresh: 5 * time.Second, SyncDepth: 500, RefreshDepth: 1000,
		BookEvery: 350 * time.Millisecond, TradesEvery: time.Second, DepthEvery: depthEvery,
	})
	var markets []venue.Market
	for i := range n {
		base := "P" + string(rune('A'+i))
		markets = append(markets, venue.Market{Symbol: base + "USDT", Base: base, Quote: "USDT", Perpetual: true, Trading: true})
		symbols = append(symbols, base+"USDT")
	}
	pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{Venue: "sim"}, time.Now())
	store.PutDoc(pairs, time.Now())
	s.SetPairs(pairs)
	s.Live(snapshot.StreamBook, symbols)
	rest := s.cfg.REST.(*fakeREST)
	for _, sym := range symbols {
		s.Depth(venue.DepthUpdate{Symbol: sym, First: 100, Last: 102, Prev: 99, Bids: []venue.Level{{Price: "99", Size: "3"}}})
	}
	s.Sync()
	rest.wait()

	sch = &jobs{every: map[time.Duration][]func(context.Context){}}
	s.Schedule(sch)
	return s, store, symbols, sch
}

// When the streams stop, each book in sequence is left in the store as a
// depth at the last update id it applied, however long ago the last
// periodic depth was: a cluster member's next poller starts from it and
// from the events held from then on (see standby.Relay.Depth), which do
// not hold what this poller was handed.
func TestStoppedStreamsLeaveEveryBookAsADepth(t *testing.T) {
	s, store, symbols, sch := spreadSourceJobs(t, 3, time.Hour) // no periodic depth in the test
	s.Depth(venue.DepthUpdate{Symbol: symbols[0], First: 103, Last: 107, Prev: 102, Bids: []venue.Level{{Price: "99.5", Size: "1"}}})
	for _, sym := range symbols {
		if d := store.Depth([]byte(strings.TrimSuffix(sym, "USDT") + "_USDT")); d != nil {
			t.Fatalf("%s: a depth at %d before the streams stopped", sym, d.Seq())
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the poller's term ends: its streams' Run returns
	for _, g := range sch.goes {
		g(ctx)
	}
	for i, sym := range symbols {
		want := int64(102)
		if i == 0 {
			want = 107
		}
		d := store.Depth([]byte(strings.TrimSuffix(sym, "USDT") + "_USDT"))
		if d == nil || d.Seq() != want {
			t.Fatalf("%s: depth %v once the streams stopped, want one at update id %d", sym, d, want)
		}
	}
}

// The schedule spreads a period's publications over its steps: each step
// publishes the books of about a seventh of the pairs, and one period's
// steps publish every pair's book once.
func TestBooksArePublishedSpreadOverThePeriod(t *testing.T) {
	const n = 15
	s, store, symbols, step := spreadSource(t, n, 0)
	published := map[string]int{}
	store.onPutBook = func(b *snapshot.Book) { published[b.TickerID()]++ }
	store.onPutDepth = func(d *snapshot.Depth) {
		t.Errorf("%s's depth published, though no source asked for depths", d.TickerID())
	}
	for period := range 2 {
		// Every book changes, then a period's seven steps run.
		for _, sym := range symbols {
			s.Depth(venue.DepthUpdate{Symbol: sym, First: int64(103 + period), Last: int64(103 + period), Prev: int64(102 + period),
				Bids: []venue.Level{{Price: "98", Size: "1"}}})
		}
		checkPeriod(t, "book", period, 7, n, step, published)
	}
}

// checkPeriod runs a period's steps (of a source of n pairs) and checks
// that each publishes at most its share of what published counts, and the
// period every pair's once.
func checkPeriod(t *testing.T, what string, period, steps, n int, step func(context.Context), published map[string]int) {
	t.Helper()
	clear(published)
	share := (n + steps - 1) / steps
	for i := range steps {
		before := len(published)
		step(t.Context())
		if got := len(published) - before; got > share {
			t.Errorf("period %d, step %d published %d of %d %ss, want at most %d", period, i, got, n, what, share)
		}
	}
	if len(published) != n {
		t.Errorf("period %d published %d %ss of %d", period, len(published), what, n)
	}
	for id, times := range published {
		if times != 1 {
			t.Errorf("period %d published %s's %s %d times, want once", period, id, what, times)
		}
	}
}

// A source asked for depths publishes each book in sequence as a depth once
// every DepthEvery, changed or not, spread over the steps as books are,
// and each depth holds the book's levels at the book's update id.
func TestDepthsArePublishedOncePerPeriod(t *testing.T) {
	const n = 15
	_, store, _, step := spreadSource(t, n, 500*time.Millisecond)
	published := map[string]int{}
	store.onPutDepth = func(d *snapshot.Depth) { published[d.TickerID()]++ }
	for period := range 2 {
		checkPeriod(t, "depth", period, 10, n, step, published)
	}
	d := store.Depth([]byte("PA_USDT"))
	if d == nil {
		t.Fatal("no depth kept")
	}
	bids, asks := d.Sides()
	if d.Seq() != 102 || !slices.Equal(bids, []snapshot.Level{{Price: "99", Size: "3"}}) || !slices.Equal(asks, []snapshot.Level{{Price: "101", Size: "1"}}) {
		t.Fatalf("depth at update id %d: bids %v, asks %v; want the book's at 102", d.Seq(), bids, asks)
	}
}

func TestSlots(t *testing.T) {
	for _, tc := range []struct {
		every, step time.Duration
		want        uint32
	}{
		{350 * time.Millisecond, 50 * time.Millisecond, 7},
		{time.Second, 50 * time.Millisecond, 20},
		{330 * time.Millisecond, 50 * time.Millisecond, 6},
		{50 * time.Millisecond, 50 * time.Millisecond, 1},
		{10 * time.Millisecond, 50 * time.Millisecond, 1},
		{0, 0, 1},
	} {
		if got := slots(tc.every, tc.step); got != tc.want {
			t.Errorf("slots(%v, %v) = %d, want %d", tc.every, tc.step, got, tc.want)
		}
	}
}
