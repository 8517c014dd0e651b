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
type tradeWindow struct {
	trades []venue.Trade
}

// add puts one trade in its place and reports whether the window changed:
// a trade already held, or older than a full window's oldest, changes
// nothing.
func (w *tradeWindow) add(tr venue.Trade) bool {
	n := len(w.trades)
	if n > 0 && tr.ID > w.trades[n-1].ID {
		w.trades = append(w.trades, tr) // the usual case: the newest trade
	} else {
		at, found := slices.BinarySearchFunc(w.trades, tr.ID, func(t venue.Trade, id int64) int {
			switch {
			case t.ID < id:
				return -1
			case t.ID > id:
				return 1
			}
			return 0
		})
		if found || (at == 0 && n >= snapshot.MaxTrades) {
			return false
		}
		w.trades = slices.Insert(w.trades, at, tr)
	}
	if extra := len(w.trades) - snapshot.MaxTrades; extra > 0 {
		w.trades = append(w.trades[:0], w.trades[extra:]...)
	}
	return true
}

// merge adds trades read from REST and reports whether the window changed.
func (w *tradeWindow) merge(trades []venue.Trade) bool {
	changed := false
	for _, tr := range trades {
		if w.add(tr) {
			changed = true
		}
	}
	return changed
}

// full reports whether the window holds as many trades as a response can
// carry: then it is complete without a REST read.
func (w *tradeWindow) full() bool { return len(w.trades) >= snapshot.MaxTrades }

// list returns the window's trades, oldest first. The slice is the window's:
// callers read it while they hold the pair's lock.
func (w *tradeWindow) list() []venue.Trade { return w.trades }

// empty reports whether the window holds no trade.
func (w *tradeWindow) empty() bool { return len(w.trades) == 0 }

// newest returns the newest trade's id; 0 when the window is empty.
func (w *tradeWindow) newest() int64 {
	if len(w.trades) == 0 {
		return 0
	}
	return w.trades[len(w.trades)-1].ID
}

// dropBefore removes the trades older than id.
func (w *tradeWindow) dropBefore(id int64) {
	at, _ := slices.BinarySearchFunc(w.trades, id, func(t venue.Trade, id int64) int { return cmp.Compare(t.ID, id) })
	w.trades = append(w.trades[:0], w.trades[at:]...)
}
