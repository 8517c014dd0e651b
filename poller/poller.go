// Package poller owns everything that reads the venue: the Venue interface
// adapters implement, the schedules that drive reads, the weight budget that
// stretches cadence instead of exceeding the venue's limit, the back-off that
// obeys the venue's rate-limit answers, the hot set of pairs that requests
// keep alive, and the single-flight cold loads of a pair's first request.
//
// Every read turns into an immutable snapshot published through a
// snapshot.Store; a failed read publishes nothing, so the last good snapshot
// stays in place until the server judges it too old. The refresh functions are
// synchronous and tested directly; cron only schedules them.
package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/robfig/cron/v3"

	"marketfeed/internal/backoff"
	"marketfeed/internal/logthrottle"
	"marketfeed/poller/budget"
	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// bulkPlan is how often the bulk calls run within the budget, derived from
// the venue's weight limit (see Poller.plan).
type bulkPlan struct {
	mu          sync.Mutex
	statsEvery  time.Duration
	quotesEvery time.Duration
	bulkReserve int // weight per minute the bulk calls are planned to spend
	// catalogReserve is the part of bulkReserve the catalog needs; the
	// rest is for tickers, which a live ticker stream makes unnecessary.
	catalogReserve int
	// staleUnmet is set when the bulk calls cannot run often enough within
	// their share of the budget to honour max-stale.
	staleUnmet bool
}

// Config is what a Poller needs; zero durations take the defaults.
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
	// Quotes, when not empty, allows perp items only with these quote assets.
	Quotes []string
	// Budget is the fraction of the venue's weight limit the poller may spend
	// (default 0.5), leaving the rest to anything else on the same address.
	Budget float64

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
	// from (default 500): deeper than the 100 levels published, so that
	// the published levels stay complete as the top is consumed, and half
	// the weight of 1000, so that a cold start of every book is quicker.
	SyncDepth int
	// RefreshDepth is the depth of the snapshot laid under a book whose
	// side came close to its edge (default 1000): the deepest snapshot is
	// the cheapest in the long run, since it is needed least often.
	RefreshDepth int
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
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	if c.SyncDepth <= 0 {
		c.SyncDepth = 500
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

// Poller reads the venue on schedules and publishes snapshots.
type Poller struct {
	cfg    Config
	venue  venue.Venue
	store  *snapshot.Store
	log    *slog.Logger
	ledger *budget.Ledger
	gate   *budget.Gate
	logs   *logthrottle.Throttle
	hot    [2]*hotSet // by snapshot.Stream
	// slots bound the reads of each stream in flight at once, across
	// overlapping rounds; cap Config.Parallel.
	slots [2]chan struct{}
	// liveSlots bound the snapshot and backfill reads of stream-fed pairs
	// in flight at once; cap Config.Parallel.
	liveSlots chan struct{}
	// src is the stream-fed source, or restOnly without streams: the
	// poller asks it the same questions either way.
	src     source
	metrics *pollerMetrics
	born    time.Time // when New ran: the age of data never read

	// The poller's one lifetime: every goroutine it starts runs under ctx
	// and is waited for by wg (see Run, spawn).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lifeMu sync.Mutex // orders spawn against end
	ended  bool

	// flights are the cold loads in flight, one per pair and stream.
	flightsMu sync.Mutex
	flights   map[flightKey]*flight
	// catalogMu guards the spot list and the last catalog, from which the
	// pairs are rebuilt when the spot list changes.
	catalogMu sync.Mutex
	spot      []string
	markets   []venue.Market
	planned   bulkPlan
	tk        tickerReads

	stretched  atomic.Int64 // reads a round could not afford
	omitted    atomic.Int64 // spot tickers left out of the last build
	venueLimit atomic.Int64 // the venue's weight limit per minute; 0: none
}

type flightKey struct {
	stream snapshot.Stream
	id     string
}

type flight struct {
	done chan struct{}
	err  error
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
		ledger:    budget.NewLedger(),
		gate:      budget.NewGate(),
		logs:      logthrottle.New(time.Minute),
		hot:       [2]*hotSet{newHotSet(), newHotSet()},
		slots:     [2]chan struct{}{make(chan struct{}, cfg.Parallel), make(chan struct{}, cfg.Parallel)},
		liveSlots: make(chan struct{}, cfg.Parallel),
		ctx:       ctx,
		cancel:    cancel,
		flights:   make(map[flightKey]*flight),
		spot:      slices.Clone(cfg.Spot),
		born:      time.Now(),
	}
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	p.src = restOnly{}
	if cfg.Streams != nil {
		p.src = live.New(live.Config{
			Streams: cfg.Streams,
			REST:    liveREST{p},
			Store:   cfg.Store,
			Demand:  liveREST{p},
			Log: func(level slog.Level, key, msg string, args ...any) {
				p.logs.Log(p.log, level, key, msg, args...)
			},
			Metrics:      set,
			MaxStale:     cfg.MaxStale,
			Fresh:        p.fresher(),
			SyncDepth:    cfg.SyncDepth,
			RefreshDepth: cfg.RefreshDepth,
		})
	}
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
	stop := context.AfterFunc(ctx, p.cancel)
	defer stop()
	ctx = p.ctx
	if err := p.RefreshCatalog(ctx); err != nil {
		p.log.Warn("first catalog read failed; retrying on schedule", logKeyErr, err)
	}
	if err := p.RefreshTickers(ctx); err != nil {
		p.log.Warn("first tickers read failed; retrying on schedule", logKeyErr, err)
	}
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
	// With streams the tickers are rebuilt from the ticker stream and the
	// local books as often as books are published, so that a spot pair's
	// book back in sequence shows in /tickers at once; the bulk calls keep
	// their own, slower plan either way.
	tickersEvery := p.cfg.TickersEvery
	if p.cfg.Streams != nil {
		tickersEvery = min(tickersEvery, p.cfg.BookEvery)
	}
	every(tickersEvery, single, func(ctx context.Context) { _ = p.RefreshTickers(ctx) })
	every(p.cfg.BookEvery, overlapping, p.RefreshBooks)
	every(p.cfg.TradesEvery, overlapping, p.RefreshTrades)
	if p.cfg.Streams != nil {
		src := p.src
		p.spawn(func(ctx context.Context) {
			if err := src.Stream(ctx); err != nil && ctx.Err() == nil {
				p.log.Error("market streams stopped; pairs are served by REST", logKeyErr, err)
			}
		})
		every(p.cfg.BookEvery, single, func(context.Context) { src.PublishBooks(); src.Sync() })
		every(p.cfg.TradesEvery, single, func(context.Context) { src.PublishTrades() })
		every(time.Second, single, func(context.Context) { src.Watch() })
		// A request waiting for a pair starts its read at once, not at the
		// next tick.
		p.spawn(func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-src.Wake():
					src.Sync()
				}
			}
		})
	}
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}

