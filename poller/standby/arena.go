package standby

// This file is the memory a relay holds a pair's depth events in: one arena
// of decimals and lengths a pair, reused rather than allocated per event.

import (
	"slices"
	"unsafe"

	"marketfeed/poller/venue"
)

// heldDepth is a held diff event: its ids and time, and where its levels
// are in its pair's arena (see depthArena). It holds no pointer, nor does
// the arena: what a member holds for a takeover is memory the garbage
// collector does not scan, and the copy of an event writes no pointer.
type heldDepth struct {
	First, Last, Prev, Time int64
	text, textLen           int32 // its decimals' bytes in the arena's text
	lens                    int32 // where its levels' lengths start in the arena's lens
	bids, asks              int32 // its levels on each side
}

// depthArena is the memory of a pair's held depth events, in the order
// they are held: the decimals of their levels in text, each level's price
// and size lengths in lens. An event held appends to it. When the member's
// coverage moves, what it covers is dropped and the few events past it are
// moved to the front (a compaction), so that the next period's events find
// the room the last one's left; an event that finds no room grows the
// arena. The memory is reused rather than allocated per event, and follows
// what a period brings: about what the events held at their most take, as
// clones of them took, without the garbage they left.
type depthArena struct {
	text []byte
	lens []int32
	// levels are the sides of the event lent to a sink (see lend), reused
	// for the next.
	levels []venue.Level
	// settle is set when the coverage moved: the next event held compacts
	// the arena first.
	settle bool
	// periods are what the last periods between two of the member's
	// values brought, in bytes of decimals and in lengths: the arena is
	// sized on the most of them.
	periods, periodsLens lately
}

// lately keeps the last few of a count.
type lately struct {
	last [8]int
	next int
}

func (l *lately) add(n int) {
	l.last[l.next%len(l.last)] = n
	l.next++
}

// most returns the most of the last ones.
func (l *lately) most() int { return slices.Max(l.last[:]) }

// size returns what the events held take of the arena.
func size(held []heldDepth) (text, lens int) {
	for _, h := range held {
		text += int(h.textLen)
		lens += 2 * int(h.bids+h.asks)
	}
	return text, lens
}

// period takes what was held when the member's coverage moved.
func (a *depthArena) period(held []heldDepth) {
	n, nl := size(held)
	a.periods.add(n)
	a.periodsLens.add(nl)
	a.settle = true
}

// minArena is the least room, in bytes of decimals, an arena is given.
const minArena = 4 << 10

// own copies u's levels into the arena, compacting held first when the
// coverage has moved or there is no room.
func (a *depthArena) own(u venue.DepthUpdate, held []heldDepth) heldDepth {
	n := 0
	for _, side := range [2][]venue.Level{u.Bids, u.Asks} {
		for _, l := range side {
			n += len(l.Price) + len(l.Size)
		}
	}
	nl := 2 * (len(u.Bids) + len(u.Asks))
	if a.settle || len(a.text)+n > cap(a.text) || len(a.lens)+nl > cap(a.lens) {
		a.compact(held, n, nl)
		a.settle = false
	}
	h := heldDepth{First: u.First, Last: u.Last, Prev: u.Prev, Time: u.Time,
		text: int32(len(a.text)), textLen: int32(n), lens: int32(len(a.lens)), bids: int32(len(u.Bids)), asks: int32(len(u.Asks))}
	for _, side := range [2][]venue.Level{u.Bids, u.Asks} {
		for _, l := range side {
			a.text = append(append(a.text, l.Price...), l.Size...)
			a.lens = append(a.lens, int32(len(l.Price)), int32(len(l.Size)))
		}
	}
	return h
}

// compact moves the events held to the front of the arena, which is
// given room for n more bytes of decimals and nl lengths besides: in place,
// unless the arena lacks that room (a new one twice what is needed now) or
// is more than twice what is needed now and what a period lately brought
// (see periods; a new one a quarter more than that). In place, bytes move
// towards the front only, so that an event is copied before anything is
// written over it.
func (a *depthArena) compact(held []heldDepth, n, nl int) {
	hn, hl := size(held)
	n, nl = n+hn, nl+hl
	text := resize(a.text, n, max(n, a.periods.most(), minArena))
	lens := resize(a.lens, nl, max(nl, a.periodsLens.most(), minArena/8))
	for i := range held {
		h := &held[i]
		at, lat := len(text), len(lens)
		text = append(text, a.text[h.text:h.text+h.textLen]...)
		lens = append(lens, a.lens[h.lens:h.lens+2*(h.bids+h.asks)]...)
		h.text, h.lens = int32(at), int32(lat)
	}
	a.text, a.lens = text, lens
}

// resize returns s emptied, or a new empty slice: twice n when s has no
// room for n, need and a quarter when s is more than twice need.
func resize[T any](s []T, n, need int) []T {
	switch {
	case n > cap(s):
		return make([]T, 0, 2*n)
	case cap(s) > 2*need:
		return make([]T, 0, need+need/4)
	}
	return s[:0]
}

// lend passes h on to sink as a diff event of symbol, its decimals the
// arena's: lent, as the adapter lends its frames (see venue.DepthUpdate).
func (a *depthArena) lend(sink venue.Sink, symbol string, h heldDepth) {
	nl := int(h.bids + h.asks)
	lens := a.lens[h.lens : int(h.lens)+2*nl]
	levels, at := a.levels[:0], int(h.text)
	str := func(n int32) string {
		if n == 0 {
			return ""
		}
		at += int(n)
		return unsafe.String(&a.text[at-int(n)], n)
	}
	for i := range nl {
		levels = append(levels, venue.Level{Price: str(lens[2*i]), Size: str(lens[2*i+1])})
	}
	a.levels = levels
	sink.Depth(venue.DepthUpdate{Symbol: symbol, First: h.First, Last: h.Last, Prev: h.Prev, Time: h.Time,
		Bids: levels[:h.bids:h.bids], Asks: levels[h.bids:]})
}
