package live

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// pair is one pair's stream-fed state: one feed per stream kind, and what
// the ticker stream said of its market. mu guards everything but the
// atomics. Its fields are the state of one pair's streams under one lock,
// so that an event, a publication and a watchdog see them change together.
type pair struct {
	symbol   string
	tickerID string
	// slot says at which step of the publication periods the pair is
	// published (see publishStep): pairs take the next number as they
	// are listed, so that every slot holds about as many.
	slot uint32
	// spot is set while the pair is one of the platform's spot pairs; the
	// spot list can change while the pair's state stays.
	spot   atomic.Bool
	mu     sync.Mutex
	books  feed[*snapshot.Book]
	trades feed[*snapshot.Trades]
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
	// tradesSuspect is set when a probe found the pair's depth stream
	// silent: its trade stream may be silent too, and the read that
	// settles the window says so if it finds trades the stream did not
	// deliver (see readOn).
	tradesSuspect bool
	// shallow is set while the book holds no more levels than are
	// published: those of a seed of the published book or of a shallow
	// depth (see Seed), or of the 100-level snapshot
	// that synced it (the cheapest that answers with every level). Once
	// it serves fewer, its deeper view is read from the book share, after
	// the books to sync (tierDeepen), not from the refresh share, which is
	// sized for one book running short now and then, not for every book
	// of a cold start or of a member that has just taken over.
	shallow bool
	// lastQuote is the best bid and ask of the book last published, and
	// lastQuoteAt when it was last known current: the tickers' mid while
	// the book resyncs.
	lastQuote   venue.Quote
	lastQuoteAt time.Time
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
	// activeAt is when the ticker stream last showed the market trading:
	// then its depth and trade streams must be delivering too.
	activeAt time.Time
	// tradedAt is when the trade stream last delivered a trade: a market
	// that trades changes its book, so its depth stream must deliver too.
	tradedAt time.Time
	volume   string // the last base volume the ticker stream sent
}

// value is a published snapshot of one kind: immutable, confirmed as still
// current by a copy with a later read time.
type value[V any] interface {
	comparable
	Confirmed(at time.Time) V
	ReadAt() int64
}

// feed is one stream of one pair: its subscription, its silence watchdog,
// the REST read it may need, and the publications of its snapshot. The
// pair's mu guards it.
//
// Publications are numbered when their state is taken (under the lock) and
// shown in that order: one built outside the lock that finishes after a
// newer one is dropped, and a confirmation, which republishes the last
// publication, is made only while no newer one is being built, under the
// lock. So two publishers (the schedule and a sync) can never leave an older
// snapshot in place.
type feed[V value[V]] struct {
	stream
	pub V // the snapshot last published
}

// stream is what a feed holds whatever its snapshot's type.
type stream struct {
	live   bool      // the subscription is acknowledged on a reading connection
	at     time.Time // when the last event, or the acknowledgement, arrived
	silent silence
	rest   restState
	taken  uint64 // publications taken
	shown  uint64 // the number of the publication last shown
	// building counts publications taken and not yet finished.
	building int
	// waiters is closed at the next publication, for requests waiting for
	// one; nil until a request waits.
	waiters chan struct{}
	// waiting is when a request last began to wait for this stream's
	// snapshot (Unix ns; 0: none waits), read without the pair's lock: its
	// read goes first in the REST queue. It is the stream's, not the
	// pair's, so that a request waiting for a book does not send the
	// pair's trades backfill ahead of the cold start's syncs.
	waiting atomic.Int64
}

// silence tracks a subscription that is acknowledged but does not deliver.
type silence struct {
	resubscribedAt time.Time // zero: not resubscribed
	fellBack       bool      // served by REST until the stream delivers again
}

// delivering reports whether the stream delivers: acknowledged and not
// given up as silent.
func (f *stream) delivering() bool { return f.live && !f.silent.fellBack }

// take numbers a publication whose state the caller has just taken.
func (f *stream) take() uint64 {
	f.taken++
	f.building++
	return f.taken
}

// finish ends publication seq: v (unless zero, for a build that failed) is
// published through put unless a newer publication was shown meanwhile. It
// reports whether v was shown.
func (f *feed[V]) finish(seq uint64, v V, put func(V) bool) bool {
	f.building--
	var zero V
	if v == zero || seq < f.shown {
		return false
	}
	f.shown, f.pub = seq, v
	put(v)
	if f.waiters != nil {
		close(f.waiters)
		f.waiters = nil
	}
	return true
}

