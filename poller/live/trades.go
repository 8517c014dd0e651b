package live

import (
	"context"
	"log/slog"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// The trades kind: a pair's window of the newest aggregate trades, fed by
// the trade stream, backfilled toward snapshot.MaxTrades by REST, published
// as snapshot.Trades, and settled by a read when the stream was lost.

// tradesState is a pair's trades kind: its feed and its window. The pair's
// mu guards it.
type tradesState struct {
	trades feed[*snapshot.Trades]
	// tradesSuspect is set when a probe found the pair's depth stream
	// silent: its trade stream may be silent too, and the read that
	// settles the window says so if it finds trades the stream did not
	// deliver (see readOn).
	tradesSuspect bool
	// window is the newest trades; windowChanged is set when it changed
	// since its last publication, and backfilled once it was filled from
	// REST since the stream went live.
	window        tradeWindow
	windowChanged bool
	backfilled    bool
	// streamed is set when the trade stream delivered a trade into an
	// empty window while live: the window then answers, newest first,
	// before its backfill, nothing before that trade having been missed.
	streamed bool
	// tradesLost is set when the trade stream was lost: the window may
	// have missed trades and does not answer until the first trade after
	// the stream is back says whether it did (the venue numbers aggregate
	// trades one by one: an id right after the window's newest means none
	// was missed), or a read made after the stream came back says so.
	// losses counts the losses, so that a read started before the last
	// one vouches for nothing.
	tradesLost bool
	losses     int
	// idChecked is the loss (see losses) for which the venue's newest
	// single trade id came after the window's newest trade: the window
	// missed trades, and a read of them settles it (see
	// tradesState.checkID).
	idChecked int
}

// The trades kind's tiers (see Tier), in the order they go: the reads of
// trades, then the checks of the venue's newest trade id (see
// tradesState.due). Tiers rank one kind's reads, so these are the trades'
// own, apart from the book's.
const (
	tierTrades  Tier = iota // a read of trades
	tierTradeID             // a check of the venue's newest trade id (see checkID)
)

// tradesRow is the trades kind's row of kinds.
var tradesRow = kindRow{
	of:      func(lp *pair) kind { return &lp.tradesState },
	every:   func(cfg *Config) time.Duration { return cfg.TradesEvery },
	purpose: [numTiers]budget.Purpose{tierTrades: budget.PurposeBackfill, tierTradeID: budget.PurposeBackfill},
	weight: func(s *Source, tier Tier) int {
		if tier == tierTradeID {
			w, _ := s.cfg.REST.TradeIDWeight()
			return w
		}
		return s.cfg.REST.TradesWeight()
	},
}

// feed is the trade stream's feed.
func (t *tradesState) feed() *stream { return &t.trades.stream }

// current: see tradesCurrent.
func (t *tradesState) current() bool { return t.tradesCurrent() }

// active is when the ticker stream last showed the market trading.
func (t *tradesState) active(lp *pair) time.Time { return lp.activeAt }

// lose: the window may have missed trades (see tradesState.tradesLost).
func (t *tradesState) lose(*Source, *pair, string) { t.tradesLost, t.losses = true, t.losses+1 }

// A window answers before its backfill (see tradesState.tradesCurrent),
// which fills it toward MaxTrades in the background: the pairs
// requests read first, and only once every book is in sequence (a
// book out of sequence is not served at all), but for a window a
// request waits for. A window that may have missed trades while
// its stream was lost is read when no trade came within
// resumeGrace of the stream's return to say whether it did (the
// trades after its newest are read); one that did miss trades
// reads the ids it missed. Where the venue reads its newest single
// trade's id for less than a read of trades, that id is checked
// first (tierTradeID): most windows that hear nothing after the
// stream's return are of quiet markets that missed nothing, and after
// a venue-wide outage their reads of 20 weight each took the weight
// the books' syncs wait for.
func (t *tradesState) due(s *Source, lp *pair, now time.Time) (ok bool, tier Tier, order int) {
	switch {
	case !lp.trades.live:
		return false, 0, 0
	case lp.tradesLost:
		if now.Sub(lp.trades.at) < resumeGrace && lp.trades.waiting.Load() == 0 {
			return false, 0, 0
		}
	case lp.window.hole.open():
	case lp.backfilled || lp.window.full():
		return false, 0, 0
	}
	if s.booksBehind.Load() && lp.trades.waiting.Load() == 0 {
		return false, 0, 0
	}
	tier = tierTrades
	if _, reads := s.cfg.REST.TradeIDWeight(); reads && lp.tradesLost && lp.idChecked != lp.losses && lp.window.newestLastID() != 0 {
		tier = tierTradeID
	}
	if s.cfg.Demand.Wanted(snapshot.StreamTrades, lp.tickerID, now) {
		return true, tier, 0
	}
	return true, tier, 1
}

// checkID reads the venue's newest single trade id for a window that may
// have missed trades while its stream was lost: the id its newest trade
// ends with means none came after, and the window is settled as it is; a
// later one means it missed some, which the window's next read fetches
// (see readOn). A check started before a later loss, or one that finds
// the window settled meanwhile, settles nothing.
func (t *tradesState) checkID(ctx context.Context, s *Source, lp *pair) (func(time.Time) bool, error) {
	lp.mu.Lock()
	losses, newest, last := lp.losses, lp.window.newest(), lp.window.newestLastID()
	lp.mu.Unlock()
	id, err := s.cfg.REST.NewestTradeID(ctx, lp.symbol)
	return func(time.Time) bool {
		if !lp.tradesLost || losses != lp.losses {
			return true
		}
		if id != last || last == 0 {
			lp.idChecked = losses
			return true
		}
		// Nothing traded since: the stream, live again, has missed
		// nothing either, silent or not.
		lp.tradesSuspect = false
		lp.resumeTrades(newest + 1)
		return true
	}, err
}

// seed starts the window from the seed's trades, taken as having possibly
// missed trades since (see Seed).
func (t *tradesState) seed(s *Source, lp *pair, seed Seed) bool {
	if v, _ := seed.Values[snapshot.StreamTrades].(*snapshot.Trades); v != nil {
		if trades, err := v.VenueTrades(); err == nil && len(trades) > 0 {
			lp.window.merge(trades)
			// The next publication numbers the trades it shares with
			// the seed as the seed did.
			lp.trades.pub = v
			lp.backfilled = true
			lp.tradesLost, lp.losses = true, lp.losses+1
			return true
		}
	}
	return false
}

// tradesCurrent reports whether the pair's trade window is kept current by
// the stream and may answer: backfilled, full, or holding a trade the stream
// delivered, and not waiting to learn whether it missed trades while the
// stream was lost. A window answers the newest trades it has before its
// backfill fills it toward MaxTrades: only a window that never held a trade
// waits for a read.
func (t *tradesState) tradesCurrent() bool {
	return t.trades.delivering() && !t.tradesLost && (t.backfilled || t.streamed || t.window.full())
}

// resumeTrades settles a window that may have missed trades while its
// stream was lost, given the oldest id of trades that came after the
// stream was back (from the stream or a read): right after the window's
// newest, nothing was missed; further on, the window holds a hole, serves
// only what comes after it, and a read of the missing ids fills it (see
// tradesState.fetch). It reports whether trades were missed. Called with lp.mu
// held.
func (t *tradesState) resumeTrades(first int64) (missed bool) {
	t.tradesLost = false
	if newest := t.window.newest(); newest != 0 && first > newest+1 {
		t.window.markHole(idRange{newest + 1, first})
		return true
	}
	return false
}

// Trade adds one aggregate trade to the pair's window.
func (s *Source) Trade(symbol string, tr venue.Trade) {
	lp := s.pair(symbol)
	if lp == nil {
		return
	}
	now := time.Now()
	lp.mu.Lock()
	lp.trades.at, lp.tradedAt = now, now
	lp.trades.silent = silence{}
	if lp.tradesLost && lp.trades.live && tr.ID > lp.window.newest() {
		if lp.resumeTrades(tr.ID) {
			s.metrics.tradeGaps.Inc()
		}
	}
	// A trade into an empty window cannot leave a hole behind it: the
	// window answers from then on (see tradesState.tradesCurrent).
	if lp.trades.live && lp.window.empty() {
		lp.streamed = true
	}
	if lp.window.add(tr) {
		lp.windowChanged = true
	}
	lp.mu.Unlock()
}

// publish publishes the trade window if it is complete and changed,
// and confirms it if it did not change.
func (t *tradesState) publish(s *Source, lp *pair, now time.Time) func() {
	if !lp.tradesCurrent() || (!lp.windowChanged && lp.trades.confirm(now, s.cfg.Store.PutTrades)) {
		return nil
	}
	return t.take(s, lp, now)
}

// take takes the trade window for publishing and returns the build of
// its publication, to run once lp.mu is released. Called with lp.mu held.
func (t *tradesState) take(s *Source, lp *pair, now time.Time) (build func()) {
	// The window's own trades, read without the lock: the window leaves
	// them as they are until the build gives them back (see lend).
	list, epoch := lp.window.lend()
	prev := lp.trades.pub
	lp.windowChanged = false
	seq := lp.trades.take()
	return func() {
		t, err := snapshot.NewTradesAfter(prev, lp.tickerID, list, now)
		if err != nil {
			s.cfg.Log(slog.LevelWarn, "trades-"+lp.tickerID, "trade window unusable",
				slog.String(logkey.Pair, lp.tickerID), slog.String(logkey.Err, err.Error()))
		}
		lp.mu.Lock()
		lp.window.giveBack(epoch)
		lp.trades.finish(seq, t, s.cfg.Store.PutTrades)
		lp.mu.Unlock()
	}
}

// resumeGrace is how long a window that may have missed trades waits for
// a trade from its stream, which settles it for free, before a read does.
const resumeGrace = 2 * time.Second

// fetch reads what a pair's window needs: for a window that may have
// missed trades while its stream was lost, the venue's newest single trade
// id (tierTradeID, see checkID) or the trades after its newest (see readOn);
// for one with a hole, the ids it misses; otherwise, and for a window that
// never held a trade, the newest trades.
func (t *tradesState) fetch(ctx context.Context, s *Source, lp *pair, tier Tier) (func(time.Time) bool, error) {
	if tier == tierTradeID {
		return t.checkID(ctx, s, lp)
	}
	lp.mu.Lock()
	lost, losses, newest := lp.tradesLost, lp.losses, lp.window.newest()
	hole, read, fill := lp.window.holeRead()
	lp.mu.Unlock()
	switch {
	case lost && newest != 0:
		return s.readOn(ctx, lp, newest+1, losses)
	case fill && !lost:
		s.metrics.gapReads.Inc()
		trades, err := s.cfg.REST.TradesFrom(ctx, lp.symbol, read.from, int(read.to-read.from))
		return func(time.Time) bool {
			if lp.window.fill(hole, read, trades) {
				// The venue has no such ids: what it has is read
				// again as the window's backfill.
				s.metrics.gapsCut.Inc()
				lp.backfilled = false
			}
			return true
		}, err
	}
	trades, err := s.cfg.REST.Trades(ctx, lp.symbol, snapshot.MaxTrades)
	return func(time.Time) bool {
		if lost && lp.tradesLost && losses == lp.losses {
			lp.tradesLost = false // the window held nothing to miss trades after
		}
		lp.window.merge(trades)
		lp.backfilled = true
		return true
	}, err
}

// readOn settles a window that may have missed trades while its stream was
// lost, and that no trade from the stream has settled since it came back:
// it reads the trades from id from, right after the window's newest, on.
// None: nothing was missed. The ids from from on: those the window missed,
// now filled in. A first id further on: a hole the venue cannot fill (see
// pair.resumeTrades). A full read may be followed by more trades the window
// missed: it stays unsettled, and the next read goes on from the last. A
// read started before a later loss settles nothing.
func (s *Source) readOn(ctx context.Context, lp *pair, from int64, losses int) (func(time.Time) bool, error) {
	trades, err := s.cfg.REST.TradesFrom(ctx, lp.symbol, from, snapshot.MaxTrades)
	return func(now time.Time) bool {
		if lp.tradesSuspect && len(trades) > 0 {
			// Trades the stream never delivered, though it had time
			// to: its subscription is silent too.
			s.giveUp(lp, snapshot.StreamTrades, &lp.trades.stream, now)
		}
		lp.tradesSuspect = false
		if lp.tradesLost && losses == lp.losses {
			first := from
			if len(trades) > 0 {
				first = trades[0].ID
			}
			if lp.resumeTrades(first) {
				s.metrics.tradeGaps.Inc()
			}
			lp.tradesLost = len(trades) == snapshot.MaxTrades
		}
		lp.window.merge(trades)
		return true
	}, err
}
