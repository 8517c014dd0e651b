package live

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// ids builds trades first..last.
func ids(first, last int64) []venue.Trade {
	var out []venue.Trade
	for id := first; id <= last; id++ {
		out = append(out, venue.Trade{ID: id})
	}
	return out
}

func idsOf(trades []venue.Trade) (out []int64) {
	for _, tr := range trades {
		out = append(out, tr.ID)
	}
	return out
}

// windowOf is a window holding trades first..last with a hole of missed.
func windowOf(first, last int64, missed idRange) *tradeWindow {
	w := &tradeWindow{}
	w.merge(ids(first, last))
	w.markHole(missed)
	return w
}

func wantServed(t *testing.T, w *tradeWindow, first, last int64) {
	t.Helper()
	if got, want := idsOf(w.served()), idsOf(ids(first, last)); !slices.Equal(got, want) {
		t.Fatalf("served %v, want %d..%d", got, first, last)
	}
}

// A window with a hole serves only what comes after it, and asks for the
// missing ids the window would hold, however wide the hole.
func TestTradeWindowHoleServesWhatFollowsAndReadsWhatFits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hole       idRange
		after      int64 // trades after the hole
		read       idRange
		servedFrom int64
	}{
		{"narrow", idRange{11, 16}, 3, idRange{11, 16}, 16},
		{"as wide as the window", idRange{11, 111}, 1, idRange{12, 111}, 111},
		{"wider than a read", idRange{11, 5011}, 2, idRange{4913, 5011}, 5011},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &tradeWindow{}
			w.merge(ids(1, 10))
			w.markHole(tc.hole)
			w.merge(ids(tc.hole.to, tc.hole.to+tc.after-1))
			wantServed(t, w, tc.servedFrom, tc.hole.to+tc.after-1)
			hole, read, ok := w.holeRead()
			if !ok || hole != tc.hole || read != tc.read {
				t.Fatalf("hole read %v %v %v, want %v %v", hole, read, ok, tc.hole, tc.read)
			}
			if cut := w.fill(hole, read, ids(read.from, read.to-1)); cut {
				t.Fatal("a read of every missing id cut the window")
			}
			if _, _, ok := w.holeRead(); ok {
				t.Fatal("the hole is still open after its read")
			}
			first := max(1, tc.hole.to+tc.after-snapshot.MaxTrades)
			wantServed(t, w, first, tc.hole.to+tc.after-1)
		})
	}
}

// Reads that bring back part of a hole shrink it; a second loss while it is
// open widens it, keeping the trades before it; one that brings back
// nothing it asked for gives it up; one made for a hole that has changed
// since changes nothing.
func TestTradeWindowFillOutcomes(t *testing.T) {
	w := windowOf(1, 10, idRange{11, 21})
	w.merge(ids(21, 22))
	hole, read, _ := w.holeRead()
	if w.fill(hole, read, ids(11, 14)) {
		t.Fatal("a partial read cut the window")
	}
	if hole, read, _ = w.holeRead(); hole != (idRange{15, 21}) || read != hole {
		t.Fatalf("after a partial read the hole is %v, read %v; want 15..20", hole, read)
	}
	wantServed(t, w, 21, 22)

	// A second loss while the hole is open: it widens, and 21..25, held
	// inside it now, are not served until it is filled.
	w.merge(ids(23, 25))
	stale, staleRead, _ := w.holeRead()
	w.markHole(idRange{26, 30})
	w.merge(ids(30, 30))
	wantServed(t, w, 30, 30)
	if hole, read, _ = w.holeRead(); hole != (idRange{15, 30}) || read != hole {
		t.Fatalf("after a second loss the hole is %v, read %v; want 15..29", hole, read)
	}
	if w.fill(stale, staleRead, ids(15, 20)); !slices.Equal(idsOf(w.served()), []int64{30}) {
		t.Fatalf("a read for a hole since widened changed what is served: %v", idsOf(w.served()))
	}
	if w.fill(hole, read, ids(15, 29)) {
		t.Fatal("a read of every missing id cut the window")
	}
	wantServed(t, w, 1, 30)

	// The venue has no trade with the first missing id.
	w.markHole(idRange{31, 35})
	w.merge(ids(35, 35))
	hole, read, _ = w.holeRead()
	if !w.fill(hole, read, ids(33, 35)) {
		t.Fatal("a read without the first missing id did not cut the window")
	}
	wantServed(t, w, 35, 35)
	if len(w.trades) != 1 {
		t.Fatalf("the trades before a hole given up are kept: %v", idsOf(w.trades))
	}
}

// Trades after the hole that arrive while its read is in flight push the
// oldest out as the read's trades go in: the window ends with the newest
// MaxTrades and no hole. A read whose hole newer trades closed before it
// landed changes nothing.
func TestTradeWindowFillWhileNewerTradesArrive(t *testing.T) {
	w := windowOf(1, 10, idRange{11, 21})
	w.merge(ids(21, 30))
	hole, read, _ := w.holeRead()
	w.merge(ids(31, 115)) // 95 trades after the hole: 6..10 still before it
	if cut := w.fill(hole, read, ids(read.from, read.to-1)); cut {
		t.Fatal("the read cut the window")
	}
	if _, _, ok := w.holeRead(); ok {
		t.Fatal("the hole is still open after its read")
	}
	wantServed(t, w, 16, 115)

	w = windowOf(1, 10, idRange{11, 21})
	w.merge(ids(21, 30))
	hole, read, _ = w.holeRead()
	w.merge(ids(31, 120)) // 100 trades after the hole: none before it left
	if _, _, ok := w.holeRead(); ok {
		t.Fatal("the hole is open with no trade before it left")
	}
	w.fill(hole, read, ids(read.from, read.to-1))
	wantServed(t, w, 21, 120)
}

