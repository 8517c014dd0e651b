package sim

import (
	"context"
	"math/big"
	"reflect"
	"slices"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

func TestTrades(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 2, Now: c.now})
	ctx := context.Background()
	for _, sym := range []string{"BTCUSDT", "XRPUSDT", "1MBABYDOGEUSDT", "ETHUSDT_260925"} {
		c.set(t0)
		trades, err := v.Trades(ctx, sym, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(trades) != 1000 {
			t.Fatalf("%s: %d trades, want 1000", sym, len(trades))
		}
		var buys, sells, dups int
		for i, tr := range trades {
			if tr.Time > t0.UnixMilli() {
				t.Fatalf("%s: trade at %d after now %d", sym, tr.Time, t0.UnixMilli())
			}
			if i > 0 {
				if tr.Time < trades[i-1].Time {
					t.Fatalf("%s: trades not oldest first at %d", sym, i)
				}
				if tr.ID <= trades[i-1].ID {
					t.Fatalf("%s: trade ids not increasing at %d: %d after %d", sym, i, tr.ID, trades[i-1].ID)
				}
				// Identical in every published field; only the venue id
				// tells the two apart.
				prev := trades[i-1]
				prev.ID, prev.LastID = tr.ID, tr.LastID
				if tr == prev {
					dups++
				}
			}
			if tr.Sell {
				sells++
			} else {
				buys++
			}
		}
		if buys < 300 || sells < 300 {
			t.Errorf("%s: %d buys, %d sells", sym, buys, sells)
		}
		if dups == 0 {
			t.Errorf("%s: no identical trades in 1000", sym)
		}

		// Trades trade at the book: buyers at or above the ask of their
		// heartbeat, sellers at or below the bid.
		last := trades[len(trades)-1]
		c.set(time.UnixMilli(last.Time))
		b, _ := v.Book(ctx, sym, 1)
		p, _ := units(t, last.Price)
		bid, _ := units(t, b.Bids[0].Price)
		ask, _ := units(t, b.Asks[0].Price)
		if last.Sell && p > bid || !last.Sell && p < ask {
			t.Errorf("%s: trade %+v outside book %s/%s", sym, last, b.Bids[0].Price, b.Asks[0].Price)
		}
	}
}

func TestTradesLimitAndHistory(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 2, Now: c.now})
	ctx := context.Background()
	for _, tc := range []struct{ limit, want int }{{1, 1}, {10, 10}, {100, 100}, {1000, 1000}, {5000, 1000}, {0, 500}, {-1, 500}} {
		trades, err := v.Trades(ctx, "ETHUSDT", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(trades) != tc.want {
			t.Errorf("limit %d: %d trades, want %d", tc.limit, len(trades), tc.want)
		}
	}
	// A smaller limit is the newest tail of a larger one.
	few, _ := v.Trades(ctx, "ETHUSDT", 10)
	many, _ := v.Trades(ctx, "ETHUSDT", 100)
	if !reflect.DeepEqual(few, many[90:]) {
		t.Error("limit 10 is not the tail of limit 100")
	}
	// The past does not change: ten seconds later the same trades are still
	// there, followed by newer ones.
	c.add(10 * time.Second)
	later, _ := v.Trades(ctx, "ETHUSDT", 1000)
	i := len(later) - 1
	for i >= 0 && later[i].Time > t0.UnixMilli() {
		i--
	}
	if i < 99 || !reflect.DeepEqual(later[i-99:i+1], many) {
		t.Error("history rewritten between reads")
	}
	if i == len(later)-1 {
		t.Error("no new trades in ten seconds")
	}
}

// A read from an id returns the same trades, with the same ids, as the
// newest trades do, from that id on: the trades a window missed.
func TestTradesFromAnID(t *testing.T) {
	v := New(Config{Seed: 2, Now: fixed(t0)})
	ctx := context.Background()
	for _, sym := range []string{"ETHUSDT", "DOGEUSDT", "LTCUSDT"} {
		newest, err := v.Trades(ctx, sym, 300)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{0, 1, 150, 299} {
			for _, limit := range []int{1, 5, 100} {
				got, err := v.TradesFrom(ctx, sym, newest[at].ID, limit)
				if err != nil {
					t.Fatal(err)
				}
				if want := newest[at:min(at+limit, len(newest))]; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s from id %d limit %d:\n%v\nwant\n%v", sym, newest[at].ID, limit, got, want)
				}
			}
		}
		if got, _ := v.TradesFrom(ctx, sym, newest[299].ID+1, 100); len(got) != 0 {
			t.Errorf("%s: %d trades after the newest, want none", sym, len(got))
		}
		// An id older than the venue keeps starts at its oldest trade.
		old, err := v.TradesFrom(ctx, sym, 0, 1000)
		if err != nil || len(old) != 1000 || old[0].ID > newest[0].ID || old[999].ID < old[0].ID {
			t.Errorf("%s from id 0: %d trades (%v), want the 1000 oldest, ids rising", sym, len(old), err)
		}
	}
	if _, err := v.TradesFrom(ctx, "NOPEUSDT", 1, 10); err == nil {
		t.Error("an unknown symbol read without an error")
	}
}

// Where an era of ids begins, the ids skip (see tradeStart): a read from
// an id in the skipped range starts at the era's first trade, and reads
// across the start return what the newest trades hold.
func TestTradesFromAcrossAnEra(t *testing.T) {
	start := time.UnixMilli(7 * eraBuckets * tickMs).Add(30 * time.Second)
	v := New(Config{Seed: 3, Now: fixed(start)})
	ctx := context.Background()
	newest, err := v.Trades(ctx, "ETHUSDT", 1000)
	if err != nil {
		t.Fatal(err)
	}
	skip := slices.IndexFunc(newest[1:], func(tr venue.Trade) bool { return tr.Time >= 7*eraBuckets*tickMs }) + 1
	if skip <= 0 || newest[skip].ID <= newest[skip-1].ID+1 {
		t.Fatalf("no skip of ids where the era begins in the newest 1000 trades (at %d)", skip)
	}
	for _, at := range []int{skip - 3, skip - 1, skip, skip + 1} {
		got, err := v.TradesFrom(ctx, "ETHUSDT", newest[at].ID, 5)
		if err != nil || !reflect.DeepEqual(got, newest[at:at+5]) {
			t.Fatalf("from id %d: %v, %v; want %v", newest[at].ID, got, err, newest[at:at+5])
		}
	}
	got, err := v.TradesFrom(ctx, "ETHUSDT", newest[skip-1].ID+1, 2)
	if err != nil || !reflect.DeepEqual(got, newest[skip:skip+2]) {
		t.Fatalf("from a skipped id: %v, %v; want the era's first trades %v", got, err, newest[skip:skip+2])
	}
}

func TestQuoteQty(t *testing.T) {
	v := New(Config{Seed: 4, Now: fixed(t0)})
	ctx := context.Background()
	doge, err := v.Trades(ctx, "DOGEUSDT", 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range doge {
		if tr.QuoteQty != "" {
			t.Fatalf("DOGEUSDT trade has quote qty %q, want none", tr.QuoteQty)
		}
	}
	for _, sym := range []string{"BTCUSDT", "1000PEPEUSDT", "LTCUSDT"} {
		trades, err := v.Trades(ctx, sym, 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trades {
			want := new(big.Rat).Mul(rat(t, tr.Price), rat(t, tr.Size))
			if tr.QuoteQty == "" || rat(t, tr.QuoteQty).Cmp(want) != 0 {
				t.Fatalf("%s: quote qty %q, want %s × %s", sym, tr.QuoteQty, tr.Price, tr.Size)
			}
		}
	}
}