// spawn runs fn under the poller's lifetime and reports whether it did: once
// Run has ended, nothing more starts.
func (p *Poller) spawn(fn func(ctx context.Context)) bool {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.ended {
		return false
	}
	p.wg.Go(func() { fn(p.ctx) })
	return true
}

// end ends the poller's lifetime and waits for everything it started.
func (p *Poller) end() {
	p.lifeMu.Lock()
	p.ended = true
	p.lifeMu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// cronLogger routes cron's own messages (recovered panics above all) to slog.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(string, ...any) {} // cron's scheduling chatter
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error(msg, append([]any{logKeyErr, err}, kv...)...)
}

// plan derives how often the bulk calls run from the venue's weight limit:
// statistics may take 30 % of the budget and quotes 10 %, never more, so
// that per-pair reads always keep a share. When those shares cannot run the
// bulk calls twice per max-stale period, tickers go stale on schedule: the
// process says so (a log line and a metric) rather than starve every pair.
// What the bulk calls are planned to spend is held back from per-pair reads.
func (p *Poller) plan(limit int) {
	p.planned.mu.Lock()
	defer p.planned.mu.Unlock()
	ceiling := max(p.cfg.TickersEvery, p.fresher())
	p.planned.staleUnmet = false
	interval := func(weight int, share float64) time.Duration {
		if limit == 0 || weight == 0 {
			return p.cfg.TickersEvery
		}
		d := time.Duration(float64(weight) * float64(time.Minute) / (share * float64(limit)))
		if d > ceiling {
			p.planned.staleUnmet = true
		}
		return max(d, p.cfg.TickersEvery)
	}
	p.planned.statsEvery = interval(p.venue.Weight(venue.CallStats), 0.3)
	p.planned.quotesEvery = interval(p.venue.Weight(venue.CallQuotes), 0.1)
	perMinute := func(weight int, every time.Duration) int {
		return int(math.Ceil(float64(weight) * float64(time.Minute) / float64(every)))
	}
	p.planned.catalogReserve = perMinute(p.venue.Weight(venue.CallCatalog), p.cfg.CatalogEvery)
	p.planned.bulkReserve = perMinute(p.venue.Weight(venue.CallStats), p.planned.statsEvery) +
		perMinute(p.venue.Weight(venue.CallQuotes), p.planned.quotesEvery) + p.planned.catalogReserve
}

