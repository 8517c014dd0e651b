package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// live keeps every listed pair current from the venue's market streams: a
// local order book per pair synced from a REST snapshot and kept in sequence
// by the diff stream, a window of the newest aggregate trades per pair, and
// the all-market ticker's rows. It is the poller's Sink.
//
// Work per event is applying it under the pair's lock. Serializing happens on
// the publication schedules only (books every BookEvery, trades every
// TradesEvery), and only for pairs that changed; a pair that did not change
// but is still in sequence is republished as confirmed, which costs a copy of
// the value's header and keeps a quiet market fresh.
type live struct {
	p       *Poller
	streams venue.Streams

	// setMu serialises setPairs (a catalog read and a spot-list reload
	// may both publish pairs); readers load the maps without locking.
	setMu sync.Mutex
	pairs atomic.Pointer[map[string]*livePair] // by venue symbol
	ids   atomic.Pointer[map[string]*livePair] // by ticker id

	tickersMu sync.Mutex
	tickers   map[string]venue.Stat // newest row per catalog symbol
	tickersAt time.Time             // when the last ticker-stream rows arrived

	// wake starts a sync or backfill round at once when a request waits.
	wake chan struct{}
}

// livePair is one pair's stream-fed state.
type livePair struct {
	symbol   string
	tickerID string
	// spot is set while the pair is one of the platform's spot pairs; the
	// spot list can change while the pair's state stays.
	spot atomic.Bool

	// waiting is when a request last waited for this pair (Unix ns): such
	// pairs go first in the REST queue.
	waiting atomic.Int64

	mu sync.Mutex
	// rest is the state of the pair's REST reads, by restKind.
	rest [numRestKinds]restState
	// published, by snapshot.Stream, is closed at the next publication of
	// the pair's book or trades, for requests waiting for one; nil until a
	// request waits.
	published [2]chan struct{}
	// Depth: the local book and what the stream has said about it.
	book      *orderbook.Book
	depthLive bool           // the subscription is acknowledged on a reading connection
	depthAt   time.Time      // when the last depth event arrived
	pub       *snapshot.Book // the book last published from the stream
	// lastQuote is the best bid and ask of the book last published, and
	// lastQuoteAt when it was last known current: the tickers' mid while
	// the book resyncs.
	lastQuote   venue.Quote
	lastQuoteAt time.Time
	// bookTaken and bookShown order the book's publications: each state
	// taken for publishing gets the next number, and a publication older
	// than the one already shown is dropped, so two publishers (the
	// schedule and a sync) can never leave an older book in place.
	bookTaken, bookShown uint64
	silent               silence
	// Trades: the window and its state.
	trades        tradeWindow
	tradesLive    bool
	tradesAt      time.Time
	tradesChanged bool
	backfilled    bool // the window was filled from REST since the stream went live
	tradesPub     *snapshot.Trades
	// tradesTaken and tradesShown order the trades' publications, as
	// bookTaken and bookShown do the book's.
	tradesTaken, tradesShown uint64
	tradesSilent             silence
	// activeAt is when the ticker stream last showed the market trading:
	// then its depth and trade streams must be delivering too.
	activeAt time.Time
	// tradedAt is when the trade stream last delivered a trade: a market
	// that trades changes its book, so its depth stream must deliver too.
	tradedAt time.Time
	volume   string // the last base volume the ticker stream sent
}

// silence tracks a subscription that is acknowledged but does not deliver.
type silence struct {
	resubscribedAt time.Time // zero: not resubscribed
	fellBack       bool      // served by REST until the stream delivers again
}

// refreshBelow is how many levels a side may still vouch for when its book
// asks for a new snapshot to lay under it.
const refreshBelow = snapshot.MaxDepth + snapshot.MaxDepth/2

// Resync causes, for metrics and logs.
const (
	causeGap      = "gap"      // an event did not continue the book
	causeLost     = "lost"     // the connection closed or the venue refused
	causeShort    = "short"    // the book came close to holding fewer levels than are published
	causeDepleted = "depleted" // a side ran out of levels; its refresh was read beyond the refresh share
	causeStale    = "stale"    // the snapshot was older than the buffered events
	causeBadData  = "bad_data" // an event or snapshot held an unusable value
	causeSilent   = "silent"   // an acknowledged subscription delivered nothing
)

