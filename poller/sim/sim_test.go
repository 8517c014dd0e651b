package sim

import (
	"context"
	"errors"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
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

func TestCatalog(t *testing.T) {
	v := New(Config{})
	c, err := v.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.WeightLimit != 0 {
		t.Errorf("WeightLimit = %d, want 0", c.WeightLimit)
	}
	for call := venue.CallCatalog; call <= venue.CallTrades; call++ {
		if w := v.Weight(call); w != 0 {
			t.Errorf("Weight(%s) = %d, want 0", call, w)
		}
	}
	if v.Name() != "sim" {
		t.Errorf("Name() = %q", v.Name())
	}

	seen := map[string]bool{}
	var tradablePerps, settling, dated, odd, usdc int
	for _, m := range c.Markets {
		if seen[m.Symbol] {
			t.Errorf("duplicate symbol %s", m.Symbol)
		}
		seen[m.Symbol] = true
		fits := assetForm.MatchString(m.Base) && assetForm.MatchString(m.Quote)
		switch {
		case !fits && m.Symbol == "SUPERLONGMEMECOINUSDT":
			odd++
		case !fits:
			t.Errorf("%s: base %q / quote %q do not fit the ticker form", m.Symbol, m.Base, m.Quote)
		}
		switch {
		case !m.Perpetual:
			dated++
			if !strings.HasPrefix(m.Symbol, m.Base+m.Quote+"_") {
				t.Errorf("dated future %s: symbol should be BASEQUOTE_YYMMDD", m.Symbol)
			}
		case !m.Trading:
			settling++
		default:
			if fits {
				tradablePerps++
			}
			if m.Quote == "USDC" {
				usdc++
			}
		}
		if m.Perpetual && m.Symbol != m.Base+m.Quote {
			t.Errorf("perpetual %s is not base+quote (%s+%s)", m.Symbol, m.Base, m.Quote)
		}
	}
	if tradablePerps < 40 {
		t.Errorf("%d publishable perpetuals, want at least 40", tradablePerps)
	}
	if settling < 2 || dated < 2 || odd != 1 || usdc < 2 {
		t.Errorf("settling %d, dated %d, odd %d, usdc %d", settling, dated, odd, usdc)
	}

	for sym, base := range map[string]string{
		"1000PEPEUSDT":   "1000PEPE",
		"1000SHIBUSDT":   "1000SHIB",
		"1MBABYDOGEUSDT": "1MBABYDOGE",
		"1INCHUSDT":      "1INCH",
		"BTCUSDT":        "BTC",
	} {
		m, ok := find(c.Markets, sym)
		if !ok || m.Base != base || m.Quote != "USDT" || !m.Perpetual || !m.Trading {
			t.Errorf("%s: got %+v, want tradable perpetual with base %s", sym, m, base)
		}
	}
	if m, ok := find(c.Markets, "OCEANUSDT"); !ok || !m.Perpetual || m.Trading {
		t.Errorf("OCEANUSDT: %+v, want a non-tradable perpetual", m)
	}
	if m, ok := find(c.Markets, "BTCUSDT_261225"); !ok || m.Perpetual || m.Base != "BTC" {
		t.Errorf("BTCUSDT_261225: %+v, want a dated BTC future", m)
	}

	// The caller owns the slice.
	c.Markets[0].Symbol = "MUTATED"
	if again := catalog(t, v); again[0].Symbol == "MUTATED" {
		t.Error("Catalog shares its slice between calls")
	}
}

func TestDefaultSpot(t *testing.T) {
	ms := catalog(t, New(Config{}))
	tradable := map[string]bool{}
	for _, m := range ms {
		if m.Perpetual && m.Trading {
			tradable[m.Base+"_"+m.Quote] = true
		}
	}
	if len(DefaultSpot) < 10 {
		t.Errorf("DefaultSpot has %d ids, want about 10", len(DefaultSpot))
	}
	for _, id := range DefaultSpot {
		if !tickerForm.MatchString(id) {
			t.Errorf("%q is not a ticker_id", id)
		}
		if id == "PEPE_USDT" {
			if tradable[id] {
				t.Error("PEPE_USDT must have no perpetual of its own")
			}
			continue
		}
		if !tradable[id] {
			t.Errorf("%s has no tradable perpetual", id)
		}
	}
	if !tradable["1000PEPE_USDT"] || !tradable["ADA_USDT"] {
		t.Error("1000PEPE_USDT and ADA_USDT should be tradable")
	}
}

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
				prev.ID = tr.ID
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

func BenchmarkBook100(b *testing.B)  { benchBook(b, "BTCUSDT", 100) }
func BenchmarkBook1000(b *testing.B) { benchBook(b, "BTCUSDT", 1000) }

func benchBook(b *testing.B, sym string, depth int) {
	c := newClock(t0)
	v := New(Config{Now: c.now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.add(350 * time.Millisecond)
		if _, err := v.Book(ctx, sym, depth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrades100(b *testing.B)  { benchTrades(b, "BTCUSDT", 100) }
func BenchmarkTrades1000(b *testing.B) { benchTrades(b, "BTCUSDT", 1000) }

func benchTrades(b *testing.B, sym string, limit int) {
	c := newClock(t0)
	v := New(Config{Now: c.now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Trades(ctx, sym, limit); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStats(b *testing.B) {
	c := newClock(t0)
	v := New(Config{Now: c.now, Extra: 500})
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Stats(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuotes(b *testing.B) {
	c := newClock(t0)
	v := New(Config{Now: c.now, Extra: 500})
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Quotes(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