// reserve is the weight a minute held back for the bulk calls: only the
// catalog's while the ticker stream delivers the statistics.
func (p *Poller) reserve() int {
	p.planned.mu.Lock()
	all, catalog := p.planned.bulkReserve, p.planned.catalogReserve
	p.planned.mu.Unlock()
	if p.src.TickersFlowing(time.Now()) {
		return catalog
	}
	return all
}

// caps returns every class's cap: per-pair book and trade reads split what
// the bulk calls leave by the hot pairs' demand (see budget.CapsOf), and
// refreshes are held to their fixed share.
func (p *Poller) caps() budget.Caps {
	demand := func(s snapshot.Stream, c venue.Call, every time.Duration) float64 {
		return float64(p.hot[s].Len()*p.venue.Weight(c)) * float64(time.Minute) / float64(every)
	}
	plan := budget.Plan{
		Limit:   p.ledger.Limit(),
		Reserve: p.reserve(),
		Split:   [budget.NumClasses]bool{budget.ClassBook: true, budget.ClassTrades: true},
	}
	plan.Demand[budget.ClassBook] = demand(snapshot.StreamBook, venue.CallBook, p.cfg.BookEvery)
	plan.Demand[budget.ClassTrades] = demand(snapshot.StreamTrades, venue.CallTrades, p.cfg.TradesEvery)
	// Refreshes may spend RefreshShare of the venue's limit, and at least
	// one refresh.
	if limit := p.venueLimit.Load(); limit > 0 {
		plan.Share[budget.ClassRefresh] = max(int(p.cfg.RefreshShare*float64(limit)), p.bookWeight(p.cfg.RefreshDepth))
	}
	return budget.CapsOf(plan)
}

