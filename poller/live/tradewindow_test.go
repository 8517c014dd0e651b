package live

import (
	"slices"
	"testing"

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
