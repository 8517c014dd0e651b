// Package poller schedules the venue's reads and publishes what they bring:
// Run and the poller's one lifetime, the one call path every venue call
// takes (the gate, the budget, the call timeout, the metrics), the REST
// rounds over the pairs requests keep hot, the single-flight cold loads of
// a pair's first request; and, apart from those (see documents), the
// whole-market documents: the pair list from the catalog, the tickers and
// the contracts.
// Where the venue has market streams, the stream-fed source (poller/live)
// keeps every listed pair current on jobs the poller runs for it (see
// live.Scheduler).
//
// Every read turns into an immutable snapshot published through a
// snapshot.Store; a failed read publishes nothing, so the last good snapshot
// stays in place until the server judges it too old. The refresh functions
// are synchronous and tested directly; cron only schedules them.
package poller

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/robfig/cron/v3"

	"marketfeed/internal/logkey"
	"marketfeed/internal/logthrottle"
	"marketfeed/poller/budget"
	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Config is what a Poller needs; zero durations take the defaults. It is
// the poller's whole set of settings, each one a command-line flag, and
// stays one flat struct so that a caller sets any of them by name.
type Config struct {
	Venue  venue.Venue
	Store  *snapshot.Store
	Logger *slog.Logger // nil: discard
	// Metrics receives the poller's metrics: venue calls, weight, pauses,
	// snapshot ages, hot pairs, cold loads. nil: a private set, so that
	// pollers in tests do not share counters. One set holds the metrics of
	// one Poller: the names would collide.
	Metrics *metrics.Set

	// Spot lists the platform's spot pairs as ticker ids.
	Spot []string
	// WarnUnlistedSpot logs a warning for each Spot id the venue has no
	// tradable market of, which is not published (see snapshot.NewPairs):
	// set for a list an operator gave, not for a built-in one.
	WarnUnlistedSpot bool
	// Quotes, when not empty, allows perp items only with these quote assets.
	Quotes []string
	// Budget is the fraction of the venue's weight limit the poller may spend
	// (default 0.5), leaving the rest to anything else on the same address.
	Budget float64
	// Share, in (0, 1], is the part of one budget that Budget is, when
	// several processes on the same address share it (cluster members
	// reading the venue alone); default 1. The venue counts the address's
	// weight: what the others spend, up to their parts, is not taken as
	// this poller's, or each would be held to its part less the others'.
	Share float64

	BookEvery    time.Duration // per hot pair; default 350 ms
	TradesEvery  time.Duration // per hot pair; default 1 s
	TickersEvery time.Duration // bulk statistics and quotes at most this often; default 1 s
	CatalogEvery time.Duration // default 1 min
	HotTTL       time.Duration // a pair cools after this long without a request; default 60 s
	MaxStale     time.Duration // the oldest snapshot the server serves; bulk reads are planned to stay well inside it; default 10 s
	CallTimeout  time.Duration // bounds one venue call; default 10 s
	Parallel     int           // per-pair reads in flight at once; default 8

	// Streams, when set, are the venue's market streams: every listed
	// pair's book is then a local order book kept from the diff stream,
	// its trades a window fed by the trade stream, and the tickers come
	// from the all-market ticker stream; REST reads only snapshots and
	// backfills, and stands in for a pair whose stream is down. nil: REST
	// only, for the pairs requests ask for.
	Streams venue.Streams
	// SyncDepth is the per-side depth of the snapshot a local book starts
	// from, and of the read of a book that vouches for fewer levels than a
	// request asks (default DefaultSyncDepth). A book is never served
	// short of the levels asked (see snapshot.Book.Serves): a book synced
	// from 100 levels ran short within a minute of a moving top, and each
	// request then waited for a read of its own.
	SyncDepth int
	// RefreshDepth is the depth of the snapshot laid under a book whose
	// side came close to its edge (default 1000): the deepest snapshot is
	// the cheapest in the long run, since it is needed least often.
	RefreshDepth int
	// Seed, when set with Streams, returns what a stream-fed pair new to
	// the poller starts from instead of its REST reads (see live.Seed): a
	// cluster member that takes over the ingest starts from the values
	// the leader before it published.
	Seed func(tickerID string) live.Seed
	// DepthEvery, when positive with Streams, is how often each book in
	// sequence is published as a snapshot.Depth for a Seed of another
	// process's poller, and once more when the streams stop, for the
	// member's next poller; 0 (a process alone): never.
	DepthEvery time.Duration
	// Replicated, when set, reports whether every replica holds the
	// book and trades this poller published of a pair: a pair new to the
	// catalog is listed only once it does (or has waited its longest), so
	// that no replica lists a pair another cannot answer yet.
	Replicated func(tickerID string) bool
	// RefreshShare is the share of the venue's weight limit refreshes may
	// spend in a minute (default 0.04, at most half of Budget). A market
	// whose price travels faster than that buys serves fewer than the
	// published levels on the side it moves towards until its refresh
	// comes: always an exact prefix of the venue's book, never a level it
	// cannot vouch for. Books out of sequence are not held to it (they are
	// not served at all), nor are books with a side run dry (see
	// tierDepleted).
	RefreshShare float64
}