// call runs one venue call of kind c whose weight is already spent: it
// refuses while calls are paused, reconciles the budget with the venue's own
// count, and feeds the outcome to the back-off.
func (p *Poller) call(ctx context.Context, c venue.Call, fn func(context.Context) error) error {
	if err := p.gate.Check(time.Now()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	start := time.Now()
	err := fn(ctx)
	cancel()
	now := time.Now()
	p.metrics.calls[c][venue.OutcomeOf(err)].Inc()
	p.metrics.callTime[c].Observe(now.Sub(start))
	p.reconcile(now)
	if pause := p.gate.Record(start, now, err); pause > 0 {
		p.logs.Log(p.log, slog.LevelWarn, "pause", "venue calls paused",
			slog.String("call", c.String()), slog.Duration("for", pause), slog.String("err", err.Error()))
	}
	if err == nil {
		p.logs.Forget("pause")
	}
	return err
}

// reconcile feeds the venue's own count of our weight to the budget.
func (p *Poller) reconcile(now time.Time) {
	if r, ok := p.venue.(venue.UsedWeightReporter); ok {
		if used, ok := r.UsedWeight(); ok {
			p.ledger.Observe(now, used)
		}
	}
}

// bulk spends the weight of a bulk call and runs it.
func (p *Poller) bulk(ctx context.Context, c venue.Call, fn func(context.Context) error) error {
	if p.gate.Blocked(time.Now()) {
		return fmt.Errorf("%s: %w", c, venue.ErrPaused)
	}
	purpose := budget.PurposeTickers
	if c == venue.CallCatalog {
		purpose = budget.PurposeCatalog
	}
	if !p.ledger.Take(time.Now(), p.venue.Weight(c), purpose, p.caps(), true) {
		return fmt.Errorf("%s: %w", c, venue.ErrNoBudget)
	}
	p.metrics.weight[purpose].Add(p.venue.Weight(c))
	return p.call(ctx, c, fn)
}

// RefreshCatalog reads the venue's markets and publishes the pair list.
func (p *Poller) RefreshCatalog(ctx context.Context) error {
	var cat venue.Catalog
	start := time.Now()
	err := p.bulk(ctx, venue.CallCatalog, func(ctx context.Context) (err error) {
		cat, err = p.venue.Catalog(ctx)
		return err
	})
	if err != nil {
		p.logs.Log(p.log, slog.LevelWarn, "catalog", "catalog read failed", slog.String("err", err.Error()))
		return fmt.Errorf("read catalog: %w", err)
	}
	p.logs.Forget("catalog")
	p.venueLimit.Store(int64(cat.WeightLimit))
	limit := int(float64(cat.WeightLimit) * p.cfg.Budget)
	if cat.WeightLimit > 0 && limit == 0 {
		limit = 1
	}
	if limit != p.ledger.Limit() {
		p.ledger.SetLimit(limit)
		p.plan(limit)
		p.reconcile(time.Now()) // the count that came with the catalog, now that there is a limit
		p.log.Info("venue weight budget", "limit_per_minute", cat.WeightLimit, "budget_per_minute", limit)
		p.planned.mu.Lock()
		unmet, statsEvery := p.planned.staleUnmet, p.planned.statsEvery
		p.planned.mu.Unlock()
		if unmet && p.cfg.Streams == nil {
			p.log.Warn("max-stale cannot be honoured within the venue weight budget: tickers are read less often",
				"max_stale", p.cfg.MaxStale, "stats_every", statsEvery)
		}
	}
	p.catalogMu.Lock()
	p.markets = cat.Markets
	spot := p.spot
	p.catalogMu.Unlock()
	p.publishPairs(cat.Markets, spot, start)
	return nil
}

// publishPairs publishes the pair list and, with streams, has the streams
// follow it.
func (p *Poller) publishPairs(markets []venue.Market, spot []string, readAt time.Time) {
	pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{
		Venue: p.venue.Name(), Spot: spot, Quotes: p.cfg.Quotes,
	}, readAt)
	p.store.PutPairs(pairs)
	p.src.SetPairs(pairs)
}

// SetSpot replaces the platform's spot list and republishes the pairs from
// the last catalog read, without calling the venue.
func (p *Poller) SetSpot(ids []string) {
	p.catalogMu.Lock()
	p.spot = slices.Clone(ids)
	markets := p.markets
	p.catalogMu.Unlock()
	if prev := p.store.Pairs(); prev != nil {
		p.publishPairs(markets, ids, time.Unix(0, prev.ReadAt()))
	}
}

// RefreshBooks runs one round of book reads over the hot pairs.
func (p *Poller) RefreshBooks(ctx context.Context) { p.round(ctx, snapshot.StreamBook) }

// RefreshTrades runs one round of trade reads over the hot pairs.
func (p *Poller) RefreshTrades(ctx context.Context) { p.round(ctx, snapshot.StreamTrades) }

// streamRow is what differs between a pair's book and its trades on the
// REST path: one row each, so that the steps are written once.
type streamRow struct {
	call venue.Call
	// purpose is what a REST read of the stream spends on.
	purpose budget.Purpose
	every   func(c *Config) time.Duration
	// read reads one pair over REST and returns its publication.
	read func(p *Poller, ctx context.Context, pair snapshot.Pair, start time.Time, gzip bool) (func(), error)
	// readAt returns when a pair's snapshot was read (0: none) and
	// whether the pair is listed.
	readAt func(store *snapshot.Store, id []byte) (int64, bool)
	// fresh reports whether a pair's snapshot may still be served at now,
	// by the snapshot value's own rule.
	fresh func(store *snapshot.Store, id []byte, now int64, maxStale time.Duration) bool
}