var resyncCauses = []string{causeGap, causeLost, causeShort, causeDepleted, causeStale, causeBadData, causeSilent}

func newLive(p *Poller, s venue.Streams) *live {
	l := &live{p: p, streams: s, tickers: make(map[string]venue.Stat), wake: make(chan struct{}, 1)}
	empty := map[string]*livePair{}
	l.pairs.Store(&empty)
	l.ids.Store(&empty)
	return l
}

// setPairs follows a new pair list: pairs that stay keep their state, new
// ones start buffering, delisted ones are dropped, and the streams are told.
func (l *live) setPairs(pairs *snapshot.Pairs) {
	l.setMu.Lock()
	defer l.setMu.Unlock()
	old := *l.pairs.Load()
	bySymbol := make(map[string]*livePair, len(pairs.List()))
	byID := make(map[string]*livePair, len(pairs.List()))
	symbols := make([]string, 0, len(pairs.List()))
	for _, pair := range pairs.List() {
		lp := old[pair.Symbol]
		if lp == nil || lp.tickerID != pair.TickerID {
			lp = &livePair{symbol: pair.Symbol, tickerID: pair.TickerID, book: orderbook.New()}
		}
		lp.spot.Store(pair.Kind == snapshot.KindSpot)
		if _, dup := bySymbol[pair.Symbol]; dup {
			continue
		}
		bySymbol[pair.Symbol] = lp
		byID[pair.TickerID] = lp
		symbols = append(symbols, pair.Symbol)
	}
	l.pairs.Store(&bySymbol)
	l.ids.Store(&byID)
	slices.Sort(symbols)
	l.streams.Watch(symbols)
}

func (l *live) pair(symbol string) *livePair { return (*l.pairs.Load())[symbol] }

// byID returns the pair with ticker id id, or nil.
func (l *live) byID(id string) *livePair { return (*l.ids.Load())[id] }

// Depth applies one diff event to the pair's local book.
func (l *live) Depth(u venue.DepthUpdate) {
	lp := l.pair(u.Symbol)
	if lp == nil {
		return // not listed, or delisted meanwhile
	}
	now := time.Now()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.depthAt = now
	lp.silent = silence{}
	wasSynced := lp.book.Synced()
	if err := lp.book.Apply(u); err != nil {
		cause := causeGap
		if errors.Is(err, orderbook.ErrBadLevel) {
			cause = causeBadData
		}
		l.resynced(lp, cause, err)
	} else if !wasSynced && lp.book.Buffered() == 1 {
		l.poke()
	}
}

// Trade adds one aggregate trade to the pair's window.
func (l *live) Trade(symbol string, tr venue.Trade) {
	lp := l.pair(symbol)
	if lp == nil {
		return
	}
	now := time.Now()
	lp.mu.Lock()
	lp.tradesAt, lp.tradedAt = now, now
	lp.tradesSilent = silence{}
	if lp.trades.add(tr) {
		lp.tradesChanged = true
	}
	lp.mu.Unlock()
}

// Tickers merges rows of the all-market ticker stream. Rows for symbols
// outside the catalog (other margin kinds, dated contracts) are dropped. A
// changed volume means the market traded: its depth and trade streams must
// be delivering too, which is what the silence watchdog checks.
func (l *live) Tickers(rows []venue.Stat) {
	now := time.Now()
	pairs := *l.pairs.Load()
	l.tickersMu.Lock()
	l.tickersAt = now
	for _, r := range rows {
		if lp := pairs[r.Symbol]; lp != nil {
			l.tickers[r.Symbol] = r
		}
	}
	l.tickersMu.Unlock()
	for _, r := range rows {
		lp := pairs[r.Symbol]
		if lp == nil {
			continue
		}
		lp.mu.Lock()
		if lp.volume != "" && r.BaseVolume != lp.volume {
			lp.activeAt = now
		}
		lp.volume = r.BaseVolume
		lp.mu.Unlock()
	}
}

