package orderbook

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"marketfeed/poller/venue"
)

// A refresh lays a newer or slightly older snapshot under a book in
// sequence, keeping it in sequence; a snapshot older than what was recorded
// is refused and the book stays as it was.
func TestOrderBookRefreshKeepsSequence(t *testing.T) {
	snap := venue.Book{LastUpdateID: 100, Bids: lv("10", "1"), Asks: lv("11", "1")}
	b := synced(t, snap, 1000)
	b.Record()
	if err := b.Apply(upd(101, 110, 100, lv("10", "2"), nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(upd(111, 120, 110, nil, lv("11", "3"))); err != nil {
		t.Fatal(err)
	}
	// Taken at 110, arriving when the book is at 120: the recorded event
	// 111..120 is applied on top of it.
	deeper := venue.Book{LastUpdateID: 110, Bids: lv("10", "2", "9", "5"), Asks: lv("11", "1", "12", "7")}
	if err := b.Refresh(deeper, 1000); err != nil {
		t.Fatal(err)
	}
	if !b.Synced() || b.LastUpdateID() != 120 || b.Recording() {
		t.Fatalf("synced %v at %d, recording %v; want in sequence at 120, done recording", b.Synced(), b.LastUpdateID(), b.Recording())
	}
	bids, asks := b.Top(10)
	if !slices.Equal(bids, lv("10", "2", "9", "5")) || !slices.Equal(asks, lv("11", "3", "12", "7")) {
		t.Fatalf("after the refresh: bids %v asks %v", bids, asks)
	}
	if err := b.Apply(upd(121, 130, 120, lv("9", "0"), nil)); err != nil {
		t.Fatal(err)
	}
	// A snapshot from before the recording began cannot be brought up to
	// date: refused, and the book goes on as it was.
	b.Record()
	if err := b.Apply(upd(131, 140, 130, lv("10", "4"), nil)); err != nil {
		t.Fatal(err)
	}
	err := b.Refresh(venue.Book{LastUpdateID: 105, Bids: lv("10", "9")}, 1000)
	if !errors.Is(err, ErrStaleSnapshot) || !b.Synced() || b.LastUpdateID() != 140 {
		t.Fatalf("err %v, synced %v at %d; want ErrStaleSnapshot and the book unchanged at 140", err, b.Synced(), b.LastUpdateID())
	}
	if bids, _ := b.Top(1); bids[0].Size != "4" {
		t.Fatalf("a refused refresh changed the book: %v", bids)
	}
	// A snapshot newer than the book: the events it covers are dropped
	// when they arrive.
	if err := b.Refresh(venue.Book{LastUpdateID: 150, Bids: lv("10", "6")}, 1000); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(upd(141, 150, 140, lv("10", "1"), nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(upd(151, 160, 150, nil, lv("11", "8"))); err != nil {
		t.Fatal(err)
	}
	if bids, _ := b.Top(1); !b.Synced() || b.LastUpdateID() != 160 || bids[0].Size != "6" {
		t.Fatalf("synced %v at %d, bids %v: the newer snapshot's covered event was applied again", b.Synced(), b.LastUpdateID(), bids)
	}
}

// levelsFrom returns n levels one apart in price from top, down for bids
// and up for asks, each of size "1".
func levelsFrom(top, n int, bids bool) []venue.Level {
	out := make([]venue.Level, n)
	for i := range out {
		p := top + i
		if bids {
			p = top - i
		}
		out[i] = venue.Level{Price: strconv.Itoa(p), Size: "1"}
	}
	return out
}

// A refresh taken because the price rose towards the asks' edge keeps the
// bids the book vouched for beyond the new snapshot's bid edge, so that a
// price turning back down finds them, and updates there are applied again.
func TestOrderBookRefreshKeepsWhatTheBookVouchedForBeyondTheSnapshot(t *testing.T) {
	// Five levels a side: bids 100..96, asks 101..105.
	b := synced(t, venue.Book{LastUpdateID: 10, Bids: levelsFrom(100, 5, true), Asks: levelsFrom(101, 5, false)}, 5)
	// The price rises two ticks: asks 101 and 102 are taken, bids appear
	// there. The asks now vouch for three levels.
	if err := b.Apply(upd(11, 11, 10, lv("101", "1", "102", "1"), lv("101", "0", "102", "0"))); err != nil {
		t.Fatal(err)
	}
	if !b.Short(5) || b.Record() {
		t.Fatal("asks not short after the top moved towards their edge")
	}
	// Recorded after the snapshot below was taken: bid 97, beyond the
	// snapshot's bid edge, changes.
	if err := b.Apply(upd(12, 12, 11, lv("97", "7"), nil)); err != nil {
		t.Fatal(err)
	}
	// The snapshot, at 11: bids 102..98, asks 103..107.
	snap := venue.Book{LastUpdateID: 11, Bids: levelsFrom(102, 5, true), Asks: levelsFrom(103, 5, false)}
	if err := b.Refresh(snap, 5); err != nil {
		t.Fatal(err)
	}
	bids, asks := b.Top(10)
	if want := lv("102", "1", "101", "1", "100", "1", "99", "1", "98", "1", "97", "7", "96", "1"); !slices.Equal(bids, want) {
		t.Fatalf("bids %v, want %v: the levels beyond the snapshot the book held are kept, at their newest size", bids, want)
	}
	if !slices.Equal(asks, levelsFrom(103, 5, false)) || b.Short(5) || b.LastUpdateID() != 12 {
		t.Fatalf("asks %v, short %v, at %d", asks, b.Short(5), b.LastUpdateID())
	}
	// The kept levels are inside the edge again: updates there apply, and
	// beyond the old edge (96) they still do not.
	if err := b.Apply(upd(13, 13, 12, lv("96", "0", "95", "4"), nil)); err != nil {
		t.Fatal(err)
	}
	if bids, _ := b.Top(10); len(bids) != 6 || bids[5].Price != "97" {
		t.Fatalf("bids %v: want 96 removed and 95 (beyond the old edge) ignored", bids)
	}
}

// A snapshot newer than the book cannot take the book's far levels along:
// the events between would reach them only through the snapshot's edge.
func TestOrderBookRefreshFromANewerSnapshotKeepsNothingBeyondIt(t *testing.T) {
	b := synced(t, venue.Book{LastUpdateID: 10, Bids: levelsFrom(100, 5, true), Asks: levelsFrom(101, 5, false)}, 5)
	b.Record()
	snap := venue.Book{LastUpdateID: 20, Bids: levelsFrom(100, 3, true), Asks: levelsFrom(101, 3, false)}
	if err := b.Refresh(snap, 3); err != nil {
		t.Fatal(err)
	}
	// 11..20 removed bid 97, which the book at 10 still held.
	if bids, _ := b.Top(10); !slices.Equal(bids, levelsFrom(100, 3, true)) {
		t.Fatalf("bids %v, want only the snapshot's", bids)
	}
}
