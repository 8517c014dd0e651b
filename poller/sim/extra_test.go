package sim

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

func TestExtra(t *testing.T) {
	base := len(catalog(t, New(Config{})))
	c := newClock(t0)
	v := New(Config{Seed: 1, Now: c.now, Extra: 500})
	ms := catalog(t, v)
	if len(ms) != base+500 {
		t.Fatalf("%d markets, want %d", len(ms), base+500)
	}
	for i, want := range map[int]string{0: "SIM001", 8: "SIM009", 499: "SIM500"} {
		m := ms[base+i]
		if m.Symbol != want+"USDT" || m.Base != want || m.Quote != "USDT" || !m.Perpetual || !m.Trading {
			t.Errorf("extra %d: %+v, want %sUSDT", i, m, want)
		}
	}
	if again := catalog(t, New(Config{Seed: 99, Extra: 500})); !reflect.DeepEqual(again, ms) {
		t.Error("extra markets depend on the seed")
	}
	// Every synthetic market gets a sound book; every 25th a full-depth one
	// at two instants, which covers each price family.
	for i, m := range ms[base:] {
		if !assetForm.MatchString(m.Base) {
			t.Errorf("extra base %q does not fit the form", m.Base)
		}
		depth, at := 150, instants(2)[:1]
		if i%25 == 0 {
			depth, at = 1000, instants(2)
		}
		for _, at := range at {
			c.set(at)
			b, err := v.Book(context.Background(), m.Symbol, depth)
			if err != nil {
				t.Fatal(err)
			}
			checkBook(t, m.Symbol, b, at, depth)
			if _, err := v.Trades(context.Background(), m.Symbol, 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(catalog(t, New(Config{Extra: -4}))) != base {
		t.Error("negative Extra added markets")
	}
}

// The synthetic markets' 1000-level books reach as far as the venue's do:
// a recorded 1000-level Binance book spans 0.6 % of the price for BTCUSDT,
// 17 to 20 % for SUSHIUSDT, and three thinner markets sent fewer than 1000
// bids, all they had. Most synthetic books should reach tens of percent,
// a few be as dense as the majors', and a few thin.
func TestExtraBooksReachAsTheVenuesDo(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 1, Now: c.now, Extra: 800})
	ms := catalog(t, v)
	ms = ms[len(ms)-800:]
	price := func(l venue.Level) float64 {
		f, err := strconv.ParseFloat(l.Price, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var spans []float64
	thin := 0
	for _, m := range ms {
		b, err := v.Book(context.Background(), m.Symbol, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Asks) != 1000 {
			t.Fatalf("%s: %d asks, want 1000", m.Symbol, len(b.Asks))
		}
		best, worst := price(b.Bids[0]), price(b.Bids[len(b.Bids)-1])
		if len(b.Bids) < 1000 {
			// A thin book sends every bid there is, down to near zero.
			if worst > best/10 {
				t.Fatalf("%s: %d bids down to %v from %v: a short side must be the whole side", m.Symbol, len(b.Bids), worst, best)
			}
			thin++
			continue
		}
		spans = append(spans, (best-worst)/best)
	}
	slices.Sort(spans)
	median, dense := spans[len(spans)/2], spans[len(spans)/20]
	t.Logf("1000 bids span: median %.1f%%, 5th percentile %.2f%%; %d of 800 books thin", 100*median, 100*dense, thin)
	if median < 0.08 || median > 0.4 {
		t.Errorf("median 1000-bid span %.1f%%, want the venue's tens of percent", 100*median)
	}
	if dense > 0.03 {
		t.Errorf("5th percentile span %.2f%%: no synthetic book is as dense as a major's", 100*dense)
	}
	if thin < 8 || thin > 120 {
		t.Errorf("%d thin books of 800, want a few", thin)
	}
}

// The price path moves at about the venue's pace, on the busy side of it:
// a recorded BTCUSDT trade tape ranges over 0.047 % of the price in 9 s and
// a recorded LTCUSDT aggregate trade tape over 0.06 % in 164 s. The median
// range of 40 such windows of the simulated mid must not be below that, nor
// above ten times it (BTC) or six and a half (LTC), so that local books run
// through their levels not much faster than a busy venue's.
func TestPricePathPace(t *testing.T) {
	for _, tc := range []struct {
		symbol   string
		span     time.Duration
		venue    float64 // the recorded range, percent of the price
		low, top float64 // bounds of the simulated median, percent
	}{
		{"BTCUSDT", 9 * time.Second, 0.047, 0.01, 0.47},
		{"LTCUSDT", 164 * time.Second, 0.06, 0.06, 0.4},
	} {
		c := newClock(t0)
		v := New(Config{Seed: 1, Now: c.now})
		var ranges []float64
		for i := range 40 {
			start := t0.Add(time.Duration(i) * 97 * time.Minute)
			lo, hi := math.Inf(1), 0.0
			for d := time.Duration(0); d <= tc.span; d += time.Second {
				c.set(start.Add(d))
				quotes, err := v.Quotes(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range quotes {
					if q.Symbol == tc.symbol {
						bid, _ := strconv.ParseFloat(q.Bid, 64)
						ask, _ := strconv.ParseFloat(q.Ask, 64)
						lo, hi = min(lo, (bid+ask)/2), max(hi, (bid+ask)/2)
					}
				}
			}
			ranges = append(ranges, 100*(hi-lo)/lo)
		}
		slices.Sort(ranges)
		median := ranges[len(ranges)/2]
		t.Logf("%s over %v: median range %.3f%% (the venue's recorded window %.3f%%)", tc.symbol, tc.span, median, tc.venue)
		if median < tc.low || median > tc.top {
			t.Errorf("%s over %v: median range %.3f%%, want within [%.2f%%, %.2f%%]", tc.symbol, tc.span, median, tc.low, tc.top)
		}
	}
}
