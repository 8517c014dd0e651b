package orderbook

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"marketfeed/poller/venue"
)

// lv builds levels from price, size pairs.
func lv(ps ...string) []venue.Level {
	var out []venue.Level
	for i := 0; i+1 < len(ps); i += 2 {
		out = append(out, venue.Level{Price: ps[i], Size: ps[i+1]})
	}
	return out
}

func upd(first, last, prev int64, bids, asks []venue.Level) venue.DepthUpdate {
	return venue.DepthUpdate{Symbol: "BTCUSDT", First: first, Last: last, Prev: prev, Time: last, Bids: bids, Asks: asks}
}

func synced(t *testing.T, snap venue.Book, limit int, buffered ...venue.DepthUpdate) *Book {
	t.Helper()
	b := New()
	for _, u := range buffered {
		if err := b.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(snap, limit); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOrderBookFollowsTheVenueProcedure(t *testing.T) {
	snap := venue.Book{LastUpdateID: 100, Time: 1, Bids: lv("10.0", "1", "9.9", "2"), Asks: lv("10.1", "1", "10.2", "3")}
	b := synced(t, snap, 1000,
		upd(80, 90, 70, lv("10.0", "5"), nil),     // ends before the snapshot: dropped
		upd(95, 105, 90, lv("9.9", "0"), nil),     // spans it: applied
		upd(106, 110, 105, nil, lv("10.05", "4")), // chains: applied
	)
	if !b.Synced() || b.LastUpdateID() != 110 {
		t.Fatalf("synced %v at %d, want in sequence at 110", b.Synced(), b.LastUpdateID())
	}
	bids, asks := b.Top(10)
	if want := lv("10.0", "1"); !slices.Equal(bids, want) {
		t.Fatalf("bids %v, want %v (the dropped event must not apply)", bids, want)
	}
	if want := lv("10.05", "4", "10.1", "1", "10.2", "3"); !slices.Equal(asks, want) {
		t.Fatalf("asks %v, want %v", asks, want)
	}
	// A duplicate, as two connections deliver during a replacement, is
	// ignored; removing a level the book lacks is normal.
	if err := b.Apply(upd(106, 110, 105, nil, lv("10.05", "9"))); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(upd(111, 112, 110, lv("5", "0"), nil)); err != nil {
		t.Fatal(err)
	}
	if _, asks := b.Top(1); asks[0].Size != "4" {
		t.Fatalf("a duplicate event changed the book: %v", asks)
	}
}

func TestOrderBookFirstEventStartingRightAfterTheSnapshot(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 100, Bids: lv("1", "1")}, 1000)
	if err := b.Apply(upd(101, 104, 100, lv("1", "2"), nil)); err != nil {
		t.Fatal(err)
	}
	if b.LastUpdateID() != 104 {
		t.Fatalf("at %d, want 104", b.LastUpdateID())
	}
}

func TestOrderBookHoldsAnEarlyEventUntilTheMissingOneArrives(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 100, Bids: lv("1", "1")}, 1000)
	// 111..120 arrives before 101..110, as when a new connection runs
	// ahead of the old one.
	if err := b.Apply(upd(111, 120, 110, lv("1", "3"), nil)); err != nil {
		t.Fatal(err)
	}
	if !b.Held() || b.LastUpdateID() != 100 {
		t.Fatalf("held %v at %d: the early event must wait", b.Held(), b.LastUpdateID())
	}
	if err := b.Apply(upd(101, 110, 100, lv("1", "2"), nil)); err != nil {
		t.Fatal(err)
	}
	if b.Held() || b.LastUpdateID() != 120 {
		t.Fatalf("held %v at %d, want both applied in order up to 120", b.Held(), b.LastUpdateID())
	}
	if bids, _ := b.Top(1); bids[0].Size != "3" {
		t.Fatalf("bids %v: the events applied out of order", bids)
	}
}

