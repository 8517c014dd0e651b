package sim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

func TestBookInvariants(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 3, Now: c.now, Extra: 20})
	ms := catalog(t, v)
	for _, at := range instants(4) {
		c.set(at)
		for _, m := range ms {
			b, err := v.Book(context.Background(), m.Symbol, 1000)
			if err != nil {
				t.Fatal(err)
			}
			checkBook(t, m.Symbol, b, at, 150)
		}
	}
}

// checkBook checks one book: enough levels, best first, not crossed, a
// spread of a few ticks, plain positive decimals.
func checkBook(t *testing.T, sym string, b venue.Book, at time.Time, minLevels int) {
	t.Helper()
	if b.Time != at.UnixMilli() {
		t.Errorf("%s: Time %d, want %d", sym, b.Time, at.UnixMilli())
	}
	if len(b.Bids) < minLevels || len(b.Asks) < minLevels {
		t.Fatalf("%s: %d bids, %d asks, want at least %d", sym, len(b.Bids), len(b.Asks), minLevels)
	}
	dec := -1
	price := func(l venue.Level) int64 {
		p, d := units(t, l.Price)
		if dec < 0 {
			dec = d
		} else if d != dec {
			t.Fatalf("%s: price %q has %d decimals, others %d", sym, l.Price, d, dec)
		}
		if size, _ := units(t, l.Size); p <= 0 || size <= 0 {
			t.Fatalf("%s: level %+v not positive", sym, l)
		}
		return p
	}
	// The tick is the greatest common divisor of the gaps between levels.
	var tick int64
	gcd := func(a, b int64) int64 {
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	prev := int64(1 << 62)
	for i, l := range b.Bids {
		p := price(l)
		if p >= prev {
			t.Fatalf("%s: bids not strictly descending at %s", sym, l.Price)
		}
		if i > 0 {
			tick = gcd(tick, prev-p)
		}
		prev = p
	}
	prev = 0
	for i, l := range b.Asks {
		p := price(l)
		if p <= prev {
			t.Fatalf("%s: asks not strictly ascending at %s", sym, l.Price)
		}
		if i > 0 {
			tick = gcd(tick, p-prev)
		}
		prev = p
	}
	bid, _ := units(t, b.Bids[0].Price)
	ask, _ := units(t, b.Asks[0].Price)
	if bid >= ask {
		t.Fatalf("%s: crossed book %s / %s", sym, b.Bids[0].Price, b.Asks[0].Price)
	}
	// A few ticks: the widest spread the venue draws is six.
	if spread := (ask - bid) / tick; spread > 6 || (ask-bid)%tick != 0 {
		t.Errorf("%s: spread %s / %s is not 1..6 ticks of %d", sym, b.Bids[0].Price, b.Asks[0].Price, tick)
	}
}

func TestBookDepth(t *testing.T) {
	v := New(Config{Now: fixed(t0)})
	ctx := context.Background()
	for _, tc := range []struct{ depth, want int }{
		{1, 1}, {5, 5}, {100, 100}, {150, 150}, {1000, 1000}, {5000, 1000}, {0, 500}, {-3, 500},
	} {
		b, err := v.Book(ctx, "BTCUSDT", tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Bids) != tc.want || len(b.Asks) != tc.want {
			t.Errorf("depth %d: %d/%d levels, want %d", tc.depth, len(b.Bids), len(b.Asks), tc.want)
		}
	}
	// A shallower read is a prefix of a deeper one at the same instant.
	small, _ := v.Book(ctx, "ETHUSDT", 20)
	big, _ := v.Book(ctx, "ETHUSDT", 1000)
	if !reflect.DeepEqual(small.Bids, big.Bids[:20]) || !reflect.DeepEqual(small.Asks, big.Asks[:20]) {
		t.Error("depth 20 is not the head of depth 1000")
	}
}

func TestBookMoves(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 11, Now: c.now})
	ctx := context.Background()
	for _, sym := range []string{"BTCUSDT", "1000PEPEUSDT", "LINKUSDT"} {
		c.set(t0)
		var last venue.Book
		for i := range 30 {
			b, err := v.Book(ctx, sym, 100)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && (reflect.DeepEqual(b.Bids, last.Bids) || reflect.DeepEqual(b.Asks, last.Asks)) {
				t.Fatalf("%s: book unchanged after 350 ms (step %d)", sym, i)
			}
			last = b
			c.add(350 * time.Millisecond)
		}
	}
	// Within one heartbeat the book stands still; only its time moves.
	c.set(time.UnixMilli(t0.UnixMilli() / tickMs * tickMs))
	a, _ := v.Book(ctx, "BTCUSDT", 100)
	c.add(99 * time.Millisecond)
	b, _ := v.Book(ctx, "BTCUSDT", 100)
	if !reflect.DeepEqual(a.Bids, b.Bids) || !reflect.DeepEqual(a.Asks, b.Asks) || b.Time-a.Time != 99 {
		t.Error("book changed within one heartbeat")
	}
	// Over a day the price actually travels.
	c.set(t0)
	q1, _ := v.Quotes(ctx)
	c.add(6 * time.Hour)
	q2, _ := v.Quotes(ctx)
	if q1[0].Bid == q2[0].Bid {
		t.Error("BTC price did not move in six hours")
	}
}
