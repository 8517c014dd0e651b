package live

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

const (
	testSymbol = "BTCUSDT"
	testID     = "BTC_USDT"
)

// fakeREST serves one fixed snapshot and counts the reads it starts; each
// read runs in its own goroutine, waited for by wait.
type fakeREST struct {
	mu      sync.Mutex
	book    venue.Book
	started int
	// onStart, when set, runs once inside the next Start, before it
	// starts its read: what another goroutine does meanwhile.
	onStart func()
	// budget, when set, is how many more reads the budget allows; the
	// reads refused and started are recorded in refused and starts.
	budget *int
	// refuse, when set, refuses the reads of the purposes it names, as a
	// budget refuses a read heavier than the weight it has free.
	refuse  func(budget.Purpose) bool
	refused []budget.Purpose
	starts  []startedRead
	// depths are the depths of the books read, in order.
	depths []int
	// deferred counts the reads the source reported held back.
	deferred int
	wg       sync.WaitGroup
}

// startedRead is one read Start let through.
type startedRead struct {
	purpose budget.Purpose
	prio    budget.Priority
}

func (f *fakeREST) Start(ask budget.Ask, read func(context.Context)) bool {
	purpose, prio := ask.Purpose, ask.Priority
	f.mu.Lock()
	hook := f.onStart
	f.onStart = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	if f.refuse != nil && f.refuse(purpose) {
		f.refused = append(f.refused, purpose)
		f.mu.Unlock()
		return false
	}
	if f.budget != nil {
		if *f.budget == 0 {
			f.refused = append(f.refused, purpose)
			f.mu.Unlock()
			return false
		}
		*f.budget--
	}
	f.started++
	f.starts = append(f.starts, startedRead{purpose, prio})
	f.mu.Unlock()
	f.wg.Go(func() { read(context.Background()) })
	return true
}

func (f *fakeREST) Book(_ context.Context, _ string, depth int) (venue.Book, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.depths = append(f.depths, depth)
	return f.book, nil
}

func (f *fakeREST) Trades(context.Context, string, int) ([]venue.Trade, error) { return nil, nil }
func (f *fakeREST) TradesFrom(context.Context, string, int64, int) ([]venue.Trade, error) {
	return nil, nil
}
func (f *fakeREST) NewestTradeID(context.Context, string) (int64, error) { return 0, nil }
func (f *fakeREST) TradeIDWeight() (int, bool)                           { return 0, false }
func (f *fakeREST) BookWeight(int) int                                   { return 10 }
func (f *fakeREST) TradesWeight() int                                    { return 20 }
func (f *fakeREST) Deferred(_ snapshot.Stream, n int) {
	f.mu.Lock()
	f.deferred += n
	f.mu.Unlock()
}

func (f *fakeREST) wait() { f.wg.Wait() }

type quietStreams struct{}

func (quietStreams) Run(ctx context.Context, _ venue.Sink) error { <-ctx.Done(); return ctx.Err() }
func (quietStreams) Watch([]string)                              {}
func (quietStreams) Resubscribe(snapshot.Stream, string)         {}

// noDemand is a Demand that no request reads.
type noDemand struct{}

func (noDemand) Wanted(snapshot.Stream, string, time.Time) bool   { return false }
func (noDemand) HeldBack(snapshot.Stream, string, time.Time) bool { return false }

// hookStore is a snapshot.Store that runs onPutBook before each book it
// publishes takes effect.
type hookStore struct {
	*snapshot.Store
	onPutBook  func(b *snapshot.Book)
	onPutDepth func(d *snapshot.Depth)
}

func (h *hookStore) PutDepth(d *snapshot.Depth) bool {
	if h.onPutDepth != nil {
		h.onPutDepth(d)
	}
	return h.Store.PutDepth(d)
}

func (h *hookStore) PutBook(b *snapshot.Book) bool {
	if h.onPutBook != nil {
		h.onPutBook(b)
	}
	return h.Store.PutBook(b)
}