// DefaultSyncDepth is Config.SyncDepth's default: 500 levels (Binance:
// weight 10), five times what is served, so that a book synced from it
// serves its 100 levels until the top has moved 400 levels, which in
// steady state a book rarely does before its refresh (docs/venues.md has
// the measurements).
const DefaultSyncDepth = snapshot.DepthLevels

// fresher is the age within which data from the streams (and the bulk
// calls' last reads) is used without another REST read standing in: half of
// max-stale, so that a source gone quiet leaves time for a read before
// anything ages out.
func (c *Config) fresher() time.Duration { return c.MaxStale / 2 }

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.BookEvery, 350*time.Millisecond)
	def(&c.TradesEvery, time.Second)
	def(&c.TickersEvery, time.Second)
	def(&c.CatalogEvery, time.Minute)
	def(&c.HotTTL, time.Minute)
	def(&c.MaxStale, 10*time.Second)
	def(&c.CallTimeout, 10*time.Second)
	if c.Budget <= 0 || c.Budget > 1 {
		c.Budget = 0.5
	}
	if c.Share <= 0 || c.Share > 1 {
		c.Share = 1
	}
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	if c.SyncDepth <= 0 {
		c.SyncDepth = DefaultSyncDepth
	}
	if c.RefreshDepth <= 0 {
		c.RefreshDepth = 1000
	}
	if c.RefreshShare <= 0 {
		c.RefreshShare = 0.04
	}
	// Refreshes never take more than half the budget.
	c.RefreshShare = min(c.RefreshShare, c.Budget/2)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Poller reads the venue on schedules and publishes snapshots. It is where
// the parts meet (the venue, the store, the budget and gate, the hot sets,
// the stream-fed source, the plans), so it holds one field per part, each
// owned by its own type, and the few counters its status reports.
type Poller struct {
	cfg    Config
	venue  venue.Venue
	store  *snapshot.Store
	log    *slog.Logger
	ledger *budget.Ledger
	gate   *budget.Gate
	logs   *logthrottle.Throttle
	pause  pauseLog                     // the log of a pause of every venue call, start to end
	hot    [snapshot.NumStreams]*hotSet // by snapshot.Stream
	// slots bound the reads of each stream in flight at once, across
	// overlapping rounds; cap Config.Parallel.
	slots [snapshot.NumStreams]chan struct{}
	// liveSlots bound the snapshot and backfill reads of stream-fed pairs
	// in flight at once; cap Config.Parallel.
	liveSlots chan struct{}
	// src is the stream-fed source, or restOnly without streams: the
	// poller asks it the same questions either way.
	src     source
	metrics *pollerMetrics
	born    time.Time // when New ran: the age of data never read

	life    lifetime
	flights flights
	planned bulkPlan
	// docs builds the whole-market documents: the pair list, the tickers
	// and the contracts.
	docs *documents

	stretched  atomic.Int64 // reads a round could not afford
	venueLimit atomic.Int64 // the venue's weight limit per minute; 0: none
}

// lifetime is the poller's one lifetime: every goroutine it starts runs
// under ctx and is waited for by wg (see Run, spawn).
type lifetime struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // orders spawn against end
	ended  bool
}

// flights are the cold loads in flight, one per pair and stream.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

type flightKey struct {
	stream snapshot.Stream
	id     string
}

type flight struct {
	done  chan struct{}
	err   error
	depth int // the levels a side a book's flight reads for (see Load)
}