var streamRows = [2]streamRow{
	snapshot.StreamBook: {
		call:    venue.CallBook,
		purpose: budget.PurposePollBook,
		every:   func(c *Config) time.Duration { return c.BookEvery },
		read:    (*Poller).readBook,
		readAt: func(store *snapshot.Store, id []byte) (int64, bool) {
			b, listed := store.Book(id)
			if b == nil {
				return 0, listed
			}
			return b.ReadAt(), true
		},
		fresh: func(store *snapshot.Store, id []byte, now int64, maxStale time.Duration) bool {
			b, _ := store.Book(id)
			return b.FreshAt(now, maxStale)
		},
	},
	snapshot.StreamTrades: {
		call:    venue.CallTrades,
		purpose: budget.PurposePollTrades,
		every:   func(c *Config) time.Duration { return c.TradesEvery },
		read:    (*Poller).readTrades,
		readAt: func(store *snapshot.Store, id []byte) (int64, bool) {
			t, listed := store.Trades(id)
			if t == nil {
				return 0, listed
			}
			return t.ReadAt(), true
		},
		fresh: func(store *snapshot.Store, id []byte, now int64, maxStale time.Duration) bool {
			t, _ := store.Trades(id)
			return t.FreshAt(now, maxStale)
		},
	},
}

// round reads the stream of every hot pair that is due, oldest read first,
// while the budget allows. A pair is due when its last read began at least
// one period before this round's tick; ticks are aligned to the period, so
// round reads of a pair are spaced by whole periods however late a round runs.
func (p *Poller) round(ctx context.Context, s snapshot.Stream) {
	pairs := p.store.Pairs()
	if pairs == nil {
		return
	}
	now := time.Now()
	row := &streamRows[s]
	every := row.every(&p.cfg)
	tick := alignDown(now, every)
	hot := p.hot[s].snapshot(now.Add(-p.cfg.HotTTL), func(id string) bool {
		_, ok := pairs.Lookup(id)
		return ok
	})
	due := hot[:0]
	for _, hp := range hot {
		if p.src.Streaming(hp.id, s) {
			continue // the stream keeps it, once synced: see live.Source.Load
		}
		if tick-hp.started.Load() >= int64(every) && !hp.reading.Load() {
			due = append(due, hp)
		}
	}
	slices.SortFunc(due, func(a, b *hotPair) int { return cmp.Compare(a.started.Load(), b.started.Load()) })

	c, purpose, caps := row.call, row.purpose, p.caps()
	var wg sync.WaitGroup
	slots := p.slots[s]
dispatch:
	for i, hp := range due {
		if p.gate.Blocked(time.Now()) {
			break
		}
		// Slots are shared by overlapping rounds: when reads stuck in
		// earlier rounds hold them all, the rest wait for the next round.
		select {
		case slots <- struct{}{}:
		default:
			break dispatch
		}
		if !hp.reading.CompareAndSwap(false, true) {
			<-slots // a cold load started reading it meanwhile
			continue
		}
		if !p.ledger.Take(time.Now(), p.venue.Weight(c), purpose, caps, true) {
			hp.reading.Store(false)
			<-slots
			left := len(due) - i
			p.deferred(s, left)
			p.logs.Log(p.log, slog.LevelInfo, "stretch-"+s.String(), "weight budget stretches cadence",
				slog.String("stream", s.String()), slog.Int("hot", len(hot)), slog.Int("deferred", left))
			break
		}
		p.metrics.weight[purpose].Add(p.venue.Weight(c))
		pair, _ := pairs.Lookup(hp.id)
		hp.started.Store(tick)
		wg.Go(func() {
			defer func() { <-slots }()
			defer hp.reading.Store(false)
			if err := p.read(ctx, s, pair, time.Unix(0, tick), p.gzipWanted(hp, now)); err != nil {
				p.logs.Log(p.log, slog.LevelWarn, "read-"+s.String(), "venue read failed",
					slog.String("stream", s.String()), slog.String(logKeyPair, pair.TickerID), slog.String(logKeyErr, err.Error()))
			}
		})
	}
	wg.Wait()
}