// newTestSource is a source following one listed pair whose depth stream is
// live, with one event buffered: its book waits for a snapshot.
func newTestSource(t *testing.T) (*Source, *fakeREST, *hookStore) {
	t.Helper()
	s, rest, store := newListedSource(t, nil)
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 100, Last: 102, Prev: 99,
		Bids: []venue.Level{{Price: "99", Size: "3"}}})
	return s, rest, store
}

// newListedSource is a source following one listed pair, started from seed
// (nil: none), whose streams have said nothing yet.
func newListedSource(t *testing.T, seed func(string) Seed) (*Source, *fakeREST, *hookStore) {
	t.Helper()
	return newSourceOf(t, Config{SyncDepth: 500, RefreshDepth: 1000, Seed: seed}, perpetual(testSymbol, "BTC"))
}

// newSourceOf is a source with cfg's depths and seed following the markets,
// listed, whose streams have said nothing yet. Its REST serves one snapshot
// of two levels a side.
func newSourceOf(t testing.TB, cfg Config, markets ...venue.Market) (*Source, *fakeREST, *hookStore) {
	t.Helper()
	rest := &fakeREST{book: venue.Book{
		LastUpdateID: 101,
		Bids:         []venue.Level{{Price: "99", Size: "1"}, {Price: "98", Size: "1"}},
		Asks:         []venue.Level{{Price: "101", Size: "1"}, {Price: "102", Size: "1"}},
	}}
	store := &hookStore{Store: snapshot.NewStore()}
	cfg.Streams, cfg.REST, cfg.Store, cfg.Demand = quietStreams{}, rest, store, noDemand{}
	cfg.Log = func(slog.Level, string, string, ...any) {}
	cfg.MaxStale, cfg.Fresh = 10*time.Second, 5*time.Second
	s := New(cfg)
	pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{Venue: "sim"}, time.Now())
	store.PutDoc(pairs, time.Now())
	s.SetPairs(pairs)
	return s, rest, store
}

// perpetual is a trading perpetual market quoted in USDT.
func perpetual(symbol, base string) venue.Market {
	return venue.Market{Symbol: symbol, Base: base, Quote: "USDT", Perpetual: true, Trading: true}
}

func (s *Source) servedBook(t *testing.T) *snapshot.Book {
	t.Helper()
	b, _ := s.cfg.Store.(*hookStore).Book([]byte(testID), time.Now().UnixNano())
	if b == nil {
		t.Fatal("no book published")
	}
	return b
}

// The schedule and a waiting request's wake-up may dispatch at once: a
// pair that needs a snapshot is read once, not once per dispatcher.
func TestTwoDispatchersReadOneSnapshot(t *testing.T) {
	s, rest, _ := newTestSource(t)
	rest.onStart = func() { s.dispatch(snapshot.StreamBook) } // the other dispatcher, between claim and read
	s.dispatch(snapshot.StreamBook)
	rest.wait()
	if rest.started != 1 {
		t.Fatalf("%d snapshot reads started for one book, want 1", rest.started)
	}
	if !s.Current(testID, snapshot.StreamBook) {
		t.Fatal("the book is not in sequence after its snapshot")
	}
}

// A confirmation (the schedule republishing an unchanged book) racing the
// publication of a newer state never puts the older book back.
func TestConfirmationNeverReplacesANewerBook(t *testing.T) {
	s, rest, store := newTestSource(t)
	s.Sync()
	rest.wait()
	older := s.servedBook(t)
	if !strings.Contains(string(older.Body()), `["99","3"]`) {
		t.Fatalf("synced book %s, want the buffered event applied", older.Body())
	}
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 103, Last: 103, Prev: 102,
		Bids: []venue.Level{{Price: "99", Size: "7"}}})
	// A publisher (a sync, say) takes the newer state and builds it ...
	lp := s.byID(testID)
	lp.mu.Lock()
	newer := lp.bookState.take(s, lp, time.Now())
	lp.mu.Unlock()
	// ... and finishes while the schedule's confirmation of the older
	// book is on its way to the store.
	finished := false
	store.onPutBook = func(b *snapshot.Book) {
		if b.Version() == older.Version() && !finished {
			finished = true
			newer()
		}
	}
	s.publishPeriod()
	if !finished {
		newer()
	}
	if got := string(s.servedBook(t).Body()); !strings.Contains(got, `["99","7"]`) {
		t.Fatalf("served\n%s\nwant the newer book", got)
	}
}

