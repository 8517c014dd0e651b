// Package orderbook is the local order book of one market: kept in sequence
// from the venue's diff depth stream after a REST snapshot, by the venue's
// own procedure, refreshed from deeper snapshots without leaving sequence,
// and vouching only for the levels it can prove are the venue's. It is pure:
// no I/O, no clock, no locks; its owner locks it.
package orderbook

import (
	"errors"
	"fmt"
	"slices"

	"marketfeed/poller/venue"
)

// Book is one market's local order book, kept current from the venue's
// diff depth stream by the venue's own procedure for USDⓈ-M futures:
//
//  1. buffer the stream's events;
//  2. take a REST snapshot (its lastUpdateId L);
//  3. drop buffered events that end before L;
//  4. the first event applied must span L (U <= L <= u), or start right
//     after it (pu == L);
//  5. every later event must continue the previous one (pu == previous u);
//     otherwise the book is out of sequence and is synced again from a new
//     snapshot.
//
// The venue numbers a market's updates per market, not per connection: a
// book whose stream was cut off is suspended rather than dropped (Suspend),
// and when its stream is back, a first event that continues its chain
// resumes it with nothing lost; only a broken chain needs a new snapshot.
//
// Levels are the venue's strings, kept byte for byte; a size of zero removes
// a level, and removing a level the book does not hold is normal.
//
// A snapshot holds only the best levels of each side. A side that came back
// full may have more levels beyond its worst one, which the diff stream
// reports only when they change, so the book trusts nothing beyond that edge:
// it ignores updates there, and what it holds is always an exact prefix of
// the venue's side. As the top is consumed towards the edge, Short reports
// it; the book then records the events it applies (Record) so that a new
// snapshot can be laid under it without leaving sequence (Refresh), while
// it goes on being served.
//
// A Book is not safe for concurrent use; its owner locks it.
type Book struct {
	synced bool // a snapshot was applied and every event since has chained
	// suspended is set while the stream that fed the book is cut off: the
	// book keeps its levels and update id but is not current until an
	// event continues its chain (see Suspend).
	suspended bool
	first     bool  // no event has been applied since the snapshot
	last      int64 // the update id the book is current at
	time      int64 // the venue's time of the last event or snapshot, ms
	bids      bookSide
	asks      bookSide
	// buffer holds the events received while the book waits for a
	// snapshot, oldest first; at most maxBuffered, the newest kept.
	buffer []venue.DepthUpdate
	// ahead holds events that arrived before the one they follow: while a
	// connection is replaced the same events come from two connections,
	// and one may run ahead of the other. At most maxAhead.
	ahead []venue.DepthUpdate
	// recording is set while a refresh is pending: recent then holds the
	// events applied since, at most maxBuffered, the newest kept, so that a
	// snapshot taken meanwhile can be brought up to the book's update id.
	recording bool
	recent    []venue.DepthUpdate
	// changed is set when the published levels may differ from the last
	// time Changed was reset: when an event changed one of the shown best
	// levels of a side, or anything else did.
	changed bool
}

// The bounds of the buffers. At 10 events a second, maxBuffered covers a
// snapshot that takes up to about three seconds to arrive: the events needed
// are those from just before the snapshot was taken, so older ones are
// dropped rather than held for hundreds of markets waiting their turn in the
// budget. A snapshot older than the buffer is refused and read again.
const (
	maxBuffered = 30
	maxAhead    = 10
)

// Errors of the procedure; each means the book must be synced again.
var (
	// ErrOutOfSequence is an event that does not continue the book.
	ErrOutOfSequence = errors.New("depth stream out of sequence")
	// ErrStaleSnapshot is a snapshot older than every buffered event, or
	// than the last event the stream delivered.
	ErrStaleSnapshot = errors.New("depth snapshot older than the buffered events")
	// ErrBadLevel is a level whose price is not a plain decimal. Sizes are
	// kept as the venue adapter checked them (the venue contract), not
	// checked again: the book parses prices only because it orders by them.
	ErrBadLevel = errors.New("depth level price is not a plain decimal")
)

// New returns an empty book that buffers events until Sync.
func New() *Book { return newBook(maxSideLevels) }

