package sim

import (
	"context"
	"errors"
	"math/big"
	"reflect"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

// within reports whether |a/b - 1| <= ppm parts per million.
func within(a, b *big.Rat, ppm int64) bool {
	d := new(big.Rat).Quo(a, b)
	d.Sub(d, big.NewRat(1, 1)).Abs(d)
	return d.Cmp(big.NewRat(ppm, 1_000_000)) <= 0
}

// TestContracts: every tradable perpetual has one row, whose values are
// what the venue's premiumIndex gives: a mark at the book's mid, an index
// and settle price near it, a small funding rate and the next funding time
// at 00, 08 or 16 UTC.
func TestContracts(t *testing.T) {
	for _, at := range instants(40) {
		v := New(Config{Seed: 7, Now: fixed(at)})
		rows, invalid, err := v.Contracts(context.Background())
		if err != nil || invalid != 0 {
			t.Fatalf("invalid %d, %v", invalid, err)
		}
		cat, _ := v.Catalog(context.Background())
		quotes, _ := v.Quotes(context.Background())
		var perps []string
		mids := map[string]*big.Rat{}
		for i, m := range cat.Markets {
			if m.Perpetual && m.Trading {
				perps = append(perps, m.Symbol)
			}
			q := quotes[i]
			mids[q.Symbol] = new(big.Rat).Quo(new(big.Rat).Add(rat(t, q.Bid), rat(t, q.Ask)), big.NewRat(2, 1))
		}
		if len(rows) != len(perps) {
			t.Fatalf("%d rows for %d tradable perpetuals", len(rows), len(perps))
		}
		ms := at.UnixMilli()
		for i, r := range rows {
			if r.Symbol != perps[i] {
				t.Fatalf("row %d is %s, want %s", i, r.Symbol, perps[i])
			}
			mark, index, settle, rate := rat(t, r.MarkPrice), rat(t, r.IndexPrice), rat(t, r.SettlePrice), rat(t, r.FundingRate)
			if mark.Cmp(mids[r.Symbol]) != 0 {
				t.Errorf("%s mark %s, mid %s", r.Symbol, r.MarkPrice, mids[r.Symbol].FloatString(8))
			}
			if index.Sign() <= 0 || !within(index, mark, 151) {
				t.Errorf("%s index %s against mark %s", r.Symbol, r.IndexPrice, r.MarkPrice)
			}
			if settle.Sign() <= 0 || !within(settle, mark, 5_000) {
				t.Errorf("%s settle %s against mark %s", r.Symbol, r.SettlePrice, r.MarkPrice)
			}
			if rate.Cmp(big.NewRat(-2, 100_000)) < 0 || rate.Cmp(big.NewRat(22, 100_000)) > 0 || len(r.FundingRate) < 10 {
				t.Errorf("%s funding rate %s", r.Symbol, r.FundingRate)
			}
			next := time.UnixMilli(r.NextFunding).UTC()
			if r.Time != ms || r.NextFunding <= ms || r.NextFunding-ms > fundingInterval ||
				next.Hour()%8 != 0 || next.Minute() != 0 || next.Second() != 0 || next.Nanosecond() != 0 {
				t.Errorf("%s time %d, next funding %s", r.Symbol, r.Time, next)
			}
		}
		if again := v.ContractsAt(ms); !reflect.DeepEqual(again, rows) {
			t.Error("ContractsAt differs from Contracts at the same instant")
		}
	}
}

// TestContractsMove: the values are a function of the instant that moves
// as a venue's do: the mark with the book, the funding rate slowly, and
// both ways across the markets over a day.
func TestContractsMove(t *testing.T) {
	v := New(Config{Seed: 3})
	ms := t0.UnixMilli()
	a, b := v.ContractsAt(ms), v.ContractsAt(ms+1000)
	if reflect.DeepEqual(a, b) {
		t.Fatal("nothing changed in a second")
	}
	var marks, negative, positive int
	for i := range a {
		if a[i].MarkPrice != b[i].MarkPrice {
			marks++
		}
		step := new(big.Rat).Sub(rat(t, a[i].FundingRate), rat(t, b[i].FundingRate))
		if step.Abs(step).Cmp(big.NewRat(1, 1_000_000)) > 0 {
			t.Errorf("%s funding moved from %s to %s in a second", a[i].Symbol, a[i].FundingRate, b[i].FundingRate)
		}
	}
	if marks == 0 {
		t.Error("no mark price moved in a second")
	}
	for h := range 48 {
		for _, r := range v.ContractsAt(ms + int64(h)*3600_000) {
			if r.FundingRate[0] == '-' {
				negative++
			} else {
				positive++
			}
		}
	}
	if negative == 0 || positive < 10*negative {
		t.Errorf("%d negative and %d positive funding rates over two days", negative, positive)
	}
	if reflect.DeepEqual(New(Config{Seed: 4}).ContractsAt(ms), a) {
		t.Error("another seed gives the same contracts")
	}
}

func TestOpenInterest(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 7, Now: c.now})
	ctx := context.Background()
	first, err := v.OpenInterest(ctx, "BTCUSDT")
	if err != nil || first.Symbol != "BTCUSDT" || first.Time != t0.UnixMilli() {
		t.Fatalf("%+v, %v", first, err)
	}
	base := rat(t, first.Amount)
	if base.Sign() <= 0 || len(first.Amount) < 5 || first.Amount[len(first.Amount)-4] != '.' {
		t.Errorf("open interest %q: want a positive amount in BTCUSDT's 3 size decimals", first.Amount)
	}
	moved := false
	for range 24 {
		c.add(time.Hour)
		oi, err := v.OpenInterest(ctx, "BTCUSDT")
		if err != nil {
			t.Fatal(err)
		}
		moved = moved || oi.Amount != first.Amount
		if !within(rat(t, oi.Amount), base, 250_000) {
			t.Errorf("open interest %s far from %s", oi.Amount, first.Amount)
		}
	}
	if !moved {
		t.Error("open interest never moved in a day")
	}
	// Every listed market has an open interest, dated futures included.
	cat, _ := v.Catalog(ctx)
	for _, m := range cat.Markets {
		if oi, err := v.OpenInterest(ctx, m.Symbol); err != nil || rat(t, oi.Amount).Sign() <= 0 {
			t.Errorf("%s: %+v, %v", m.Symbol, oi, err)
		}
	}
	var se *venue.StatusError
	if _, err := v.OpenInterest(ctx, "NOPEUSDT"); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("unknown symbol: %v, want a 400 StatusError", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.OpenInterest(cancelled, "BTCUSDT"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled OpenInterest: %v", err)
	}
	if _, _, err := v.Contracts(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Contracts: %v", err)
	}
	if v.ContractsWeight() != 0 || v.OpenInterestWeight() != 0 {
		t.Error("the simulator charges no weight")
	}
}
