package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// localBook is a book kept from a snapshot and diff events, as a stream
// consumer keeps one: price → size per side.
type localBook struct{ bids, asks map[string]string }

func newLocal(b venue.Book) localBook {
	l := localBook{bids: map[string]string{}, asks: map[string]string{}}
	for _, x := range b.Bids {
		l.bids[x.Price] = x.Size
	}
	for _, x := range b.Asks {
		l.asks[x.Price] = x.Size
	}
	return l
}

func (l localBook) apply(u venue.DepthUpdate) {
	for _, side := range []struct {
		book   map[string]string
		levels []venue.Level
	}{{l.bids, u.Bids}, {l.asks, u.Asks}} {
		for _, x := range side.levels {
			if x.Size == "0" {
				delete(side.book, x.Price) // removing an absent level is normal
			} else {
				side.book[x.Price] = x.Size
			}
		}
	}
}

// sameWithin checks that the local book agrees with the truth at every price
// both cover: on each side, from the best price out to the shallower of the
// two books' last levels.
func sameWithin(t *testing.T, what string, local localBook, truth, snap venue.Book) {
	t.Helper()
	for _, side := range []struct {
		name        string
		local       map[string]string
		truth, snap []venue.Level
		beyond      func(p, edge int64) bool // p is further out than edge
	}{
		{"bids", local.bids, truth.Bids, snap.Bids, func(p, edge int64) bool { return p < edge }},
		{"asks", local.asks, truth.Asks, snap.Asks, func(p, edge int64) bool { return p > edge }},
	} {
		edge, _ := units(t, side.truth[len(side.truth)-1].Price)
		if e, _ := units(t, side.snap[len(side.snap)-1].Price); side.beyond(edge, e) {
			edge = e
		}
		want := map[string]string{}
		for _, x := range side.truth {
			if p, _ := units(t, x.Price); !side.beyond(p, edge) {
				want[x.Price] = x.Size
			}
		}
		got := map[string]string{}
		for price, size := range side.local {
			if p, _ := units(t, price); !side.beyond(p, edge) {
				got[price] = size
			}
		}
		if len(want) < 100 {
			t.Fatalf("%s %s: only %d levels covered", what, side.name, len(want))
		}
		if !maps.Equal(got, want) {
			for p, s := range want {
				if got[p] != s {
					t.Errorf("%s %s: at %s local %q, venue %q", what, side.name, p, got[p], s)
				}
			}
			for p, s := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("%s %s: local has %s %s, venue none", what, side.name, p, s)
				}
			}
			t.FailNow()
		}
	}
}

var depthProbe = []string{"BTCUSDT", "1000PEPEUSDT", "DOGEUSDT", "SUPERLONGMEMECOINUSDT", "ETHUSDT_260925", "SIM002USDT"}

// One event applied to the book at its Prev gives the book at its Last,
// for heartbeat after heartbeat, including those where the top moves.
func TestDepthUpdateApplies(t *testing.T) {
	v := New(Config{Seed: 12, Extra: 3})
	for _, sym := range depthProbe {
		for _, start := range instants(2) {
			k0 := Heartbeat(start)
			var topMoves int
			id, _ := v.UpdateID(sym, k0-1)
			after := bookAt(t, v, sym, id, 1000)
			for k := k0; k < k0+100; k++ {
				u := depthUpdate(t, v, sym, k)
				before := after
				if before.LastUpdateID != u.Prev {
					t.Fatalf("%s: pu %d, previous u %d", sym, u.Prev, before.LastUpdateID)
				}
				after = bookAt(t, v, sym, u.Last, 1000)
				if before.Bids[0].Price != after.Bids[0].Price || before.Asks[0].Price != after.Asks[0].Price {
					topMoves++
				}
				local := newLocal(before)
				local.apply(u)
				sameWithin(t, sym, local, after, before)
			}
			if topMoves < 10 {
				t.Errorf("%s: the top moved in %d of 100 heartbeats, want some", sym, topMoves)
			}
		}
	}
}

