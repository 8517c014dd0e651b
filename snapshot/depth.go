package snapshot

import (
	"encoding/binary"
	"fmt"
	"time"
)

// DepthLevels is the most levels per side a Depth carries: the venue's
// 500-level snapshot, five times what a response serves, so that a book
// started from it can follow the price a long way before it needs a
// snapshot read of its own.
const DepthLevels = 500

// Depth is a pair's local order book deeper than any response carries: what
// a cluster's leader publishes, every few seconds, for a member that takes
// over reading the venue to start the pair's book from with no snapshot
// read (see live.Seed). It is never served. Its levels are held in their
// wire form and checked once, when it is made or decoded; Sides builds them
// only when a book is started from it.
type Depth struct {
	tickerID string
	time     int64 // the venue's clock for the book, ms
	seq      int64 // the venue's update id the levels are current at
	readAt   int64 // Unix ns
	nBids    int
	nAsks    int
	levels   string // each level's price and size, length-prefixed, bids then asks, best first
}

// NewDepth encodes a local book's top (at most DepthLevels levels a side)
// whose levels the caller vouches for, as for NewCheckedBook; seq is the
// update id they are current at, which must be positive.
func NewDepth(tickerID string, venueTime, seq int64, bids, asks []Level, readAt time.Time) *Depth {
	bids = bids[:min(len(bids), DepthLevels)]
	asks = asks[:min(len(asks), DepthLevels)]
	size := 0
	for _, side := range [][]Level{bids, asks} {
		for _, l := range side {
			size += len(l.Price) + len(l.Size) + 2
		}
	}
	levels := make([]byte, 0, size)
	for _, side := range [][]Level{bids, asks} {
		for _, l := range side {
			levels = appendWireBytes(levels, []byte(l.Price))
			levels = appendWireBytes(levels, []byte(l.Size))
		}
	}
	return &Depth{tickerID: tickerID, time: venueTime, seq: seq, readAt: readAt.UnixNano(),
		nBids: len(bids), nAsks: len(asks), levels: string(levels)}
}

// TickerID returns the pair's ticker_id.
func (d *Depth) TickerID() string { return d.tickerID }

// Time returns the venue's clock for the book, ms.
func (d *Depth) Time() int64 { return d.time }

// Seq returns the venue's update id the levels are current at.
func (d *Depth) Seq() int64 { return d.seq }

// ReadAt returns when the levels were current, Unix ns.
func (d *Depth) ReadAt() int64 { return d.readAt }

// Sides returns the levels, best first. Their strings share d's text.
func (d *Depth) Sides() (bids, asks []Level) {
	r := wireReader{b: []byte(d.levels)}
	str := func(b []byte) string {
		at := len(d.levels) - len(r.b) - len(b)
		return d.levels[at : at+len(b)]
	}
	side := func(n int) []Level {
		out := make([]Level, n)
		for i := range out {
			out[i].Price = str(r.bytes("price"))
			out[i].Size = str(r.bytes("size"))
		}
		return out
	}
	bids = side(d.nBids)
	asks = side(d.nAsks)
	return bids, asks
}

// AppendWire appends the wire form of d.
func (d *Depth) AppendWire(dst []byte) []byte {
	dst = appendBookHead(dst, wireDepth, d.tickerID, d.time, d.seq, d.readAt)
	dst = binary.AppendUvarint(dst, uint64(d.nBids))
	dst = binary.AppendUvarint(dst, uint64(d.nAsks))
	return append(dst, d.levels...)
}

// DecodeDepth returns the depth whose wire form is data, after checking
// every level as NewBook does: a positive plain decimal price and size,
// each side strictly ordered best first. It keeps none of data.
func DecodeDepth(data []byte) (*Depth, error) {
	r := wireReader{b: data}
	id, venueTime, seq, readAt := r.bookHead(wireDepth)
	nBids, nAsks := r.int("bids"), r.int("asks")
	if r.err == nil && (nBids > DepthLevels || nAsks > DepthLevels) {
		r.fail("%d bids and %d asks, more than %d", nBids, nAsks, DepthLevels)
	}
	// One string holds every level's text, which is kept as the value's,
	// so that checking a thousand levels allocates once.
	levels := r.b
	text := string(levels)
	str := func(b []byte) string {
		at := len(levels) - len(r.b) - len(b)
		return text[at : at+len(b)]
	}
	for _, side := range []struct {
		n     int
		order int
	}{{nBids, 1}, {nAsks, -1}} {
		var prev string
		for i := range side.n {
			price := str(r.bytes("price"))
			size := str(r.bytes("size"))
			if r.err != nil {
				break
			}
			if !isPositive(price) || !isPositive(size) || i > 0 && comparePositive(prev, price) != side.order {
				r.fail("level %d of %d: %q at %q is not a level of an ordered side", i+1, side.n, size, price)
			}
			prev = price
		}
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	if !ValidTickerID([]byte(id)) || seq <= 0 {
		return nil, fmt.Errorf("%w: depth of %q at update id %d", ErrBadWire, id, seq)
	}
	return &Depth{tickerID: id, time: venueTime, seq: seq, readAt: readAt,
		nBids: nBids, nAsks: nAsks, levels: text}, nil
}