func TestOrderBookGapDesyncsAndBuffersAgain(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 100, Bids: lv("1", "1")}, 1000)
	var err error
	u := int64(110) // 101..110 never arrives
	for i := 0; i <= maxAhead && err == nil; i++ {
		err = b.Apply(upd(u+1, u+10, u, lv("1", strconv.Itoa(i+2)), nil))
		u += 10
	}
	if !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("err %v after %d events past a gap, want ErrOutOfSequence", err, maxAhead+1)
	}
	if b.Synced() {
		t.Fatal("a book past a gap still claims to be in sequence")
	}
	if bids, _ := b.Top(1); len(bids) != 0 {
		t.Fatalf("levels kept across a gap: %v", bids)
	}
	// The held events start the new buffer; a new snapshot syncs again.
	if b.Buffered() != maxAhead+1 {
		t.Fatalf("buffered %d, want the %d held events and the last", b.Buffered(), maxAhead+1)
	}
	if err := b.Sync(venue.Book{LastUpdateID: 150, Bids: lv("1", "7")}, 1000); err != nil {
		t.Fatal(err)
	}
	if !b.Synced() || b.LastUpdateID() != u {
		t.Fatalf("synced %v at %d, want %d", b.Synced(), b.LastUpdateID(), u)
	}
}

func TestOrderBookRefusesASnapshotOlderThanTheBuffer(t *testing.T) {
	b := New()
	_ = b.Apply(upd(201, 210, 200, lv("1", "1"), nil))
	err := b.Sync(venue.Book{LastUpdateID: 150, Bids: lv("1", "1")}, 1000)
	if !errors.Is(err, ErrStaleSnapshot) {
		t.Fatalf("err %v, want ErrStaleSnapshot", err)
	}
	if b.Synced() || b.Buffered() != 1 {
		t.Fatalf("synced %v with %d buffered: a stale snapshot must leave the buffer for the next", b.Synced(), b.Buffered())
	}
	if err := b.Sync(venue.Book{LastUpdateID: 205, Bids: lv("1", "1")}, 1000); err != nil {
		t.Fatal(err)
	}
}

func TestOrderBookRefusesPricesThatAreNotPlainDecimals(t *testing.T) {
	for _, bad := range []string{"1e3", "", "-1", "NaN", "1.", ".5", "0x10", " 1"} {
		b := synced(t, venue.Book{LastUpdateID: 1, Bids: lv("1", "1")}, 1000)
		err := b.Apply(upd(2, 2, 1, lv(bad, "1"), nil))
		if !errors.Is(err, ErrBadLevel) || b.Synced() {
			t.Errorf("price %q: err %v, synced %v; want ErrBadLevel and a resync", bad, err, b.Synced())
		}
	}
}

// A side that came back full may continue beyond its worst level: updates
// there are ignored, and once the top is consumed below the published depth
// the book asks for a new snapshot.
func TestOrderBookTrustsNothingBeyondAFullSnapshotsEdge(t *testing.T) {
	var bids []venue.Level
	for i := range 5 {
		bids = append(bids, venue.Level{Price: strconv.Itoa(100 - i), Size: "1"})
	}
	b := synced(t, venue.Book{LastUpdateID: 1, Bids: bids, Asks: lv("101", "1")}, 5)
	if err := b.Apply(upd(2, 2, 1, lv("50", "9"), nil)); err != nil { // beyond the edge (96)
		t.Fatal(err)
	}
	if got, _ := b.Top(10); len(got) != 5 {
		t.Fatalf("%d bids: an update beyond the snapshot's edge was kept", len(got))
	}
	if b.Short(5) {
		t.Fatal("short with every level the snapshot vouched for")
	}
	if err := b.Apply(upd(3, 3, 2, lv("100", "0"), nil)); err != nil {
		t.Fatal(err)
	}
	if !b.Short(5) {
		t.Fatal("not short after the top was consumed below the published depth")
	}
	// The asks came back with fewer levels than asked: the venue has no
	// more, so a thin side is complete, not short.
	if b.asks.vouched() < 5 {
		t.Fatal("a side the venue sent in full reported short")
	}
}