// confirm republishes the last publication as read at at, unless there is
// none or a newer one is being built (it will be fresher). It reports
// whether the publication stands as current at at: republished, or already
// read no earlier than at.
func (f *feed[V]) confirm(at time.Time, put func(V) bool) bool {
	var zero V
	if f.pub == zero || f.building > 0 {
		return false
	}
	if at.UnixNano() <= f.pub.ReadAt() {
		return true // nothing newer to say: the venue has not spoken since
	}
	return f.finish(f.take(), f.pub.Confirmed(at), put)
}

// next returns a channel closed at the feed's next publication.
func (f *stream) next() <-chan struct{} {
	if f.waiters == nil {
		f.waiters = make(chan struct{})
	}
	return f.waiters
}

// kind is what differs between a pair's stream kinds, one row each, so that
// what they share is written once: a book snapshot and a trades backfill,
// say, are scheduled, paced and finished the same way. The functions are
// called with the pair's lock held, weight and fetch excepted.
type kind struct {
	// silence labels the venue stream in the silence metrics, and part
	// the kind in the pairs-by-source metrics.
	silence, part string
	// stream is the pair's feed of the kind.
	stream func(lp *pair) *stream
	// current reports whether the stream keeps the pair's snapshot current,
	// so that it is published or confirmed.
	current func(lp *pair) bool
	// active is when the market last showed the activity that makes a
	// silent stream suspect.
	active func(lp *pair) time.Time
	// lose drops what the stream's loss makes unusable, for cause.
	lose func(s *Source, lp *pair, cause string)
	// take takes the pair's snapshot for publishing and returns the build
	// of its publication, to run once the lock is released.
	take func(s *Source, lp *pair, now time.Time) (build func())

	// The REST read of the kind: purpose is what its weight is spent on,
	// by tier, and prio how much of its class's cap it may take when no
	// request waits for the pair.
	purpose [numTiers]budget.Purpose
	prio    [numTiers]budget.Priority
	weight  func(s *Source, tier int) int
	// due reports whether lp needs the read, its tier (lower tiers go
	// first) and its order within the tier (lower first). Called only
	// when a read of the kind may start.
	due func(s *Source, lp *pair, now time.Time) (ok bool, tier, order int)
	// fetch reads the venue and returns what applies the result with
	// lp.mu held; that reports whether to publish the snapshot at once,
	// should it be current, since a request may be waiting for it.
	fetch func(s *Source, ctx context.Context, lp *pair, tier int) (apply func(now time.Time) (publish bool), err error)
}

