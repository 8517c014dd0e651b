package sim

import (
	"context"
	"errors"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

// The venue must satisfy the interface the poller consumes.
var _ venue.Venue = (*Venue)(nil)

// t0 is an arbitrary instant with a non-round millisecond part.
var t0 = time.UnixMilli(1_767_225_600_123) // 2026-01-01T00:00:00.123Z

var (
	plain      = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	assetForm  = regexp.MustCompile(`^[A-Z0-9]{2,15}$`)
	tickerForm = regexp.MustCompile(`^[A-Z0-9]{2,15}_[A-Z0-9]{2,15}$`)
)

// clock is a settable venue clock; tests step it instead of sleeping.
type clock struct{ ms atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ms.Store(t.UnixMilli())
	return c
}

func (c *clock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *clock) set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

// instants spreads n reads over two days, off any round boundary.
func instants(n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t0.Add(time.Duration(i)*(47*time.Minute+13*time.Second) + time.Duration(i*37)*time.Millisecond)
	}
	return out
}

// units reads a plain decimal as an integer count of its last digit, for
// comparing prices of one market (which all print the same decimals). It is
// a hand-rolled check rather than the regexp because it runs for every level
// of thousands of books.
func units(t *testing.T, s string) (int64, int) {
	t.Helper()
	whole, frac, dot := strings.Cut(s, ".")
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || whole == "" || dot && frac == "" || s[0] == '+' || whole[0] == '-' && len(whole) == 1 {
		t.Fatalf("not a plain decimal: %q", s)
	}
	return v, len(frac)
}

func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	if !plain.MatchString(s) {
		t.Fatalf("not a plain decimal: %q", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("parse %q", s)
	}
	return r
}

func positive(t *testing.T, what, s string) {
	t.Helper()
	if !plain.MatchString(s) || s[0] == '-' || strings.Trim(s, "0.") == "" {
		t.Errorf("%s = %q, want a positive plain decimal", what, s)
	}
}

func catalog(t *testing.T, v *Venue) []venue.Market {
	t.Helper()
	c, err := v.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.Markets
}

func find(ms []venue.Market, symbol string) (venue.Market, bool) {
	for _, m := range ms {
		if m.Symbol == symbol {
			return m, true
		}
	}
	return venue.Market{}, false
}

// reading is everything the venue serves at one instant.
type reading struct {
	Catalog venue.Catalog
	Stats   []venue.Stat
	Quotes  []venue.Quote
	Books   map[string]venue.Book
	Trades  map[string][]venue.Trade
	Depth   map[string]venue.DepthUpdate
}

var probe = []string{"BTCUSDT", "1000PEPEUSDT", "DOGEUSDT", "ADAUSDT", "BTCUSDT_261225"}