// lender makes trades as a stream connection lends them: their strings
// are in one buffer, written over by the next trade.
type lender struct{ buf [64]byte }

// trade returns trade id, its price "<id>.5", size "0.<id>" and quote
// quantity "<id>" in the lender's buffer.
func (l *lender) trade(id int64) venue.Trade {
	b := strconv.AppendInt(l.buf[:0], id, 10)
	n := len(b)
	b = append(append(append(b, ".50."...), b[:n]...), b[:n]...)
	all := unsafe.String(&b[0], len(b))
	return venue.Trade{ID: id, Time: id, Price: all[:n+2], Size: all[n+2 : 2*n+4], QuoteQty: all[2*n+4:]}
}

// wantTrade checks that tr holds what lender.trade made of its id.
func wantTrade(t *testing.T, tr venue.Trade) {
	t.Helper()
	id := strconv.FormatInt(tr.ID, 10)
	if tr.Price != id+".5" || tr.Size != "0."+id || tr.QuoteQty != id {
		t.Fatalf("trade %d holds price %q, size %q, quote %q", tr.ID, tr.Price, tr.Size, tr.QuoteQty)
	}
}

// The window keeps trades whose strings the stream lent: once the
// connection has decoded other trades into the same memory, the window's
// trades are still what they were, newest and oldest, through the
// compactions of its text.
func TestTradeWindowKeepsLentTrades(t *testing.T) {
	var l lender
	w := &tradeWindow{}
	for id := int64(1); id <= 1000; id++ {
		w.add(l.trade(id))
	}
	w.add(l.trade(950)) // held already: changes nothing
	l.trade(999_999)    // the connection's next frame
	wantServed(t, w, 901, 1000)
	for _, tr := range w.served() {
		wantTrade(t, tr)
	}
}

// Trades lent to a publication stay as they were until it gives them back,
// whatever the window does meanwhile: it moves its trades to the front of
// their array, or their decimals to a new text, or an older trade goes in
// among them.
func TestTradeWindowLentTradesStay(t *testing.T) {
	var l lender
	oddUpTo := func(last int64) *tradeWindow { // odd ids: room for even ones
		w := &tradeWindow{}
		for id := int64(1); id <= last; id += 2 {
			w.add(l.trade(id))
		}
		return w
	}
	// whileLent runs change while w's trades are lent, and checks them.
	whileLent := func(t *testing.T, w *tradeWindow, change func()) {
		t.Helper()
		lent, epoch := w.lend()
		want := slices.Clone(lent)
		change()
		for i, tr := range lent {
			// Written over with the same decimals elsewhere is a write
			// all the same, which a publication may read half done.
			if tr != want[i] || unsafe.StringData(tr.Price) != unsafe.StringData(want[i].Price) {
				t.Fatalf("lent trade %d changed from %+v to %+v", i, want[i], tr)
			}
		}
		w.giveBack(epoch)
	}
	t.Run("array compacted", func(t *testing.T) {
		w := &tradeWindow{}
		w.merge(ids(1, 250)) // trades without decimals: no text
		whileLent(t, w, func() { w.merge(ids(251, 500)) })
		wantServed(t, w, 401, 500)
	})
	t.Run("text compacted", func(t *testing.T) {
		w := oddUpTo(399)
		for id := int64(401); ; id += 2 {
			next := l.trade(id)
			if len(w.text)+textLen(next) > cap(w.text) && len(w.trades) < cap(w.trades) {
				// The next trade compacts the text, not the array.
				whileLent(t, w, func() { w.add(next) })
				break
			}
			w.add(next)
		}
		for _, tr := range w.served() {
			wantTrade(t, tr)
		}
	})
	t.Run("older trade in", func(t *testing.T) {
		w := oddUpTo(399)
		whileLent(t, w, func() {
			w.add(l.trade(352))
			w.dropBefore(300)
		})
		if got := idsOf(w.served()); got[0] != 301 || !slices.Contains(got, 352) {
			t.Fatalf("served %v, want 301.. with 352", got)
		}
		for _, tr := range w.served() {
			wantTrade(t, tr)
		}
	})
}

// A publication reads the window's trades without the pair's lock while
// the stream adds more under it: every value published holds trades as
// they came, in order. Run with -race, it also finds the window writing
// what a publication reads.
func TestTradesPublishedWhileTradesArrive(t *testing.T) {
	s, _, store := newListedSource(t, nil)
	s.Live(snapshot.StreamTrades, []string{testSymbol})
	var l lender
	s.Trade(testSymbol, l.trade(1))
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		id := int64(2)
		for ; ; id++ {
			select {
			case <-stop:
				done <- id
				return
			default:
			}
			s.Trade(testSymbol, l.trade(id))
		}
	}()
	for range 200 {
		s.publishPeriod()
		got, _ := store.Trades([]byte(testID), time.Now().UnixNano())
		if got == nil {
			t.Fatal("no trades published")
		}
		trades, err := got.VenueTrades()
		if err != nil {
			t.Fatal(err)
		}
		for i, tr := range trades {
			id := strings.TrimSuffix(tr.Price, ".5")
			if tr.Size != "0."+id || (i > 0 && tr.Time != trades[i-1].Time+1) {
				t.Fatalf("published trade %d: %+v after %+v", i, tr, trades[max(i-1, 0)])
			}
		}
	}
	close(stop)
	if last := <-done; last < 2 {
		t.Fatalf("the stream added %d trades", last-2)
	}
}
