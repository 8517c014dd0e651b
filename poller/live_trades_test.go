package poller

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/internal/promtext"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Trades come from the stream into a window of the newest 100, backfilled
// once over REST; a trade that both bring is published once.
func TestStreamTradesAreBackfilledOnceAndDeduplicated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 1, Config{})
		defer w.stop()
		sym := w.symbols[0]
		trade := func(id int64) venue.Trade {
			return venue.Trade{ID: id, Time: 1_700_000_000_000 + id, Price: "10." + strconv.FormatInt(id%10, 10), Size: "1", Sell: id%3 == 0}
		}
		var tape []venue.Trade
		for id := int64(1); id <= 150; id++ {
			tape = append(tape, trade(id))
		}
		w.v.tape = map[string][]venue.Trade{sym: tape}
		w.src.Live(snapshot.StreamTrades, w.symbols)
		for id := int64(148); id <= 155; id++ { // overlaps the tape's newest
			w.src.Trade(sym, trade(id))
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		tr, _ := w.store.Trades([]byte(pairID(1)), time.Now().UnixNano())
		if tr == nil {
			t.Fatal("no trades published")
		}
		if tr.Len(snapshot.SideAll) != snapshot.MaxTrades {
			t.Fatalf("%d trades, want %d", tr.Len(snapshot.SideAll), snapshot.MaxTrades)
		}
		want := append(slices.Clone(tape), trade(151), trade(152), trade(153), trade(154), trade(155))
		exp, err := snapshot.NewTrades(pairID(1), want, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if string(tr.Body(snapshot.SideAll)) != string(exp.Body(snapshot.SideAll)) {
			t.Fatalf("published\n%s\nwant the newest 100 of tape and stream, each once\n%s", tr.Body(snapshot.SideAll), exp.Body(snapshot.SideAll))
		}
		if n := w.v.count(venue.CallTrades, sym); n != 1 {
			t.Fatalf("%d backfill reads, want 1", n)
		}
		// Quiet market: confirmed, not rebuilt.
		version := tr.Version()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		tr2, _ := w.store.Trades([]byte(pairID(1)), time.Now().UnixNano())
		if tr2.Version() != version || tr2.ReadAt() == tr.ReadAt() {
			t.Fatalf("quiet window: version %d→%d, read %d→%d; want the same value confirmed later", version, tr2.Version(), tr.ReadAt(), tr2.ReadAt())
		}
	})
}

// A stream-fed trade window answers as soon as it holds a trade the stream
// delivered, before its backfill: a venue whose trade reads fail still has
// the pair's trades served, newest first. A window that never held a trade
// is not published and waits for a read like a cold load.
func TestStreamTradesAnswerBeforeTheirBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.v.mu.Lock()
		w.v.fail = func(c venue.Call, _ string) error {
			if c == venue.CallTrades {
				return errors.New("trades unavailable")
			}
			return nil
		}
		w.v.mu.Unlock()
		w.src.Live(snapshot.StreamTrades, w.symbols)
		tape := []venue.Trade{
			{ID: 7, Time: 1_700_000_000_007, Price: "10.1", Size: "1"},
			{ID: 8, Time: 1_700_000_000_008, Price: "10.2", Size: "2", Sell: true},
			{ID: 9, Time: 1_700_000_000_009, Price: "10.3", Size: "3"},
		}
		for _, tr := range tape {
			w.src.Trade(w.symbols[0], tr)
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if w.v.count(venue.CallTrades, w.symbols[0]) == 0 {
			t.Fatal("no backfill was tried")
		}
		tr, _ := w.store.Trades([]byte(pairID(1)), time.Now().UnixNano())
		exp, err := snapshot.NewTrades(pairID(1), tape, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if tr == nil || string(tr.Body(snapshot.SideAll)) != string(exp.Body(snapshot.SideAll)) {
			t.Fatalf("published %v, want the three streamed trades while the backfill fails", tr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.p.Load(ctx, pairID(1), snapshot.StreamTrades, snapshot.MaxTrades); err != nil {
			t.Errorf("Load of a window holding streamed trades: %v, want at once", err)
		}
		if tr, _ := w.store.Trades([]byte(pairID(2)), time.Now().UnixNano()); tr != nil {
			t.Fatalf("a window that never held a trade was published: %s", tr.Body(snapshot.SideAll))
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		if err := w.p.Load(ctx2, pairID(2), snapshot.StreamTrades, snapshot.MaxTrades); err == nil {
			t.Error("Load of an empty window with failing backfills succeeded")
		}
	})
}

// Backfills fill windows in the background, the pairs requests read first:
// with one read slot, the wanted pair's backfill is the first read even
// though another pair comes before it in symbol order.
func TestStreamBackfillsWantedPairsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{Parallel: 1})
		defer w.stop()
		w.p.Want([]byte(pairID(2)), snapshot.StreamTrades, time.Now().UnixNano())
		w.src.Live(snapshot.StreamTrades, w.symbols)
		for i, sym := range w.symbols {
			w.src.Trade(sym, venue.Trade{ID: int64(i + 1), Time: 1_700_000_000_000, Price: "10", Size: "1"})
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		w.v.mu.Lock()
		var first string
		for _, c := range w.v.calls {
			if c.call == venue.CallTrades {
				first = c.symbol
				break
			}
		}
		w.v.mu.Unlock()
		if first != w.symbols[1] {
			t.Fatalf("first backfill read %q, want the wanted pair %q", first, w.symbols[1])
		}
	})
}

