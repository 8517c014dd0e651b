package live

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"marketfeed/snapshot"
)

// refreshBelow is how many levels a side may still vouch for when its book
// asks for a new snapshot to lay under it.
const refreshBelow = snapshot.MaxDepth + snapshot.MaxDepth/2

// publishStep is the step of the stream-fed publication. Each pair's book
// is published every BookEvery and its trades every TradesEvery, but not
// every pair at the same instant: a pair has a slot (see pair.slot), and
// each step publishes the pairs of one slot, so that a period's values are
// spread over it. All at once, 446 books every 350 ms and 446 trade lists
// every second (9 MB) reached a cluster's bucket as one burst each, and a
// member applied 95 % of values within 50 ms of their publication and
// 99.2 % within 100 ms; spread, 99 % within 50 ms and half within 10 ms
// (make cluster-bench, at 446 pairs). A pair's own cadence, and so the
// age of what is served, stays what it was.
const publishStep = 50 * time.Millisecond

// slots is how many steps of step a period of every is published in: one
// slot when the period is no longer than a step.
func slots(every, step time.Duration) uint32 {
	if step <= 0 || every <= step {
		return 1
	}
	return uint32(every / step)
}

// publishEachStep schedules the publication of one slot of books and one
// of trade windows every step: each pair's book once every BookEvery (at
// most: a period that is not a whole number of steps is rounded down to
// one), its trades once every TradesEvery, and its depth, if asked for,
// once every DepthEvery.
func (s *Source) publishEachStep(sch Scheduler) {
	pubs := []publication{{s.cfg.BookEvery, s.publishBook}, {s.cfg.TradesEvery, s.publishTrades}}
	step := publishStep
	for _, p := range pubs {
		if p.every > 0 {
			step = min(step, p.every)
		}
	}
	if s.cfg.DepthEvery > 0 {
		pubs = append(pubs, publication{s.cfg.DepthEvery, s.publishDepth})
	}
	// The job never overlaps itself; the count is atomic only because
	// each run may be on another goroutine.
	var n atomic.Uint32
	sch.Every(step, func(context.Context) {
		i := n.Add(1) - 1
		now := time.Now()
		for _, p := range pubs {
			of := slots(p.every, step)
			s.publish(now, i%of, of, p.take)
		}
	})
}

// publication is one kind of value published on the step schedule: each
// pair's once every every, by take, which is called with the pair's lock
// held and returns the build of the publication to run once the lock is
// released (nil: nothing to publish).
type publication struct {
	every time.Duration
	take  func(lp *pair, now time.Time) (build func())
}

// publish runs take on the pairs in slot of slots (see publishStep), then
// the build it returns with the pair's lock released.
func (s *Source) publish(now time.Time, slot, slots uint32, take func(lp *pair, now time.Time) func()) {
	for _, lp := range *s.pairs.Load() {
		if lp.slot%slots != slot {
			continue
		}
		lp.mu.Lock()
		build := take(lp, now)
		lp.mu.Unlock()
		if build != nil {
			build()
		}
	}
}

// publishDepth publishes, as a snapshot.Depth, the book if it is in
// sequence and serves levels: what a cluster member taking over starts the
// pair's book from (see Seed). A depth is current at its update id whatever
// the book did since its last publication, so it is published whether the
// book changed or not.
func (s *Source) publishDepth(lp *pair, now time.Time) func() {
	if !lp.bookCurrent() || lp.book.Held() || lp.book.Vouched() == 0 {
		return nil
	}
	bids, asks := lp.book.Top(snapshot.DepthLevels)
	venueTime, updateID := lp.book.Time(), lp.book.LastUpdateID()
	return func() {
		s.cfg.Store.PutDepth(snapshot.NewDepth(lp.tickerID, venueTime, updateID, bids, asks, now))
	}
}

