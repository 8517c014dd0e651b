package live

import (
	"cmp"
	"slices"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// tradeWindow is one pair's newest trades in the venue's id order, oldest
// first, at most snapshot.MaxTrades, each venue id once. The trade stream and
// REST reads of the same aggregate trades feed it; whichever brings a trade
// first, the trade is the same.
//
// A window may hold one hole: ids it is known to have missed while its
// stream was lost. It then serves only the trades after the hole, which are
// in sequence, until a read of the missing ids fills it (see holeRead and
// fill) or newer trades push every trade before it out. Trades inside the
// hole (held between two losses, or merged from a read of the newest) are
// never served while it is open.
type tradeWindow struct {
	trades []venue.Trade
	hole   idRange
}

// idRange is the trade ids from from up to, not including, to; empty when
// to <= from.
type idRange struct{ from, to int64 }

// open reports whether the range holds an id.
func (r idRange) open() bool { return r.to > r.from }

// add puts one trade in its place and reports whether the window changed:
// a trade already held, or older than a full window's oldest, changes
// nothing.
func (w *tradeWindow) add(tr venue.Trade) bool {
	n := len(w.trades)
	if n > 0 && tr.ID > w.trades[n-1].ID {
		w.trades = append(w.trades, tr) // the usual case: the newest trade
	} else {
		at, found := slices.BinarySearchFunc(w.trades, tr.ID, byID)
		if found || (at == 0 && n >= snapshot.MaxTrades) {
			return false
		}
		w.trades = slices.Insert(w.trades, at, tr)
	}
	if extra := len(w.trades) - snapshot.MaxTrades; extra > 0 {
		w.trades = append(w.trades[:0], w.trades[extra:]...)
	}
	if w.hole.open() {
		w.settle()
	}
	return true
}

func byID(t venue.Trade, id int64) int { return cmp.Compare(t.ID, id) }

// merge adds trades read from REST.
func (w *tradeWindow) merge(trades []venue.Trade) {
	for _, tr := range trades {
		w.add(tr)
	}
}

// full reports whether the window holds as many trades as a response can
// carry: then it is complete without a REST read.
func (w *tradeWindow) full() bool { return len(w.trades) >= snapshot.MaxTrades }

// served returns the trades the window answers, oldest first: those after
// its hole, if it holds one. The slice is the window's: callers read it
// while they hold the pair's lock.
func (w *tradeWindow) served() []venue.Trade {
	if !w.hole.open() {
		return w.trades
	}
	return w.trades[w.index(w.hole.to):]
}

// index is where the trades from id on start.
func (w *tradeWindow) index(id int64) int {
	at, _ := slices.BinarySearchFunc(w.trades, id, byID)
	return at
}

// empty reports whether the window holds no trade.
func (w *tradeWindow) empty() bool { return len(w.trades) == 0 }

// newest returns the newest trade's id; 0 when the window is empty.
func (w *tradeWindow) newest() int64 {
	if len(w.trades) == 0 {
		return 0
	}
	return w.trades[len(w.trades)-1].ID
}

// newestLastID returns the newest trade's LastID: the venue's newest single
// trade id when nothing came after it; 0 when the window is empty or the
// venue sent none.
func (w *tradeWindow) newestLastID() int64 {
	if len(w.trades) == 0 {
		return 0
	}
	return w.trades[len(w.trades)-1].LastID
}

// dropBefore removes the trades older than id.
func (w *tradeWindow) dropBefore(id int64) {
	w.trades = append(w.trades[:0], w.trades[w.index(id):]...)
}

// markHole records that the ids of missed were missed. The window keeps
// one hole: one still open widens to take in the new one, the trades held
// between them read again with the missing ids, so that the trades before
// it stay.
func (w *tradeWindow) markHole(missed idRange) {
	if w.hole.open() {
		missed.from = w.hole.from
	}
	w.hole = missed
	w.settle()
}

// settle shrinks the hole to the ids the window still misses: trades that
// continue the ids before it fill it from its start, and once no trade
// before it is left (newer trades pushed them out), there is nothing to
// fill.
func (w *tradeWindow) settle() {
	if len(w.trades) == 0 || w.trades[0].ID >= w.hole.to {
		w.hole = idRange{}
		return
	}
	for at := w.index(w.hole.from); at < len(w.trades) && w.trades[at].ID == w.hole.from && w.hole.open(); at++ {
		w.hole.from++
	}
	if !w.hole.open() {
		w.hole = idRange{}
	}
}

// holeRead returns the ids a read should ask for to fill the hole: only
// those the window would still hold once filled, so at most MaxTrades less
// the trades after the hole, however many the hole skipped. ok is false
// when the window holds no hole.
func (w *tradeWindow) holeRead() (hole, read idRange, ok bool) {
	if !w.hole.open() {
		return idRange{}, idRange{}, false
	}
	after := len(w.trades) - w.index(w.hole.to)
	from := max(w.hole.from, w.hole.to-int64(snapshot.MaxTrades-after))
	return w.hole, idRange{from, w.hole.to}, true
}

// fill merges what a read of ids read returned, the hole being hole when
// the read started. The ids before the read's are no longer missed: the
// window holds what comes after. A read that did not bring back the first
// id it asked for (the venue no longer has it) gives the hole up: the
// window keeps what comes after the hole, and cut reports it. A read made
// for a hole that has changed since is dropped: the new hole gets its own.
func (w *tradeWindow) fill(hole, read idRange, trades []venue.Trade) (cut bool) {
	if w.hole != hole {
		return false
	}
	if len(trades) == 0 || trades[0].ID != read.from {
		w.dropBefore(hole.to)
		w.hole = idRange{}
		return true
	}
	if read.from > hole.from {
		w.dropBefore(read.from)
		w.hole.from = read.from
	}
	w.merge(trades) // each trade that continues the ids shrinks the hole
	if w.hole.open() {
		w.settle() // newer trades may have left no room for the read's
	}
	return false
}