// A lost trade stream may have missed trades: a window that is not full
// stops being current (it ages out rather than serve a hole) until, if no
// new trade arrives, a read of the trades after its newest says what it
// missed; those are then published, and the window is not read again.
func TestLostTradeStreamIsReadOnFromItsNewest(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, _ func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		// Trades 26..30 happened while the stream was down; none after it.
		w.v.setTape(sym, tape(30))
		w.v.failTrades(true)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if w.p.served(pairID(1), snapshot.StreamTrades, 1) {
			t.Fatal("a window that may have missed trades is still current while its read fails")
		}
		if last := w.healTrades(t, sym, tape(30)); last.from != 26 || last.limit != snapshot.MaxTrades {
			t.Fatalf("last read from %d, %d trades; want from 26, up to %d", last.from, last.limit, snapshot.MaxTrades)
		}
		if n := w.v.count(venue.CallTrades, sym) - len(w.v.fromReads(sym)); n != 1 {
			t.Errorf("%d reads of the newest trades, want only the first backfill", n)
		}
		if !w.p.served(pairID(1), snapshot.StreamTrades, 1) {
			t.Fatal("window not current after its read")
		}
	})
}

// A window that missed more trades than one read carries reads on from the
// last until a read comes back short, and answers only then.
func TestLostTradeStreamReadsOnPastAFullRead(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, _ func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		w.v.setTape(sym, tape(175)) // 26..175 missed, none after
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, tape(175)[175-snapshot.MaxTrades:]); got != want {
			t.Fatalf("published\n%s\nwant the newest 100, 76..175\n%s", got, want)
		}
		reads := w.v.fromReads(sym)
		if len(reads) != 2 || reads[0].from != 26 || reads[1].from != 126 {
			t.Fatalf("reads %+v, want from 26, then from 126", reads)
		}
		if n := w.v.count(venue.CallTrades, sym) - len(reads); n != 1 {
			t.Errorf("%d reads of the newest trades, want only the first backfill", n)
		}
	})
}

// lostTradesWorld is one pair whose window holds trades 1..25 (backfilled
// from a tape of 20, then 18..25 from the stream), then loses its trade
// stream, which comes back; trade builds trade id, whose last single trade
// is 1000 + 3 × id (three single trades to each aggregate one). The venue
// reads no single trade id (see lostTradesWorldOf).
func lostTradesWorld(t *testing.T) (w *streamWorld, trade func(id int64) venue.Trade, tape func(last int64) []venue.Trade) {
	return lostTradesWorldOf(t, 0)
}

