package orderbook

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"marketfeed/poller/venue"
)

// venueBook is the venue's true book in a model test: price → size a side.
type venueBook struct{ bids, asks map[int]int }

func (v venueBook) clone() venueBook { return venueBook{maps.Clone(v.bids), maps.Clone(v.asks)} }

// prices returns a side's prices, best first.
func prices(side map[int]int, bids bool) []int {
	ps := slices.Sorted(maps.Keys(side))
	if bids {
		slices.Reverse(ps)
	}
	return ps
}

// snapshotOf is the venue's depth answer for v at update id id.
func snapshotOf(v venueBook, id int64, limit int) venue.Book {
	b := venue.Book{LastUpdateID: id}
	for i, p := range prices(v.bids, true) {
		if i < limit {
			b.Bids = append(b.Bids, venue.Level{Price: strconv.Itoa(p), Size: strconv.Itoa(v.bids[p])})
		}
	}
	for i, p := range prices(v.asks, false) {
		if i < limit {
			b.Asks = append(b.Asks, venue.Level{Price: strconv.Itoa(p), Size: strconv.Itoa(v.asks[p])})
		}
	}
	return b
}

// The local book against a model of the venue: random events (several
// updates each, some delivered late), syncs, and refreshes from snapshots
// a little older or newer than the book at random depths, with sides kept
// to 40 levels so that trimming and keeping levels beyond a refresh's edge
// happen all the time. After every step each side must be exactly the
// venue's, from the best price to the side's edge (or whole, for a side
// the venue sent whole).
func TestOrderBookMatchesTheVenueUnderRandomEvents(t *testing.T) {
	for seed := range uint64(150) {
		modelRun(t, seed)
	}
}

func modelRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x0b0b))
	cur := venueBook{map[int]int{}, map[int]int{}}
	for p := 1; p <= 60; p++ {
		cur.bids[1000-p] = 1 + r.IntN(9)
		cur.asks[1000+p] = 1 + r.IntN(9)
	}
	states := []venueBook{cur.clone()} // states[id]: the venue after update id
	var prev int64
	mid := 1000
	set := func(out *[]venue.Level, side map[int]int, p, size int) {
		if size == 0 {
			delete(side, p)
		} else {
			side[p] = size
		}
		*out = append(*out, venue.Level{Price: strconv.Itoa(p), Size: strconv.Itoa(size)})
	}
	// event changes the venue by one to three updates and returns the
	// diff event, its last size for each price, as the venue sends it.
	event := func() venue.DepthUpdate {
		first := int64(len(states))
		var bids, asks []venue.Level
		for range 1 + r.IntN(3) {
			if r.IntN(10) == 0 {
				mid += r.IntN(11) - 5
			}
			size := 1 + r.IntN(9)
			if r.IntN(4) == 0 {
				size = 0
			}
			off := r.IntN(80)
			if r.IntN(2) == 0 {
				p := mid - 1 - off
				set(&bids, cur.bids, p, size)
				for _, q := range prices(cur.asks, false) {
					if size > 0 && q <= p { // the book never crosses
						set(&asks, cur.asks, q, 0)
					}
				}
			} else {
				p := mid + 1 + off
				set(&asks, cur.asks, p, size)
				for _, q := range prices(cur.bids, true) {
					if size > 0 && q >= p {
						set(&bids, cur.bids, q, 0)
					}
				}
			}
			states = append(states, cur.clone())
		}
		last := int64(len(states) - 1)
		u := venue.DepthUpdate{First: first, Last: last, Prev: prev, Bids: lastOfEach(bids), Asks: lastOfEach(asks)}
		prev = last
		return u
	}
	b := newBook(40)
	for range 3 {
		if err := b.Apply(event()); err != nil {
			t.Fatal(err)
		}
	}
	limit := 5 + r.IntN(30)
	if seed%3 == 0 {
		limit = 500 // the venue sends every level
	}
	id := int64(len(states) - 2)
	if err := b.Sync(snapshotOf(states[id], id, limit), limit); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	var late []venue.DepthUpdate
	for step := range 400 {
		switch x := r.IntN(10); {
		case x < 6:
			u := event()
			if r.IntN(8) == 0 && len(late) == 0 {
				late = append(late, u) // delivered after the next one
				continue
			}
			if err := b.Apply(u); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if len(late) > 0 && (r.IntN(2) == 0 || len(b.ahead) >= maxAhead-2) {
				for _, u := range late {
					if err := b.Apply(u); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				late = nil
			}
		case x < 8:
			b.Record()
		default:
			if !b.Recording() {
				continue
			}
			id := b.last + int64(r.IntN(7)) - 4
			if id < 0 || id >= int64(len(states)) {
				continue
			}
			limit := 3 + r.IntN(40)
			if r.IntN(5) == 0 {
				limit = 500
			}
			// A snapshot older than the recording is refused, and the
			// book stays as it was: checked below like any other step.
			_ = b.Refresh(snapshotOf(states[id], id, limit), limit)
		}
		if !b.Synced() {
			t.Fatalf("seed %d step %d: the book left sequence", seed, step)
		}
		truth := states[b.last]
		checkModelSide(t, seed, step, &b.bids, truth.bids)
		checkModelSide(t, seed, step, &b.asks, truth.asks)
	}
}

// lastOfEach keeps the last level given for each price, in first-seen
// order: one event carries one size a price.
func lastOfEach(levels []venue.Level) []venue.Level {
	at := map[string]int{}
	var out []venue.Level
	for _, l := range levels {
		if i, ok := at[l.Price]; ok {
			out[i] = l
			continue
		}
		at[l.Price] = len(out)
		out = append(out, l)
	}
	return out
}

func checkModelSide(t *testing.T, seed uint64, step int, side *bookSide, truth map[int]int) {
	t.Helper()
	var want []venue.Level
	for _, p := range prices(truth, side.bids) {
		k, _ := parsePrice(strconv.Itoa(p))
		if side.bounded && side.better(side.edge, k) {
			break
		}
		want = append(want, venue.Level{Price: strconv.Itoa(p), Size: strconv.Itoa(truth[p])})
	}
	if got := side.appendTop(nil, 1<<20); !slices.Equal(got, want) {
		t.Fatalf("seed %d step %d, bids %v (edge %v, bounded %v):\n got %v\nwant %v", seed, step, side.bids, side.edge, side.bounded, got, want)
	}
}
