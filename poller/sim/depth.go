package sim

import (
	"errors"
	"fmt"
	"time"

	"marketfeed/poller/venue"
)

// Heartbeat returns the venue heartbeat that t falls in. The book of
// heartbeat k is in force from k×100 ms since the Unix epoch until the next
// heartbeat starts.
func Heartbeat(t time.Time) int64 { return floorDiv(t.UnixMilli(), tickMs) }

// HeartbeatTime returns when heartbeat k starts, in ms since the Unix epoch:
// the engine time of its diff event.
func HeartbeatTime(k int64) int64 { return k * tickMs }

// book returns up to n levels per side of the book of heartbeat k, stamped
// with time at (ms).
func (m *market) book(k, at int64, n int) venue.Book {
	bid, ask := m.top(k)
	w := text{buf: make([]byte, 0, 2*n*m.levelBytes)}
	nb := m.side(&w, m.bidKey, k, bid, -1, n)
	na := m.side(&w, m.askKey, k, ask, +1, n)

	// One string and one level slice for the whole book: the poller may read
	// hundreds of books a second.
	c := cutter{string(w.buf)}
	levels := make([]venue.Level, nb+na)
	for i := range levels {
		levels[i].Price = c.next()
		levels[i].Size = c.next()
	}
	return venue.Book{Time: at, LastUpdateID: m.updateID(k), Bids: levels[:nb:nb], Asks: levels[nb:]}
}

// errUpdateID is the answer to an update id no book has.
var errUpdateID = errors.New("update id must be positive")

// BookAt returns up to depth levels per side of symbol's book as it stood at
// update id updateID: the book of the last heartbeat whose update id is at
// most updateID, with that heartbeat's id as LastUpdateID and its start as
// Time. depth is read as Book reads it. It lets a check compare a book built
// from the diff stream with the truth at the id it was built to.
func (v *Venue) BookAt(symbol string, updateID int64, depth int) (venue.Book, error) {
	m, err := v.market("book at", symbol)
	if err != nil {
		return venue.Book{}, err
	}
	if updateID <= 0 {
		return venue.Book{}, fmt.Errorf("book at %s %d: %w", symbol, updateID, errUpdateID)
	}
	n := depth
	if n <= 0 {
		n = defaultDepth
	}
	k := m.heartbeatOf(updateID)
	return m.book(k, HeartbeatTime(k), min(n, maxDepth)), nil
}

// UpdateID returns symbol's order book update id after heartbeat k: the
// LastUpdateID of its book and the Last of its diff event.
func (v *Venue) UpdateID(symbol string, k int64) (int64, error) {
	m, err := v.market("update id", symbol)
	if err != nil {
		return 0, err
	}
	return m.updateID(k), nil
}

// DepthUpdate returns symbol's diff event of heartbeat k: every level of the
// whole book, not only the top 1000, whose size differs between heartbeats
// k-1 and k, best first on each side, with its new size or "0" for a level
// that is gone. First is the previous heartbeat's update id plus one, Last
// this heartbeat's, Prev the previous heartbeat's, and Time the heartbeat's
// start. Applied to the book at Prev it gives the book at Last.
func (v *Venue) DepthUpdate(symbol string, k int64) (venue.DepthUpdate, error) {
	return v.depthUpdateSince(symbol, k-1, k)
}

// depthUpdateSince returns symbol's diff event spanning heartbeats from
// (exclusive) to k (inclusive): the levels that differ between the two
// books, chained from the update id of from. A stream that fell behind sends
// one such event instead of a gap. from must be before k.
func (v *Venue) depthUpdateSince(symbol string, from, k int64) (venue.DepthUpdate, error) {
	m, err := v.market("depth update", symbol)
	if err != nil {
		return venue.DepthUpdate{}, err
	}
	if from >= k {
		return venue.DepthUpdate{}, fmt.Errorf("depth update %s: heartbeat %d is not after %d", symbol, k, from)
	}
	return m.depthUpdate(from, k), nil
}

func (m *market) depthUpdate(k0, k1 int64) venue.DepthUpdate {
	bid0, ask0 := m.top(k0)
	bid1, ask1 := m.top(k1)
	w := text{buf: make([]byte, 0, 64*m.levelBytes)}
	nb := m.diff(&w, m.bidKey, k0, k1, bid0, bid1, -1)
	na := m.diff(&w, m.askKey, k0, k1, ask0, ask1, +1)
	c := cutter{string(w.buf)}
	levels := make([]venue.Level, nb+na)
	for i := range levels {
		levels[i].Price = c.next()
		levels[i].Size = c.next()
	}
	prev := m.updateID(k0)
	return venue.DepthUpdate{
		Symbol: m.info.Symbol,
		First:  prev + 1,
		Last:   m.updateID(k1),
		Prev:   prev,
		Time:   HeartbeatTime(k1),
		Bids:   levels[:nb:nb],
		Asks:   levels[nb:],
	}
}

// heartbeatTrades returns symbol's trades during heartbeat k, oldest first,
// with their ids: what the aggregate trade stream sends once the heartbeat
// is over, and what Trades returns for those times.
func (v *Venue) heartbeatTrades(symbol string, k int64) ([]venue.Trade, error) {
	m, err := v.market("heartbeat trades", symbol)
	if err != nil {
		return nil, err
	}
	return m.bucketTrades(k), nil
}

func (m *market) bucketTrades(b int64) []venue.Trade {
	var bt [maxBucketTrades]rawTrade
	n := m.bucket(b, &bt)
	if n == 0 {
		return nil
	}
	out := make([]venue.Trade, n)
	w := text{buf: make([]byte, 0, n*m.tradeBytes)}
	start := m.tradeStart(b)
	for j := range n {
		t := &bt[j]
		out[j].ID = start + int64(j)
		out[j].LastID = out[j].ID // each aggregate trade is one single trade
		out[j].Time = t.time
		out[j].Sell = t.sell
		m.writeTrade(&w, t)
	}
	c := cutter{string(w.buf)}
	for j := range out {
		out[j].Price = c.next()
		out[j].Size = c.next()
		out[j].QuoteQty = c.next()
	}
	return out
}

// writeTrade writes a trade's price, size and quote quantity.
func (m *market) writeTrade(w *text, t *rawTrade) {
	w.decimal(t.price*m.tick, m.priceDec)
	w.decimal(t.lots, m.qtyDec)
	if m.noQuoteQty {
		w.empty()
	} else {
		w.decimal(t.price*m.tick*t.lots, m.priceDec+m.qtyDec)
	}
}