// A book kept from one snapshot and a long run of events stays equal to the
// venue's top 100, which is what the poller publishes.
func TestDepthUpdateChain(t *testing.T) {
	v := New(Config{Seed: 3})
	for _, sym := range []string{"BTCUSDT", "XRPUSDT", "1000BONKUSDT"} {
		k := Heartbeat(t0)
		id, err := v.UpdateID(sym, k)
		if err != nil {
			t.Fatal(err)
		}
		snap := bookAt(t, v, sym, id, 1000)
		local := newLocal(snap)
		// The venue's procedure applies first the event with U <= lastUpdateId
		// <= u: the snapshot's own heartbeat, whose absolute sizes the
		// snapshot already holds.
		if u := depthUpdate(t, v, sym, k); u.First > id || u.Last != id {
			t.Fatalf("%s: event U %d u %d does not cover the snapshot's %d", sym, u.First, u.Last, id)
		} else {
			local.apply(u)
		}
		sameWithin(t, sym, local, snap, snap)
		for range 300 {
			k++
			u := depthUpdate(t, v, sym, k)
			if u.Prev != id {
				t.Fatalf("%s: pu %d, previous u %d", sym, u.Prev, id)
			}
			id = u.Last
			local.apply(u)
			sameWithin(t, sym, local, bookAt(t, v, sym, id, 100), snap)
		}
	}
}

// An event spanning many heartbeats is the sum of the single ones.
func TestDepthUpdateSince(t *testing.T) {
	v := New(Config{Seed: 4})
	for _, sym := range []string{"ETHUSDT", "1000SHIBUSDT"} {
		for _, span := range []int64{2, 7, 60, 3000} {
			k := Heartbeat(t0)
			u, err := v.depthUpdateSince(sym, k-span, k)
			if err != nil {
				t.Fatal(err)
			}
			prev, _ := v.UpdateID(sym, k-span)
			last, _ := v.UpdateID(sym, k)
			if u.Prev != prev || u.First != prev+1 || u.Last != last {
				t.Errorf("%s span %d: U %d u %d pu %d, want %d %d %d", sym, span, u.First, u.Last, u.Prev, prev+1, last, prev)
			}
			before := bookAt(t, v, sym, prev, 1000)
			local := newLocal(before)
			local.apply(u)
			sameWithin(t, sym, local, bookAt(t, v, sym, last, 1000), before)
		}
	}
	if _, err := v.depthUpdateSince("ETHUSDT", 10, 10); err == nil {
		t.Error("an empty span gave no error")
	}
}

// Events carry tens of levels, not the whole book, each a plain positive
// decimal or "0", sorted best first, with ids chained as the venue's are.
func TestDepthUpdateForm(t *testing.T) {
	v := New(Config{Seed: 5, Extra: 2})
	for _, sym := range depthProbe {
		k0 := Heartbeat(t0)
		var levels, events int
		for k := k0; k < k0+300; k++ {
			u := depthUpdate(t, v, sym, k)
			prev, _ := v.UpdateID(sym, k-1)
			last, _ := v.UpdateID(sym, k)
			if u.Symbol != sym || u.Prev != prev || u.First != prev+1 || u.Last != last || u.First > u.Last {
				t.Fatalf("%s heartbeat %d: s %s U %d u %d pu %d; ids %d→%d", sym, k, u.Symbol, u.First, u.Last, u.Prev, prev, last)
			}
			if u.Time != k*100 {
				t.Fatalf("%s: T %d, want %d", sym, u.Time, k*100)
			}
			checkSorted(t, sym+" bids", u.Bids, -1)
			checkSorted(t, sym+" asks", u.Asks, +1)
			levels += len(u.Bids) + len(u.Asks)
			events++
		}
		avg := levels / events
		t.Logf("%s: %d levels per event on average", sym, avg)
		if avg < 5 || avg > 120 {
			t.Errorf("%s: %d levels per event on average, want tens", sym, avg)
		}
	}
}

func checkSorted(t *testing.T, what string, levels []venue.Level, dir int64) {
	t.Helper()
	for i, x := range levels {
		if x.Size != "0" {
			positive(t, what+" size", x.Size)
		}
		positive(t, what+" price", x.Price)
		if i > 0 {
			p, _ := units(t, x.Price)
			q, _ := units(t, levels[i-1].Price)
			if (p-q)*dir <= 0 {
				t.Fatalf("%s: %s after %s, not best first", what, x.Price, levels[i-1].Price)
			}
		}
	}
}

