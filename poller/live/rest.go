package live

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/internal/backoff"
	"marketfeed/poller/budget"
	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// restState is a feed's REST read: one at a time, and after a failed one
// not before after.
type restState struct {
	inFlight bool
	after    time.Time
	failures int // consecutive failures of this pair's reads, for its own back-off
}

// ready reports whether a read may start now.
func (st restState) ready(now time.Time) bool { return !st.inFlight && !now.Before(st.after) }

// retry is the pair's own back-off after a failed read: what the venue
// said decides it. A pause of every call (rate limit, firewall, outage) is
// the gate's: the read is simply refused until it lifts, so the pair waits
// no more than a second; a read this pair alone failed (the venue refused
// the symbol, its answer was unusable) waits longer each time, up to a
// minute; a read the poller stopped is retried at once.
func retry(err error, failures int) time.Duration {
	switch venue.OutcomeOf(err) {
	case venue.OutcomeCanceled:
		return 0
	case venue.OutcomeRefused, venue.OutcomeBadData:
		return pairBackoff.Step(failures - 1)
	}
	return time.Second
}

// pairBackoff spaces the retries of one pair's failing reads.
var pairBackoff = backoff.Exponential{Base: time.Second, Max: time.Minute}

// Snapshot tiers. The books clients are reading and are about to lose go
// first: the refreshes of depleted books, then the syncs of books out of
// sequence whose last publication is still served. Then the books nobody
// can read yet, to sync; then the refreshes of books that are served
// meanwhile.
//
// A book is depleted when the top has run through every level a side
// vouched for: the side would be published empty, though the venue has
// levels there. A book out of sequence is not published either. Either
// way the last publication goes on being served, aging, and answers 502
// past max-stale: such a book must not wait behind a cold start's syncs,
// which spend the whole book share for minutes. At 446 books on Binance's
// limits, 2 to 5 books that had answered during a cold start then answered
// 502 for up to 50 s when they waited: depleted ones, and books a request
// had read from REST before their streams delivered. They are few, so the
// syncs lose a read's weight now and then. Both are read at budget.Serving,
// ahead of requests that wait and with the part of the book share those
// leave, since in a cold start's first minute requests spend the rest
// within seconds.
//
// A book in sequence whose stream has said nothing for probeAfter is
// probed (tierProbe): a connected stream that is quiet about a symbol
// proves nothing, since a subscription can go silent while its connection
// carries every other symbol. The cheapest read that can tell, ProbeDepth
// levels, says whether the venue's update id is still the book's; the
// probes have a share of their own (budget.ClassProbe).
//
// A depleted book's refresh, and that of a book started from a seed that
// serves fewer than the published levels (every book of a member taking
// over may need deepening at once: tierDeepen, after the books to sync,
// which leaves the others part of the book share), bypass the refresh
// share: a book that still serves some levels waits its turn in it, so the
// share bounds what refreshes cost however fast prices travel, short of
// running books dry.
const (
	tierDepleted = iota
	tierResync
	tierProbe
	tierSync
	tierDeepen
	tierRefresh
	numTiers
)

// snapshotDepth is the depth of a snapshot read of a tier.
func (s *Source) snapshotDepth(tier int) int {
	switch tier {
	case tierSync, tierResync:
		return s.cfg.SyncDepth
	case tierDeepen:
		return min(deepenDepth, s.cfg.RefreshDepth)
	}
	return s.cfg.RefreshDepth
}

// deepenDepth is the depth a shallow book deepens to (see pair.shallow):
// 500 levels at 10 weight rather than 1000 at 20, since every book of a
// cold start deepens at once, and half the weight has every book serving
// its 100 levels again twice as soon (446 books: 4,460 weight, about six
// minutes of three quarters of the book share). The books that then run
// short are refreshed from 1000 like any other.
const deepenDepth = 5 * snapshot.MaxDepth

