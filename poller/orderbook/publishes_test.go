package orderbook

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"marketfeed/poller/venue"
)

// A book that publishes its best 3 levels a side reports a change only
// when an event changes one of them: a size there, a level removed there
// (the 4th moves in) or added among them; not a level below them.
func TestChangedOnlyWhenAShownLevelChanges(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bids, asks []venue.Level
		want       bool
	}{
		{"a 4th bid's size", lv("997", "5"), nil, false},
		{"a 5th ask removed", nil, lv("2004", "0"), false},
		{"a bid added 5th", lv("996.5", "1"), nil, false},
		{"a bid added 4th", lv("997.5", "1"), nil, false},
		{"a bid the book lacks removed", lv("990.5", "0"), nil, false},
		{"deep levels on both sides", lv("995", "2", "993", "0"), lv("2008", "7", "2005.5", "1"), false},
		{"a 3rd bid's size", lv("998", "5"), nil, true},
		{"a 3rd ask removed", nil, lv("2002", "0"), true},
		{"an ask added 3rd", nil, lv("2001.5", "1"), true},
		{"a new best bid", lv("1000.5", "1"), nil, true},
		{"a deep bid and the best ask", lv("995", "2"), lv("2000", "9"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := synced(t, venue.Book{LastUpdateID: 1, Bids: levelsFrom(1000, 10, true), Asks: levelsFrom(2000, 10, false)}, 20)
			b.Publishes(3)
			b.ResetChanged()
			if err := b.Apply(upd(2, 2, 1, tc.bids, tc.asks)); err != nil {
				t.Fatal(err)
			}
			if b.Changed() != tc.want {
				t.Errorf("Changed() = %v, want %v", b.Changed(), tc.want)
			}
		})
	}
	// A book that publishes every level reports every event.
	b := synced(t, venue.Book{LastUpdateID: 1, Bids: levelsFrom(1000, 10, true), Asks: levelsFrom(2000, 10, false)}, 20)
	b.ResetChanged()
	if err := b.Apply(upd(2, 2, 1, lv("991", "4"), nil)); err != nil || !b.Changed() {
		t.Errorf("Changed() = %v (%v) after the worst bid changed, publishing every level", b.Changed(), err)
	}
}

// Whatever events a book takes, when it reports no change its shown
// levels are the ones it showed before.
func TestUnchangedBookShowsTheSameLevels(t *testing.T) {
	const shown = 5
	r := rand.New(rand.NewPCG(1, 2))
	b := synced(t, venue.Book{LastUpdateID: 1, Bids: levelsFrom(1000, 40, true), Asks: levelsFrom(1100, 40, false)}, 100)
	b.Publishes(shown)
	side := func(lo, hi int) []venue.Level {
		var out []venue.Level
		for range r.IntN(5) {
			size := "0"
			if r.IntN(3) > 0 {
				size = strconv.Itoa(1 + r.IntN(9))
			}
			out = append(out, venue.Level{Price: strconv.Itoa(lo + r.IntN(hi-lo)), Size: size})
		}
		return out
	}
	unchanged := 0
	for id := int64(2); id < 5000; id++ {
		b.ResetChanged()
		bids0, asks0 := b.Top(shown)
		// Distinct prices a side, sorted as the venue sends them.
		bids, asks := side(940, 1000), side(1100, 1160)
		slices.SortFunc(bids, func(a, b venue.Level) int { return cmpPrice(b.Price, a.Price) })
		slices.SortFunc(asks, func(a, b venue.Level) int { return cmpPrice(a.Price, b.Price) })
		bids = slices.CompactFunc(bids, func(a, b venue.Level) bool { return a.Price == b.Price })
		asks = slices.CompactFunc(asks, func(a, b venue.Level) bool { return a.Price == b.Price })
		if err := b.Apply(upd(id, id, id-1, bids, asks)); err != nil {
			t.Fatal(err)
		}
		if b.Changed() {
			continue
		}
		unchanged++
		bids1, asks1 := b.Top(shown)
		if !slices.Equal(bids0, bids1) || !slices.Equal(asks0, asks1) {
			t.Fatalf("update %d (bids %v, asks %v) reported no change, but the shown levels went from %v %v to %v %v",
				id, bids, asks, bids0, asks0, bids1, asks1)
		}
	}
	if unchanged < 1000 {
		t.Fatalf("only %d of the events left the shown levels as they were: the test tests little", unchanged)
	}
}

func cmpPrice(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x - y
}
