package standby

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"marketfeed/poller/venue"
	"marketfeed/poller/venue/venuetest"
	"marketfeed/snapshot"
)

// recorder is a venue.Sink that writes down what it gets, in order, and a
// venue.Streams that writes down its watch lists.
type recorder struct {
	venuetest.Recorder
	mu      sync.Mutex
	watches [][]string
}

func (c *recorder) Run(ctx context.Context, _ venue.Sink) error { <-ctx.Done(); return ctx.Err() }
func (c *recorder) Watch(symbols []string) {
	c.mu.Lock()
	c.watches = append(c.watches, slices.Clone(symbols))
	c.mu.Unlock()
}
func (c *recorder) Resubscribe(snapshot.Stream, string) {}

// take returns the calls since the last take, a line each.
func (c *recorder) take() []string { return lines(c.Take(), false) }

// lines writes calls down a line each; withLevels, a depth event's levels
// and a trade's price and size too.
func lines(calls []venuetest.Call, withLevels bool) []string {
	var out []string
	for _, call := range calls {
		var l string
		switch u := call.Depth; call.Method {
		case venuetest.Depth:
			l = fmt.Sprintf("depth %s %d", u.Symbol, u.Last)
			if withLevels {
				l = fmt.Sprintf("%s %v %v", l, u.Bids, u.Asks)
			}
		case venuetest.Trade:
			l = fmt.Sprintf("trade %s %d", call.Symbol, call.Trade.ID)
			if withLevels {
				l = fmt.Sprintf("%s %s %s", l, call.Trade.Price, call.Trade.Size)
			}
		case venuetest.Tickers:
			l = fmt.Sprintf("tickers %d", len(call.Stats))
		case venuetest.Contracts:
			l = fmt.Sprintf("contracts %d", len(call.Contracts))
		case venuetest.Live:
			l = fmt.Sprintf("live %s %v", call.Kind, call.Symbols)
		case venuetest.Lost:
			l = fmt.Sprintf("lost %s %v", call.Kind, call.Symbols)
		}
		out = append(out, l)
	}
	return out
}

// covered is a Held whose ids a test sets.
type covered struct {
	mu  sync.Mutex
	ids map[snapshot.Stream]int64
}

func (c *covered) held(k snapshot.Stream, id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "BTC_USDT" {
		return 0
	}
	return c.ids[k]
}

func (c *covered) set(k snapshot.Stream, v int64) {
	c.mu.Lock()
	c.ids[k] = v
	c.mu.Unlock()
}

func testPairs() *snapshot.Pairs {
	return snapshot.NewPairs([]venue.Market{
		{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true},
		{Symbol: "ETHUSDT", Base: "ETH", Quote: "USDT", Perpetual: true, Trading: true},
	}, snapshot.PairsConfig{Venue: "sim"}, time.Now())
}

func newTestRelay(t *testing.T) (*Relay, *recorder, *covered) {
	t.Helper()
	streams := &recorder{}
	cov := &covered{ids: map[snapshot.Stream]int64{}}
	r := New(streams, cov.held, nil)
	r.Follow(testPairs())
	return r, streams, cov
}

// lend runs the relay's streams as a leading poller does, with sink, until
// the returned stop; it returns once Run has attached the sink. It runs in
// a synctest bubble, where Wait is that moment.
func lend(r *Relay, sink venue.Sink) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = r.Streams().Run(ctx, sink) }()
	synctest.Wait()
	return func() { cancel(); synctest.Wait() }
}