// Live marks the pairs' streams as subscribed.
func (l *live) Live(kind snapshot.Stream, symbols []string) {
	now := time.Now()
	for _, s := range symbols {
		lp := l.pair(s)
		if lp == nil {
			continue
		}
		lp.mu.Lock()
		if kind == snapshot.StreamBook {
			lp.depthLive = true
			lp.depthAt = now
		} else {
			lp.tradesLive = true
			lp.tradesAt = now
		}
		lp.mu.Unlock()
	}
}

// Lost marks the pairs' streams as no longer delivering in sequence. A book
// must be synced again; a trade window may have missed trades while the
// stream was down, so it is backfilled again once the stream is back.
func (l *live) Lost(kind snapshot.Stream, symbols []string) {
	for _, s := range symbols {
		lp := l.pair(s)
		if lp == nil {
			continue
		}
		lp.mu.Lock()
		if kind == snapshot.StreamBook {
			lp.depthLive = false
			if lp.book.Synced() {
				lp.book.Desync()
				l.resynced(lp, causeLost, nil)
			}
		} else {
			lp.tradesLive = false
			lp.backfilled = false
		}
		lp.mu.Unlock()
	}
}

// resynced records that a pair's book left sequence. Called with lp.mu held.
func (l *live) resynced(lp *livePair, cause string, err error) {
	l.p.metrics.resyncs[cause].Inc()
	attrs := []slog.Attr{slog.String(logKeyPair, lp.tickerID), slog.String("cause", cause)}
	if err != nil {
		attrs = append(attrs, slog.String(logKeyErr, err.Error()))
	}
	l.p.logs.log(l.p.log, slog.LevelInfo, "resync-"+cause, "order book resyncs", attrs...)
}

// poke starts a sync round without waiting for the schedule.
func (l *live) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// announce wakes the requests waiting for the pair's next publication of
// s. Called with lp.mu held.
func (lp *livePair) announce(s snapshot.Stream) {
	if ch := lp.published[s]; ch != nil {
		close(ch)
		lp.published[s] = nil
	}
}

// streaming reports whether the pair's stream of s delivers: acknowledged
// and not given up as silent. Such a pair is kept by the stream once synced
// or backfilled, and REST polls would only spend the budget those need.
func (lp *livePair) streaming(s snapshot.Stream) bool {
	if s == snapshot.StreamTrades {
		return lp.tradesLive && !lp.tradesSilent.fellBack
	}
	return lp.depthLive && !lp.silent.fellBack
}

// bookCurrent reports whether the pair's book is kept current by the stream:
// synced, in sequence and not silent. Such a pair needs no REST read.
func (lp *livePair) bookCurrent() bool {
	return lp.depthLive && lp.book.Synced() && !lp.silent.fellBack
}

// tradesCurrent reports whether the pair's trade window is complete and kept
// current by the stream.
func (lp *livePair) tradesCurrent() bool {
	return lp.tradesLive && (lp.backfilled || lp.trades.full()) && !lp.tradesSilent.fellBack
}

// streaming reports whether the pair's stream of s delivers, so that the
// stream, not REST polling, keeps it (see livePair.streaming).
func (l *live) streaming(id string, s snapshot.Stream) bool {
	lp := l.byID(id)
	if lp == nil {
		return false
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.streaming(s)
}

// publishBooks publishes every stream-fed book that changed since its last
// publication, and confirms those that did not. A book whose side runs short
// of published levels is synced again.
func (l *live) publishBooks() {
	now := time.Now()
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		if !lp.bookCurrent() || lp.book.Held() {
			lp.mu.Unlock()
			continue
		}
		// Ask for a deeper view while the book can still publish every
		// level: half the published depth ahead of running short. What it
		// holds meanwhile is an exact prefix of the venue's book.
		switch {
		case lp.book.Short(refreshBelow):
			if !lp.book.Record() {
				l.p.metrics.resyncs[causeShort].Inc()
			}
		case lp.book.Recording() && !lp.rest[restSnapshot].inFlight:
			// The price turned back while the refresh waited its turn
			// in the refresh share: it is no longer needed.
			lp.book.StopRecording()
		}
		if lp.book.Vouched() == 0 {
			// Depleted: the last publication stands until the refresh.
			lp.mu.Unlock()
			continue
		}
		if !lp.book.Changed() && lp.pub != nil {
			b := lp.pub.Confirmed(now)
			lp.pub = b
			lp.lastQuoteAt = now
			lp.mu.Unlock()
			l.p.store.PutBook(b)
			continue
		}
		publish := l.takeBook(lp, now)
		lp.mu.Unlock()
		publish()
	}
}