// Sync starts the REST reads stream-fed pairs need: snapshots for the
// books that are not in sequence or ask for a refresh, then backfills of
// the trade windows that are not complete. It does not wait for them.
func (s *Source) Sync() {
	s.dispatch(snapshot.StreamBook)
	s.booksBehind.Store(s.booksWaiting(time.Now()))
	s.dispatch(snapshot.StreamTrades)
}

// booksWaiting reports whether a book out of sequence waits for its
// snapshot: one whose read is in flight, or is still to be made, or whose
// stream has just been acknowledged and has had no event yet to buffer. A
// round's own count of books left over would not be enough: it misses the
// reads another round has in flight, and the books whose first events are
// still on the way, and a backfill started then would spend the weight
// their snapshots need. A stream quiet for ackGrace after its
// acknowledgement no longer counts, so that a market with no depth changes
// holds nothing back.
func (s *Source) booksWaiting(now time.Time) bool {
	return s.count(func(lp *pair) bool {
		return lp.books.delivering() && !lp.book.Synced() && (lp.book.Buffered() > 0 || now.Sub(lp.books.at) < ackGrace)
	}) > 0
}

// ackGrace is how long a depth stream acknowledged without an event yet is
// taken as about to deliver the events its book's sync starts from.
const ackGrace = 2 * time.Second

// dispatcher runs the dispatches of one stream kind one at a time.
type dispatcher struct {
	mu sync.Mutex
	// pending is set by every dispatch asked for; the one running takes
	// it before each round, so that a dispatch asked for meanwhile is a
	// round more of the running one rather than one beside it.
	pending atomic.Bool
}

// dispatch starts the reads of stream kind k for every pair that needs one,
// in queue order, while the budget and the read slots allow. The schedule
// and a waiting request's wake-up both ask for dispatches; they run one at a
// time, a dispatch asked for while another runs being run by it, after its
// round, instead of waiting. Were two to run at once, one that found a pair
// claimed by the other would leave it out of its queue, and the reads
// behind it would take the weight its read waits for. A pair's read is
// still claimed under its lock, where its readiness is checked again, so
// that it is read once.
//
// A read is made at its tier's priority (kind.prio), or at least at
// budget.Requested for a pair a request waits for, and the reads of a higher
// priority go first.
func (s *Source) dispatch(k snapshot.Stream) {
	d := &s.dispatchers[k]
	d.pending.Store(true)
	for d.mu.TryLock() {
		if !d.pending.Swap(false) {
			d.mu.Unlock()
			return
		}
		s.dispatchRound(k)
		d.mu.Unlock()
	}
}

// dispatchRound is one round of dispatch.
func (s *Source) dispatchRound(k snapshot.Stream) {
	r, now := &kinds[k], time.Now()
	type queued struct {
		lp          *pair
		tier, order int
		prio        budget.Priority
		waiting     int64 // since when a request waits for the pair (Unix ns); 0: none
	}
	var due []queued
	s.each(func(lp *pair) {
		if r.stream(lp).rest.ready(now) {
			if ok, tier, order := r.due(s, lp, now); ok {
				q := queued{lp: lp, tier: tier, order: order, prio: r.prio[tier], waiting: r.stream(lp).waiting.Load()}
				if q.waiting != 0 {
					q.prio = max(q.prio, budget.Requested)
				}
				due = append(due, q)
			}
		}
	})
	// A request waiting for a pair puts it first whatever its tier, but
	// after the books being served that are about to stop (see
	// tierDepleted).
	// Then the newest wait first among those of a tier; then spot pairs;
	// then the rest by symbol, so that a cold start works through the
	// catalog in a stable order.
	slices.SortFunc(due, func(a, b queued) int {
		return cmp.Or(
			cmp.Compare(b.prio, a.prio),
			cmp.Compare(a.tier, b.tier),
			cmp.Compare(a.order, b.order),
			cmp.Compare(b.waiting, a.waiting),
			trueFirst(a.lp.spot.Load(), b.lp.spot.Load()),
			cmp.Compare(a.lp.symbol, b.lp.symbol),
		)
	})
	// Within a class of the budget, reads go in queue order: once the
	// budget or the read slots refused one, the class gets no more reads
	// this round, so that a lighter read behind it (a sync of 500 levels
	// behind the refresh of a depleted book, of 1000) does not take the
	// weight it waits for as it frees. Another class may still have room:
	// refreshes are not held up by a backlog of books to sync.
	//
	// Each read the budget held back counts as deferred, the refused one
	// and those behind it alike; but refreshes wait by design, within
	// their share: that is not a budget running short.
	var refused [budget.NumClasses]bool
	deferred := 0
	for _, q := range due {
		lp, tier := q.lp, q.tier
		class := r.purpose[tier].Class()
		if !refused[class] {
			if !s.claim(r, lp, tier) {
				continue
			}
			if s.cfg.REST.Start(r.purpose[tier], r.weight(s, tier), q.prio, func(ctx context.Context) {
				s.run(ctx, k, lp, tier)
			}) {
				continue
			}
			lp.mu.Lock()
			r.stream(lp).rest.inFlight = false
			lp.mu.Unlock()
			refused[class] = true
		}
		if r.purpose[tier] != budget.PurposeRefresh {
			deferred++
		}
	}
	if deferred > 0 {
		s.cfg.REST.Deferred(k, deferred)
	}
}

