package live

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/snapshot"
)

// pair is one pair's stream-fed state: its identity, what the streams said
// of its market's activity, and one state per stream kind (see kind), each
// owning its feed and its fields. mu guards everything but the atomics. The
// states of one pair's streams are under one lock, so that an event, a
// publication and a watchdog see them change together.
type pair struct {
	symbol   string
	tickerID string
	// slot says at which step of the publication periods the pair is
	// published (see publishStep): pairs take the next number as they
	// are listed, so that every slot holds about as many.
	slot uint32
	// spot is set while the pair is one of the platform's spot pairs; the
	// spot list can change while the pair's state stays.
	spot        atomic.Bool
	mu          sync.Mutex
	bookState   // the order book kind (book.go)
	tradesState // the trades kind (trades.go)
	// activeAt is when the ticker stream last showed the market trading:
	// then its depth and trade streams must be delivering too.
	activeAt time.Time
	// tradedAt is when the trade stream last delivered a trade: a market
	// that trades changes its book, so its depth stream must deliver too.
	tradedAt time.Time
	volume   string // the last base volume the ticker stream sent
}

// kind returns the pair's state of stream kind k.
func (lp *pair) kind(k snapshot.Stream) kind { return kinds[k].of(lp) }

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
	// spoiled is set when an event of the stream could not be used, until
	// the book is in sequence again or resynced: the cause of a break in
	// its chain (see Source.Spoiled).
	spoiled bool
	taken   uint64 // publications taken
	shown   uint64 // the number of the publication last shown
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

// kind is one stream kind of a pair: the state type that owns the kind's
// fields (bookState, tradesState) and the steps that differ between kinds,
// so that what they share is written once: a book snapshot and a trades
// backfill, say, are scheduled, paced and finished the same way. Its
// methods are called with the pair's lock held, fetch excepted.
type kind interface {
	// feed is the pair's feed of the kind.
	feed() *stream
	// current reports whether the stream keeps the pair's snapshot current,
	// so that it is published or confirmed.
	current() bool
	// active is when the market last showed the activity that makes a
	// silent stream suspect.
	active(lp *pair) time.Time
	// lose drops what the stream's loss makes unusable, for cause.
	lose(s *Source, lp *pair, cause string)
	// publish is the kind's step of the publication schedule: it takes the
	// pair's snapshot for publishing if it changed, or confirms it if not,
	// and returns the build of a publication, or nil.
	publish(s *Source, lp *pair, now time.Time) (build func())
	// take takes the pair's snapshot for publishing and returns the build
	// of its publication, to run once the lock is released.
	take(s *Source, lp *pair, now time.Time) (build func())
	// due reports whether lp needs the kind's REST read, its tier (lower
	// tiers go first) and its order within the tier (lower first). Called
	// only when a read of the kind may start.
	due(s *Source, lp *pair, now time.Time) (ok bool, tier Tier, order int)
	// fetch reads the venue and returns what applies the result with
	// lp.mu held; that reports whether to publish the snapshot at once,
	// should it be current, since a request may be waiting for it.
	fetch(ctx context.Context, s *Source, lp *pair, tier Tier) (apply func(now time.Time) (publish bool), err error)
	// seed starts the new pair's state from seed, if it holds a usable
	// value of the kind, and reports whether it did. Called before the
	// pair is shared, so without its lock.
	seed(s *Source, lp *pair, seed Seed) bool
}

// kindRow is what the source knows of a stream kind besides a pair's state
// of it: one row each, in kinds.
type kindRow struct {
	// of returns the pair's state of the kind.
	of func(lp *pair) kind
	// every is the period of the kind's publication.
	every func(cfg *Config) time.Duration
	// The REST read of the kind: purpose is what its weight is spent on,
	// by tier, and prio how much of its class's cap it may take when no
	// request waits for the pair.
	purpose [numTiers]budget.Purpose
	prio    [numTiers]budget.Priority
	weight  func(s *Source, tier Tier) int
	// dispatched, when set, runs after each dispatch of the kind's reads
	// (see Sync), before the next kind's.
	dispatched func(s *Source)
}

// kinds is the source's table of stream kinds: each kind's row is in its
// file (book.go, trades.go).
var kinds = [snapshot.NumStreams]kindRow{
	snapshot.StreamBook:   bookRow,
	snapshot.StreamTrades: tradesRow,
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
func (lp *pair) streaming(k snapshot.Stream) bool { return lp.kind(k).feed().delivering() }
