package live

import (
	"cmp"
	"slices"
	"unsafe"

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
//
// A trade comes every few hundred microseconds across the market, so
// taking one in costs no allocation and no work proportional to the
// window: trades is a slice of a backing array of twice MaxTrades, the
// oldest trade leaves by moving the slice's start, and the trades are
// moved back to the array's front only once the slice reaches its end,
// once every MaxTrades trades. The trades' decimals are copied into the
// window's own text (see keep), since what the stream delivers is lent.
type tradeWindow struct {
	trades []venue.Trade
	hole   idRange
	// buf is the backing array trades is a slice of; nil until the first
	// trade.
	buf []venue.Trade
	// text holds the decimals of the trades, and what trades no longer
	// held use: it is only appended to, and a compaction copies what the
	// trades use into a new text, never writing the old one again, so a
	// string handed out (a published value keeps some) stays what it was.
	// used is the bytes the trades use.
	text []byte
	used int
	// lent counts the publications reading trades without the pair's
	// lock (see lend); while one does, nothing the slice they were lent
	// holds is written: a write there moves the trades to a new backing
	// array first (see own). epoch tells the lends of the array from
	// those of one given up.
	lent  int
	epoch int
}

// idRange is the trade ids from from up to, not including, to; empty when
// to <= from.
type idRange struct{ from, to int64 }

// open reports whether the range holds an id.
func (r idRange) open() bool { return r.to > r.from }

// add puts one trade in its place and reports whether the window changed:
// a trade already held, or older than a full window's oldest, changes
// nothing. The trade's strings may be lent: the window keeps a copy.
func (w *tradeWindow) add(tr venue.Trade) bool {
	n := len(w.trades)
	at := n
	if n == 0 || tr.ID <= w.trades[n-1].ID { // else the usual case: the newest trade
		var found bool
		at, found = slices.BinarySearchFunc(w.trades, tr.ID, byID)
		if found || (at == 0 && n >= snapshot.MaxTrades) {
			return false
		}
	}
	for len(w.trades) >= snapshot.MaxTrades { // the oldest goes out, at >= 1
		w.drop(1)
		at--
	}
	w.keep(&tr)
	if len(w.trades) == cap(w.trades) {
		w.compact()
	}
	if at < len(w.trades) {
		w.own() // the trades after at move up one
	}
	w.trades = w.trades[:len(w.trades)+1]
	copy(w.trades[at+1:], w.trades[at:])
	w.trades[at] = tr
	if w.hole.open() {
		w.settle()
	}
	return true
}

func byID(t venue.Trade, id int64) int { return cmp.Compare(t.ID, id) }

// windowBuf is the length of a window's backing array once full: twice
// the window, so that a compaction comes once every MaxTrades trades and
// costs one move of each.
const windowBuf = 2 * snapshot.MaxTrades

// drop removes the n oldest trades: the slice's start moves, and their
// text is no longer used.
func (w *tradeWindow) drop(n int) {
	for _, tr := range w.trades[:n] {
		w.used -= textLen(tr)
	}
	w.trades = w.trades[n:]
}

// compact makes room for one more trade at the end: the trades move to
// the front of the backing array, or to a new one of twice their number
// (at most windowBuf) when they fill more than half of it, or when a
// publication reads them (see lend).
func (w *tradeWindow) compact() {
	n := len(w.trades)
	buf := w.buf
	if w.lent > 0 || 2*n > len(buf) || n == len(buf) {
		w.move(max(min(2*(n+1), windowBuf), 8))
		return
	}
	copy(buf, w.trades)
	clear(buf[n:]) // no string of a trade gone keeps an old text
	w.trades = buf[:n:len(buf)]
}

// move moves the trades to a new backing array of size trades, which no
// publication reads.
func (w *tradeWindow) move(size int) {
	buf := make([]venue.Trade, size)
	copy(buf, w.trades)
	w.buf, w.trades = buf, buf[:len(w.trades):size]
	w.lent, w.epoch = 0, w.epoch+1
}

// own makes the trades the window's alone before one of them is written
// in place: while a publication reads them (see lend), they move to a new
// backing array, which the next compaction would have done anyway.
func (w *tradeWindow) own() {
	if w.lent > 0 {
		w.move(len(w.buf))
	}
}

// lend returns the trades the window serves (see served) for a
// publication to read once the pair's lock is released, and the epoch to
// give them back with (see giveBack). They stay as they are until then:
// trades the stream adds meanwhile go after them, and a trade leaving
// only moves the window's start. It saves a copy of the window every
// publication. Called with the pair's lock held.
func (w *tradeWindow) lend() (trades []venue.Trade, epoch int) {
	w.lent++
	return w.served(), w.epoch
}

// giveBack ends a lend of epoch. Called with the pair's lock held.
func (w *tradeWindow) giveBack(epoch int) {
	if epoch == w.epoch {
		w.lent--
	}
}

// minTradeText is the smallest text a window starts or is compacted into:
// about 40 trades' decimals.
const minTradeText = 1024

// textRoom is how many times the decimals its trades use a compacted text
// holds. A compaction leaves what it copied from garbage, so the text's
// garbage per trade is textRoom/(textRoom-1) times a trade's decimals,
// against once for a copy of each; 3 keeps that at 1.5 with a full
// window's text (~2 KB) held about three times.
const textRoom = 3

// keep copies tr's decimals into the window's text and points its
// strings there. When the text has no room left, the decimals the
// trades use are copied into a new one of textRoom times their bytes: one
// allocation every two windows' worth of trades or so, however many trades
// come. The old text is left as it was: strings handed out still read it.
func (w *tradeWindow) keep(tr *venue.Trade) {
	n := textLen(*tr)
	if n == 0 {
		return
	}
	if len(w.text)+n > cap(w.text) {
		w.own() // the trades' strings move to the new text
		w.text = make([]byte, 0, max(textRoom*(w.used+n), minTradeText))
		w.used = 0
		for i := range w.trades {
			held := &w.trades[i]
			if n := textLen(*held); n > 0 {
				at := len(w.text)
				w.text = append(w.text, unsafe.String(unsafe.StringData(held.Price), n)...) // laid out as below
				w.point(held, at)
			}
		}
	}
	// Price, size and quote quantity one after the other, so that a
	// compaction copies them at once.
	at := len(w.text)
	w.text = append(append(append(w.text, tr.Price...), tr.Size...), tr.QuoteQty...)
	w.point(tr, at)
}

// point points tr's strings at their bytes in the text from at on, where
// they were laid out as keep does.
func (w *tradeWindow) point(tr *venue.Trade, at int) {
	n := textLen(*tr)
	w.used += n
	all := unsafe.String(&w.text[at], n)
	p, q := len(tr.Price), len(tr.Price)+len(tr.Size)
	tr.Price, tr.Size, tr.QuoteQty = all[:p], all[p:q], all[q:]
}

// textLen is the bytes of tr's decimals.
func textLen(tr venue.Trade) int { return len(tr.Price) + len(tr.Size) + len(tr.QuoteQty) }

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
	w.drop(w.index(id))
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