func readAll(t *testing.T, v *Venue, reverse bool) reading {
	t.Helper()
	ctx := context.Background()
	r := reading{Books: map[string]venue.Book{}, Trades: map[string][]venue.Trade{}, Depth: map[string]venue.DepthUpdate{}}
	syms := append([]string(nil), probe...)
	if reverse {
		for i, j := 0, len(syms)-1; i < j; i, j = i+1, j-1 {
			syms[i], syms[j] = syms[j], syms[i]
		}
	}
	var err error
	do := []func(){
		func() { r.Catalog, err = v.Catalog(ctx) },
		func() { r.Stats, err = v.Stats(ctx) },
		func() { r.Quotes, err = v.Quotes(ctx) },
		func() {
			for _, s := range syms {
				b, err := v.Book(ctx, s, 200)
				if err != nil {
					t.Fatal(err)
				}
				r.Books[s] = b
			}
		},
		func() {
			for _, s := range syms {
				tr, err := v.Trades(ctx, s, 300)
				if err != nil {
					t.Fatal(err)
				}
				r.Trades[s] = tr
			}
		},
		func() {
			for _, s := range syms {
				u, err := v.DepthUpdate(s, Heartbeat(v.now()))
				if err != nil {
					t.Fatal(err)
				}
				r.Depth[s] = u
			}
		},
	}
	for i := range do {
		if reverse {
			i = len(do) - 1 - i
		}
		do[i]()
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestDeterministic(t *testing.T) {
	a := readAll(t, New(Config{Seed: 7, Now: fixed(t0)}), false)
	b := readAll(t, New(Config{Seed: 7, Now: fixed(t0)}), true)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed and instant, different answers")
	}
	// The same venue read twice at the same instant, after reads at other
	// instants: nothing depends on history.
	c := newClock(t0)
	v := New(Config{Seed: 7, Now: c.now})
	c.add(time.Hour)
	readAll(t, v, false)
	c.set(t0)
	if got := readAll(t, v, true); !reflect.DeepEqual(a, got) {
		t.Fatal("answer depends on earlier reads")
	}

	d := readAll(t, New(Config{Seed: 8, Now: fixed(t0)}), false)
	if reflect.DeepEqual(a.Books, d.Books) {
		t.Error("different seeds, same books")
	}
	if reflect.DeepEqual(a.Trades, d.Trades) {
		t.Error("different seeds, same trades")
	}
	if reflect.DeepEqual(a.Depth, d.Depth) {
		t.Error("different seeds, same depth updates")
	}
	if reflect.DeepEqual(a.Stats, d.Stats) {
		t.Error("different seeds, same stats")
	}
	if !reflect.DeepEqual(a.Catalog, d.Catalog) {
		t.Error("the catalog should not depend on the seed")
	}
}

func TestConcurrentReadsAgree(t *testing.T) {
	v := New(Config{Seed: 1, Now: fixed(t0)})
	want, err := v.Book(context.Background(), "ETHUSDT", 100)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := v.Book(context.Background(), "ETHUSDT", 100)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Error("concurrent read differs")
					return
				}
				if _, err := v.Trades(context.Background(), "ETHUSDT", 100); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDecimalsPlain(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 5, Now: c.now, Extra: 10})
	ctx := context.Background()
	ms := catalog(t, v)
	check := func(what, s string) {
		t.Helper()
		if !plain.MatchString(s) {
			t.Fatalf("%s = %q, not a plain decimal", what, s)
		}
		positive(t, what, s)
	}
	for _, at := range instants(3) {
		c.set(at)
		stats, err := v.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			check(s.Symbol+" last", s.LastPrice)
			check(s.Symbol+" high", s.High)
			check(s.Symbol+" low", s.Low)
			check(s.Symbol+" quote volume", s.QuoteVolume)
			if s.BaseVolume != "" {
				check(s.Symbol+" base volume", s.BaseVolume)
			}
		}
		quotes, err := v.Quotes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range quotes {
			check(q.Symbol+" bid", q.Bid)
			check(q.Symbol+" ask", q.Ask)
		}
		for _, m := range ms {
			trades, err := v.Trades(ctx, m.Symbol, 300)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trades {
				check(m.Symbol+" trade price", tr.Price)
				check(m.Symbol+" trade size", tr.Size)
				if tr.QuoteQty != "" {
					check(m.Symbol+" trade quote qty", tr.QuoteQty)
				}
			}
		}
	}
}