// While the member follows, what is held of a pair's streams is only what
// is past the values it holds; a poller that lists the pair gets it, in
// order after the acknowledgement, then the live events.
func TestHeldEventsAreWhatIsPastTheMembersValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, streams, cov := newTestRelay(t)
		if len(streams.watches) != 1 || !slices.Equal(streams.watches[0], []string{"BTCUSDT", "ETHUSDT"}) {
			t.Fatalf("a follower subscribes %v, want the leader's pairs", streams.watches)
		}
		r.Live(snapshot.StreamBook, []string{"BTCUSDT"})
		r.Live(snapshot.StreamTrades, []string{"BTCUSDT"})
		cov.set(snapshot.StreamBook, 15)
		cov.set(snapshot.StreamTrades, 3)
		for _, last := range []int64{10, 20, 30} {
			r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: last})
		}
		for id := range int64(6) {
			r.Trade("BTCUSDT", venue.Trade{ID: id})
		}
		cov.set(snapshot.StreamBook, 25) // the leader's next book
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: 40})
		r.Rows(venue.TickerRows(make([]venue.Stat, 3)))        // nobody to pass them to
		r.Depth(venue.DepthUpdate{Symbol: "ETHUSDT", Last: 5}) // not acknowledged: not held

		sink := &recorder{}
		stop := lend(r, sink)
		defer stop()
		if got := sink.take(); len(got) != 0 {
			t.Fatalf("handed %v before the poller listed a pair", got)
		}
		r.Streams().Watch([]string{"BTCUSDT", "ETHUSDT"})
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: 50})
		r.Rows(venue.TickerRows(make([]venue.Stat, 2)))
		want := []string{
			"live book [BTCUSDT]", "depth BTCUSDT 30", "depth BTCUSDT 40",
			"live trades [BTCUSDT]", "trade BTCUSDT 4", "trade BTCUSDT 5",
			"depth BTCUSDT 50", "tickers 2",
		}
		if got := sink.take(); !slices.Equal(got, want) {
			t.Fatalf("the poller got\n%q\nwant\n%q", got, want)
		}
		if n := len(streams.watches); n != 2 || !slices.Equal(streams.watches[1], []string{"BTCUSDT", "ETHUSDT"}) {
			t.Fatalf("watch lists %v: the poller's list goes to the streams", streams.watches)
		}
		r.Follow(testPairs())
		if n := len(streams.watches); n != 2 {
			t.Fatalf("a leader's replicated list was subscribed again (%d watches): the poller's own list rules", n)
		}
	})
}

// A lost stream drops what was held of it: it no longer continues into
// what comes after; the poller hears of the loss only for its pairs.
func TestLostStreamDropsWhatWasHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, _ := newTestRelay(t)
		r.Live(snapshot.StreamBook, []string{"BTCUSDT", "ETHUSDT"})
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: 10})
		r.Lost(snapshot.StreamBook, []string{"BTCUSDT"})
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: 11}) // on a stream not acknowledged again
		r.Live(snapshot.StreamBook, []string{"BTCUSDT"})
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", Last: 20})
		sink := &recorder{}
		stop := lend(r, sink)
		defer stop()
		r.Streams().Watch([]string{"BTCUSDT"})
		r.Lost(snapshot.StreamBook, []string{"BTCUSDT", "ETHUSDT"})
		want := []string{"live book [BTCUSDT]", "depth BTCUSDT 20", "lost book [BTCUSDT]"}
		if got := sink.take(); !slices.Equal(got, want) {
			t.Fatalf("the poller got %q, want %q", got, want)
		}
	})
}

// Once the poller's term ends, the events are held again, from the values
// the member holds; a pair no longer listed holds nothing; and what is held
// of one pair is bounded.
func TestHeldAgainAfterTheTermAndBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, _ := newTestRelay(t)
		r.Live(snapshot.StreamTrades, []string{"BTCUSDT", "ETHUSDT"})
		stop := lend(r, &recorder{})
		r.Streams().Watch([]string{"BTCUSDT"})
		stop()
		for id := range int64(maxHeld + 10) {
			r.Trade("BTCUSDT", venue.Trade{ID: id + 1})
		}
		r.Trade("ETHUSDT", venue.Trade{ID: 1})
		r.Follow(snapshot.NewPairs([]venue.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
			snapshot.PairsConfig{Venue: "sim"}, time.Now()))
		r.Trade("ETHUSDT", venue.Trade{ID: 2})
		sink := &recorder{}
		defer lend(r, sink)()
		r.Streams().Watch([]string{"BTCUSDT", "ETHUSDT"})
		got := sink.take()
		if len(got) != maxHeld+1 || got[0] != "live trades [BTCUSDT]" || got[1] != "trade BTCUSDT 11" || got[maxHeld] != fmt.Sprintf("trade BTCUSDT %d", maxHeld+10) {
			t.Fatalf("handed %d items, %q ... %q; want the acknowledgement and the newest %d trades", len(got), got[:2], got[len(got)-1], maxHeld)
		}
	})
}

// A poller may list its pairs before its streams run, and the venue may
// acknowledge them in between, for pairs no leader has published yet (a
// member's first term, a new listing): the poller still gets the
// acknowledgement and what came after, once it runs.
func TestPollerThatListsBeforeItRunsGetsWhatCameMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(&recorder{}, func(snapshot.Stream, string) int64 { return 0 }, nil)
		r.Streams().Watch([]string{"NEWUSDT"})
		r.Live(snapshot.StreamBook, []string{"NEWUSDT"})
		r.Depth(venue.DepthUpdate{Symbol: "NEWUSDT", Last: 3})
		r.Follow(testPairs()) // the pair list the leader published before: without the new pair
		sink := &recorder{}
		defer lend(r, sink)()
		want := []string{"live book [NEWUSDT]", "depth NEWUSDT 3"}
		if got := sink.take(); !slices.Equal(got, want) {
			t.Fatalf("the poller got %q, want %q", got, want)
		}
	})
}