// lostTradesWorldOf is lostTradesWorld on a venue whose newest single
// trade id read weighs idWeight; 0: the venue has none.
func lostTradesWorldOf(t *testing.T, idWeight int) (w *streamWorld, trade func(id int64) venue.Trade, tape func(last int64) []venue.Trade) {
	v := newFakeVenue(1)
	if idWeight > 0 {
		v.weights[venue.CallTrades], v.weights[venue.CallTradeID] = 20, idWeight
	}
	w = newStreamWorldOf(t, v, Config{Venue: v, MaxStale: 3 * time.Second})
	trade = func(id int64) venue.Trade {
		return venue.Trade{ID: id, LastID: 1000 + 3*id, Time: 1_700_000_000_000 + id, Price: "10", Size: "1"}
	}
	tape = func(last int64) (out []venue.Trade) {
		for id := int64(1); id <= last; id++ {
			out = append(out, trade(id))
		}
		return out
	}
	sym := w.symbols[0]
	w.v.mu.Lock()
	w.v.tape = map[string][]venue.Trade{sym: tape(20)}
	w.v.mu.Unlock()
	w.src.Live(snapshot.StreamTrades, w.symbols)
	for id := int64(18); id <= 25; id++ {
		w.src.Trade(sym, trade(id))
	}
	time.Sleep(1100 * time.Millisecond)
	synctest.Wait()
	if n := w.v.count(venue.CallTrades, sym); n != 1 {
		t.Fatalf("%d backfill reads before the loss, want 1", n)
	}
	w.src.Lost(snapshot.StreamTrades, w.symbols)
	w.src.Live(snapshot.StreamTrades, w.symbols)
	return w, trade, tape
}

// Where the venue reads its newest single trade id for a quarter of a
// trades read, a window that may have missed trades and hears nothing
// from its stream after the stream's return is settled by that id alone
// when it is the one the window's newest trade ends with: one read of 5
// and none of 20, and the window answers with what it held. Quiet markets
// are most of those a venue-wide outage leaves unsettled.
func TestLostQuietTradeWindowIsSettledByTheNewestTradeID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _, tape := lostTradesWorldOf(t, 5)
		defer w.stop()
		sym := w.symbols[0]
		w.v.setTape(sym, tape(25)) // nothing traded after the window's newest
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallTradeID, sym); n != 1 {
			t.Fatalf("%d reads of the newest trade id, want 1", n)
		}
		if reads := w.v.fromReads(sym); len(reads) != 0 {
			t.Fatalf("reads of trades from an id %+v, want none", reads)
		}
		if n := w.v.count(venue.CallTrades, sym); n != 1 {
			t.Errorf("%d reads of trades, want only the first backfill", n)
		}
		if got := w.weightOf(t, budget.PurposeBackfill); got != 20+5 {
			t.Errorf("trade reads weighed %d, want the backfill's 20 and the check's 5", got)
		}
		if !w.p.served(pairID(1), snapshot.StreamTrades, 1) {
			t.Fatal("window not current after the check")
		}
		if got, want := w.publishedTrades(), tradesBody(t, tape(25)); got != want {
			t.Fatalf("published\n%s\nwant the window as it was\n%s", got, want)
		}
	})
}

// A newest single trade id past the one the window's newest trade ends
// with says the window missed trades: it reads them on from its newest, as
// without the check, and answers with them.
func TestLostTradeWindowReadsOnWhenTheNewestTradeIDIsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _, tape := lostTradesWorldOf(t, 5)
		defer w.stop()
		sym := w.symbols[0]
		w.v.setTape(sym, tape(30)) // 26..30 traded while the stream was down
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallTradeID, sym); n != 1 {
			t.Fatalf("%d reads of the newest trade id, want 1", n)
		}
		if reads := w.v.fromReads(sym); len(reads) != 1 || reads[0].from != 26 {
			t.Fatalf("reads of trades from an id %+v, want one from 26", reads)
		}
		if got := w.weightOf(t, budget.PurposeBackfill); got != 20+5+20 {
			t.Errorf("trade reads weighed %d, want the backfill's 20, the check's 5 and the read's 20", got)
		}
		if got, want := w.publishedTrades(), tradesBody(t, tape(30)); got != want {
			t.Fatalf("published\n%s\nwant the missed trades read back\n%s", got, want)
		}
	})
}

// weightOf is the REST weight the poller spent on purpose.
func (w *streamWorld) weightOf(t testing.TB, purpose budget.Purpose) int {
	return int(promtext.Scrape(t, w.metrics.WritePrometheus)[`marketfeed_venue_weight_total{purpose="`+purpose.String()+`"}`])
}

// lostTradesTest runs f under synctest on a lostTradesWorld, whose pair's
// symbol is sym.
func lostTradesTest(t *testing.T, f func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade)) {
	synctest.Test(t, func(t *testing.T) {
		w, trade, tape := lostTradesWorld(t)
		defer w.stop()
		f(t, w, w.symbols[0], trade, tape)
	})
}