// Book is the book at its own update id; BookAt finds the book in force at
// any id between two heartbeats' ids; ids rise with the heartbeat.
func TestUpdateIDs(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Seed: 6, Now: c.now})
	ctx := context.Background()
	for _, sym := range []string{"BTCUSDT", "LINKUSDT"} {
		for _, at := range instants(4) {
			c.set(at)
			b, err := v.Book(ctx, sym, 1000)
			if err != nil {
				t.Fatal(err)
			}
			k := Heartbeat(at)
			id, _ := v.UpdateID(sym, k)
			next, _ := v.UpdateID(sym, k+1)
			if b.LastUpdateID != id || next <= id {
				t.Fatalf("%s: book id %d, heartbeat ids %d then %d", sym, b.LastUpdateID, id, next)
			}
			for _, at := range []int64{id, (id + next) / 2, next - 1} {
				got := bookAt(t, v, sym, at, 1000)
				if got.LastUpdateID != id || got.Time != k*100 {
					t.Errorf("%s: BookAt(%d) has id %d time %d, want %d %d", sym, at, got.LastUpdateID, got.Time, id, k*100)
				}
				if !reflect.DeepEqual(got.Bids, b.Bids) || !reflect.DeepEqual(got.Asks, b.Asks) {
					t.Fatalf("%s: BookAt(%d) differs from Book at id %d", sym, at, id)
				}
			}
			if got := bookAt(t, v, sym, next, 5); got.LastUpdateID != next {
				t.Errorf("%s: BookAt(%d) has id %d", sym, next, got.LastUpdateID)
			}
		}
		prev := int64(0)
		for k := Heartbeat(t0); k < Heartbeat(t0)+5000; k++ {
			id, _ := v.UpdateID(sym, k)
			if id <= prev {
				t.Fatalf("%s: update id %d after %d", sym, id, prev)
			}
			prev = id
		}
	}
	var se *venue.StatusError
	if _, err := v.BookAt("NOPEUSDT", 5, 10); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("unknown symbol: %v, want a 400 StatusError", err)
	}
	if _, err := v.BookAt("BTCUSDT", 0, 10); err == nil {
		t.Error("update id 0 gave no error")
	}
	if _, err := v.DepthUpdate("NOPEUSDT", 5); !errors.As(err, &se) {
		t.Errorf("unknown symbol: %v, want a StatusError", err)
	}
}

// The trades REST returns carry the ids the stream sends for them.
func TestTradeIDsAgree(t *testing.T) {
	v := New(Config{Seed: 2, Now: fixed(t0)})
	for _, sym := range []string{"BTCUSDT", "DOGEUSDT", "ETHUSDT_260925"} {
		trades, err := v.Trades(context.Background(), sym, 1000)
		if err != nil {
			t.Fatal(err)
		}
		streamed := map[int64]venue.Trade{}
		for k := Heartbeat(time.UnixMilli(trades[0].Time)); k <= Heartbeat(t0); k++ {
			hb, err := v.heartbeatTrades(sym, k)
			if err != nil {
				t.Fatal(err)
			}
			for i, tr := range hb {
				if Heartbeat(time.UnixMilli(tr.Time)) != k || i > 0 && tr.ID <= hb[i-1].ID {
					t.Fatalf("%s heartbeat %d: trade %+v out of place", sym, k, tr)
				}
				streamed[tr.ID] = tr
			}
		}
		for i, tr := range trades {
			if streamed[tr.ID] != tr {
				t.Fatalf("%s: REST trade %+v, stream %+v", sym, tr, streamed[tr.ID])
			}
			if i > 0 && tr.ID != trades[i-1].ID+1 {
				t.Fatalf("%s: trade id %d after %d: ids are consecutive, as the venue's", sym, tr.ID, trades[i-1].ID)
			}
			if tr.LastID != tr.ID {
				t.Fatalf("%s: trade %+v covers single trade %d, want its own id: the simulator aggregates nothing", sym, tr, tr.LastID)
			}
		}
		// The newest single trade is the newest trade: what a window
		// ending in it proves it missed nothing with.
		newest, err := v.NewestTradeID(context.Background(), sym)
		if err != nil || newest != trades[len(trades)-1].LastID {
			t.Fatalf("%s: newest single trade %d, %v; want %d", sym, newest, err, trades[len(trades)-1].LastID)
		}
	}
}