// New returns a poller; Run starts it.
func New(cfg Config) *Poller {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Poller{
		cfg:       cfg,
		venue:     cfg.Venue,
		store:     cfg.Store,
		log:       cfg.Logger.With("component", "poller", "venue", cfg.Venue.Name()),
		gate:      budget.NewGate(),
		logs:      logthrottle.New(time.Minute),
		liveSlots: make(chan struct{}, cfg.Parallel),
		life:      lifetime{ctx: ctx, cancel: cancel},
		flights:   flights{m: make(map[flightKey]*flight)},
		born:      time.Now(),
	}
	for st := range snapshot.NumStreams {
		p.hot[st] = newHotSet()
		p.slots[st] = make(chan struct{}, cfg.Parallel)
	}
	// The ledger asks the poller's one planner for the caps at every
	// decision: no caller computes caps of its own.
	p.ledger = budget.NewLedger(p.capsPlan)
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	// The one choice of source; nothing else asks whether streams are read.
	var src interface {
		source
		docSource
	} = restOnly{}
	if cfg.Streams != nil {
		p.ledger.SetServingReserve(true)
		src = live.New(live.Config{
			Streams: cfg.Streams,
			REST:    liveREST{p},
			Store:   cfg.Store,
			Demand:  liveREST{p},
			Log: func(level slog.Level, key, msg string, args ...any) {
				p.logs.Log(p.log, level, key, msg, args...)
			},
			Event: func(level slog.Level, msg string, args ...any) {
				p.log.Log(context.Background(), level, msg, args...)
			},
			Metrics:      set,
			MaxStale:     cfg.MaxStale,
			Fresh:        p.cfg.fresher(),
			SyncDepth:    cfg.SyncDepth,
			RefreshDepth: cfg.RefreshDepth,
			BookEvery:    cfg.BookEvery,
			TradesEvery:  cfg.TradesEvery,
			Seed:         cfg.Seed,
			DepthEvery:   cfg.DepthEvery,
		})
	}
	p.src = src
	p.docs = newDocuments(p, src)
	p.metrics = newPollerMetrics(set, p)
	p.plan(0)
	return p
}

// Run reads the catalog and tickers once, then refreshes everything on its
// schedules until ctx is done. It returns after every goroutine the poller
// started (schedules, streams, reads, cold loads) has finished; after that
// the poller starts no more reads, and Load fails.
//
// The poller has one lifetime, made in New so that Load works before Run:
// Run ends it when ctx is done, and every goroutine runs under it.
func (p *Poller) Run(ctx context.Context) error {
	defer p.end()
	stop := context.AfterFunc(ctx, p.life.cancel)
	defer stop()
	ctx = p.life.ctx
	if err := p.RefreshCatalog(ctx); err != nil {
		p.log.Warn("first catalog read failed; retrying on schedule", logkey.Err, err)
	}
	p.docs.first(ctx, p.src.KeepsTickers())
	logger := cronLogger{p.log}
	c := cron.New(cron.WithLogger(logger))
	// Bulk jobs never overlap themselves. Per-pair rounds may: a round waits
	// for the reads it started, and one read stuck until the call timeout
	// must not hold back the next round's reads of every other pair; reads
	// still in flight are skipped instead (see round).
	single := cron.NewChain(cron.Recover(logger), cron.SkipIfStillRunning(logger))
	overlapping := cron.NewChain(cron.Recover(logger))
	every := func(d time.Duration, chain cron.Chain, f func(context.Context)) {
		c.Schedule(Every(d), chain.Then(cron.FuncJob(func() { f(ctx) })))
	}
	every(p.cfg.CatalogEvery, single, func(ctx context.Context) { _ = p.RefreshCatalog(ctx) })
	p.docs.schedule(func(d time.Duration, f func(context.Context)) { every(d, single, f) }, p.src.KeepsTickers())
	for k, row := range streamRows {
		every(row.every(&p.cfg), overlapping, func(ctx context.Context) { p.Refresh(ctx, snapshot.Stream(k)) })
	}
	p.src.Schedule(scheduler{p, func(d time.Duration, f func(context.Context)) { every(d, single, f) }})
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}

// spawn runs fn under the poller's lifetime and reports whether it did: once
// Run has ended, nothing more starts.
func (p *Poller) spawn(fn func(ctx context.Context)) bool {
	p.life.mu.Lock()
	defer p.life.mu.Unlock()
	if p.life.ended {
		return false
	}
	p.life.wg.Go(func() { fn(p.life.ctx) })
	return true
}

// end ends the poller's lifetime and waits for everything it started.
func (p *Poller) end() {
	p.life.mu.Lock()
	p.life.ended = true
	p.life.mu.Unlock()
	p.life.cancel()
	p.life.wg.Wait()
}

// scheduler runs a source's jobs on Run's cron, never overlapping
// themselves, and its goroutines under the poller's lifetime.
type scheduler struct {
	p     *Poller
	every func(d time.Duration, f func(context.Context))
}

func (s scheduler) Every(d time.Duration, f func(context.Context)) { s.every(d, f) }
func (s scheduler) Go(f func(context.Context))                     { s.p.spawn(f) }

// cronLogger routes cron's own messages (recovered panics above all) to slog.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(string, ...any) {} // cron's scheduling chatter
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error(msg, append([]any{logkey.Err, err}, kv...)...)
}