// healTrades lets trade reads succeed again, and after 3 s wants the
// pair's published window to be want, its gaps read back. It returns the
// last read of missing ids.
func (w *streamWorld) healTrades(t *testing.T, sym string, want []venue.Trade) fakeCall {
	t.Helper()
	w.v.failTrades(false)
	time.Sleep(3 * time.Second)
	synctest.Wait()
	if got, want := w.publishedTrades(), tradesBody(t, want); got != want {
		t.Fatalf("published\n%s\nwant every trade, the missed ones read back\n%s", got, want)
	}
	reads := w.v.fromReads(sym)
	if len(reads) == 0 {
		t.Fatal("no read of the missing ids")
	}
	return reads[len(reads)-1]
}

// publishedTrades is the pair's published window, or "" without one.
func (w *streamWorld) publishedTrades() string {
	tr, _ := w.store.Trades([]byte(pairID(1)), time.Now().UnixNano())
	if tr == nil {
		return ""
	}
	return string(tr.Body(snapshot.SideAll))
}

func tradesBody(t *testing.T, trades []venue.Trade) string {
	t.Helper()
	exp, err := snapshot.NewTrades(pairID(1), trades, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return string(exp.Body(snapshot.SideAll))
}

// The venue numbers aggregate trades one by one: when the first trade after
// a lost stream comes back follows the window's newest, nothing was missed,
// and the window answers at once with no read.
func TestLostTradeStreamContinuesWhenNoTradeWasMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, trade, tape := lostTradesWorld(t)
		defer w.stop()
		w.src.Trade(w.symbols[0], trade(26))
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, tape(26)); got != want {
			t.Fatalf("published\n%s\nwant trades 1..26\n%s", got, want)
		}
		if !w.p.served(pairID(1), snapshot.StreamTrades, 1) {
			t.Fatal("window not current after a trade that continues it")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallTrades, w.symbols[0]); n != 1 {
			t.Fatalf("%d trade reads, want only the first backfill", n)
		}
		if got := promtext.Scrape(t, w.metrics.WritePrometheus)["marketfeed_trade_window_gaps_total"]; got != 0 {
			t.Fatalf("gaps %v, want 0", got)
		}
	})
}

// When the first trade after the stream is back skips ids, the window
// missed trades: it answers at once with what came after (never a hole),
// and a read in the background asks for the missed ids only, never the
// whole window again.
func TestLostTradeStreamReadsOnlyTheMissedTrades(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		w.v.setTape(sym, tape(33))
		w.v.failTrades(true)
		w.src.Trade(sym, trade(31)) // 26..30 were missed
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, []venue.Trade{trade(31)}); got != want {
			t.Fatalf("published\n%s\nwant only trade 31 while the read fails\n%s", got, want)
		}
		// Trades keep coming while the gap is open: they are served.
		w.src.Trade(sym, trade(32))
		w.src.Trade(sym, trade(33))
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, tape(33)[30:]); got != want {
			t.Fatalf("published\n%s\nwant trades 31..33 while the read fails\n%s", got, want)
		}
		if got := promtext.Scrape(t, w.metrics.WritePrometheus)["marketfeed_trade_window_holes"]; got != 1 {
			t.Fatalf("windows with a hole %v, want 1", got)
		}
		last := w.healTrades(t, sym, tape(33))
		reads := w.v.fromReads(sym)
		if last.from != 26 || last.limit != 5 {
			t.Errorf("the gap was read from id %d, %d trades; want from 26, 5 trades", last.from, last.limit)
		}
		if n := w.v.count(venue.CallTrades, sym) - len(reads); n != 1 {
			t.Errorf("%d reads of the newest trades, want only the first backfill", n)
		}
		m := promtext.Scrape(t, w.metrics.WritePrometheus)
		if m["marketfeed_trade_window_gaps_total"] != 1 || m["marketfeed_trade_window_gaps_cut_total"] != 0 || m["marketfeed_trade_window_holes"] != 0 {
			t.Errorf("gaps %v, cut %v, holes %v; want 1 gap filled", m["marketfeed_trade_window_gaps_total"], m["marketfeed_trade_window_gaps_cut_total"], m["marketfeed_trade_window_holes"])
		}
		// Filled: nothing more is read.
		before := w.v.count(venue.CallTrades, sym)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallTrades, sym); n != before {
			t.Errorf("%d more trade reads after the gap was filled", n-before)
		}
	})
}