// Two publishers of one book finishing out of order never leave the older
// state in place.
func TestOlderPublicationNeverReplacesANewerOne(t *testing.T) {
	s, rest, _ := newTestSource(t)
	s.Sync()
	rest.wait()
	lp := s.byID(testID)
	lp.mu.Lock()
	older := lp.bookState.take(s, lp, time.Now())
	lp.mu.Unlock()
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 103, Last: 103, Prev: 102,
		Bids: []venue.Level{{Price: "99", Size: "7"}}})
	lp.mu.Lock()
	newer := lp.bookState.take(s, lp, time.Now())
	lp.mu.Unlock()
	newer()
	older()
	if got := string(s.servedBook(t).Body()); !strings.Contains(got, `["99","7"]`) {
		t.Fatalf("served\n%s\nwant the newer state", got)
	}
}

// The books are settled only once every depth stream delivers and no book
// waits for its snapshot: a listed pair whose stream is not acknowledged
// yet is not, nor one buffering for its sync.
func TestSettledOnceEveryBookIsInSequence(t *testing.T) {
	if s, _, _ := newSourceOf(t, Config{}); s.Settled(time.Now()) {
		t.Fatal("settled while following no pair: every book is still to come")
	}
	s, rest, _ := newListedSource(t, nil)
	now := time.Now()
	if s.Settled(now) {
		t.Fatal("settled before the pair's depth stream was acknowledged")
	}
	s.Live(snapshot.StreamBook, []string{testSymbol})
	s.Depth(venue.DepthUpdate{Symbol: testSymbol, First: 100, Last: 102, Prev: 99})
	if s.Settled(time.Now()) {
		t.Fatal("settled while the book waits for its snapshot")
	}
	s.Sync()
	rest.wait()
	if !s.Current(testID, snapshot.StreamBook) || !s.Settled(time.Now()) {
		t.Fatal("not settled with the book in sequence")
	}
}

// A symbol still listed keeps the string it was first listed by, though
// each catalog read brings a copy: the streams are told that string again,
// so that the events they deliver with it find its pair by the string's
// address.
func TestAListedSymbolKeepsItsString(t *testing.T) {
	s, _, _ := newListedSource(t, nil)
	first := s.pair(testSymbol)
	watched := &watchStreams{}
	s.cfg.Streams = watched
	reread := snapshot.NewPairs([]venue.Market{perpetual(strings.Clone(testSymbol), "BTC")},
		snapshot.PairsConfig{Venue: "sim"}, time.Now())
	s.SetPairs(reread)
	if lp := s.pair(testSymbol); lp != first {
		t.Fatal("the pair listed again lost its state")
	}
	if len(watched.symbols) != 1 || unsafe.StringData(watched.symbols[0]) != unsafe.StringData(first.symbol) {
		t.Errorf("the streams were told %q, want the string the pair was first listed by", watched.symbols)
	}
	for sym := range *s.pairs.Load() {
		if unsafe.StringData(sym) != unsafe.StringData(first.symbol) {
			t.Errorf("the pair is keyed by a copy of its symbol")
		}
	}
}

// watchStreams is quietStreams that keeps the symbols it was last told to
// watch.
type watchStreams struct {
	quietStreams
	symbols []string
}

func (w *watchStreams) Watch(symbols []string) { w.symbols = symbols }