// takeBook takes the book's state for publishing and returns the
// publication, to run once lp.mu is released. Called with lp.mu held.
func (l *live) takeBook(lp *livePair, now time.Time) func() {
	bids, asks := lp.book.Top(snapshot.MaxDepth)
	venueTime := lp.book.Time()
	lp.book.ResetChanged()
	lp.bookTaken++
	seq := lp.bookTaken
	return func() { l.publishBook(lp, seq, venueTime, bids, asks, now) }
}

// publishBook builds and publishes one pair's book outside its lock.
func (l *live) publishBook(lp *livePair, seq uint64, venueTime int64, bids, asks []venue.Level, now time.Time) {
	b, err := snapshot.NewBook(lp.tickerID, venueTime, bids, asks, now)
	if err != nil {
		// The levels were checked when applied: a book that fails the
		// builder's checks (a crossed side) is out of sequence.
		lp.mu.Lock()
		lp.book.Desync()
		l.resynced(lp, causeBadData, err)
		lp.mu.Unlock()
		return
	}
	if l.p.gzipWanted(l.p.hot[snapshot.StreamBook].get(lp.tickerID), now) {
		b = b.WithGzip()
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if seq < lp.bookShown {
		return // a newer state was published meanwhile
	}
	lp.bookShown = seq
	l.p.store.PutBook(b)
	lp.pub = b
	lp.lastQuote, lp.lastQuoteAt = quoteOf(lp.symbol, bids[:min(1, len(bids))], asks[:min(1, len(asks))]), now
	lp.announce(snapshot.StreamBook)
	l.p.metrics.publishLag.Observe(now.Sub(time.UnixMilli(venueTime)))
}

// publishTrades publishes every complete trade window that changed, and
// confirms those that did not.
func (l *live) publishTrades() {
	now := time.Now()
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		if !lp.tradesCurrent() {
			lp.mu.Unlock()
			continue
		}
		if !lp.tradesChanged && lp.tradesPub != nil {
			t := lp.tradesPub.Confirmed(now)
			lp.tradesPub = t
			lp.mu.Unlock()
			l.p.store.PutTrades(t)
			continue
		}
		publish := l.takeTrades(lp, now)
		lp.mu.Unlock()
		publish()
	}
}

// takeTrades takes the trade window for publishing and returns the
// publication, to run once lp.mu is released. Called with lp.mu held.
func (l *live) takeTrades(lp *livePair, now time.Time) func() {
	list := slices.Clone(lp.trades.list())
	prev := lp.tradesPub
	lp.tradesChanged = false
	lp.tradesTaken++
	seq := lp.tradesTaken
	return func() { l.publishTradeList(lp, seq, prev, list, now) }
}