func TestParsePriceOrdersExactly(t *testing.T) {
	ordered := []string{"0.00000001", "0.0000001", "0.1", "0.10000000000000001", "1", "1.5", "9.99", "10", "65000.1", "65000.10000000000000001"}
	for i := 1; i < len(ordered); i++ {
		a, okA := parsePrice(ordered[i-1])
		b, okB := parsePrice(ordered[i])
		if !okA || !okB || !a.less(b) {
			t.Errorf("%s < %s: parsed %v %v, less %v", ordered[i-1], ordered[i], okA, okB, a.less(b))
		}
	}
	if a, _ := parsePrice("1.50"); a != (priceKey{1, 5e17}) {
		t.Errorf("1.50 parsed as %v", a)
	}
}

// less is exact for every pair of keys, at the edges of both halves too:
// the integer parts decide unless equal, then the fractions.
func TestPriceKeyLessIsTheOrderOfThePrices(t *testing.T) {
	const top = ^uint64(0)
	keys := []priceKey{{0, 0}, {0, 1}, {0, 5e17}, {0, top}, {1, 0}, {1, 1}, {1, top}, {2, 0}, {top - 1, top}, {top, 0}, {top, 1}, {top, top}}
	for i, a := range keys {
		for j, b := range keys {
			// keys is in rising order.
			if got, want := a.less(b), i < j; got != want {
				t.Errorf("%v less %v = %v, want %v", a, b, got, want)
			}
		}
	}
}

// A side that grows past maxSideLevels, as the bids do while the price
// rises, drops its worst levels and vouches no farther than it holds.
func TestOrderBookSideIsTrimmed(t *testing.T) {
	// The venue sent every bid: the side is complete and unbounded.
	b := synced(t, venue.Book{LastUpdateID: 1, Bids: levelsFrom(1000, 10, true), Asks: lv("5000", "1")}, 1000)
	var last int64 = 1
	for top := 1001; top < 1001+maxSideLevels+maxSideLevels/8; top += 10 {
		if err := b.Apply(upd(last+1, last+1, last, levelsFrom(top+9, 10, true), nil)); err != nil {
			t.Fatal(err)
		}
		last++
	}
	bids, _ := b.Top(1 << 20)
	if len(bids) > maxSideLevels+maxSideLevels/8 || len(bids) < maxSideLevels {
		t.Fatalf("%d bids, want between %d and %d", len(bids), maxSideLevels, maxSideLevels+maxSideLevels/8)
	}
	worst := bids[len(bids)-1].Price
	// Beyond the trimmed edge nothing is vouched for any more.
	if err := b.Apply(upd(last+1, last+1, last, lv("995", "3"), nil)); err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Top(1 << 20); len(again) != len(bids) || again[len(again)-1].Price != worst {
		t.Fatalf("an update beyond the trimmed edge %s was applied", worst)
	}
}

// A book whose stream was cut off is suspended, not dropped: it is not
// current until an event continues its chain (pu == the book's u) or covers
// its next update (U <= u+1); a duplicate says nothing yet; any other first
// event means updates were missed, and the book desyncs and buffers it.
func TestOrderBookSuspendedResumesOnlyOnItsChain(t *testing.T) {
	cases := []struct {
		name    string
		events  []venue.DepthUpdate
		resumed bool
		last    int64
		bid     string // the size of the bid at 1 after the events
	}{
		{"continues", []venue.DepthUpdate{upd(101, 105, 100, lv("1", "2"), nil)}, true, 105, "2"},
		{"continues by pu, starting past the next id", []venue.DepthUpdate{upd(150, 160, 100, lv("1", "8"), nil)}, true, 160, "8"},
		{"covers the next update", []venue.DepthUpdate{upd(97, 108, 96, lv("1", "3"), nil)}, true, 108, "3"},
		{"a duplicate, then continues", []venue.DepthUpdate{
			upd(96, 100, 95, lv("1", "9"), nil), upd(101, 102, 100, lv("1", "4"), nil),
		}, true, 102, "4"},
		{"updates missed", []venue.DepthUpdate{upd(104, 106, 103, lv("1", "5"), nil)}, false, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := synced(t, venue.Book{LastUpdateID: 100, Bids: lv("1", "1")}, 1000)
			b.Suspend()
			if b.Synced() || !b.Suspended() {
				t.Fatalf("synced %v, suspended %v: a suspended book is not current", b.Synced(), b.Suspended())
			}
			var err error
			for _, u := range c.events {
				if err = b.Apply(u); err != nil {
					break
				}
			}
			if !c.resumed {
				if !errors.Is(err, ErrOutOfSequence) || b.Synced() || b.Suspended() || b.Buffered() != 1 {
					t.Fatalf("err %v, synced %v, suspended %v, buffered %d: want out of sequence, desynced, the event buffered",
						err, b.Synced(), b.Suspended(), b.Buffered())
				}
				if bids, _ := b.Top(1); len(bids) != 0 {
					t.Fatalf("levels kept across missed updates: %v", bids)
				}
				return
			}
			if err != nil || !b.Synced() || b.LastUpdateID() != c.last {
				t.Fatalf("err %v, synced %v at %d: want resumed at %d", err, b.Synced(), b.LastUpdateID(), c.last)
			}
			if bids, _ := b.Top(1); len(bids) != 1 || bids[0].Size != c.bid {
				t.Fatalf("bids %v, want size %s", bids, c.bid)
			}
			// Resumed, the book follows the ordinary rule again.
			if err := b.Apply(upd(c.last+1, c.last+2, c.last, nil, nil)); err != nil || b.LastUpdateID() != c.last+2 {
				t.Fatalf("err %v at %d after resuming", err, b.LastUpdateID())
			}
		})
	}
}