// askRefreshes has every stream-fed book whose side runs short of published
// levels ask for a refresh, and withdraws the request of a book no longer
// short. It looks at every book at once, whatever its slot, so that the
// round that follows chooses among all that wait, nearest to running out
// first.
func (s *Source) askRefreshes() {
	s.each(func(lp *pair) {
		if !lp.bookCurrent() || lp.book.Held() {
			return
		}
		// Ask for a deeper view while the book can still publish every
		// level: half the published depth ahead of running short. What it
		// holds meanwhile is an exact prefix of the venue's book.
		switch {
		case lp.book.Short(refreshBelow):
			if !lp.book.Record() {
				s.metrics.resyncs[causeShort].Inc()
			}
		case lp.book.Recording() && !lp.books.rest.inFlight:
			// The price turned back while the refresh waited its turn in
			// the refresh share: it is no longer needed.
			lp.book.StopRecording()
		}
	})
}

// publishBook publishes the stream-fed book if it changed since its last
// publication, and confirms it if not.
func (s *Source) publishBook(lp *pair, now time.Time) func() {
	switch {
	case !lp.bookCurrent() || lp.book.Held():
		return nil
	case lp.book.Vouched() == 0:
		return nil // depleted: the last publication stands until the refresh
	case !lp.book.Changed() && lp.book.Time()-lp.books.pubTime() < confirmSlack.Milliseconds() &&
		lp.books.confirm(lp.heardAt, s.cfg.Store.PutBook):
		lp.lastQuoteAt = lp.heardAt
		return nil
	}
	return s.takeBook(lp, now)
}

// confirmSlack is how far the venue time of a book whose published levels
// did not change may run ahead of its publication's before it is built
// again rather than confirmed: a confirmation keeps the published bytes,
// and with them their timestamp, which must stay within max-stale of the
// venue time the book was last vouched for (an event beyond the published
// levels, or a probe).
const confirmSlack = time.Second

// pubTime is the venue time of the book last published; 0 before any.
func (f *feed[V]) pubTime() int64 {
	if b, ok := any(f.pub).(*snapshot.Book); ok && b != nil {
		return b.Time()
	}
	return 0
}

// takeBook takes the book's state for publishing and returns the build of
// its publication, to run once lp.mu is released: read when the venue last
// vouched for it (see pair.heardAt). Called with lp.mu held.
func (s *Source) takeBook(lp *pair, _ time.Time) (build func()) {
	bids, asks := lp.book.Top(snapshot.MaxDepth)
	venueTime, updateID, now := lp.book.Time(), lp.book.LastUpdateID(), lp.heardAt
	lp.book.ResetChanged()
	seq := lp.books.take()
	return func() {
		// The levels were checked as they arrived and the book keeps its
		// sides in order: they are not checked again.
		b := snapshot.NewCheckedBook(lp.tickerID, venueTime, updateID, bids, asks, now)
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if lp.books.finish(seq, b, s.cfg.Store.PutBook) {
			lp.lastQuote = quoteOf(lp.symbol, bids, asks)
			lp.lastQuoteAt = now
			s.metrics.publishLag.Observe(now.Sub(time.UnixMilli(venueTime)))
		}
	}
}

// publishTrades publishes the trade window if it is complete and changed,
// and confirms it if it did not change.
func (s *Source) publishTrades(lp *pair, now time.Time) func() {
	if !lp.tradesCurrent() || (!lp.windowChanged && lp.trades.confirm(now, s.cfg.Store.PutTrades)) {
		return nil
	}
	return s.takeTrades(lp, now)
}

// takeTrades takes the trade window for publishing and returns the build of
// its publication, to run once lp.mu is released. Called with lp.mu held.
func (s *Source) takeTrades(lp *pair, now time.Time) (build func()) {
	list := slices.Clone(lp.window.served())
	prev := lp.trades.pub
	lp.windowChanged = false
	seq := lp.trades.take()
	return func() {
		t, err := snapshot.NewTradesAfter(prev, lp.tickerID, list, now)
		if err != nil {
			s.cfg.Log(slog.LevelWarn, "trades-"+lp.tickerID, "trade window unusable",
				slog.String(logKeyPair, lp.tickerID), slog.String(logKeyErr, err.Error()))
		}
		lp.mu.Lock()
		lp.trades.finish(seq, t, s.cfg.Store.PutTrades)
		lp.mu.Unlock()
	}
}