var kinds = [snapshot.NumStreams]kind{
	snapshot.StreamBook: {
		silence: "depth", part: "books",
		stream:  func(lp *pair) *stream { return &lp.books.stream },
		current: (*pair).bookCurrent,
		// A market that trades changes its book, so its depth stream
		// must deliver too.
		active: func(lp *pair) time.Time { return later(lp.activeAt, lp.tradedAt) },
		lose: func(s *Source, lp *pair, cause string) {
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
		},
		take: (*Source).takeBook,
		purpose: [numTiers]budget.Purpose{tierDepleted: budget.PurposeDepleted, tierResync: budget.PurposeSnapshot,
			tierProbe: budget.PurposeProbe, tierSync: budget.PurposeSnapshot, tierDeepen: budget.PurposeDeepen,
			tierRefresh: budget.PurposeRefresh},
		// A book about to stop being served to the clients reading it
		// goes before even a request that waits, and may spend the part
		// of the book share requests leave (budget.Serving). A book out of
		// sequence that is not served is what every reader of the pair
		// waits for: its sync may take the part of the book share held
		// back for requests too, once it would otherwise go unused.
		// A probe proves a book being served current: it goes before the
		// syncs, within its own share, and may take the serving reserve
		// when the rest of the minute is spent.
		prio: [numTiers]budget.Priority{tierDepleted: budget.Serving, tierResync: budget.Serving,
			tierProbe: budget.Serving, tierSync: budget.Sync},
		weight: func(s *Source, tier int) int { return s.cfg.REST.BookWeight(s.snapshotDepth(tier)) },
		due: func(s *Source, lp *pair, now time.Time) (bool, int, int) {
			if !lp.books.live {
				return false, 0, 0
			}
			if lp.book.Synced() {
				// A refresh: the book is served meanwhile, so it waits
				// behind every book that is not, and the book nearest
				// to running short goes first; but a depleted book is
				// refreshed from the book share before any (see
				// tierDepleted), and so is a shallow one (see
				// pair.shallow) as soon as it serves fewer than the
				// published levels, after the books to sync and leaving
				// room (see budget.PurposeDeepen).
				vouched := lp.book.Vouched()
				switch {
				case vouched == 0 && lp.shallow:
					// A book synced from 100 levels that ran dry is
					// read again from as few, as a book out of
					// sequence that is served is (tierResync), and
					// deepens after the syncs (tierDeepen). Dense
					// books run through 100 levels within a minute: in
					// a cold start of 446 books, 30 deep reads of
					// theirs (20 weight each) took the second minute's
					// weight from the syncs.
					return lp.book.Recording(), tierResync, vouched
				case vouched == 0:
					return lp.book.Recording(), tierDepleted, vouched
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
		},
		fetch: (*Source).fetchSnapshot,
	},
	snapshot.StreamTrades: {
		silence: "trades", part: "trades",
		stream:  func(lp *pair) *stream { return &lp.trades.stream },
		current: (*pair).tradesCurrent,
		active:  func(lp *pair) time.Time { return lp.activeAt },
		// The window may have missed trades: see pair.tradesLost.
		lose:    func(_ *Source, lp *pair, _ string) { lp.tradesLost, lp.losses = true, lp.losses+1 },
		take:    (*Source).takeTrades,
		purpose: [numTiers]budget.Purpose{0: budget.PurposeBackfill}, // a backfill's due has one tier
		weight:  func(s *Source, _ int) int { return s.cfg.REST.TradesWeight() },
		// A window answers before its backfill (see pair.tradesCurrent),
		// which fills it toward MaxTrades in the background: the pairs
		// requests read first, and only once every book is in sequence (a
		// book out of sequence is not served at all), but for a window a
		// request waits for. A window that may have missed trades while
		// its stream was lost is read when no trade came within
		// resumeGrace of the stream's return to say whether it did (the
		// trades after its newest are read); one that did miss trades
		// reads the ids it missed.
		due: func(s *Source, lp *pair, now time.Time) (bool, int, int) {
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
			if s.cfg.Demand.Wanted(snapshot.StreamTrades, lp.tickerID, now) {
				return true, 0, 0
			}
			return true, 0, 1
		},
		fetch: (*Source).fetchTrades,
	},
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// streaming reports whether the pair's stream of k delivers. Such a pair is
// kept by the stream once synced or backfilled, and REST polls would only
// spend the budget those need.
func (lp *pair) streaming(k snapshot.Stream) bool { return kinds[k].stream(lp).delivering() }

// bookCurrent reports whether the pair's book is kept current by the stream:
// synced, in sequence and not silent. Such a pair needs no REST read.
func (lp *pair) bookCurrent() bool { return lp.books.delivering() && lp.book.Synced() }

// tradesCurrent reports whether the pair's trade window is kept current by
// the stream and may answer: backfilled, full, or holding a trade the stream
// delivered, and not waiting to learn whether it missed trades while the
// stream was lost. A window answers the newest trades it has before its
// backfill fills it toward MaxTrades: only a window that never held a trade
// waits for a read.
func (lp *pair) tradesCurrent() bool {
	return lp.trades.delivering() && !lp.tradesLost && (lp.backfilled || lp.streamed || lp.window.full())
}

// resumeTrades settles a window that may have missed trades while its
// stream was lost, given the oldest id of trades that came after the
// stream was back (from the stream or a read): right after the window's
// newest, nothing was missed; further on, the window holds a hole, serves
// only what comes after it, and a read of the missing ids fills it (see
// Source.fetchTrades). It reports whether trades were missed. Called with lp.mu
// held.
func (lp *pair) resumeTrades(first int64) (missed bool) {
	lp.tradesLost = false
	if newest := lp.window.newest(); newest != 0 && first > newest+1 {
		lp.window.markHole(idRange{newest + 1, first})
		return true
	}
	return false
}
