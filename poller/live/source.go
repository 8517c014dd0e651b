// Package live keeps every listed pair current from the venue's market
// streams: a local order book per pair synced from a REST snapshot and kept
// in sequence by the diff stream, a window of the newest aggregate trades per
// pair, and the latest rows of each whole-market stream (the all-market
// tickers, the mark prices). A Source is the streams' Sink.
//
// A lost connection costs only what was really missed: a book is suspended
// until its next event says whether its chain goes on, and a trade window
// until its next trade id does; a window that missed trades reads back the
// missing ids only. Books out of sequence get their snapshots
// before any trades backfill but one a request waits for, at the whole
// budget the poller leaves them
// (the part kept for requests too, once it would otherwise go unused: see
// budget.Sync), and their progress is logged and reported (SyncProgress).
//
// It declares what it needs of the rest of the poller as small interfaces
// (REST, Store, Demand, Scheduler) rather than holding the poller: the REST
// reads a pair needs go through the poller's one call path and budget, and
// the poller's Run owns every goroutine the source runs on.
//
// Work per event is applying it under the pair's lock. Serializing happens on
// the publication schedules only, and only for pairs that changed; a pair
// that did not change but is still in sequence is republished as confirmed,
// which costs a copy of the value's header and keeps a quiet market fresh.
package live

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/logkey"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// REST is what stream-fed pairs need of the venue's REST API: one read of
// a book or of trades, made through the poller's call path (the back-off
// gate, the call timeout, the metrics), and a way to start such reads
// within the budget.
type REST interface {
	// Start runs read in the background, under the poller's lifetime, if a
	// read slot is free, calls are not paused and the budget grants the
	// ask; it reports whether it started.
	Start(ask budget.Ask, read func(ctx context.Context)) bool
	// Book reads one snapshot of a market's book, depth levels a side.
	Book(ctx context.Context, symbol string, depth int) (venue.Book, error)
	// Trades reads a market's newest aggregate trades.
	Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error)
	// TradesFrom reads a market's aggregate trades from id fromID on.
	TradesFrom(ctx context.Context, symbol string, fromID int64, limit int) ([]venue.Trade, error)
	// BookWeight is the weight of a book read of depth levels.
	BookWeight(depth int) int
	// TradesWeight is the weight of a trades read.
	TradesWeight() int
	// NewestTradeID reads the id of a market's newest single trade, which
	// a window's newest trade's LastID equals when it missed nothing
	// (venue.TradeIDReader).
	NewestTradeID(ctx context.Context, symbol string) (int64, error)
	// TradeIDWeight is the weight of NewestTradeID, and whether the venue
	// reads it at all; without it windows are read as they were.
	TradeIDWeight() (weight int, reads bool)
	// Deferred counts reads of s that the budget or the read slots pushed
	// to a later round.
	Deferred(s snapshot.Stream, n int)
}

// Store is where snapshots are published; *snapshot.Store is one.
type Store interface {
	PutBook(b *snapshot.Book) bool
	PutTrades(t *snapshot.Trades) bool
	PutDepth(d *snapshot.Depth) bool
	// FreshAt reports whether the pair's snapshot of st may still be
	// served at now.
	FreshAt(st snapshot.Stream, id []byte, now int64, maxStale time.Duration) bool
	// Pair returns the pair's snapshot of st, and whether the pair is
	// answered at now (see snapshot.Store.Pair).
	Pair(st snapshot.Stream, id []byte, now int64) (snapshot.PairValue, bool)
}

// Demand says what requests ask for.
type Demand interface {
	// Wanted reports whether requests read the pair's snapshot of s
	// within the hot period.
	Wanted(s snapshot.Stream, id string, now time.Time) bool
	// HeldBack reports whether the REST read of the pair's s that requests
	// ask for, while no usable stream keeps it, is being held back for
	// want of venue weight: the pair is not being read (see Sources).
	HeldBack(s snapshot.Stream, id string, now time.Time) bool
}

// Scheduler runs a source's work under its owner's lifetime, which ends
// every job and goroutine it started.
type Scheduler interface {
	// Every runs f every d; a run still going when the next is due makes
	// that one skip.
	Every(d time.Duration, f func(ctx context.Context))
	// Go runs f in a goroutine of its own until ctx is done.
	Go(f func(ctx context.Context))
}