// A poller's term may end at any moment: what it was handed is not held,
// since its book has it and it leaves that book in the member's store as a
// depth when its streams stop; what comes once the term has ended is held,
// and the next poller gets the events past that depth. A poller that left
// no depth of the pair (its book out of sequence) leaves a gap the next one
// finds (see Continues) and syncs across.
func TestNextPollerGetsWhatCameAfterThePreviousTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, cov := newTestRelay(t)
		r.Live(snapshot.StreamBook, []string{"BTCUSDT"})
		cov.set(snapshot.StreamBook, 15)
		first := &recorder{}
		stop := lend(r, first)
		r.Streams().Watch([]string{"BTCUSDT"})
		for _, last := range []int64{20, 30} {
			r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", First: last - 9, Last: last})
		}
		if got := first.take(); !slices.Equal(got, []string{"live book [BTCUSDT]", "depth BTCUSDT 20", "depth BTCUSDT 30"}) {
			t.Fatalf("the first poller got %q", got)
		}
		if held := r.count(snapshot.StreamBook).held; held != 0 {
			t.Fatalf("%d events held while a poller had the pair, want none", held)
		}
		stop()
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", First: 31, Last: 40}) // after the term
		if r.Continues("BTC_USDT", 15) {
			t.Error("the events from the member's depth before the term continue without those the poller had")
		}
		cov.set(snapshot.StreamBook, 30) // the depth the first poller left
		if !r.Continues("BTC_USDT", 30) {
			t.Error("the events held do not continue the depth the first poller left")
		}
		next := &recorder{}
		defer lend(r, next)()
		if got := next.take(); len(got) != 0 {
			t.Fatalf("the next poller was handed %q before it listed a pair: it would drop them", got)
		}
		r.Streams().Watch([]string{"BTCUSDT"})
		if got := next.take(); !slices.Equal(got, []string{"live book [BTCUSDT]", "depth BTCUSDT 40"}) {
			t.Fatalf("the next poller got %q, want the acknowledgement and the event past the depth the first left", got)
		}
	})
}

// The relay says whether it holds the chain of a pair's events from an
// update id: the first event held past it follows it, or none is held past
// it. Events trimmed by a book that covered more are gone, so a depth that
// covers less than that book is not continued; a lost stream continues
// nothing.
func TestContinues(t *testing.T) {
	r, _, cov := newTestRelay(t)
	r.Live(snapshot.StreamBook, []string{"BTCUSDT"})
	cov.set(snapshot.StreamBook, 20) // a book at 20; no depth yet
	for _, last := range []int64{10, 20, 25, 30} {
		r.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", First: last - 4, Last: last, Prev: last - 5})
	}
	for _, tc := range []struct {
		seq  int64
		want bool
	}{
		{20, true},  // the book: 21..25 follows it
		{22, true},  // 21..25 spans it
		{15, false}, // a depth older than the book: 16..20 is gone
		{30, true},  // nothing held past it
	} {
		if got := r.Continues("BTC_USDT", tc.seq); got != tc.want {
			t.Errorf("Continues(%d) = %v, want %v", tc.seq, got, tc.want)
		}
	}
	if r.Continues("ETH_USDT", 0) || r.Continues("DOGE_USDT", 0) {
		t.Error("a pair whose stream was never live, or not followed, continues")
	}
	r.Lost(snapshot.StreamBook, []string{"BTCUSDT"})
	if r.Continues("BTC_USDT", 30) {
		t.Error("a lost stream continues")
	}
}

// levels records the levels of the depth events it gets, as a poller's
// book would read them during the call: a copy of them is kept.
type levels struct {
	recorder
}

func newLevels() *levels {
	l := &levels{}
	l.Clone = true
	return l
}

func (c *levels) take() []string { return lines(c.Take(), true) }