// A snapshot laid under a suspended book (a refresh read in flight when the
// stream was lost) does not resume it: the snapshot may predate updates the
// stream missed, so the book stays suspended until an event follows the
// snapshot by the first-event rule (pu <= L <= u). Suspending a book that is
// not synced changes nothing.
func TestOrderBookSuspendedAndSnapshotOrNotSynced(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 100, Bids: lv("1", "1")}, 1000)
	b.Suspend()
	if err := b.Refresh(venue.Book{LastUpdateID: 120, Bids: lv("1", "6")}, 1000); err != nil {
		t.Fatal(err)
	}
	if b.Synced() || !b.Suspended() || b.LastUpdateID() != 120 {
		t.Fatalf("synced %v, suspended %v at %d: want at the snapshot's 120, still suspended", b.Synced(), b.Suspended(), b.LastUpdateID())
	}
	if err := b.Apply(upd(118, 125, 117, lv("1", "7"), nil)); err != nil || !b.Synced() || b.LastUpdateID() != 125 {
		t.Fatalf("err %v, synced %v at %d: an event spanning the snapshot resumes the book", err, b.Synced(), b.LastUpdateID())
	}
	fresh := New()
	fresh.Suspend()
	if fresh.Suspended() || fresh.Synced() {
		t.Fatal("a book never synced became suspended")
	}
	if err := fresh.Apply(upd(1, 2, 0, lv("1", "1"), nil)); err != nil || fresh.Buffered() != 1 {
		t.Fatalf("err %v, buffered %d: a book never synced buffers as before", err, fresh.Buffered())
	}
}

