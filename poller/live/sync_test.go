package live

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// withBudget lets n more reads through the fake's budget.
func (f *fakeREST) withBudget(n int) {
	f.mu.Lock()
	f.budget = &n
	f.refused, f.starts = nil, nil
	f.mu.Unlock()
}

func (f *fakeREST) purposesStarted() []budget.Purpose {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []budget.Purpose
	for _, st := range f.starts {
		out = append(out, st.purpose)
	}
	return out
}

// While a book out of sequence waits for the budget, no trades backfill
// takes weight from it: a book out of sequence is not served at all, a
// window that holds a trade is. A window a request waits for is the
// exception; and the snapshot that syncs a book is read at sync priority,
// which may take the part of the book share held back from background
// reads once that would otherwise go unused (see budget.Sync).
func TestBackfillsWaitForBooksOutOfSequence(t *testing.T) {
	s, rest, _ := newTestSource(t)
	s.Live(snapshot.StreamTrades, []string{testSymbol})
	s.Trade(testSymbol, venue.Trade{ID: 7, Price: "100", Size: "1", Time: 1})

	rest.withBudget(0)
	s.Sync()
	rest.wait()
	if got := rest.refused; !slices.Equal(got, []budget.Purpose{budget.PurposeSnapshot}) {
		t.Fatalf("reads asked of an exhausted budget: %v, want only the snapshot (the backfill waits behind it)", got)
	}

	// A request waits for the pair's book: that hurries its sync, not its
	// backfill, which still waits behind it.
	s.byID(testID).books.waiting.Store(time.Now().UnixNano())
	rest.withBudget(0)
	s.Sync()
	rest.wait()
	if got := rest.refused; !slices.Equal(got, []budget.Purpose{budget.PurposeSnapshot}) {
		t.Fatalf("reads asked with a request waiting for the book: %v, want only the snapshot", got)
	}
	s.byID(testID).books.waiting.Store(0)

	// A request waits for the pair's trades: its backfill goes ahead.
	s.byID(testID).trades.waiting.Store(time.Now().UnixNano())
	rest.withBudget(0)
	s.Sync()
	rest.wait()
	if got := rest.refused; !slices.Equal(got, []budget.Purpose{budget.PurposeSnapshot, budget.PurposeBackfill}) {
		t.Fatalf("reads asked with a request waiting: %v, want the snapshot, then the backfill", got)
	}
	s.byID(testID).trades.waiting.Store(0)

	// The budget allows the snapshot, at sync priority; once the book is in
	// sequence, the backfill follows on the next round.
	rest.withBudget(1)
	s.Sync()
	rest.wait()
	if len(rest.starts) != 1 || rest.starts[0] != (startedRead{budget.PurposeSnapshot, budget.Sync}) {
		t.Fatalf("reads started: %+v, want one snapshot at sync priority", rest.starts)
	}
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its snapshot")
	}
	rest.withBudget(1)
	s.Sync()
	rest.wait()
	if got := rest.purposesStarted(); !slices.Equal(got, []budget.Purpose{budget.PurposeBackfill}) {
		t.Fatalf("reads started with every book in sequence: %v, want the backfill", got)
	}
}

// logRecorder keeps the messages a source logs, with their attributes.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) log(_ slog.Level, _, msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := msg
	for _, a := range args {
		line += " " + a.(slog.Attr).String()
	}
	r.lines = append(r.lines, line)
}

// event records a line logged every time (Config.Event) as log does.
func (r *logRecorder) event(level slog.Level, msg string, args ...any) {
	r.log(level, "", msg, args...)
}

// A cold start of many books says how it goes: how many wait, the pace at
// which they come into sequence, when the last will, in a log line and in
// SyncProgress; and a line when every book is in sequence.
func TestSyncProgressOfAColdStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const books, perRound = 40, 2 // 2 books a second: 20 s in all
		rest := &fakeREST{book: venue.Book{
			LastUpdateID: 101,
			Bids:         []venue.Level{{Price: "99", Size: "1"}},
			Asks:         []venue.Level{{Price: "101", Size: "1"}},
		}}
		logs := &logRecorder{}
		store := snapshot.NewStore()
		s := New(Config{
			Streams: quietStreams{}, REST: rest, Store: store, Demand: noDemand{}, Log: logs.log, Event: logs.event,
			MaxStale: 10 * time.Second, Fresh: 5 * time.Second, SyncDepth: 500, RefreshDepth: 1000,
		})
		var markets []venue.Market
		var symbols []string
		for i := range books {
			sym := fmt.Sprintf("C%02dUSDT", i)
			markets = append(markets, venue.Market{Symbol: sym, Base: fmt.Sprintf("C%02d", i), Quote: "USDT", Perpetual: true, Trading: true})
			symbols = append(symbols, sym)
		}
		pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{Venue: "sim"}, time.Now())
		store.PutDoc(pairs, time.Now())
		s.SetPairs(pairs)
		s.Live(snapshot.StreamBook, symbols)
		for _, sym := range symbols {
			s.Depth(venue.DepthUpdate{Symbol: sym, First: 100, Last: 102, Prev: 99})
		}

		s.Watch()
		if got := s.SyncProgress(); got.Behind != books || got.ETA != -1 {
			t.Fatalf("before any sync: %+v, want %d waiting and no pace yet", got, books)
		}
		round := func() {
			time.Sleep(time.Second)
			rest.withBudget(perRound)
			s.Sync()
			rest.wait()
			s.Watch()
		}
		for range 10 {
			round()
		}
		got := s.SyncProgress()
		if got.Behind != books-10*perRound {
			t.Fatalf("after 10 rounds: %d waiting, want %d", got.Behind, books-10*perRound)
		}
		// The pace is 2 a second (120 a minute) and the estimate is what is
		// left at that pace.
		if got.PerMinute != 120 {
			t.Fatalf("pace %.1f a minute after 10 rounds of 2 a second, want 120", got.PerMinute)
		}
		if want := time.Duration(float64(got.Behind) / got.PerMinute * float64(time.Minute)); (got.ETA - want).Abs() > time.Millisecond {
			t.Fatalf("estimate %v, want %v", got.ETA, want)
		}
		for range 10 {
			round()
		}
		if got := s.SyncProgress(); got.Behind != 0 || got.ETA != 0 {
			t.Fatalf("after every book synced: %+v, want none waiting", got)
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		want := []string{
			"order books syncing in_sequence=20 waiting=20 total=40 per_minute=120 eta=10s",
			"every order book in sequence in_sequence=40 took=20s",
		}
		if !slices.Equal(logs.lines, want) {
			t.Fatalf("logged %q, want %q", logs.lines, want)
		}
	})
}