// Config is what a Source needs.
type Config struct {
	Streams venue.Streams
	REST    REST
	Store   Store
	Demand  Demand
	// Log writes a line at most once a minute per key (a throttled log).
	Log func(level slog.Level, key, msg string, args ...any)
	// Event writes a line every time: the end of an incident (every book
	// in sequence again, every silenced stream delivering again), once per
	// change of state, which a repeat suppression must not swallow.
	Event func(level slog.Level, msg string, args ...any)
	// Metrics receives the source's metrics.
	Metrics *metrics.Set
	// MaxStale is the oldest snapshot the server serves.
	MaxStale time.Duration
	// Fresh is the age within which the streams' tickers and quotes are
	// used without the bulk REST calls standing in.
	Fresh time.Duration
	// SyncDepth and RefreshDepth are the depths of the snapshots that sync
	// a book and that are laid under a book in sequence.
	SyncDepth, RefreshDepth int
	// BookEvery and TradesEvery are how often changed books and trade
	// windows are published (and confirmed when unchanged).
	BookEvery, TradesEvery time.Duration
	// DepthEvery is how often each book in sequence is published as a
	// snapshot.Depth, for another process to start its book from (see
	// Seed), and once more when the streams stop; 0: never.
	DepthEvery time.Duration
	// Seed, when set, returns what a pair new to the source starts from
	// (see Seed). nil: every pair starts from REST reads.
	Seed func(tickerID string) Seed
}

// Source is the stream-fed source of every listed pair.
type Source struct {
	cfg     Config
	metrics *sourceMetrics

	// setMu serialises SetPairs (a catalog read and a spot-list reload
	// may both publish pairs); readers load the maps without locking.
	setMu sync.Mutex
	pairs atomic.Pointer[map[string]*pair] // by venue symbol
	ids   atomic.Pointer[map[string]*pair] // by ticker id
	// nextSlot is the slot of the next new pair (see pair.slot), under
	// setMu.
	nextSlot uint32

	// docs holds the latest rows of each whole-market stream (see docs).
	docs [venue.NumDocs]holder

	// wake starts a sync or backfill round at once when a request waits.
	wake chan struct{}
	// booksBehind is set while the last round saw books out of sequence
	// waiting for their snapshots (see booksWaiting): until they have
	// theirs, only the backfills of windows a request waits for may spend
	// weight, and books in sequence are not refreshed (see the due of
	// each kind in kinds).
	booksBehind atomic.Bool
	// subscribed is set for a stream kind once the venue acknowledged a
	// subscription of it (see PollPurpose).
	subscribed [snapshot.NumStreams]atomic.Bool
	progress   syncProgress
	// fellBack is how many streams of each kind the watchdog found served
	// by REST at its last round (given up as silent), for the line that
	// says when none is any more.
	fellBack    [snapshot.NumStreams]int
	dispatchers [snapshot.NumStreams]dispatcher
}

var _ venue.Sink = (*Source)(nil)

// New returns a source that follows no pair until SetPairs.
func New(cfg Config) *Source {
	if cfg.Log == nil {
		cfg.Log = func(slog.Level, string, string, ...any) {}
	}
	if cfg.Event == nil {
		cfg.Event = func(slog.Level, string, ...any) {}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	s := &Source{cfg: cfg, wake: make(chan struct{}, 1)}
	for d, row := range docs {
		s.docs[d] = row.hold()
	}
	empty := map[string]*pair{}
	s.pairs.Store(&empty)
	s.ids.Store(&empty)
	s.metrics = newSourceMetrics(cfg.Metrics, s)
	return s
}

// Schedule starts the source's work on sch: the market streams, the
// publications of books and trades, the sync and backfill rounds, the
// silence watchdog, and a sync as soon as a request waits for a pair.
func (s *Source) Schedule(sch Scheduler) {
	sch.Go(func(ctx context.Context) {
		if err := s.cfg.Streams.Run(ctx, s); err != nil && ctx.Err() == nil {
			s.cfg.Log(slog.LevelError, "streams", "market streams stopped; pairs are served by REST",
				slog.String(logkey.Err, err.Error()))
		}
		if s.cfg.DepthEvery > 0 {
			// The streams deliver nothing more: each book in sequence is
			// left as it ends, the depth the next poller of the member
			// starts from (see standby.Relay.Depth).
			s.publish(time.Now(), 0, 1, s.publishDepth)
		}
	})
	s.publishEachStep(sch)
	sch.Every(s.cfg.BookEvery, func(context.Context) { s.askRefreshes(); s.Sync() })
	sch.Every(time.Second, func(context.Context) { s.Watch() })
	sch.Go(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				s.Sync()
			}
		}
	})
}