// The levels Top hands out stay as they were whatever the book does next:
// sizes changed thousands of times (so that the side's text is compacted
// again and again), levels removed and added, the side trimmed, a refresh
// laid under it, the book desynced. And the book's own levels stay right
// through every compaction.
func TestOrderBookTopStaysAsHandedOut(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 1, Bids: levelsFrom(1000, 50, true), Asks: lv("5000", "1", "5001", "2")}, 100)
	type handed struct {
		bids, asks []venue.Level
		want       []venue.Level
	}
	var all []handed
	take := func() {
		bids, asks := b.Top(100)
		all = append(all, handed{bids, asks, slices.Concat(slices.Clone(bids), slices.Clone(asks))})
	}
	take()
	last := int64(1)
	apply := func(bids, asks []venue.Level) {
		t.Helper()
		if err := b.Apply(upd(last+1, last+1, last, bids, asks)); err != nil {
			t.Fatal(err)
		}
		last++
	}
	for i := range 5000 {
		// Every bid's size changes; one ask comes and goes.
		var bids []venue.Level
		for p := 951; p <= 1000; p++ {
			bids = append(bids, venue.Level{Price: strconv.Itoa(p), Size: strconv.Itoa(i+p) + ".5"})
		}
		asks := lv("4999.5", "7")
		if i%2 == 1 {
			asks = lv("4999.5", "0")
		}
		apply(bids, asks)
		if i%500 == 0 {
			take()
		}
	}
	gotBids, _ := b.Top(100)
	if len(gotBids) != 50 || gotBids[0] != (venue.Level{Price: "1000", Size: "5999.5"}) || gotBids[49] != (venue.Level{Price: "951", Size: "5950.5"}) {
		t.Fatalf("bids after 5,000 events: %v ... %v", gotBids[0], gotBids[len(gotBids)-1])
	}
	if err := b.Record(); err {
		t.Fatal("already recording")
	}
	apply(lv("1000", "1"), nil)
	if err := b.Refresh(venue.Book{LastUpdateID: last, Bids: levelsFrom(1000, 10, true), Asks: lv("5000", "1")}, 10); err != nil {
		t.Fatal(err)
	}
	take()
	b.Desync()
	for i, h := range all {
		if got := slices.Concat(h.bids, h.asks); !slices.Equal(got, h.want) {
			t.Fatalf("levels handed out by Top %d changed since", i)
		}
	}
}

// A level is found, or its place, from wherever the search starts: the
// hint only says where to look first.
func TestSearchFindsTheSamePlaceFromAnyHint(t *testing.T) {
	for _, bids := range []bool{true, false} {
		for _, n := range []int{0, 1, 2, 3, 5, 8, 12, 33, 34, 100, 300} {
			s := bookSide{bids: bids}
			for i := range n {
				p := 10 + 2*i // worst first: ascending bids, descending asks
				if !bids {
					p = 10 + 2*(n-1-i)
				}
				s.levels = append(s.levels, bookLevel{key: priceKey{whole: uint64(p)}})
			}
			for p := 8; p <= 12+2*n; p++ {
				key := priceKey{whole: uint64(p)}
				// want: the first level not worse than key, by a plain scan.
				want := 0
				for want < n && s.better(key, s.levels[want].key) {
					want++
				}
				wantFound := want < n && s.levels[want].key == key
				for hint := -1; hint <= n+1; hint++ {
					at, found := s.search(key, hint)
					if at != want || found != wantFound {
						t.Fatalf("bids %v, %d levels, price %d, hint %d: search = %d, %v; want %d, %v",
							bids, n, p, hint, at, found, want, wantFound)
					}
				}
			}
		}
	}
}

// A venue read at the book's update id, or an older one, proves the book
// current and moves its time to the read's; a later id is updates the
// stream did not deliver. A book out of sequence, suspended, or holding an
// event ahead of a missing one is proven nothing.
func TestOrderBookConfirmTellsAQuietBookFromASilentStream(t *testing.T) {
	snap := venue.Book{LastUpdateID: 100, Time: 1000, Bids: lv("10.0", "1"), Asks: lv("10.1", "1")}
	b := synced(t, snap, 1000, upd(95, 105, 90, nil, nil))
	if !b.Confirm(105, 4000) || b.Time() != 4000 {
		t.Fatalf("read at the book's id: confirmed at time %d, want confirmed at the read's time 4000", b.Time())
	}
	if !b.Confirm(103, 3000) || b.Time() != 4000 {
		t.Fatalf("read older than the book: time %d, want it kept at 4000", b.Time())
	}
	if b.Confirm(106, 5000) || b.Time() != 4000 || !b.Synced() {
		t.Fatalf("read past the book's id confirmed it (time %d, synced %v)", b.Time(), b.Synced())
	}
	if err := b.Apply(upd(108, 109, 107, nil, nil)); err != nil { // 106..107 not yet here
		t.Fatal(err)
	}
	if b.Confirm(105, 6000) {
		t.Fatal("a book holding an event ahead of a missing one was confirmed")
	}
	b.Suspend()
	if b.Confirm(105, 6000) {
		t.Fatal("a suspended book was confirmed")
	}
	if New().Confirm(0, 1) {
		t.Fatal("a book never synced was confirmed")
	}
}