// newBook returns an empty book whose sides keep at most max levels.
func newBook(max int) *Book {
	return &Book{bids: bookSide{bids: true, max: max}, asks: bookSide{max: max}}
}

// Synced reports whether the book is current: synced from a snapshot and in
// sequence since, and not suspended.
func (b *Book) Synced() bool { return b.synced && !b.suspended }

// Suspended reports whether the book waits for its stream to come back (see
// Suspend).
func (b *Book) Suspended() bool { return b.suspended }

// Suspend keeps a synced book whose stream was cut off: it is not current
// (Synced is false) until Apply takes an event that continues its chain
// (pu equal to the book's update id, or an event whose range covers the
// book's next update) and resumes it; a first event that does neither
// desyncs it. A book that is not synced is left as it is.
func (b *Book) Suspend() {
	if b.synced {
		b.suspended = true
	}
}

// LastUpdateID is the update id the book is current at; 0 before a sync.
func (b *Book) LastUpdateID() int64 { return b.last }

// Time is the venue's time of the newest event or snapshot applied, ms.
func (b *Book) Time() int64 { return b.time }

// Confirm takes a venue read of the book made at update id id and venue
// time t (a read of a few levels is enough: only its id is used) and
// reports whether the book was current as of that read: in sequence, at or
// past the read's update id. Then the book's time advances to the read's,
// since the venue has just said that nothing changed up to t. A later id
// means the venue made updates the stream did not deliver: the book is
// left as it is, and its owner resyncs it.
func (b *Book) Confirm(id, t int64) bool {
	if !b.Synced() || len(b.ahead) > 0 || id > b.last {
		return false
	}
	b.time = max(b.time, t)
	return true
}

// Held reports whether events are held waiting for one that did not arrive:
// the book is then behind the stream, and not to be confirmed as current.
func (b *Book) Held() bool { return len(b.ahead) > 0 }

// Buffered reports how many events wait for a snapshot.
func (b *Book) Buffered() int { return len(b.buffer) }

// Changed reports whether the book's published levels may have changed
// since the last ResetChanged: by an event that changed one of the best
// levels Publishes set (any level, unless it was set), or by a snapshot
// or a desync.
func (b *Book) Changed() bool { return b.changed }

// Publishes says that only the best n levels of each side are published
// (0: all): an event that changes none of them, only deeper levels, then
// leaves Changed as it was, and the book's owner need not publish it
// again. Deeper levels are kept all the same; they become the published
// ones as the top moves.
func (b *Book) Publishes(n int) { b.bids.shown, b.asks.shown = n, n }

// ResetChanged clears Changed, once the book's state has been published.
func (b *Book) ResetChanged() { b.changed = false }

// Desync drops the book's levels and starts buffering for a new snapshot;
// the events that were ahead are kept as the start of the new buffer.
func (b *Book) Desync() {
	b.synced, b.suspended = false, false
	b.first = false
	b.bids.reset(0)
	b.asks.reset(0)
	b.buffer = append(b.buffer[:0], b.ahead...)
	b.ahead = b.ahead[:0]
	b.recording, b.recent = false, nil
	b.changed = true
}

// Apply takes one event of the diff stream, lent for the call (see
// venue.DepthUpdate): what the book keeps of it, it clones. Before a sync
// it is buffered.
// After one, a duplicate or an event older than the book is ignored, the
// next event is applied, and an event that skips ahead is held until the
// events before it arrive. An error means the book is no longer current:
// it has desynced and buffers again, and needs a new snapshot.
func (b *Book) Apply(u venue.DepthUpdate) error {
	if !b.synced {
		b.buffer = appendBounded(b.buffer, u)
		return nil
	}
	if u.Last <= b.last {
		return nil // a duplicate, or older than the book
	}
	switch {
	case b.suspended && (b.follows(u) || u.First <= b.last+1):
		// The first event after the book's stream came back resumes it:
		// it continues the book (pu == the book's u) or covers the book's
		// next update (U <= u+1 <= the event's u: re-applying the part the
		// book already holds changes nothing, since an event sets sizes
		// outright). A book a snapshot was laid under while suspended
		// takes the first-event rule of a sync instead (pu <= L <= u).
		b.suspended = false
	case b.suspended:
		// Updates were missed while the stream was down.
		return b.outOfSequence(u, ", when the stream came back")
	case b.follows(u):
	case len(b.ahead) < maxAhead:
		b.ahead = append(b.ahead, u.Clone())
		return nil
	default:
		return b.outOfSequence(u, "")
	}
	if err := b.apply(u); err != nil {
		return err
	}
	return b.drainAhead()
}