// read reads one pair's stream and publishes it. start is when the read
// began by the service's clock; it becomes the snapshot's read time. gzip
// adds the compressed form of the default body.
func (p *Poller) read(ctx context.Context, s snapshot.Stream, pair snapshot.Pair, start time.Time, gzip bool) error {
	row := &streamRows[s]
	// The value is built inside the call, so that a venue answer the
	// builder refuses counts as unusable data, not as a good read.
	var publish func()
	err := p.call(ctx, row.call, func(ctx context.Context) (err error) {
		publish, err = row.read(p, ctx, pair, start, gzip)
		return err
	})
	if err != nil {
		return fmt.Errorf("read %s %s: %w", s, pair.TickerID, err)
	}
	publish()
	return nil
}

// readBook reads one pair's book over REST and returns its publication.
func (p *Poller) readBook(ctx context.Context, pair snapshot.Pair, start time.Time, gzip bool) (func(), error) {
	book, err := p.venue.Book(ctx, pair.Symbol, snapshot.MaxDepth)
	if err != nil {
		return nil, err
	}
	b, err := snapshot.NewBook(pair.TickerID, book.Time, book.Bids, book.Asks, start)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", venue.ErrBadData, err)
	}
	if gzip {
		b = b.WithGzip()
	}
	return func() { p.store.PutBook(b) }, nil
}

// readTrades reads one pair's trades over REST and returns their
// publication.
func (p *Poller) readTrades(ctx context.Context, pair snapshot.Pair, start time.Time, gzip bool) (func(), error) {
	trades, err := p.venue.Trades(ctx, pair.Symbol, snapshot.MaxTrades)
	if err != nil {
		return nil, err
	}
	prev, _ := p.store.Trades([]byte(pair.TickerID))
	t, err := snapshot.NewTradesAfter(prev, pair.TickerID, trades, start)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", venue.ErrBadData, err)
	}
	if gzip {
		t = t.WithGzip()
	}
	return func() { p.store.PutTrades(t) }, nil
}

// bookWeight is the weight of a book read of the given depth.
func (p *Poller) bookWeight(depth int) int {
	if w, ok := p.venue.(venue.DepthWeigher); ok {
		return w.BookWeight(depth)
	}
	return p.venue.Weight(venue.CallBook)
}

// deferred counts reads of a stream that the budget or the read slots
// pushed to a later round.
func (p *Poller) deferred(s snapshot.Stream, n int) {
	p.stretched.Add(int64(n))
	p.metrics.deferred[s].Add(n)
}

// Want marks a pair's stream as asked for by a request, keeping it hot. It
// does not allocate once the pair is hot.
//
// gzip says the request accepts gzip for the stream's default body: the
// pair's snapshots are then built with their compressed form for as long as
// the pair stays hot, and not otherwise, since compressing costs more than
// building.
func (p *Poller) Want(id []byte, s snapshot.Stream, gzip bool) { p.hot[s].want(id, time.Now(), gzip) }

// ErrUnlisted is returned by Load for a pair the current pair list lacks.
var ErrUnlisted = errors.New("pair not listed")

// ErrStopped is returned by Load once Run has ended.
var ErrStopped = errors.New("poller stopped")