// SetPairs follows a new pair list: pairs that stay keep their state, new
// ones start buffering, delisted ones are dropped, and the streams are told.
//
// A symbol still listed keeps the string it was first listed by, as the
// key of its pair and in what the streams are told, though each catalog
// read brings a copy: the venue's streams hand its events over with the
// string they were told to watch it by (binance's do), and a map lookup
// whose key has the address of the symbol looked up compares no bytes. At hundreds of pairs
// the keys' bytes are cold, and comparing them was most of a lookup.
func (s *Source) SetPairs(pairs *snapshot.Pairs) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	old := *s.pairs.Load()
	bySymbol := make(map[string]*pair, len(pairs.List()))
	byID := make(map[string]*pair, len(pairs.List()))
	symbols := make([]string, 0, len(pairs.List()))
	for _, p := range pairs.List() {
		sym := p.Symbol
		lp := old[sym]
		if lp != nil {
			sym = lp.symbol
		}
		if lp == nil || lp.tickerID != p.TickerID {
			lp = &pair{symbol: sym, tickerID: p.TickerID, slot: s.nextSlot, bookState: bookState{book: newBook()}}
			s.nextSlot++
			s.seed(lp)
		}
		lp.spot.Store(p.Kind == snapshot.KindSpot)
		if _, dup := bySymbol[sym]; dup {
			continue
		}
		bySymbol[sym] = lp
		byID[p.TickerID] = lp
		symbols = append(symbols, sym)
	}
	s.pairs.Store(&bySymbol)
	s.ids.Store(&byID)
	slices.Sort(symbols)
	s.cfg.Streams.Watch(symbols)
}

func (s *Source) pair(symbol string) *pair { return (*s.pairs.Load())[symbol] }

// byID returns the pair with ticker id id, or nil.
func (s *Source) byID(id string) *pair { return (*s.ids.Load())[id] }

// each calls f for every pair with its lock held.
func (s *Source) each(f func(lp *pair)) {
	for _, lp := range *s.pairs.Load() {
		lp.mu.Lock()
		f(lp)
		lp.mu.Unlock()
	}
}

// count counts the pairs for which f, called with the pair's lock held,
// reports true.
func (s *Source) count(f func(lp *pair) bool) int {
	n := 0
	s.each(func(lp *pair) {
		if f(lp) {
			n++
		}
	})
	return n
}

// poke starts a sync round without waiting for the schedule.
func (s *Source) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Streaming reports whether the pair's stream of k delivers, so that the
// stream, not REST polling, keeps it (see pair.streaming).
func (s *Source) Streaming(id string, k snapshot.Stream) bool {
	return s.test(id, func(lp *pair) bool { return lp.streaming(k) })
}

// Current reports whether the stream keeps the pair's snapshot of k
// current: synced (or backfilled), in sequence and not silent.
func (s *Source) Current(id string, k snapshot.Stream) bool {
	return s.test(id, func(lp *pair) bool { return lp.kind(k).current() })
}

// test reports what f, called with the lock held, says of the pair with
// ticker id id; false when no such pair is listed.
func (s *Source) test(id string, f func(lp *pair) bool) bool {
	lp := s.byID(id)
	if lp == nil {
		return false
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return f(lp)
}

// PollPurpose is what the poller's REST round spends on a stream-fed pair
// whose stream of k is lost: a stand-in, which leaves the window room for
// the syncs the books need once their streams are back (see
// budget.PurposeStandInBook). Until the venue has acknowledged a
// subscription of k, no stream was lost and no sync waits for one: the
// venue serves its REST API alone (its stream paths answer 404, say), and
// a round's read is a poll, as without streams. As stand-ins, after a
// few dozen pairs had been answered the pacing held the reads of a pair
// clients kept reading for half a minute.
func (s *Source) PollPurpose(k snapshot.Stream) budget.Purpose {
	if !s.subscribed[k].Load() {
		return poll[k]
	}
	return standIn[k]
}

// standIn is the stand-in purpose of each stream kind, and poll the purpose
// of a REST round's read without streams.
var (
	standIn = [snapshot.NumStreams]budget.Purpose{
		snapshot.StreamBook:   budget.PurposeStandInBook,
		snapshot.StreamTrades: budget.PurposeStandInTrades,
	}
	poll = [snapshot.NumStreams]budget.Purpose{
		snapshot.StreamBook:   budget.PurposePollBook,
		snapshot.StreamTrades: budget.PurposePollTrades,
	}
)