// A bucket's first trade id is the one before's plus its trades, however
// the ids are asked for (in order, backwards, or cold), but where an era
// begins: there ids skip to the era's own start.
func TestTradeIDsAreConsecutiveWithinAnEra(t *testing.T) {
	era := floorDiv(Heartbeat(t0), eraBuckets) + 1
	edge := era * eraBuckets
	m := New(Config{Seed: 2}).bySymbol["BTCUSDT"]
	cold := func(b int64) int64 { return New(Config{Seed: 2}).bySymbol["BTCUSDT"].tradeStart(b) }
	inOrder := map[int64]int64{}
	for b := edge - 600; b < edge+600; b++ {
		start, next := m.tradeStart(b), m.tradeStart(b+1)
		inOrder[b] = start
		switch {
		case b+1 == edge:
			if want := m.tradeBase + era*eraBuckets*maxBucketTrades; next != want {
				t.Fatalf("first id of era %d: %d, want %d", era, next, want)
			}
		case next != start+int64(m.tradeCount(b)):
			t.Fatalf("heartbeat %d starts at %d with %d trades, the next at %d", b, start, m.tradeCount(b), next)
		}
		if b%97 == 0 && cold(b) != start {
			t.Fatalf("heartbeat %d: %d asked cold, %d in order", b, cold(b), start)
		}
	}
	// Backwards, as Trades walks.
	for b := edge + 599; b >= edge-600; b-- {
		if got, want := m.tradeStart(b), inOrder[b]; got != want {
			t.Fatalf("heartbeat %d backwards: %d, want %d", b, got, want)
		}
	}
}