// What is held of a depth event is the relay's copy: the adapter reuses its
// frame, symbol included, once the call returns, and the memory of an event
// dropped is reused for the next held in its place; each event handed is
// the one the stream delivered.
func TestHeldDepthIsACopyOfTheLentFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, cov := newTestRelay(t)
		var frame []byte
		send := func(last int64, price, size string) {
			// The frame's bytes, as the adapter's decoder lends them.
			frame = append(append(frame[:0], "BTCUSDT"...), price+size...)
			p := unsafe.String(&frame[7], len(price))
			s := unsafe.String(&frame[7+len(price)], len(size))
			r.Depth(venue.DepthUpdate{Symbol: unsafe.String(&frame[0], 7), First: last, Last: last,
				Bids: []venue.Level{{Price: p, Size: s}}, Asks: []venue.Level{{Price: s, Size: p}}})
			for i := range frame {
				frame[i] = 'x' // the next frame
			}
		}
		send(1, "100.5", "2")
		if _, ok := (*r.pairs.Load())["BTCUSDT"]; !ok {
			t.Fatal("the pair its first event added is not found by its symbol once the frame is reused")
		}
		r.Live(snapshot.StreamBook, []string{"BTCUSDT"})
		send(2, "100.25", "30")
		cov.set(snapshot.StreamBook, 2) // both dropped; their memory is the next events'
		send(3, "7", "0.125")
		send(4, "99.75", "1.5")
		sink := newLevels()
		defer lend(r, sink)()
		r.Streams().Watch([]string{"BTCUSDT"})
		want := []string{
			"live book [BTCUSDT]",
			"depth BTCUSDT 3 [{7 0.125}] [{0.125 7}]",
			"depth BTCUSDT 4 [{99.75 1.5}] [{1.5 99.75}]",
		}
		if got := sink.take(); !slices.Equal(got, want) {
			t.Fatalf("the poller got\n%q\nwant\n%q", got, want)
		}
	})
}

// What is held of a trade is the relay's copy: the adapter reuses its
// frame once the call returns, and the trades handed at a takeover are
// those the stream delivered.
func TestHeldTradeIsACopyOfTheLentFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, cov := newTestRelay(t)
		r.Live(snapshot.StreamTrades, []string{"BTCUSDT"})
		cov.set(snapshot.StreamTrades, 0)
		var frame []byte
		send := func(id int64, price, size string) {
			// The frame's bytes, as the adapter's decoder lends them.
			frame = append(frame[:0], price+size...)
			r.Trade("BTCUSDT", venue.Trade{ID: id, Price: unsafe.String(&frame[0], len(price)), Size: unsafe.String(&frame[len(price)], len(size))})
			for i := range frame {
				frame[i] = 'x' // the next frame
			}
		}
		send(1, "100.5", "2")
		send(2, "99.75", "1.5")
		sink := newLevels()
		defer lend(r, sink)()
		r.Streams().Watch([]string{"BTCUSDT"})
		want := []string{"live trades [BTCUSDT]", "trade BTCUSDT 1 100.5 2", "trade BTCUSDT 2 99.75 1.5"}
		if got := sink.take(); !slices.Equal(got, want) {
			t.Fatalf("the poller got\n%q\nwant\n%q", got, want)
		}
	})
}

// The memory a pair keeps for its held depth events follows what is held:
// a pair that once held maxHeld events (before any value covered its book)
// gives the rest back once the periods between two of the member's values
// bring fewer, and events held across compactions keep their levels.
func TestHeldMemoryFollowsWhatIsHeld(t *testing.T) {
	arena := &depthArena{}
	h := &events[heldDepth, venue.DepthUpdate]{id: func(u heldDepth) int64 { return u.Last }, own: arena.own, period: arena.period, pass: arena.lend}
	id := int64(0)
	// Long decimals, so that maxHeld events take more than minArena.
	price := func(id int64) string { return strconv.FormatInt(60000+id, 10) + "." + strings.Repeat("0", 190) + "5" }
	hold := func(n int, covered int64) {
		for range n {
			id++
			levels := []venue.Level{{Price: price(id), Size: "2"}, {Price: price(id), Size: ""}}
			h.hold(venue.DepthUpdate{Symbol: "BTCUSDT", Last: id, Bids: levels[:1], Asks: levels[1:]}, id, covered)
		}
	}
	check := func() {
		t.Helper()
		list := slices.Clone(h.list)
		sink := newLevels()
		for _, u := range list {
			arena.lend(sink, "BTCUSDT", u)
		}
		for i, got := range sink.take() {
			u := list[i].Last
			if want := fmt.Sprintf("depth BTCUSDT %d [{%s 2}] [{%s }]", u, price(u), price(u)); got != want {
				t.Fatalf("lent %q, want %q", got, want)
			}
		}
	}
	hold(maxHeld+10, 0)
	check()
	big := cap(arena.text)
	for range 20 { // periods of 10 events, each covered by the next value
		hold(10, id)
		check()
	}
	if len(h.list) != 10 || cap(arena.text) >= big || cap(arena.text) > 4*minArena {
		t.Errorf("%d events held in room for %d bytes (%d after maxHeld); want 10, in at most %d", len(h.list), cap(arena.text), big, 4*minArena)
	}
}
