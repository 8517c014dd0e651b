package live

import (
	"context"
	"errors"
	"sync"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// The order book kind: a pair's local order book, kept in sequence from the
// diff depth stream after a REST snapshot, published as a snapshot.Book
// (and, for a cluster, as a snapshot.Depth), refreshed, probed and synced
// again by REST reads of its own tiers.

// bookState is a pair's order book kind: its feed, its local book and what
// the venue last said of it. The pair's mu guards it.
type bookState struct {
	books feed[*snapshot.Book]
	// book is the local order book the depth stream keeps.
	book *orderbook.Book
	// heardAt is when the venue last vouched for the book: an event
	// applied in sequence, the snapshot that synced or refreshed it, or a
	// probe that found no update missed. The book is published as read at
	// heardAt, never later, so that a book whose subscription went silent
	// ages out at max-stale unless a probe proves it current (see
	// tierProbe). A connected stream that says nothing proves nothing.
	heardAt time.Time
	// behindAt is when a probe found the venue's book past this one with
	// no event since: the stream is silent unless one comes within
	// probeAfter (see Watch). Zero: no such probe.
	behindAt time.Time
	// shallow is set while the book holds no more levels than are
	// published: those of a seed of the published book or of a shallow
	// depth (see Seed), or of the 100-level snapshot
	// that synced it (the cheapest that answers with every level). Once
	// it serves fewer, its deeper view is read from the book share, after
	// the books to sync (tierDeepen), not from the refresh share, which is
	// sized for one book running short now and then, not for every book
	// of a cold start or of a member that has just taken over.
	shallow bool
	// asked is the levels a side a request waits for while the book in
	// sequence vouches for fewer (see Source.Load and tierAsked); 0 while
	// none does.
	asked int
	// lastQuote is the best bid and ask of the book last published, and
	// lastQuoteAt when it was last known current: the tickers' mid while
	// the book resyncs.
	lastQuote   venue.Quote
	lastQuoteAt time.Time
}

// bookRow is the order book kind's row of kinds.
var bookRow = kindRow{
	of:    func(lp *pair) kind { return &lp.bookState },
	every: func(cfg *Config) time.Duration { return cfg.BookEvery },
	purpose: [numTiers]budget.Purpose{tierDepleted: budget.PurposeDepleted, tierDry: budget.PurposeDepleted, tierResync: budget.PurposeSnapshot,
		tierAsked: budget.PurposeDepleted, tierAskedShallow: budget.PurposeDepleted, tierProbe: budget.PurposeProbe, tierSync: budget.PurposeSnapshot,
		tierDeepen: budget.PurposeDeepen, tierRefresh: budget.PurposeRefresh},
	// A book about to stop being served to the clients reading it
	// goes before even a request that waits, and may spend the part
	// of the book share requests leave (budget.Serving). A book out of
	// sequence that is not served is what every reader of the pair
	// waits for: its sync may take the part of the book share held
	// back for requests too, once it would otherwise go unused.
	// A probe proves a book being served current: it goes before the
	// syncs, within its own share, and may take the serving reserve
	// when the rest of the minute is spent.
	// A book read deeper for a request that waits is a served book that
	// stops answering its readers until the read lands, as a depleted
	// one does; a shallow one, which runs short with all the others,
	// waits as a cold load does (see tierAsked).
	prio: [numTiers]budget.Priority{tierDepleted: budget.Serving, tierDry: budget.Serving, tierResync: budget.Serving,
		tierAsked: budget.Serving, tierAskedShallow: budget.Requested, tierProbe: budget.Serving, tierSync: budget.Sync},
	weight: func(s *Source, tier Tier) int { return s.cfg.REST.BookWeight(s.snapshotDepth(tier)) },
	// The trade backfills wait while books wait for their snapshots.
	dispatched: func(s *Source) { s.booksBehind.Store(s.booksWaiting(time.Now())) },
}

// feed is the depth stream's feed.
func (b *bookState) feed() *stream { return &b.books.stream }

// current: see bookCurrent.
func (b *bookState) current() bool { return b.bookCurrent() }

// active: a market that trades changes its book, so its depth stream must
// deliver too.
func (b *bookState) active(lp *pair) time.Time { return later(lp.activeAt, lp.tradedAt) }

// lose suspends a book in sequence whose stream was lost, and takes it
// out of sequence for any other cause.
func (b *bookState) lose(s *Source, lp *pair, cause string) {
	switch {
	case !lp.book.Synced():
	case cause == causeLost:
		// The venue numbers updates per market: the next
		// event may still continue the chain (see Source.Depth).
		lp.book.Suspend()
		s.metrics.suspended.Inc()
	default:
		lp.book.Desync()
		s.resynced(lp, cause, nil)
	}
}

// due: see the snapshot tiers (tierDepleted and the rest).
func (b *bookState) due(s *Source, lp *pair, now time.Time) (ok bool, tier Tier, order int) {
	if !lp.books.live {
		return false, 0, 0
	}
	if lp.book.Synced() {
		// A refresh: the book is served meanwhile, so it waits
		// behind every book that is not, and the book nearest
		// to running short goes first; but a depleted book is
		// refreshed from the book share before any (see
		// tierDepleted), and so is a shallow one (see
		// bookState.shallow) as soon as it serves fewer than the
		// published levels, after the books to sync and leaving
		// room (see budget.PurposeDeepen).
		vouched := lp.book.Vouched()
		switch {
		case vouched == 0 && lp.shallow && !s.booksBehind.Load():
			return lp.book.Recording(), tierDry, vouched
		case vouched == 0 && lp.shallow:
			// A book synced from 100 levels that ran dry
			// while books wait for their syncs is read again
			// from as few, as a book out of sequence that is
			// served is (tierResync), and deepens after the
			// syncs (tierDeepen, or tierDry when it runs dry
			// again). Dense books run through 100 levels
			// within a minute: in a cold start of 446 books,
			// 30 deep reads of theirs (20 weight each) took
			// the second minute's weight from the syncs.
			return lp.book.Recording(), tierResync, vouched
		case vouched == 0:
			return lp.book.Recording(), tierDepleted, vouched
		case lp.asked > 0 && vouched < lp.asked:
			// A request waits for more levels than the book vouches
			// for: it is read for the request (see tierAsked).
			if lp.shallow {
				return lp.book.Recording(), tierAskedShallow, vouched
			}
			return lp.book.Recording(), tierAsked, vouched
		case s.probeDue(lp, now):
			// Quiet for long enough that it must be proven
			// current, the longest quiet first.
			return !lp.book.Held(), tierProbe, -int(now.Sub(lp.heardAt) / time.Millisecond)
		}
		// A book that serves levels waits for its deeper view
		// while books out of sequence, which serve nothing,
		// wait for their syncs: from 100 levels every book of a
		// cold start asks for one at once, and the deeper views
		// took the book share's weight from the syncs.
		ok := lp.book.Recording() && !s.booksBehind.Load()
		if lp.shallow && vouched < snapshot.MaxDepth {
			return ok, tierDeepen, vouched
		}
		return ok, tierRefresh, vouched
	}
	if s.cfg.Store.FreshAt(snapshot.StreamBook, []byte(lp.tickerID), now.UnixNano(), s.cfg.MaxStale) {
		return lp.book.Buffered() > 0, tierResync, 0
	}
	return lp.book.Buffered() > 0, tierSync, 0
}

// seed starts the book from the seed's depth, or else its book (see Seed).
func (b *bookState) seed(s *Source, lp *pair, seed Seed) bool {
	var snap venue.Book
	pub, _ := seed.Values[snapshot.StreamBook].(*snapshot.Book)
	switch d := seed.Depth; {
	case d != nil:
		snap.Bids, snap.Asks = d.Sides()
		snap.Time, snap.LastUpdateID = d.Time(), d.Seq()
	case pub != nil && pub.Seq() > 0:
		snap.Bids, snap.Asks = pub.Sides()
		snap.Time, snap.LastUpdateID = pub.Time(), pub.Seq()
	}
	// The published levels are an exact prefix of the venue's book, and
	// the venue may have more beyond them on either side: both are cut to
	// the shorter one's length, which the book then takes as continuing
	// beyond its edge, as with a snapshot of that limit.
	if n := min(len(snap.Bids), len(snap.Asks)); n > 0 {
		snap.Bids, snap.Asks = snap.Bids[:n], snap.Asks[:n]
		if lp.book.Sync(snap, n) == nil {
			lp.book.Suspend()
			// A depth's hundreds of levels a side hold more than are
			// published: such a seed is as deep as a refresh, and a
			// side of it that runs dry is refreshed (tierDepleted), not
			// read again from 100 levels as a book synced from them.
			lp.shallow = n <= snapshot.MaxDepth
			return true
		}
	}
	return false
}

// ask has the book, if it is in sequence and vouches for fewer than depth
// levels on a side the venue may hold more of, read for a request that
// waits for depth levels (see tierAsked): it records the events it applies
// from now on, so that the snapshot can be laid under it. Called with
// lp.mu held.
func (lp *pair) ask(depth int) {
	if !lp.book.Synced() || !lp.book.Short(depth) {
		return
	}
	lp.asked = max(lp.asked, depth)
	lp.book.Record()
}

// bookCurrent reports whether the pair's book is kept current by the stream:
// synced, in sequence and not silent. Such a pair needs no REST read.
func (b *bookState) bookCurrent() bool { return b.books.delivering() && b.book.Synced() }

// Depth applies one diff event to the pair's local book.
func (s *Source) Depth(u venue.DepthUpdate) {
	lp := s.pair(u.Symbol)
	if lp == nil {
		return // not listed, or delisted meanwhile
	}
	now := time.Now()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.books.at = now
	lp.books.silent = silence{}
	wasSynced, suspended, before := lp.book.Synced(), lp.book.Suspended(), lp.book.LastUpdateID()
	err := lp.book.Apply(u)
	if err == nil && lp.book.Synced() && lp.book.LastUpdateID() > before {
		// The venue vouched for the book up to this event, and the
		// stream delivers.
		lp.heardAt, lp.behindAt = now, time.Time{}
		lp.books.spoiled = false
	}
	if err != nil {
		cause := causeGap
		switch {
		case errors.Is(err, orderbook.ErrBadLevel), suspended && lp.books.spoiled:
			cause = causeBadData // an event held an unusable value, or was one
		case suspended:
			cause = causeLost // updates were missed while the stream was down
		}
		lp.books.spoiled = false
		s.resynced(lp, cause, err)
	} else if !wasSynced && lp.book.Buffered() == 1 {
		s.poke()
	}
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

// Settled reports whether the books need nothing more of the venue than
// their steady state does: every depth stream delivers (none is waiting for
// its subscription or lost), and no book waits for its snapshot. Reads that
// only spend idle weight (the contracts' open interest) wait until then: a
// cold start's first seconds, before any stream is acknowledged, have no
// book out of sequence yet, and every one about to be.
func (s *Source) Settled(now time.Time) bool {
	// A source that follows no pair yet has every book still to come.
	if len(*s.pairs.Load()) == 0 {
		return false
	}
	return !s.booksWaiting(now) && s.count(func(lp *pair) bool { return !lp.books.delivering() }) == 0
}

// ackGrace is how long a depth stream acknowledged without an event yet is
// taken as about to deliver the events its book's sync starts from.
const ackGrace = 2 * time.Second

// refreshBelow is how many levels a side may still vouch for when its book
// asks for a new snapshot to lay under it.
const refreshBelow = snapshot.MaxDepth + snapshot.MaxDepth/2

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

// newBook returns a pair's local book, which publishes its top
// snapshot.MaxDepth levels a side: an event that changes only deeper
// levels, many of venuesim's and of a busy market's, leaves what is
// published as it was, and its publication is confirmed rather than
// built again (see bookState.publish).
func newBook() *orderbook.Book {
	b := orderbook.New()
	b.Publishes(snapshot.MaxDepth)
	return b
}

// publish publishes the stream-fed book if its published levels changed
// since its last publication, and confirms it if not.
func (b *bookState) publish(s *Source, lp *pair, now time.Time) func() {
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
	return b.take(s, lp, now)
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

// take takes the book's state for publishing and returns the build of
// its publication, to run once lp.mu is released: read when the venue last
// vouched for it (see bookState.heardAt). Called with lp.mu held.
func (b *bookState) take(s *Source, lp *pair, _ time.Time) (build func()) {
	top := tops.Get().(*topLevels)
	bids, asks := lp.book.AppendTop(top.bids[:0], top.asks[:0], snapshot.MaxDepth)
	var open snapshot.Open
	open.Bids, open.Asks = lp.book.Open()
	venueTime, updateID, now := lp.book.Time(), lp.book.LastUpdateID(), lp.heardAt
	lp.book.ResetChanged()
	seq := lp.books.take()
	return func() {
		// The levels were checked as they arrived and the book keeps its
		// sides in order: they are not checked again. A side that ends at
		// its snapshot's edge says so, and serves no request for more
		// levels than it holds (see snapshot.Open).
		b := snapshot.NewLocalBook(lp.tickerID, venueTime, updateID, bids, asks, open, now)
		quote := quoteOf(lp.symbol, bids, asks)
		// The value holds its own bytes: the levels go back for the next
		// book, without the strings, which would keep the book's text.
		clear(bids)
		clear(asks)
		tops.Put(top)
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if lp.books.finish(seq, b, s.cfg.Store.PutBook) {
			lp.lastQuote = quote
			lp.lastQuoteAt = now
			s.metrics.publishLag.Observe(now.Sub(time.UnixMilli(venueTime)))
		}
	}
}

// topLevels holds a book's published levels while its value is built:
// every listed book is published about three times a second, and the
// levels are done with once serialized.
type topLevels struct {
	bids, asks [snapshot.MaxDepth]venue.Level
}

var tops = sync.Pool{New: func() any { return new(topLevels) }}

// fetch reads one snapshot, which syncs the pair's book or is laid
// under a book in sequence that asked for a deeper view, or proves a quiet
// book current (see fetchProbe).
func (b *bookState) fetch(ctx context.Context, s *Source, lp *pair, tier Tier) (func(time.Time) bool, error) {
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
	if depthReadReasons[tier] != "" {
		s.metrics.depthReads[tier].Inc()
		s.metrics.depthWeight[tier].Add(s.cfg.REST.BookWeight(depth))
	}
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
	lp.tradesLost, lp.losses = true, lp.losses+1 // see tradesState.tradesLost
}