// A gap wider than a read can carry (the venue's limit is 1,000) costs one
// read all the same: only the ids the window still holds once filled are
// asked for, and the trades before the gap are let go.
func TestWideTradeGapReadsOnlyWhatTheWindowHolds(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		w.v.setTape(sym, tape(5031))
		w.src.Trade(sym, trade(5030)) // 26..5029 were missed
		w.src.Trade(sym, trade(5031))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, tape(5031)[5031-snapshot.MaxTrades:]); got != want {
			t.Fatalf("published\n%s\nwant the newest 100 trades, 4932..5031\n%s", got, want)
		}
		reads := w.v.fromReads(sym)
		if len(reads) != 1 || reads[0].from != 4932 || reads[0].limit != 98 {
			t.Fatalf("gap reads %+v, want one from id 4932, 98 trades", reads)
		}
	})
}

// A venue that has no trade with the first id a read of the gap asks for
// cannot fill it: the window gives the gap up, keeping what came after it,
// and its backfill reads the newest trades the venue does have, which are
// what the window then answers.
func TestTradeGapTheVenueCannotFillIsCut(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		// The venue returns 26 and 27, then nothing before 31.
		venueTape := append(tape(27), trade(31))
		w.v.setTape(sym, venueTape)
		w.src.Trade(sym, trade(31))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		reads := w.v.fromReads(sym)
		if len(reads) != 2 || reads[0].from != 26 || reads[0].limit != 5 || reads[1].from != 28 || reads[1].limit != 3 {
			t.Fatalf("gap reads %+v, want 26 (5 trades), then 28 (3 trades)", reads)
		}
		if n := w.v.count(venue.CallTrades, sym) - len(reads); n != 2 {
			t.Errorf("%d reads of the newest trades, want the first backfill and one after the gap was given up", n)
		}
		if got, want := w.publishedTrades(), tradesBody(t, venueTape); got != want {
			t.Fatalf("published\n%s\nwant the venue's own trades\n%s", got, want)
		}
		if got := promtext.Scrape(t, w.metrics.WritePrometheus)["marketfeed_trade_window_gaps_cut_total"]; got != 1 {
			t.Errorf("gaps cut %v, want 1", got)
		}
		if !w.p.served(pairID(1), snapshot.StreamTrades, 1) {
			t.Error("window not current after its gap was given up")
		}
	})
}

// A second loss while a gap is still open widens it: the window keeps the
// trades before the first gap, and one read brings back both gaps and the
// trades held between them.
func TestSecondLossWhileAGapIsOpenKeepsTheWindow(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		w.v.setTape(sym, tape(40))
		w.v.failTrades(true)
		w.src.Trade(sym, trade(31)) // 26..30 missed
		w.src.Trade(sym, trade(32))
		w.src.Trade(sym, trade(33))
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		w.src.Lost(snapshot.StreamTrades, w.symbols)
		w.src.Live(snapshot.StreamTrades, w.symbols)
		w.src.Trade(sym, trade(40)) // 34..39 missed
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, []venue.Trade{trade(40)}); got != want {
			t.Fatalf("published\n%s\nwant only trade 40 while the reads fail\n%s", got, want)
		}
		if last := w.healTrades(t, sym, tape(40)); last.from != 26 || last.limit != 14 {
			t.Fatalf("last gap read from %d, %d trades; want from 26, 14 trades", last.from, last.limit)
		}
	})
}

// Trades that arrive after a gap before it is read fill the window on
// their own: once no trade before the gap is left, there is nothing to
// read.
func TestTradeGapPushedOutByNewerTradesNeedsNoRead(t *testing.T) {
	lostTradesTest(t, func(t *testing.T, w *streamWorld, sym string, trade func(int64) venue.Trade, tape func(int64) []venue.Trade) {
		for id := int64(31); id <= 130; id++ {
			w.src.Trade(sym, trade(id))
		}
		before := w.v.count(venue.CallTrades, sym)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, want := w.publishedTrades(), tradesBody(t, tape(130)[30:]); got != want {
			t.Fatalf("published\n%s\nwant trades 31..130\n%s", got, want)
		}
		if n := w.v.count(venue.CallTrades, sym); n != before {
			t.Errorf("%d trade reads for a gap no longer in the window", n-before)
		}
	})
}
