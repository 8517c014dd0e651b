package snapshot

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// A read that continues the previous value is built by follow, without
// looking its trades up; any read gives the value buildTrades gives, byte
// for byte and id for id, whichever way it is built: as the window slides
// by a few trades or by more than a window, with lookalike trades (new
// ones alike, and new ones like kept ones whose first copy has left),
// times that go back, trades without venue ids, ids out of order, a trade
// missing from the middle, the newest missing, a trade sent twice, and new
// trades that must not be published.
func TestNewTradesAfterFollowsAsTheGeneralBuild(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 1))
	prices, sizes := []string{"100.5", "100.6"}, []string{"1", "2.5"}
	var tape []Trade
	grow := func(n int) {
		for range n {
			id := int64(len(tape) + 1)
			tr := Trade{ID: id, Time: tradeTime + id/3, Price: prices[r.IntN(2)], Size: sizes[r.IntN(2)], Sell: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				tr.QuoteQty = "250.75"
			}
			if len(tape) > 0 && r.IntN(5) == 0 {
				// A lookalike of a trade up to a window back.
				o := tape[max(0, len(tape)-1-r.IntN(MaxTrades+20))]
				tr.Time, tr.Price, tr.Size, tr.Sell = o.Time, o.Price, o.Size, o.Sell
			}
			tape = append(tape, tr)
		}
	}
	var prev *Trades
	followed, built := 0, 0
	for step := range 3000 {
		grow([]int{0, 1, 1, 2, 5, 5, 9, 40, MaxTrades + 30}[r.IntN(9)])
		read := slices.Clone(tape[max(0, len(tape)-MaxTrades):])
		if len(read) == 0 {
			continue
		}
		last := len(read) - 1
		switch r.IntN(16) {
		case 0: // a trade without a venue id
			read[r.IntN(len(read))].ID = 0
		case 1: // the newest trades out of id order
			if last > 0 {
				read[last], read[last-1] = read[last-1], read[last]
			}
		case 2: // time going back
			read[r.IntN(len(read))].Time -= 5
		case 3: // a trade missing from the middle
			read = slices.Delete(read, len(read)/2, len(read)/2+1)
		case 4: // the newest missing
			read = read[:last]
		case 5: // a new trade that must not be published
			read[last].Price = "0"
		case 6: // a trade twice, venue id and all
			at := r.IntN(len(read))
			read = slices.Insert(read, at, read[at])[:min(len(read)+1, MaxTrades)]
		}
		general, gerr := buildTrades(prev, "BTC_USDT", read, readAt)
		if prev != nil {
			if _, ok, _ := prev.follow(read, readAt); ok {
				followed++
			} else {
				built++
			}
		}
		got, err := NewTradesAfter(prev, "BTC_USDT", read, readAt)
		if (err != nil) != (gerr != nil) || err != nil && err.Error() != gerr.Error() {
			t.Fatalf("step %d: error %v, the general build's %v", step, err, gerr)
		}
		if err != nil {
			continue
		}
		sameTrades(t, step, got, general)
		if prev = got; r.IntN(4) == 0 {
			prev = general // and follow what the general build built
		}
	}
	if followed < 500 || built < 500 {
		t.Fatalf("%d reads followed the value before, %d not: the test does not try both", followed, built)
	}
}

// sameTrades fails unless a and b serve the same bytes and number the
// trades a next read shares with them the same way.
func sameTrades(t *testing.T, step int, a, b *Trades) {
	t.Helper()
	for side := range numSides {
		if got, want := string(a.Body(side)), string(b.Body(side)); got != want {
			t.Fatalf("step %d, side %d:\n%s\nthe general build's:\n%s", step, side, got, want)
		}
	}
	switch {
	case !slices.Equal(a.all.ends, b.all.ends):
		t.Fatalf("step %d: ends %v, the general build's %v", step, a.all.ends, b.all.ends)
	case a.sells != b.sells:
		t.Fatalf("step %d: sells %x, the general build's %x", step, a.sells, b.sells)
	case !slices.Equal(a.ids.byVenue, b.ids.byVenue):
		t.Fatalf("step %d: venue ids %v, the general build's %v", step, a.ids.byVenue, b.ids.byVenue)
	case !maps.Equal(a.ids.byIdent, b.ids.byIdent):
		t.Fatalf("step %d: ids by fields differ from the general build's", step)
	case a.ids.inOrder != b.ids.inOrder || a.ids.inOrder != a.ids.orderOf(len(a.all.ends)):
		t.Fatalf("step %d: in order %v, the general build's %v", step, a.ids.inOrder, b.ids.inOrder)
	}
}

// A body is sized for its new items before they are written: by at least
// their bytes, or it would be allocated twice, and by little more where
// the venue sends the target volume, as every listed pair holds the body
// until its next trade.
func TestItemBoundSizesAnItem(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 2))
	decimal := func() string {
		s := strconv.FormatUint(r.Uint64N([]uint64{10, 1e3, 1e6, 1e12, 1e19}[r.IntN(5)])+1, 10)
		if at := r.IntN(len(s) + 3); at < len(s) {
			s = s[:at] + "." + s[at:]
			if at == 0 {
				s = "0" + s
			}
		}
		return s
	}
	for range 20000 {
		tr := Trade{Time: tradeTime + r.Int64N(1e6), Price: decimal(), Size: decimal(), Sell: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			tr.QuoteQty = decimal()
		}
		id := tradeID(tr, 0)
		item, err := appendTrade(nil, id[:], tr)
		if err != nil {
			t.Fatal(err)
		}
		// Exact but for the time's digits (13 of 20) and a buy's type,
		// where the venue sends the target volume.
		slack := len("-9223372036854775808") - len("1767225600000") + len("sell") - len("buy")
		if bound, n := itemBound(&tr), len(item); bound < n || tr.QuoteQty != "" && bound > n+slack {
			t.Fatalf("%s is %d bytes, sized for %d", item, n, bound)
		}
	}
}

// orSells moves the kept items' marks as marking them one by one would,
// for every count of kept items and of items added before them.
func TestOrSellsMovesEachKeptMark(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for m := 0; m <= MaxTrades; m++ {
		for added := 0; m+added <= MaxTrades; added++ {
			var src, dst, want [(MaxTrades + 63) / 64]uint64
			for k := range src {
				src[k] = rng.Uint64()
			}
			for j := range added { // the new items' own marks
				if rng.IntN(2) == 0 {
					dst[j/64] |= 1 << (j % 64)
				}
			}
			want = dst
			for j := range m {
				if src[j/64]&(1<<(j%64)) != 0 {
					at := j + added
					want[at/64] |= 1 << (at % 64)
				}
			}
			orSells(&dst, &src, m, added)
			if dst != want {
				t.Fatalf("m %d, added %d: %x, want %x", m, added, dst, want)
			}
		}
	}
}
