package binance

import (
	"sync"
	"sync/atomic"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// This file is what lets two connections carry the same streams at once
// (StreamOptions.Lines): the line each connection belongs to, the reports
// of what the lines together carry, and the table by which each event is
// applied once whichever line brings it first.

// maxLines is the most lines Streams runs: one, or two for redundancy.
const maxLines = 2

// line is one complete set of connections: every watched stream on one of
// its slots. A second line carries the same streams on connections of its
// own, so that losing or replacing any one connection loses no event.
type line struct {
	n      int                // 0 for line A, 1 for line B
	where  map[string]*slot   // stream name → the slot that carries it
	groups [numGroups][]*slot // the line's connections, by path
}

// name is the line's letter, as the venue sees it in the User-Agent.
func (l *line) name() string { return string(rune('A' + l.n)) }

var _ venue.Sink = lineSink{}

// lineSink is the sink of one line's connections: events go through, and
// the line's Live and Lost reports are merged with the other line's (see
// carriers). Its methods are called from the line's reading goroutines.
type lineSink struct {
	venue.Sink
	s    *Streams
	line int
}

// Live reports the streams live: always passed on, since a subscription
// acknowledged again is what the sink's silence watchdog waits for.
func (ls lineSink) Live(kind snapshot.Stream, symbols []string) {
	ls.s.carried.update(ls.line, kind, ls.watched(symbols), true, ls.Sink)
}

// Lost reports the streams lost only when no other line carries them: the
// other line's events keep them in sequence.
func (ls lineSink) Lost(kind snapshot.Stream, symbols []string) {
	ls.s.carried.update(ls.line, kind, ls.watched(symbols), false, ls.Sink)
}

// Spoiled passes on at once, whatever the other line carries, that an
// event of the streams could not be used: the sink keeps it as the cause of
// a break in the chain, should one follow.
func (ls lineSink) Spoiled(kind snapshot.Stream, symbols []string) {
	if sp, ok := ls.Sink.(venue.SpoiledSink); ok {
		sp.Spoiled(kind, symbols)
	}
}

// watched keeps the symbols still watched: the report of a subscription
// made before its symbol was dropped would leave a line marked as carrying
// a stream it no longer does, and hide a later loss if the symbol is
// watched again.
func (ls lineSink) watched(symbols []string) []string {
	out := symbols[:0:0]
	for _, sym := range symbols {
		if ls.s.dups.of(sym) != nil {
			out = append(out, sym)
		}
	}
	return out
}

// carriers tracks which lines carry each stream live, so that the sink
// hears Lost only when the last line carrying a stream lost it.
type carriers struct {
	mu    sync.Mutex
	lines map[streamKey]uint8 // bit n: line n carries it live
}

// streamKey is a symbol's stream of one kind.
type streamKey struct {
	kind   snapshot.Stream
	symbol string
}

// update records a line's report and passes on what the sink must hear.
// The lock is held while the sink hears it, so that a Lost and a Live of
// two lines reach the sink in the order their lines reported them.
func (c *carriers) update(n int, kind snapshot.Stream, symbols []string, live bool, sink venue.Sink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lines == nil {
		c.lines = make(map[streamKey]uint8)
	}
	var lost []string
	for _, sym := range symbols {
		k := streamKey{kind, sym}
		if live {
			c.lines[k] |= 1 << n
			continue
		}
		c.lines[k] &^= 1 << n
		if c.lines[k] == 0 {
			delete(c.lines, k)
			lost = append(lost, sym)
		}
	}
	switch {
	case live && len(symbols) > 0:
		sink.Live(kind, symbols)
	case len(lost) > 0:
		sink.Lost(kind, lost)
	}
}

// forget drops what is known of a symbol no longer watched.
func (c *carriers) forget(symbol string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range snapshot.NumStreams {
		delete(c.lines, streamKey{k, symbol})
	}
}

// marks is what was last delivered of one symbol's per-pair streams: the
// ids and times of the last recentEvents of each kind, in the kind's ring.
// Only an event found there is a copy. An event merely older than the
// newest delivered is not: a connection just opened (a rotation's
// replacement, a line back after a drop) delivers the newest events while
// an older one still has events queued that were never delivered, and
// those are what the book's chain and the trade window need. Time as well
// as id, so that a venue whose ids start again (a restart) is not taken
// for a copy.
type marks struct {
	mu sync.Mutex
	// dropped is set once the symbol is no longer watched: the table holds
	// other marks for it if it is watched again, and a route that still
	// holds these looks the symbol up (see dedup.marksOf). It is read just
	// before mu is taken, so it sits beside mu, in the cache line the lock
	// needs: after the rings it would be a read from memory of its own.
	dropped atomic.Bool
	// heads are the rings' indexes and highest ids, in the lock's cache
	// line too: an event newer than any delivered of its kind, a line's
	// usual event, is told from them alone, and the rings, half a kilobyte
	// a kind at hundreds of pairs, are not read (see has).
	heads [snapshot.NumStreams]ringHead
	rings [snapshot.NumStreams]recent
}

// recentEvents is how many delivered events a symbol's marks remember of
// each kind: at the venue's 10 depth events a second, a copy three seconds
// late is still known. A power of two, for the ring's index.
const recentEvents = 32

// ringHead is where a kind's ring of a symbol's marks is written next, and
// the highest id it was given.
type ringHead struct {
	next int
	top  int64
}

// recent is a ring of the ids and times of the last events delivered of a
// kind. The times are beside the ids, not in pairs with them: a check reads
// ids until one is equal, and only then its time.
type recent struct {
	ids, times [recentEvents]int64
}

// has reports whether an event of kind with id at time was delivered. An
// id above every one delivered was not; otherwise the ring is read newest
// first, where the other line's copy of an event is found, a moment after
// it. m.mu is held.
func (m *marks) has(kind snapshot.Stream, id, time int64) bool {
	h, r := &m.heads[kind], &m.rings[kind]
	if id > h.top {
		return false
	}
	for k := range recentEvents {
		i := (h.next - 1 - k) & (recentEvents - 1)
		if r.ids[i] == id && r.times[i] == time {
			return true
		}
	}
	return false
}

// add records an event of kind with id at time delivered. m.mu is held,
// and has said no since it was taken. A venue whose ids started again
// lower leaves top where it was: its events are then all looked for in
// the ring, as they were before top was kept.
func (m *marks) add(kind snapshot.Stream, id, time int64) {
	h, r := &m.heads[kind], &m.rings[kind]
	r.ids[h.next], r.times[h.next] = id, time
	h.next = (h.next + 1) & (recentEvents - 1)
	h.top = max(h.top, id)
}

// hold is a symbol's marks that a connection's reader keeps locked from the
// early check of an event (dedup.check) to its delivery (dedup.deliver),
// with the event checked: so that a frame takes its symbol's lock once and
// looks it up once, and so that the other line's copy, arriving meanwhile,
// waits and is then found delivered, not decoded in bulk. The zero hold
// holds nothing. Only the reader uses its connection's hold, and it
// releases it before the frame's handling ends, whatever becomes of the
// event (see wsConn.handle).
type hold struct {
	m        *marks // locked; nil when nothing is held
	kind     snapshot.Stream
	symbol   string // the frame's bytes or its route's: valid while its frame is handled
	id, time int64
}

// release unlocks what h holds, if anything.
func (h *hold) release() {
	if h.m != nil {
		h.m.mu.Unlock()
		*h = hold{}
	}
}

// take returns the marks h holds, still locked and now the caller's to
// unlock, when it holds them for the event of symbol's stream of kind with
// the venue id at time; otherwise it releases them and returns nil.
func (h *hold) take(kind snapshot.Stream, symbol string, id, time int64) *marks {
	m := h.m
	if m == nil || h.kind != kind || h.symbol != symbol || h.id != id || h.time != time {
		h.release()
		return nil
	}
	*h = hold{}
	return m
}

// dedup is the table of marks of every watched symbol, replaced whole when
// the watched symbols change so that the readers look it up without a lock.
type dedup struct {
	bySymbol atomic.Pointer[map[string]*marks]
	// newest is the event time of the newest frame of each whole-market
	// stream delivered (by its row of wholeMarket): a frame no newer is
	// another line's copy, or late.
	newest [len(wholeMarket)]atomic.Int64
}

// watch keeps the marks of symbols, and only theirs.
func (d *dedup) watch(symbols map[string]bool) {
	old := d.bySymbol.Load()
	m := make(map[string]*marks, len(symbols))
	for sym := range symbols {
		if old != nil && (*old)[sym] != nil {
			m[sym] = (*old)[sym]
		} else {
			m[sym] = &marks{}
		}
	}
	d.bySymbol.Store(&m)
	if old != nil {
		for sym, gone := range *old {
			if !symbols[sym] {
				gone.dropped.Store(true)
			}
		}
	}
}

func (d *dedup) of(symbol string) *marks {
	if m := d.bySymbol.Load(); m != nil {
		return (*m)[symbol]
	}
	return nil
}

// marksOf returns symbol's marks: routed, the marks the route of the
// symbol's stream holds (see streamRef), unless the symbol was dropped
// since they were placed there, or else those the table holds now. Through
// its route an event finds its marks without a lookup in the table, whose
// keys' bytes are cold at hundreds of pairs.
func (d *dedup) marksOf(symbol string, routed *marks) *marks {
	if routed != nil && !routed.dropped.Load() {
		return routed
	}
	return d.of(symbol)
}

// check is the decoder's early check (see readDepth): whether an event of
// a symbol's stream of kind was delivered already, from its id and time
// alone, before the bulk of it is read. When it was not, the symbol's
// marks are left locked in h (see hold), so that deliver delivers it
// without taking the lock again, and the other line's copy cannot pass the
// check until it is delivered. Anything h held before is released first:
// a frame whose event is read twice is checked twice. routed, when not
// nil, is the symbol's marks as its stream's route holds them (see
// marksOf).
func (d *dedup) check(kind snapshot.Stream, symbol string, routed *marks, id, time int64, h *hold) bool {
	h.release()
	m := d.marksOf(symbol, routed)
	if m == nil {
		return false
	}
	m.mu.Lock()
	if m.has(kind, id, time) {
		m.mu.Unlock()
		return true
	}
	*h = hold{m: m, kind: kind, symbol: symbol, id: id, time: time}
	return false
}

// deliver delivers an event of a symbol's stream of kind, which has the
// venue id at time, to sink with the kind's row unless it was delivered
// already. A symbol's events are delivered one at a time, in the order
// they pass the check, so that a line that is behind can neither deliver a
// copy nor overtake the other's event it follows. It reports whether it
// delivered.
//
// When h holds the symbol's marks for this event (check passed it), they
// are used as they are: the event was checked under the lock still held.
// Otherwise (a trade, which the decoder does not check early, or a depth
// event without sides) h is released, and the marks found (routed, as
// check takes them) and locked. Either way they are unlocked once the sink
// has the event.
//
// A symbol not watched now has no marks: its events go to the sink, which
// drops what it does not follow.
func (d *dedup) deliver(kind snapshot.Stream, symbol string, routed *marks, id, time int64, f *frame, sink venue.Sink, h *hold) bool {
	m := h.take(kind, symbol, id, time)
	if m == nil {
		if m = d.marksOf(symbol, routed); m != nil {
			m.mu.Lock()
			if m.has(kind, id, time) {
				m.mu.Unlock()
				return false
			}
		}
	}
	if m != nil {
		defer m.mu.Unlock()
		m.add(kind, id, time)
	}
	kinds[kind].deliver(sink, symbol, f)
	return true
}

// newer reports whether a frame of the whole-market stream w (its row of
// wholeMarket) of event time t is newer than the last one delivered, and
// if so takes it as the newest: the copy the other line brings is dropped.
func (d *dedup) newer(w int, t int64) bool {
	last := &d.newest[w]
	for {
		l := last.Load()
		if t != 0 && t <= l {
			return false
		}
		if last.CompareAndSwap(l, max(t, l)) {
			return true
		}
	}
}