func TestStats(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 9, Now: c.now, Extra: 5})
	ctx := context.Background()
	ms := catalog(t, v)
	for _, at := range instants(5) {
		c.set(at)
		stats, err := v.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != len(ms) {
			t.Fatalf("%d stats for %d markets", len(stats), len(ms))
		}
		var absent []string
		for i, s := range stats {
			if s.Symbol != ms[i].Symbol {
				t.Fatalf("stat %d is %s, market %s", i, s.Symbol, ms[i].Symbol)
			}
			last, high, low := rat(t, s.LastPrice), rat(t, s.High), rat(t, s.Low)
			if high.Cmp(last) < 0 || last.Cmp(low) < 0 {
				t.Errorf("%s: high %s, last %s, low %s", s.Symbol, s.High, s.LastPrice, s.Low)
			}
			if s.BaseVolume == "" {
				absent = append(absent, s.Symbol)
				continue
			}
			// The average price of the day lies between low and high,
			// allowing for the truncated quote volume.
			avg := new(big.Rat).Quo(rat(t, s.QuoteVolume), rat(t, s.BaseVolume))
			lo := new(big.Rat).Mul(low, big.NewRat(99, 100))
			hi := new(big.Rat).Mul(high, big.NewRat(101, 100))
			if avg.Cmp(lo) < 0 || avg.Cmp(hi) > 0 {
				t.Errorf("%s: quote/base volume %s outside [%s, %s]", s.Symbol, avg.FloatString(8), s.Low, s.High)
			}
		}
		if !reflect.DeepEqual(absent, []string{"ADAUSDT"}) {
			t.Errorf("markets without base volume: %v, want [ADAUSDT]", absent)
		}
		// LastPrice is the newest trade.
		for _, sym := range []string{"BTCUSDT", "ADAUSDT", "SIM003USDT"} {
			tr, err := v.Trades(ctx, sym, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range stats {
				if s.Symbol == sym && s.LastPrice != tr[0].Price {
					t.Errorf("%s: last price %s, newest trade %s", sym, s.LastPrice, tr[0].Price)
				}
			}
		}
	}
}

func TestQuotesMatchBook(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 6, Now: c.now, Extra: 3})
	ctx := context.Background()
	ms := catalog(t, v)
	for _, at := range instants(5) {
		c.set(at)
		quotes, err := v.Quotes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(quotes) != len(ms) {
			t.Fatalf("%d quotes for %d markets", len(quotes), len(ms))
		}
		for i, q := range quotes {
			if q.Symbol != ms[i].Symbol {
				t.Fatalf("quote %d is %s, market %s", i, q.Symbol, ms[i].Symbol)
			}
			b, err := v.Book(ctx, q.Symbol, 5)
			if err != nil {
				t.Fatal(err)
			}
			if q.Bid != b.Bids[0].Price || q.Ask != b.Asks[0].Price {
				t.Errorf("%s: quote %s/%s, book %s/%s", q.Symbol, q.Bid, q.Ask, b.Bids[0].Price, b.Asks[0].Price)
			}
		}
	}
}

func TestUnknownSymbol(t *testing.T) {
	v := New(Config{Now: fixed(t0)})
	ctx := context.Background()
	_, bookErr := v.Book(ctx, "NOPEUSDT", 100)
	_, tradesErr := v.Trades(ctx, "btcusdt", 100)
	for _, err := range []error{bookErr, tradesErr} {
		var se *venue.StatusError
		if !errors.As(err, &se) || se.Status != 400 {
			t.Errorf("err = %v, want a 400 StatusError", err)
		}
	}
	if !strings.Contains(bookErr.Error(), "NOPEUSDT") {
		t.Errorf("error %q does not name the symbol", bookErr)
	}
}

func TestCancelled(t *testing.T) {
	v := New(Config{Now: fixed(t0)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := map[string]error{}
	_, errs["catalog"] = v.Catalog(ctx)
	_, errs["stats"] = v.Stats(ctx)
	_, errs["quotes"] = v.Quotes(ctx)
	_, errs["book"] = v.Book(ctx, "BTCUSDT", 100)
	_, errs["trades"] = v.Trades(ctx, "BTCUSDT", 100)
	for call, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", call, err)
		}
	}
}

func TestAppendDecimal(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		dec  int
		want string
	}{
		{0, 0, "0"}, {5, 0, "5"}, {5, 1, "0.5"}, {5, 3, "0.005"}, {123, 2, "1.23"},
		{100, 2, "1.00"}, {6500010, 2, "65000.10"}, {95000, 7, "0.0095000"}, {-15, 1, "-1.5"},
	} {
		if got := string(appendDecimal(nil, tc.v, tc.dec)); got != tc.want {
			t.Errorf("appendDecimal(%d, %d) = %q, want %q", tc.v, tc.dec, got, tc.want)
		}
	}
}