func (l *live) publishTradeList(lp *livePair, seq uint64, prev *snapshot.Trades, list []venue.Trade, now time.Time) {
	t, err := snapshot.NewTradesAfter(prev, lp.tickerID, list, now)
	if err != nil {
		l.p.logs.log(l.p.log, slog.LevelWarn, "trades-"+lp.tickerID, "trade window unusable",
			slog.String(logKeyPair, lp.tickerID), slog.String(logKeyErr, err.Error()))
		return
	}
	if l.p.gzipWanted(l.p.hot[snapshot.StreamTrades].get(lp.tickerID), now) {
		t = t.WithGzip()
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if seq < lp.tradesShown {
		return // a newer window was published meanwhile
	}
	lp.tradesShown = seq
	l.p.store.PutTrades(t)
	lp.tradesPub = t
	lp.announce(snapshot.StreamTrades)
}

// rank orders pairs for REST reads: pairs a request waits for first, newest
// wait first; then spot pairs; then the rest by symbol, so that a cold
// start works through the catalog in a stable order.
func rank(a, b *livePair) int {
	wa, wb := a.waiting.Load(), b.waiting.Load()
	if (wa != 0) != (wb != 0) {
		if wa != 0 {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(wb, wa); c != 0 {
		return c
	}
	if as, bs := a.spot.Load(), b.spot.Load(); as != bs {
		if as {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.symbol, b.symbol)
}

// restKind is one kind of REST read a stream-fed pair may need.
type restKind int

const (
	restSnapshot restKind = iota // a book snapshot, to sync or refresh the local book
	restBackfill                 // the newest trades, to fill the window
	numRestKinds
)

// restState is one kind of REST read of one pair.
type restState struct {
	inFlight bool
	after    time.Time // no read before this, after a failed one
}

// ready reports whether a read may start now.
func (st restState) ready(now time.Time) bool { return !st.inFlight && !now.Before(st.after) }

// restRead is one kind of REST read as a row of a table: a book snapshot
// and a trades backfill are scheduled, paced and finished the same way, so
// what differs is here rather than a branch at every step.
type restRead struct {
	kind    restKind
	purpose [numTiers]budget.Purpose // what the read's weight is spent on, by tier
	stream  snapshot.Stream
	weight  func(p *Poller, tier int) int
	// due reports whether lp needs the read, its tier (lower tiers go
	// first) and its order within the tier (lower first). Called with
	// lp.mu held, only when a read of the kind may start.
	due func(lp *livePair) (ok bool, tier, order int)
	// fetch reads the venue. Its result is applied with lp.mu held by the
	// function it returns, which returns what to publish once the lock is
	// released (nil: nothing).
	fetch func(l *live, ctx context.Context, lp *livePair, tier int) (apply func(now time.Time) (publish func()), err error)
}

var (
	snapshotRead = restRead{
		kind:    restSnapshot,
		purpose: [numTiers]budget.Purpose{tierSync: budget.PurposeSnapshot, tierDepleted: budget.PurposeDepleted, tierRefresh: budget.PurposeRefresh},
		stream:  snapshot.StreamBook,
		weight:  func(p *Poller, tier int) int { return p.bookWeight(p.snapshotDepth(tier)) },
		due: func(lp *livePair) (bool, int, int) {
			if !lp.depthLive {
				return false, 0, 0
			}
			if lp.book.Synced() {
				// A refresh: the book is served meanwhile, so it waits
				// behind every book that is not, and the book nearest
				// to running short goes first.
				vouched := lp.book.Vouched()
				if vouched == 0 {
					return lp.book.Recording(), tierDepleted, vouched
				}
				return lp.book.Recording(), tierRefresh, vouched
			}
			return lp.book.Buffered() > 0, tierSync, 0
		},
		fetch: (*live).fetchSnapshot,
	}
	backfillRead = restRead{
		kind:    restBackfill,
		purpose: [numTiers]budget.Purpose{budget.PurposeBackfill, budget.PurposeBackfill, budget.PurposeBackfill},
		stream:  snapshot.StreamTrades,
		weight:  func(p *Poller, _ int) int { return p.venue.Weight(venue.CallTrades) },
		due: func(lp *livePair) (bool, int, int) {
			return lp.tradesLive && !lp.backfilled && !lp.trades.full(), 0, 0
		},
		fetch: (*live).fetchTrades,
	}
)

// Snapshot tiers: books not in sequence go first, refreshes of books that
// are served meanwhile after them, the depleted ones first.
//
// A book is depleted when the top has run through every level a side
// vouched for: the side would be published empty, though the venue has
// levels there. Its last publication goes on being served (aging towards
// max-stale) instead, and its refresh no longer waits its turn in the
// refresh share: it is read from the book share, next after the books to
// sync. Only this case bypasses the share: a book that still serves some
// levels waits, so the share bounds what refreshes cost however fast
// prices travel, short of running books dry.
const (
	tierSync     = 0
	tierDepleted = 1
	tierRefresh  = 2
	numTiers     = 3
)

// snapshotDepth is the depth of a snapshot read of a tier.
func (p *Poller) snapshotDepth(tier int) int {
	if tier == tierSync {
		return p.cfg.SyncDepth
	}
	return p.cfg.RefreshDepth
}

// syncBooks starts snapshot reads for the books that need one.
func (l *live) syncBooks(ctx context.Context) { l.dispatch(ctx, snapshotRead) }

// backfillTrades starts REST reads of the newest trades for the windows
// that are not complete yet.
func (l *live) backfillTrades(ctx context.Context) { l.dispatch(ctx, backfillRead) }

// dispatch starts the reads of one kind for every pair that needs one, in
// rank order, while the budget and the read slots allow. It does not wait
// for them.
func (l *live) dispatch(ctx context.Context, r restRead) {
	now := time.Now()
	type queued struct {
		lp          *livePair
		tier, order int
	}
	var due []queued
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		if lp.rest[r.kind].ready(now) {
			if ok, tier, order := r.due(lp); ok {
				due = append(due, queued{lp, tier, order})
			}
		}
		lp.mu.Unlock()
	}
	slices.SortFunc(due, func(a, b queued) int {
		// A request waiting for a pair puts it first whatever its tier.
		aw, bw := a.lp.waiting.Load() != 0, b.lp.waiting.Load() != 0
		if aw == bw {
			if c := cmp.Compare(a.tier, b.tier); c != 0 {
				return c
			}
			if c := cmp.Compare(a.order, b.order); c != 0 {
				return c
			}
		}
		return rank(a.lp, b.lp)
	})
	// A tier the budget or the read slots refused gets no more reads this
	// round, but the next tier may still have room in its own class:
	// refreshes are not held up by a backlog of books to sync.
	var refused [numTiers]bool
	deferred := 0
	for _, q := range due {
		lp, tier := q.lp, q.tier
		if !refused[tier] && l.p.startRead(ctx, r.purpose[tier], r.weight(l.p, tier), lp.waiting.Load() != 0, func(ctx context.Context) {
			l.run(ctx, r, lp, tier)
		}, func() { lp.mu.Lock(); lp.rest[r.kind].inFlight = true; lp.mu.Unlock() }) {
			continue
		}
		refused[tier] = true
		// Refreshes wait by design, within their share: that is not a
		// budget running short.
		if r.purpose[tier] != budget.PurposeRefresh {
			deferred++
		}
	}
	if deferred > 0 {
		l.p.deferred(r.stream, deferred)
	}
}

// run makes one REST read of a pair and applies it: a failed read is
// logged and retried a second later, a good one applied under the pair's
// lock and what it changed published after.
func (l *live) run(ctx context.Context, r restRead, lp *livePair, tier int) {
	apply, err := r.fetch(l, ctx, lp, tier)
	now := time.Now()
	lp.mu.Lock()
	st := &lp.rest[r.kind]
	st.inFlight = false
	if err != nil {
		st.after = now.Add(time.Second)
		lp.mu.Unlock()
		l.p.logs.log(l.p.log, slog.LevelWarn, "rest-"+r.stream.String(), "venue read of a stream-fed pair failed",
			slog.String("purpose", r.purpose[tier].String()), slog.String(logKeyPair, lp.tickerID), slog.String(logKeyErr, err.Error()))
		return
	}
	publish := apply(now)
	lp.mu.Unlock()
	if publish != nil {
		publish()
	}
}

// fetchSnapshot reads one snapshot, which syncs the pair's book or is laid
// under a book in sequence that asked for a deeper view.
func (l *live) fetchSnapshot(ctx context.Context, lp *livePair, tier int) (func(time.Time) func(), error) {
	if tier == tierDepleted {
		l.p.metrics.resyncs[causeDepleted].Inc()
	}
	depth := l.p.snapshotDepth(tier)
	var snap venue.Book
	err := l.p.call(ctx, venue.CallBook, func(ctx context.Context) (err error) {
		snap, err = l.p.venue.Book(ctx, lp.symbol, depth)
		return err
	})
	return func(now time.Time) func() {
		if err := lp.book.Refresh(snap, depth); err != nil {
			cause := causeStale
			if !errors.Is(err, orderbook.ErrStaleSnapshot) {
				cause = causeBadData
			}
			if lp.book.Synced() {
				// A refresh that came too late: the book is still in
				// sequence and served; try again in a moment.
				lp.rest[restSnapshot].after = now.Add(time.Second)
			}
			l.resynced(lp, cause, err)
			return nil
		}
		if !lp.bookCurrent() {
			return nil
		}
		// Publish at once: a request may be waiting for this book.
		return l.takeBook(lp, now)
	}, err
}

// fetchTrades reads a pair's newest trades into its window.
func (l *live) fetchTrades(ctx context.Context, lp *livePair, _ int) (func(time.Time) func(), error) {
	var trades []venue.Trade
	err := l.p.call(ctx, venue.CallTrades, func(ctx context.Context) (err error) {
		trades, err = l.p.venue.Trades(ctx, lp.symbol, snapshot.MaxTrades)
		return err
	})
	return func(now time.Time) func() {
		lp.trades.merge(trades)
		lp.backfilled = true
		if !lp.tradesCurrent() {
			return nil
		}
		return l.takeTrades(lp, now)
	}, err
}

// The silence watchdog's periods. A market that traded (its volume moved on
// the ticker stream) must have sent depth and trade events within
// silenceAfter; a stream still silent resubscribeGrace after it was
// subscribed again is given up for REST until it delivers.
const (
	silenceAfter     = 5 * time.Second
	resubscribeGrace = 5 * time.Second
)

// watch resubscribes streams that are acknowledged but silent while their
// market trades (the ticker stream's volume moved, or for a book, trades
// arrived), and moves a pair to REST when resubscribing did not help. A
// quiet market is not a silent stream: without activity nothing happens.
func (l *live) watch() {
	now := time.Now()
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		active := lp.activeAt
		if lp.tradedAt.After(active) {
			active = lp.tradedAt
		}
		l.check(lp, snapshot.StreamBook, lp.depthLive, lp.depthAt, active, &lp.silent, now)
		l.check(lp, snapshot.StreamTrades, lp.tradesLive, lp.tradesAt, lp.activeAt, &lp.tradesSilent, now)
		lp.mu.Unlock()
	}
}

// check is the watchdog for one stream of one pair. Called with lp.mu held.
func (l *live) check(lp *livePair, kind snapshot.Stream, isLive bool, lastEvent, active time.Time, s *silence, now time.Time) {
	if !isLive || s.fellBack || active.Sub(lastEvent) < silenceAfter {
		return
	}
	switch {
	case s.resubscribedAt.IsZero():
		s.resubscribedAt = now
		l.p.metrics.silent[kind][0].Inc()
		l.streams.Resubscribe(kind, lp.symbol)
	case now.Sub(s.resubscribedAt) >= resubscribeGrace:
		s.fellBack = true
		l.p.metrics.silent[kind][1].Inc()
		if kind == snapshot.StreamBook {
			lp.book.Desync()
			l.resynced(lp, causeSilent, nil)
		} else {
			lp.backfilled = false
		}
		l.p.logs.log(l.p.log, slog.LevelWarn, "silent-"+kind.String(), "stream silent; pair served by REST until it delivers",
			slog.String(logKeyPair, lp.tickerID), slog.String("stream", kind.String()))
	}
}

// tickersFlowing reports whether the ticker stream has delivered within
// half of max-stale: then the statistics need no REST read.
func (l *live) tickersFlowing(now time.Time) bool {
	l.tickersMu.Lock()
	defer l.tickersMu.Unlock()
	return !l.tickersAt.IsZero() && now.Sub(l.tickersAt) <= l.p.cfg.MaxStale/2
}

// streamTickers returns the statistics the ticker stream has brought (over
// the REST statistics seeded under them, for markets it has not sent) and
// when its rows last arrived; ok is false before any arrived. The stream
// sends only the markets that changed, so every row is current as of at.
func (l *live) streamTickers() (rows []venue.Stat, at time.Time, ok bool) {
	l.tickersMu.Lock()
	defer l.tickersMu.Unlock()
	if l.tickersAt.IsZero() {
		return nil, time.Time{}, false
	}
	rows = make([]venue.Stat, 0, len(l.tickers))
	for _, r := range l.tickers {
		rows = append(rows, r)
	}
	return rows, l.tickersAt, true
}

// seedTickers keeps REST statistics as the base the stream's rows update:
// the stream sends only the markets that changed.
func (l *live) seedTickers(stats []venue.Stat) {
	pairs := *l.pairs.Load()
	l.tickersMu.Lock()
	defer l.tickersMu.Unlock()
	for _, r := range stats {
		if _, listed := pairs[r.Symbol]; !listed {
			continue
		}
		if _, have := l.tickers[r.Symbol]; !have {
			l.tickers[r.Symbol] = r
		}
	}
}

// quotes returns the best bid and ask of the spot pairs from their local
// books, each with when it was current: the perpetual's mid the tickers
// publish. A book in sequence gives its current top; a book resyncing gives
// the top it last published while that is younger than max-stale, so a
// resync does not take a ticker away. stale counts the spot pairs with no
// quote younger than half of max-stale: for those the bulk quotes should
// stand in, while there is time.
func (l *live) quotes(spot []snapshot.Pair, now time.Time) (quotes []venue.Quote, at []time.Time, stale int) {
	for _, pair := range spot {
		lp := l.pair(pair.Symbol)
		if lp == nil {
			stale++
			continue
		}
		lp.mu.Lock()
		q, qAt := lp.lastQuote, lp.lastQuoteAt
		if lp.bookCurrent() {
			bids, asks := lp.book.Top(1)
			q, qAt = quoteOf(pair.Symbol, bids, asks), now
		}
		lp.mu.Unlock()
		age := now.Sub(qAt)
		if q.Symbol == "" || age > l.p.cfg.MaxStale/2 {
			stale++
		}
		if q.Symbol != "" && age <= l.p.cfg.MaxStale {
			quotes = append(quotes, q)
			at = append(at, qAt)
		}
	}
	return quotes, at, stale
}

// quoteOf is the best bid and ask of a book's top levels.
func quoteOf(symbol string, bids, asks []venue.Level) venue.Quote {
	q := venue.Quote{Symbol: symbol}
	if len(bids) > 0 {
		q.Bid = bids[0].Price
	}
	if len(asks) > 0 {
		q.Ask = asks[0].Price
	}
	return q
}

// load makes a pair's stream-fed snapshot of kind s current for a waiting
// request: its book synced or its trades backfilled, ahead of every other
// pair. It reports false when the pair's stream is not live, so that the
// caller reads REST instead.
func (l *live) load(ctx context.Context, id string, s snapshot.Stream) (bool, error) {
	lp := l.byID(id)
	if lp == nil {
		return false, nil
	}
	lp.waiting.Store(time.Now().UnixNano())
	defer lp.waiting.Store(0)
	for {
		if l.p.fresh(id, s) {
			return true, nil
		}
		lp.mu.Lock()
		if !lp.streaming(s) {
			lp.mu.Unlock()
			return false, nil
		}
		if lp.published[s] == nil {
			lp.published[s] = make(chan struct{})
		}
		next := lp.published[s]
		lp.mu.Unlock()
		l.poke() // start its read now, not at the next tick
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("load %s %s from the stream: %w", s, id, ctx.Err())
		case <-next:
		}
	}
}

// shortBooks counts the books in sequence that hold fewer than the published
// levels on a side they cannot vouch beyond: they serve fewer levels there
// until their refresh comes.
func (l *live) shortBooks() int {
	n := 0
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		if lp.bookCurrent() && lp.book.Short(snapshot.MaxDepth) {
			n++
		}
		lp.mu.Unlock()
	}
	return n
}

// sources counts the pairs by where their books and trades come from.
func (l *live) sources() (books, trades [numSources]int) {
	for _, lp := range *l.pairs.Load() {
		lp.mu.Lock()
		books[sourceOf(lp.bookCurrent(), lp.depthLive && !lp.silent.fellBack)]++
		trades[sourceOf(lp.tradesCurrent(), lp.tradesLive && !lp.tradesSilent.fellBack)]++
		lp.mu.Unlock()
	}
	return books, trades
}

// source is where a pair's snapshots come from.
type source int

const (
	sourceStream  source = iota // the stream keeps it current
	sourceSyncing               // the stream is live; a snapshot or backfill is pending
	sourceREST                  // no usable stream: REST reads when asked for
	numSources
)

var sourceNames = [numSources]string{"stream", "syncing", "rest"}

func sourceOf(current, streaming bool) source {
	switch {
	case current:
		return sourceStream
	case streaming:
		return sourceSyncing
	}
	return sourceREST
}