// outOfSequence desyncs the book with u, which does not continue it, as
// the first event of the new buffer.
func (b *Book) outOfSequence(u venue.DepthUpdate, when string) error {
	b.Desync()
	b.buffer = append(b.buffer, u.Clone())
	return fmt.Errorf("%w: update %d..%d (previous %d) after %d%s", ErrOutOfSequence, u.First, u.Last, u.Prev, b.last, when)
}

// follows reports whether u is the next event for the book.
func (b *Book) follows(u venue.DepthUpdate) bool {
	if b.first {
		// The first event spans the snapshot (U <= L <= u), or starts
		// right after it: the market had no update between pu and U, so
		// pu <= L < U means the same book.
		return u.Prev <= b.last && b.last <= u.Last
	}
	return u.Prev == b.last
}

// drainAhead applies the held events that now continue the book.
func (b *Book) drainAhead() error {
	for {
		i := slices.IndexFunc(b.ahead, b.follows)
		if i < 0 {
			// What stays held is only what is still ahead of the book.
			b.ahead = slices.DeleteFunc(b.ahead, func(u venue.DepthUpdate) bool { return u.Last <= b.last })
			return nil
		}
		u := b.ahead[i]
		b.ahead = slices.Delete(b.ahead, i, i+1)
		if err := b.apply(u); err != nil {
			return err
		}
	}
}

func (b *Book) apply(u venue.DepthUpdate) error {
	bids, err := b.bids.update(u.Bids)
	asks := false
	if err == nil {
		asks, err = b.asks.update(u.Asks)
	}
	if err != nil {
		b.Desync()
		return err
	}
	b.last = u.Last
	b.first = false
	b.time = max(b.time, u.Time)
	b.changed = b.changed || bids || asks
	if b.recording {
		b.recent = appendBounded(b.recent, u)
	}
	return nil
}

// appendBounded appends a clone of u to events, dropping the oldest past
// maxBuffered.
func appendBounded(events []venue.DepthUpdate, u venue.DepthUpdate) []venue.DepthUpdate {
	if len(events) == maxBuffered {
		events = append(events[:0], events[1:]...)
	}
	return append(events, u.Clone())
}

// Sync starts the book from a REST snapshot taken with the given per-side
// limit, then applies the buffered events that follow it. A side that came
// back with limit levels is taken to continue beyond them (see Book).
func (b *Book) Sync(snap venue.Book, limit int) error {
	// Events that end before the snapshot are already in it.
	buffered := slices.DeleteFunc(b.buffer, func(u venue.DepthUpdate) bool { return u.Last < snap.LastUpdateID })
	if len(buffered) > 0 && buffered[0].Prev > snap.LastUpdateID {
		// Updates between the snapshot and the first buffered event were
		// missed: the snapshot is too old for the buffer.
		b.buffer = buffered
		return fmt.Errorf("%w: snapshot at %d, first buffered update %d", ErrStaleSnapshot, snap.LastUpdateID, buffered[0].First)
	}
	b.buffer = nil
	if err := b.load(snap, limit); err != nil {
		return err
	}
	return b.replay(buffered)
}

// load replaces the book's levels with a snapshot's and makes the book
// current at its update id.
func (b *Book) load(snap venue.Book, limit int) error {
	err := b.bids.load(snap.Bids, limit)
	if err == nil {
		err = b.asks.load(snap.Asks, limit)
	}
	if err != nil {
		b.Desync()
		return err
	}
	// A suspended book stays suspended: the snapshot may predate updates
	// its stream missed, and only the stream's next event can tell.
	b.synced, b.first = true, true
	b.last = snap.LastUpdateID
	b.time = snap.Time
	b.ahead = b.ahead[:0]
	b.changed = true
	return nil
}