// claim marks the pair's read in flight if it is still ready and due in the
// same tier; it reports whether it did.
func (s *Source) claim(r *kind, lp *pair, tier int) bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	st := &r.stream(lp).rest
	if !st.ready(time.Now()) {
		return false
	}
	if ok, t, _ := r.due(s, lp, time.Now()); !ok || t != tier {
		return false
	}
	st.inFlight = true
	return true
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// run makes one REST read of a pair's stream kind k and applies it: a
// failed read is logged and retried after the pair's back-off, a good one
// applied under the pair's lock and what it changed published after.
func (s *Source) run(ctx context.Context, k snapshot.Stream, lp *pair, tier int) {
	r := &kinds[k]
	apply, err := r.fetch(s, ctx, lp, tier)
	now := time.Now()
	lp.mu.Lock()
	st := &r.stream(lp).rest
	st.inFlight = false
	if err != nil {
		st.failures++
		st.after = now.Add(retry(err, st.failures))
		lp.mu.Unlock()
		s.cfg.Log(slog.LevelWarn, "rest-"+k.String(), "venue read of a stream-fed pair failed",
			slog.String("purpose", r.purpose[tier].String()), slog.String(logKeyPair, lp.tickerID), slog.String(logKeyErr, err.Error()))
		return
	}
	st.failures = 0
	var build func()
	if apply(now) && r.current(lp) {
		build = r.take(s, lp, now)
	}
	lp.mu.Unlock()
	if build != nil {
		build()
	}
}

// fetchSnapshot reads one snapshot, which syncs the pair's book or is laid
// under a book in sequence that asked for a deeper view, or proves a quiet
// book current (see fetchProbe).
func (s *Source) fetchSnapshot(ctx context.Context, lp *pair, tier int) (func(time.Time) bool, error) {
	if tier == tierProbe {
		return s.fetchProbe(ctx, lp)
	}
	lp.mu.Lock()
	shallow := lp.shallow
	lp.mu.Unlock()
	if tier == tierDepleted && !shallow {
		s.metrics.resyncs[causeDepleted].Inc()
	}
	depth := s.snapshotDepth(tier)
	snap, err := s.cfg.REST.Book(ctx, lp.symbol, depth)
	return func(now time.Time) bool {
		if err := lp.book.Refresh(snap, depth); err != nil {
			cause := causeStale
			if !errors.Is(err, orderbook.ErrStaleSnapshot) {
				cause = causeBadData
			}
			if lp.book.Synced() {
				// A refresh that came too late: the book is still in
				// sequence and served; try again in a moment.
				lp.books.rest.after = now.Add(time.Second)
			}
			s.resynced(lp, cause, err)
			return false
		}
		lp.shallow = depth <= snapshot.MaxDepth
		lp.heardAt = now
		return true
	}, err
}