func depthUpdate(t *testing.T, v *Venue, sym string, k int64) venue.DepthUpdate {
	t.Helper()
	u, err := v.DepthUpdate(sym, k)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func bookAt(t *testing.T, v *Venue, sym string, id int64, depth int) venue.Book {
	t.Helper()
	b, err := v.BookAt(sym, id, depth)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkStreamsHeartbeat is one heartbeat of the streams for 800 watched
// markets into a sink that drops everything: the cost the in-process streams
// add per 100 ms.
func BenchmarkStreamsHeartbeat(b *testing.B) {
	v := New(Config{Extra: 800 - len(builtin)})
	s := v.Streams()
	syms := make([]string, len(v.markets))
	for i := range v.markets {
		syms[i] = v.markets[i].info.Symbol
	}
	s.Watch(syms)
	k := Heartbeat(t0)
	var sink discard
	b.ReportAllocs()
	for b.Loop() {
		k++
		s.deliver(sink, k-1, k, k*tickMs) // a ticker delivery once in ten
	}
}

type discard struct{}

func (discard) Depth(venue.DepthUpdate)        {}
func (discard) Trade(string, venue.Trade)      {}
func (discard) Rows(venue.Rows)                {}
func (discard) Live(snapshot.Stream, []string) {}
func (discard) Lost(snapshot.Stream, []string) {}

func BenchmarkDepthUpdate(b *testing.B) {
	for _, sym := range []string{"BTCUSDT", "SIM001USDT"} {
		b.Run(sym, func(b *testing.B) {
			v := New(Config{Extra: 1})
			k := Heartbeat(t0)
			b.ReportAllocs()
			for b.Loop() {
				k++
				if _, err := v.DepthUpdate(sym, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A fast market takes the top through about the levels a second it was
// set to: after 3 s at 100 levels a second down, the best bid is about 300
// levels below the calm market's, and the venue's diff stream still takes a
// local book from one heartbeat to the next exactly, through the move. The
// books of before the move are as they were.
func TestFastMarketTakesTheTopDownTheBook(t *testing.T) {
	now := t0
	v := New(Config{Seed: 5, Now: func() time.Time { return now }})
	const sym = "BTCUSDT"
	k0 := Heartbeat(now)
	id0, _ := v.UpdateID(sym, k0)
	before := bookAt(t, v, sym, id0, 1000)
	if err := v.FastMarket(sym, -100, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if again := bookAt(t, v, sym, id0, 1000); !reflect.DeepEqual(again, before) {
		t.Fatal("the book before the move changed")
	}
	after := before
	for k := k0 + 1; k <= k0+30; k++ {
		u := depthUpdate(t, v, sym, k)
		prev := after
		after = bookAt(t, v, sym, u.Last, 1000)
		local := newLocal(prev)
		local.apply(u)
		sameWithin(t, sym, local, after, prev)
	}
	// Against the same venue without the move, whose path wanders too.
	calm := bookAt(t, New(Config{Seed: 5, Now: func() time.Time { return now }}), sym, after.LastUpdateID, 1000)
	taken := 0
	for taken < len(calm.Bids) && calm.Bids[taken].Price != after.Bids[0].Price {
		taken++
	}
	if taken < 250 || taken > 350 {
		t.Errorf("the best bid is %d levels below the calm market's after 3 s, want about 300", taken)
	}
	if err := v.FastMarket("NOPEUSDT", -1, time.Second); err == nil {
		t.Error("a fast market of an unknown symbol was set")
	}
}

// diffShape is what a run of diff events looks like against the books they
// apply to: the levels an event carries a side, and how deep in the book
// (counted in the book's levels from the top before the event) the deepest
// of them lies, both averaged over the event sides that carry any.
type diffShape struct{ levels, deepest float64 }

// measureDiffShape applies markets' diffs over heartbeats to books synced
// from the venue's 1000-level snapshot, and averages their shape.
func measureDiffShape(t *testing.T, cfg Config, markets int, heartbeats int64) diffShape {
	t.Helper()
	cfg.Extra = markets
	v := New(cfg)
	k0 := Heartbeat(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var sides, levels, deepest float64
	for m := 1; m <= markets; m++ {
		sym := fmt.Sprintf("SIM%03dUSDT", m)
		id, err := v.UpdateID(sym, k0)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := v.BookAt(sym, id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		book := newLocal(snap)
		for k := k0 + 1; k <= k0+heartbeats; k++ {
			u, err := v.DepthUpdate(sym, k)
			if err != nil {
				t.Fatal(err)
			}
			for _, side := range []struct {
				levels []venue.Level
				book   map[string]string
				bids   bool
			}{{u.Bids, book.bids, true}, {u.Asks, book.asks, false}} {
				if len(side.levels) == 0 {
					continue
				}
				deep := 0
				for _, l := range side.levels {
					p := parsePrice(t, l.Price)
					better := 0
					for q := range side.book {
						if qp := parsePrice(t, q); (side.bids && qp > p) || (!side.bids && qp < p) {
							better++
						}
					}
					deep = max(deep, better)
				}
				sides++
				levels += float64(len(side.levels))
				deepest += float64(deep)
			}
			book.apply(u)
		}
	}
	return diffShape{levels / sides, deepest / sides}
}

func parsePrice(t *testing.T, s string) float64 {
	t.Helper()
	p, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDepthWindowShapesTheDiffs checks what Config.DepthWindow is for: the
// default window's diffs carry about 14 levels a side reaching a few hundred
// levels down, and a window of 50 gives the shape of the venue's recorded
// diffs (the depth@100ms frames of four markets in poller/binance's
// testdata/recorded, against their 1000-level snapshots: 4.1 levels a side,
// the deepest 54 levels down on average), which is what the ingest is
// measured on besides the default.
func TestDepthWindowShapesTheDiffs(t *testing.T) {
	if testing.Short() {
		t.Skip("applies thousands of diffs to maps of a thousand levels")
	}
	def := measureDiffShape(t, Config{Seed: 1}, 4, 100)
	narrow := measureDiffShape(t, Config{Seed: 1, DepthWindow: 50}, 4, 100)
	t.Logf("default window: %.1f levels a side, deepest %.0f down; window 50: %.1f levels a side, deepest %.0f down",
		def.levels, def.deepest, narrow.levels, narrow.deepest)
	if def.levels < 10 || def.deepest < 150 {
		t.Errorf("default window: %.1f levels a side, deepest %.0f down; want at least 10 and 150", def.levels, def.deepest)
	}
	if narrow.levels < 2 || narrow.levels > 6 || narrow.deepest > 60 {
		t.Errorf("window 50: %.1f levels a side, deepest %.0f down; want the recorded diffs' 2 to 6, at most 60", narrow.levels, narrow.deepest)
	}
}
