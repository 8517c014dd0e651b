package live

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/internal/backoff"
	"marketfeed/internal/logkey"
	"marketfeed/poller/budget"
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
//
// Which tier goes first is the order here; what each tier's reads may
// spend is the purpose and priority they ask the budget for, in the stream
// kind's row (kindRow.purpose and kindRow.prio).
const (
	tierDepleted Tier = iota
	// tierDry is the read of a book synced from few levels (see
	// bookState.shallow) that ran dry once no book waits for its sync: a
	// market that runs through 100 levels within a minute is read at the
	// deepening depth at once, rather than from 100 levels again and again
	// (every 40 to 60 s, the weight a minute of a tenth of the markets
	// being as much as every other read's together).
	tierDry
	tierResync
	// tierAsked is the read of a book in sequence, not shallow (see
	// bookState.shallow), that vouches for fewer levels than a request
	// waits for (see Source.Load): the request is answered with the full depth or
	// not at all, so its book is read for it, at the sync depth. The book
	// has been served, and its readers are refused until the read lands:
	// it is read at budget.Serving, as a depleted book is, and may spend
	// the serving reserve. At a cold load's budget.Requested, in a cold
	// start of 846 books, books synced in its first minutes ran short of
	// 100 levels minutes later, with the window spent by the syncs down to
	// the reserve, and their readers' loads timed out until the cold start
	// ended. Such a book has run through hundreds of levels: what these
	// reads cost follows the markets, few books at a time.
	tierAsked
	tierProbe
	// tierAskedShallow is tierAsked's read of a shallow book (see
	// bookState.shallow), at a cold load's budget.Requested: every book of
	// a member that has just taken over from the last leader's 100 levels
	// may run short of them within minutes, and its readers' reads at
	// budget.Serving would spend the serving reserve that the depleted
	// books and the resyncs need.
	tierAskedShallow
	tierSync
	tierDeepen
	tierRefresh
	numTiers
)

// Tier ranks the REST reads a stream kind makes of a pair: lower tiers go
// first, and each tier has the purpose and priority its reads ask the
// budget for (see kindRow).
type Tier int

// snapshotDepth is the depth of a snapshot read of a tier.
func (s *Source) snapshotDepth(tier Tier) int {
	switch tier {
	case tierSync, tierResync, tierAsked, tierAskedShallow:
		return s.cfg.SyncDepth
	case tierDeepen, tierDry:
		return min(deepenDepth, s.cfg.RefreshDepth)
	}
	return s.cfg.RefreshDepth
}

// deepenDepth is the depth a shallow book deepens to (see bookState.shallow:
// every book a cluster member takes over from the last leader's published
// 100 levels, or synced from a SyncDepth of 100): 500 levels at 10 weight
// rather than 1000 at 20, since such books deepen all at once, and half the
// weight has every book serving its 100 levels again twice as soon (446
// books: 4,460 weight, about six minutes of three quarters of the book
// share). The books that then run short are refreshed from 1000 like any
// other.
const deepenDepth = 5 * snapshot.MaxDepth

// Sync starts the REST reads stream-fed pairs need: snapshots for the
// books that are not in sequence or ask for a refresh, then backfills of
// the trade windows that are not complete. It does not wait for them.
func (s *Source) Sync() {
	for k, row := range kinds {
		s.dispatch(snapshot.Stream(k))
		if row.dispatched != nil {
			row.dispatched(s)
		}
	}
}

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
		lp      *pair
		tier    Tier
		order   int
		prio    budget.Priority
		waiting int64 // since when a request waits for the pair (Unix ns); 0: none
	}
	var due []queued
	s.each(func(lp *pair) {
		if st := lp.kind(k); st.feed().rest.ready(now) {
			if ok, tier, order := st.due(s, lp, now); ok {
				q := queued{lp: lp, tier: tier, order: order, prio: r.prio[tier], waiting: st.feed().waiting.Load()}
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
			if !s.claim(lp.kind(k), lp, tier) {
				continue
			}
			ask := budget.Ask{Purpose: r.purpose[tier], Weight: r.weight(s, tier), Priority: q.prio}
			if s.cfg.REST.Start(ask, func(ctx context.Context) {
				s.run(ctx, k, lp, tier)
			}) {
				continue
			}
			lp.mu.Lock()
			lp.kind(k).feed().rest.inFlight = false
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
func (s *Source) claim(state kind, lp *pair, tier Tier) bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	st := &state.feed().rest
	if !st.ready(time.Now()) {
		return false
	}
	if ok, t, _ := state.due(s, lp, time.Now()); !ok || t != tier {
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
func (s *Source) run(ctx context.Context, k snapshot.Stream, lp *pair, tier Tier) {
	r, state := &kinds[k], lp.kind(k)
	apply, err := state.fetch(ctx, s, lp, tier)
	now := time.Now()
	lp.mu.Lock()
	st := &state.feed().rest
	st.inFlight = false
	if err != nil {
		st.failures++
		st.after = now.Add(retry(err, st.failures))
		lp.mu.Unlock()
		if venue.Paused(err) {
			return // a pause of every call logs itself
		}
		s.cfg.Log(slog.LevelWarn, "rest-"+k.String(), "venue read of a stream-fed pair failed",
			slog.String("purpose", r.purpose[tier].String()), slog.String(logkey.Pair, lp.tickerID), slog.String(logkey.Err, err.Error()))
		return
	}
	st.failures = 0
	var build func()
	if apply(now) && state.current() {
		build = state.take(s, lp, now)
	}
	lp.mu.Unlock()
	if build != nil {
		build()
	}
}