// ProbeDepth is the depth of a probe's read: the fewest levels the venue
// serves, at its lowest weight (Binance: 2 up to 50 levels, against 5 for
// the 100 a sync reads). Only the read's update id is used.
const ProbeDepth = 5

// probeAfter is how long a book in sequence may hear nothing from its
// stream before a probe must prove it current: a third of max-stale, at
// most 3 s, so that a probe that fails or waits for the budget still
// leaves time for another before the book ages out.
func (s *Source) probeAfter() time.Duration {
	return min(3*time.Second, s.cfg.MaxStale/3)
}

// probeDue reports whether a book in sequence must be proven current by a
// probe: its stream delivers, has said nothing of it for probeAfter, and a
// request reads it (within the hot period) or waits for it, or its mid is
// a spot pair's ticker. A quiet book nobody reads is not probed: it ages
// out of max-stale, and the first request for it waits for its probe
// instead, as for any pair's first read. Called with lp.mu held.
func (s *Source) probeDue(lp *pair, now time.Time) bool {
	if !lp.books.delivering() || !lp.behindAt.IsZero() || now.Sub(lp.heardAt) < s.probeAfter() {
		return false
	}
	return lp.books.waiting.Load() != 0 || lp.spot.Load() || s.cfg.Demand.Wanted(snapshot.StreamBook, lp.tickerID, now)
}

// fetchProbe reads ProbeDepth levels of a quiet book's market. The venue's
// update id at or before the book's proves the book current as of the
// read: it is published as read when the read started, at the read's
// venue time. A later id means the venue made updates the stream has not
// delivered: the book is not confirmed, and unless an event comes within
// probeAfter (a stream that lags, under a load that held its reader up,
// rather than one gone silent), the subscription is silent (see Watch and
// silenced).
func (s *Source) fetchProbe(ctx context.Context, lp *pair) (func(time.Time) bool, error) {
	start := time.Now()
	snap, err := s.cfg.REST.Book(ctx, lp.symbol, ProbeDepth)
	return func(time.Time) bool {
		if !lp.book.Synced() {
			return false // out of sequence meanwhile: its resync says the rest
		}
		if lp.book.Confirm(snap.LastUpdateID, snap.Time) {
			s.metrics.probes[probeConfirmed].Inc()
			lp.heardAt = later(lp.heardAt, start)
			return true
		}
		s.metrics.probes[probeBehind].Inc()
		if !lp.heardAt.After(start) {
			lp.behindAt = start
		}
		return false
	}, err
}

// silenced handles a pair whose depth subscription a probe found silent:
// its connection is up and carries other symbols, yet the venue's book
// moved and the stream said nothing. The book missed updates and syncs
// again once the stream delivers; meanwhile the stream is subscribed
// again and the pair is served by REST, as after the watchdog gives a
// stream up. The pair's trade window may have missed trades too: it
// answers again once a trade from its stream, or a read of the trades
// after its newest, says whether it did (see readOn). Called with lp.mu
// held.
func (s *Source) silenced(lp *pair, now time.Time) {
	lp.book.Desync()
	s.resynced(lp, causeSilent, nil)
	s.giveUp(lp, snapshot.StreamBook, &lp.books.stream, now)
	lp.tradesSuspect = true
	lp.tradesLost, lp.losses = true, lp.losses+1 // see pair.tradesLost
}

// resumeGrace is how long a window that may have missed trades waits for
// a trade from its stream, which settles it for free, before a read does.
const resumeGrace = 2 * time.Second

// fetchTrades reads what a pair's window needs: for a window that may have
// missed trades while its stream was lost, the trades after its newest
// (see readOn); for one with a hole, the ids it misses; otherwise, and for
// a window that never held a trade, the newest trades.
func (s *Source) fetchTrades(ctx context.Context, lp *pair, _ int) (func(time.Time) bool, error) {
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