// Load reads a pair's stream now and returns once it is published or the
// read failed, or ctx is done. Concurrent callers for the same pair and
// stream share one read, which runs to its end even if they stop waiting.
// The read keeps the venue's spacing for the pair and the weight budget: it
// waits for both rather than calling early.
func (p *Poller) Load(ctx context.Context, id string, s snapshot.Stream) error {
	start := time.Now()
	defer func() { p.metrics.coldWait[s].Observe(time.Since(start)) }()
	key := flightKey{s, id}
	p.flightsMu.Lock()
	f := p.flights[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		p.flights[key] = f
		if !p.spawn(func(ctx context.Context) {
			f.err = p.load(ctx, id, s)
			failed := 0
			if f.err != nil {
				failed = 1
			}
			p.metrics.coldLoads[s][failed].Inc()
			p.flightsMu.Lock()
			delete(p.flights, key)
			p.flightsMu.Unlock()
			close(f.done)
		}) {
			delete(p.flights, key)
			p.flightsMu.Unlock()
			return ErrStopped
		}
	}
	p.flightsMu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Poller) load(ctx context.Context, id string, s snapshot.Stream) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	if streamed, err := p.src.Load(ctx, id, s); streamed {
		return err
	}
	pairs := p.store.Pairs()
	if pairs == nil {
		return ErrUnlisted
	}
	pair, ok := pairs.Lookup(id)
	if !ok {
		return ErrUnlisted
	}
	row := &streamRows[s]
	every := row.every(&p.cfg)
	hp := p.hot[s].get(id)
	if hp != nil {
		if wait := time.Until(time.Unix(0, hp.started.Load()).Add(every)); wait > 0 {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		// A round may have read the pair while we waited.
		if p.fresh(id, s) {
			return nil
		}
	}
	if p.gate.Blocked(time.Now()) {
		return fmt.Errorf("load %s %s: %w", s, id, venue.ErrPaused)
	}
	c, purpose := row.call, row.purpose
	for {
		caps := p.caps()
		now := time.Now()
		if p.ledger.Take(now, p.venue.Weight(c), purpose, caps, true) {
			p.metrics.weight[purpose].Add(p.venue.Weight(c))
			break
		}
		at := p.ledger.FreeAt(now, p.venue.Weight(c), purpose, caps)
		if at.IsZero() {
			return fmt.Errorf("load %s %s: %w", s, id, venue.ErrNoBudget)
		}
		if err := backoff.Sleep(ctx, at.Sub(now)); err != nil {
			return fmt.Errorf("load %s %s: %w: %w", s, id, venue.ErrNoBudget, err)
		}
	}
	start := time.Now()
	if hp != nil {
		hp.started.Store(start.UnixNano())
		if hp.reading.CompareAndSwap(false, true) {
			defer hp.reading.Store(false)
		}
	}
	return p.read(ctx, s, pair, start, p.gzipWanted(hp, start))
}

// gzipWanted reports whether a request that accepts gzip asked for the
// stream within the hot period.
func (p *Poller) gzipWanted(hp *hotPair, now time.Time) bool {
	return hp != nil && hp.gzipWanted.Load() >= now.Add(-p.cfg.HotTTL).UnixNano()
}

// fresh reports whether the store holds a snapshot of the stream read within
// max-stale.
func (p *Poller) fresh(id string, s snapshot.Stream) bool {
	return streamRows[s].fresh(p.store, []byte(id), time.Now().UnixNano(), p.cfg.MaxStale)
}

// Status is what the poller reports to operators.
type Status struct {
	Ready       bool   // pairs and tickers loaded and the venue not refusing us for good
	Reason      string // why not ready, or "ok"
	HotBooks    int
	HotTrades   int
	BudgetLimit int // weight per minute the poller may spend; 0: unlimited
	BudgetSpent int // weight spent in the last minute
	Stretched   int64
	Pauses      int
	Omitted     int64 // spot tickers left out of the last build
	// Sources says where each part of the data comes from; nil without
	// market streams.
	Sources *Sources
}

// Sources says where each part of the data comes from while the poller
// reads market streams.
type Sources struct {
	Tickers string         `json:"tickers"` // "stream" or "rest"
	Books   map[string]int `json:"books"`   // pairs by source: stream, syncing, rest
	Trades  map[string]int `json:"trades"`  // the same for trades
}

// Status returns the poller's current state.
func (p *Poller) Status() Status {
	st := Status{
		HotBooks:    p.hot[snapshot.StreamBook].Len(),
		HotTrades:   p.hot[snapshot.StreamTrades].Len(),
		BudgetLimit: p.ledger.Limit(),
		BudgetSpent: p.ledger.Spent(time.Now()),
		Stretched:   p.stretched.Load(),
		Pauses:      p.gate.Pauses(),
		Omitted:     p.omitted.Load(),
	}
	if books, trades := p.src.Sources(); books != nil {
		src := &Sources{Tickers: "rest", Books: books, Trades: trades}
		if p.src.TickersFlowing(time.Now()) {
			src.Tickers = "stream"
		}
		st.Sources = src
	}
	switch perm := p.gate.Permanent(); {
	case perm != "":
		st.Reason = perm
	case p.store.Pairs() == nil:
		st.Reason = "pairs not loaded"
	case p.store.Tickers() == nil:
		st.Reason = "tickers not loaded"
	default:
		st.Ready, st.Reason = true, "ok"
	}
	return st
}