// replay applies events that followed a snapshot just loaded.
func (b *Book) replay(events []venue.DepthUpdate) error {
	for _, u := range events {
		if err := b.Apply(u); err != nil {
			return err
		}
	}
	return nil
}

// Short reports whether a side holds fewer than n levels it can vouch for
// while the venue may have more: the book needs a new snapshot to publish n
// levels.
func (b *Book) Short(n int) bool { return b.Vouched() < n }

// Vouched returns how many levels the book can vouch for on its shorter
// side that the venue may hold more of, or math.MaxInt when the venue sent
// both sides whole.
func (b *Book) Vouched() int { return min(b.bids.vouched(), b.asks.vouched()) }

// Open reports, per side, whether the venue may hold levels beyond the
// book's worst one: the side came back full from its snapshot (or was
// trimmed), so the book vouches for no more than it holds there. A side
// that is not open is the venue's whole side.
func (b *Book) Open() (bids, asks bool) { return b.bids.bounded, b.asks.bounded }

// Record starts keeping the events the book applies, for a Refresh; it
// reports whether it was already recording.
func (b *Book) Record() bool {
	was := b.recording
	b.recording = true
	return was
}

// StopRecording gives up a pending refresh whose read has not started:
// the top has moved back from the edge, and the book vouches for enough
// levels again.
func (b *Book) StopRecording() { b.recording, b.recent = false, nil }

// Recording reports whether a refresh is pending.
func (b *Book) Recording() bool { return b.recording }

// Refresh lays a new snapshot under a book that is in sequence, without
// taking it out of sequence: the events recorded since Record that follow
// the snapshot are applied on top of it. What the book vouched for beyond
// the snapshot's edge is kept (up to maxSideLevels a side): the book was in
// sequence there, so a price that turns back finds its levels still
// vouched for instead of asking for another snapshot. A book that is not
// synced is synced from the snapshot. A snapshot older than the recorded
// events is refused with ErrStaleSnapshot and the book stays as it was.
func (b *Book) Refresh(snap venue.Book, limit int) error {
	if !b.synced {
		return b.Sync(snap, limit)
	}
	events := slices.DeleteFunc(slices.Clone(b.recent), func(u venue.DepthUpdate) bool { return u.Last < snap.LastUpdateID })
	if (len(events) == 0 && snap.LastUpdateID < b.last) || (len(events) > 0 && events[0].Prev > snap.LastUpdateID) {
		return fmt.Errorf("%w: snapshot at %d, book at %d", ErrStaleSnapshot, snap.LastUpdateID, b.last)
	}
	events = append(events, b.ahead...)
	b.recording, b.recent = false, nil
	// The old sides are current at the book's update id. When that is not
	// before the snapshot's, replaying the events from the snapshot on
	// leaves the kept levels as they are: an event sets a level's size
	// outright, so applying it again to a level that already has it
	// changes nothing. A snapshot newer than the book drops the events it
	// covers, and with them their changes beyond its edge: then nothing
	// is kept.
	keep := b.last >= snap.LastUpdateID
	oldBids, oldAsks := b.bids, b.asks
	if keep {
		// load reuses the sides' arrays; the old levels must outlive it.
		b.bids.levels, b.asks.levels = nil, nil
	}
	if err := b.load(snap, limit); err != nil {
		return err
	}
	if keep {
		b.bids.keepBeyond(oldBids)
		b.asks.keepBeyond(oldAsks)
	}
	return b.replay(events)
}

// Top returns up to n levels of each side, best first. The slices are new;
// the strings are the venue's.
func (b *Book) Top(n int) (bids, asks []venue.Level) {
	return b.AppendTop(make([]venue.Level, 0, min(n, len(b.bids.levels))), make([]venue.Level, 0, min(n, len(b.asks.levels))), n)
}

// AppendTop is Top appending each side's levels to bids and asks, for a
// caller that reuses its slices.
func (b *Book) AppendTop(bids, asks []venue.Level, n int) ([]venue.Level, []venue.Level) {
	return b.bids.appendTop(bids, n), b.asks.appendTop(asks, n)
}
