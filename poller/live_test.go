package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// streamWorld is a poller reading a fake venue's streams, with a depth model
// for each of its markets; the test delivers the events.
type streamWorld struct {
	t       *testing.T
	v       *fakeVenue
	fs      *fakeStreams
	p       *Poller
	src     *live.Source
	metrics *metrics.Set
	store   *snapshot.Store
	models  []*depthModel
	symbols []string
	stop    func()
}

func newStreamWorld(t *testing.T, n int, cfg Config) *streamWorld {
	v := newFakeVenue(n)
	v.depth = map[string]*depthModel{}
	var symbols []string
	var models []*depthModel
	for _, m := range v.markets {
		model := newDepthModel(m.Symbol)
		v.depth[m.Symbol] = model
		models = append(models, model)
		symbols = append(symbols, m.Symbol)
	}
	fs := newFakeStreams()
	store := snapshot.NewStore()
	cfg.Venue, cfg.Store, cfg.Streams = v, store, fs
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	p := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	<-fs.running
	synctest.Wait()
	w := &streamWorld{t: t, v: v, fs: fs, p: p, src: p.src.(*live.Source), metrics: cfg.Metrics, store: store, models: models, symbols: symbols}
	w.stop = func() { cancel(); <-done }
	return w
}

// tick delivers one depth event of every market (except those skip names)
// and lets 100 ms pass, as the venue's 100 ms diff stream does.
func (w *streamWorld) tick(skip ...string) {
	for _, m := range w.models {
		u := m.next()
		if !slices.Contains(skip, m.symbol) {
			w.src.Depth(u)
		}
	}
	time.Sleep(100 * time.Millisecond)
	synctest.Wait()
}

// goLive gives the venue a weight limit a minute and a snapshot weight,
// has the poller read the catalog for it, then sets every depth stream
// delivering and delivers one event.
func (w *streamWorld) goLive(limit, snapshotWeight int) {
	w.v.mu.Lock()
	w.v.limit = limit
	w.v.weights[venue.CallBook] = snapshotWeight
	w.v.weights[venue.CallCatalog] = 1
	w.v.mu.Unlock()
	if err := w.p.RefreshCatalog(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.src.Live(snapshot.StreamBook, w.symbols)
	w.tick()
}

func (w *streamWorld) book(i int) *snapshot.Book {
	b, _ := w.store.Book([]byte(pairID(i+1)), time.Now().UnixNano())
	return b
}

// Every listed pair's book is synced once from a snapshot and then kept
// current by the stream alone: what is published equals the venue's true
// top 100 after the last event.
func TestStreamKeepsEveryBookCurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 20, Config{})
		defer w.stop()
		if got := w.fs.watched; !slices.Equal(got, w.symbols) {
			t.Fatalf("watched %v, want every listed symbol", got)
		}
		w.src.Live(snapshot.StreamBook, w.symbols)
		for range 30 {
			w.tick()
		}
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		for i, m := range w.models {
			b := w.book(i)
			if b == nil {
				t.Fatalf("%s: no book published", m.symbol)
			}
			if got, want := string(b.Body()), m.body(pairID(i+1)); got != want {
				t.Fatalf("%s: published\n%s\nwant the venue's book\n%s", m.symbol, got, want)
			}
			if calls := w.v.count(venue.CallBook, m.symbol); calls != 1 {
				t.Fatalf("%s: %d snapshot reads, want 1", m.symbol, calls)
			}
			if age := time.Since(time.Unix(0, b.ReadAt())); age > 350*time.Millisecond {
				t.Fatalf("%s: book confirmed %s ago, want within one publication period", m.symbol, age)
			}
		}
		if n := w.v.count(venue.CallTrades, ""); n != 0 {
			t.Fatalf("%d trade reads without any trade stream being live", n)
		}
	})
}

// A book is never published from a state built across a gap: after a lost
// event it stops being confirmed, resyncs from a new snapshot, and every
// body published meanwhile was a true state of the venue's book.
func TestStreamGapResyncsWithoutPublishingAcrossIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.src.Live(snapshot.StreamBook, w.symbols)
		gapped := w.models[0]
		truth := map[string]bool{}
		seen := map[string]bool{}
		observe := func() {
			truth[gapped.body(pairID(1))] = true
			if b := w.book(0); b != nil {
				seen[string(b.Body())] = true
			}
		}
		for range 10 {
			w.tick()
			observe()
		}
		w.tick(gapped.symbol) // one event lost
		observe()
		for range 30 {
			w.tick()
			observe()
		}
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		observe()
		for body := range seen {
			if !truth[body] {
				t.Fatalf("published a book that the venue never had:\n%s", body)
			}
		}
		if got, want := string(w.book(0).Body()), gapped.body(pairID(1)); got != want {
			t.Fatalf("after the resync: published\n%s\nwant\n%s", got, want)
		}
		if calls := w.v.count(venue.CallBook, gapped.symbol); calls != 2 {
			t.Fatalf("%d snapshot reads for the gapped market, want 2 (the first sync and one resync)", calls)
		}
		if calls := w.v.count(venue.CallBook, w.models[1].symbol); calls != 1 {
			t.Fatalf("%d snapshot reads for the other market, want 1", calls)
		}
	})
}

// A lost stream stops confirming the book, so that it ages towards
// max-stale. The venue numbers a market's updates per market, not per
// connection: when the stream comes back and its first event continues the
// book's chain, nothing was lost and no snapshot is read; when updates were
// missed meanwhile, the book resyncs from one snapshot, counted as lost.
func TestLostStreamKeepsTheBookOrResyncsWhenUpdatesWereMissed(t *testing.T) {
	for _, missed := range []int{0, 3} {
		t.Run(fmt.Sprintf("%d updates missed", missed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newStreamWorld(t, 1, Config{MaxStale: 3 * time.Second})
				defer w.stop()
				w.src.Live(snapshot.StreamBook, w.symbols)
				for range 5 {
					w.tick()
				}
				if !w.p.fresh(pairID(1), snapshot.StreamBook) {
					t.Fatal("book not fresh while its stream is in sequence")
				}
				reads := w.v.count(venue.CallBook, w.symbols[0])
				w.src.Lost(snapshot.StreamBook, w.symbols)
				readAt := w.book(0).ReadAt()
				for range missed {
					w.tick(w.symbols[0]) // the venue moves on; the events never arrive
				}
				time.Sleep(4 * time.Second)
				synctest.Wait()
				if w.book(0).ReadAt() != readAt {
					t.Fatal("a book whose stream was lost was confirmed as current")
				}
				if w.p.fresh(pairID(1), snapshot.StreamBook) {
					t.Fatal("book still fresh past max-stale after its stream was lost")
				}
				w.src.Live(snapshot.StreamBook, w.symbols)
				for range 5 {
					w.tick()
				}
				time.Sleep(400 * time.Millisecond)
				synctest.Wait()
				if !w.p.fresh(pairID(1), snapshot.StreamBook) {
					t.Fatal("book not fresh again after the stream came back")
				}
				if got, want := string(w.book(0).Body()), w.models[0].body(pairID(1)); got != want {
					t.Fatalf("after the stream came back: published\n%s\nwant\n%s", got, want)
				}
				wantReads, wantLost := reads, 0.0
				if missed > 0 {
					wantReads, wantLost = reads+1, 1
				}
				if got := w.v.count(venue.CallBook, w.symbols[0]); got != wantReads {
					t.Errorf("%d snapshot reads after the stream came back, want %d", got-reads, wantReads-reads)
				}
				want(t, scrape(t, w.metrics), map[string]float64{
					`marketfeed_book_resyncs_total{cause="lost"}`: wantLost,
					`marketfeed_books_suspended_total`:            1,
				})
			})
		})
	}
}

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
		if err := w.p.Load(ctx, pairID(1), snapshot.StreamTrades); err != nil {
			t.Errorf("Load of a window holding streamed trades: %v, want at once", err)
		}
		if tr, _ := w.store.Trades([]byte(pairID(2)), time.Now().UnixNano()); tr != nil {
			t.Fatalf("a window that never held a trade was published: %s", tr.Body(snapshot.SideAll))
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		if err := w.p.Load(ctx2, pairID(2), snapshot.StreamTrades); err == nil {
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
		w.p.Want([]byte(pairID(2)), snapshot.StreamTrades)
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
		if w.p.fresh(pairID(1), snapshot.StreamTrades) {
			t.Fatal("a window that may have missed trades is still current while its read fails")
		}
		if last := w.healTrades(t, sym, tape(30)); last.from != 26 || last.limit != snapshot.MaxTrades {
			t.Fatalf("last read from %d, %d trades; want from 26, up to %d", last.from, last.limit, snapshot.MaxTrades)
		}
		if n := w.v.count(venue.CallTrades, sym) - len(w.v.fromReads(sym)); n != 1 {
			t.Errorf("%d reads of the newest trades, want only the first backfill", n)
		}
		if !w.p.fresh(pairID(1), snapshot.StreamTrades) {
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
// stream, which comes back; trade builds trade id.
func lostTradesWorld(t *testing.T) (w *streamWorld, trade func(id int64) venue.Trade, tape func(last int64) []venue.Trade) {
	w = newStreamWorld(t, 1, Config{MaxStale: 3 * time.Second})
	trade = func(id int64) venue.Trade {
		return venue.Trade{ID: id, Time: 1_700_000_000_000 + id, Price: "10", Size: "1"}
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
		if !w.p.fresh(pairID(1), snapshot.StreamTrades) {
			t.Fatal("window not current after a trade that continues it")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := w.v.count(venue.CallTrades, w.symbols[0]); n != 1 {
			t.Fatalf("%d trade reads, want only the first backfill", n)
		}
		if got := scrape(t, w.metrics)["marketfeed_trade_window_gaps_total"]; got != 0 {
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
		if got := scrape(t, w.metrics)["marketfeed_trade_window_holes"]; got != 1 {
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
		m := scrape(t, w.metrics)
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
		if got := scrape(t, w.metrics)["marketfeed_trade_window_gaps_cut_total"]; got != 1 {
			t.Errorf("gaps cut %v, want 1", got)
		}
		if !w.p.fresh(pairID(1), snapshot.StreamTrades) {
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

// Snapshot reads never exceed the budget: a cold start of many books is
// spread over minutes, and a pair a request waits for jumps the queue.
func TestColdStartStaysInBudgetAndServesWaitingPairsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		w := newStreamWorld(t, n, Config{Budget: 0.5})
		defer w.stop()
		w.goLive(400, 10) // budget 200 a minute: 20 snapshots of weight 10
		last := n         // the last in the queue's own order
		done := make(chan error, 1)
		loadAt := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			done <- w.p.Load(ctx, pairID(last), snapshot.StreamBook)
		}()
		for range 1200 { // two minutes of events
			w.tick()
		}
		if err := <-done; err != nil {
			t.Fatalf("waiting request: %v", err)
		}
		calls := w.v.log()
		var first time.Time
		books := 0
		waitedRead := false
		for _, c := range calls {
			if c.call != venue.CallBook {
				continue
			}
			if books == 0 {
				first = c.at
			}
			books++
			// Reads started at the instant the request came may have been
			// dispatched before it; any later read must be the waited-for
			// pair's first.
			if c.symbol == w.symbols[last-1] {
				waitedRead = true
			}
			if c.at.After(loadAt) && !waitedRead {
				{
					t.Fatalf("%s read after the request for %s and before it", c.symbol, pairID(last))
				}
				waitedRead = true
			}
		}
		for i, c := range calls {
			spent := 0
			for _, d := range calls[i:] {
				if d.at.Sub(c.at) < time.Minute {
					spent += d.weight
				}
			}
			if spent > 200 {
				t.Fatalf("%d weight spent in the minute from %s, budget 200", spent, c.at.Sub(first))
			}
		}
		if books < 30 || books > n {
			t.Fatalf("%d snapshot reads in two minutes, want most of the %d books synced within the budget", books, n)
		}
	})
}

// An aggregator reading every pair's book and trades during a cold start
// does not slow it: pairs their streams keep put no demand on REST, so the
// snapshots that sync the books may spend the whole budget (but the bulk
// calls' reserve), and no trades backfill takes weight from them while a
// book waits.
func TestColdStartUsesTheWholeBudgetUnderAnAggregator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		w := newStreamWorld(t, n, Config{Budget: 0.5})
		defer w.stop()
		w.v.mu.Lock()
		w.v.weights[venue.CallTrades] = 20
		w.v.mu.Unlock()
		w.src.Live(snapshot.StreamTrades, w.symbols)
		w.goLive(400, 10) // budget 200 a minute: 20 snapshots of weight 10
		start := time.Now()
		for i := range 600 { // one minute of events, every pair read each 10 s
			if i%100 == 0 {
				for j := range n {
					for s := range snapshot.NumStreams {
						w.p.hot[s].want([]byte(pairID(j+1)), time.Now())
					}
				}
			}
			w.tick()
		}
		books, backfills := 0, 0
		for _, c := range w.v.log() {
			if c.at.Sub(start) >= time.Minute {
				continue
			}
			switch c.call {
			case venue.CallBook:
				books++
			case venue.CallTrades:
				backfills++
			}
		}
		// 19 snapshots fit beside the catalog's reserve; 90 % of the budget
		// is 18.
		if books < 18 {
			t.Fatalf("%d snapshots in the first minute of a cold start under an aggregator, want at least 18 (90 %% of the budget)", books)
		}
		if backfills != 0 {
			t.Fatalf("%d trades backfills while books waited for their snapshots, want none", backfills)
		}
	})
}

// An acknowledged depth stream that stays silent while its market trades is
// resubscribed, then given up for REST.
func TestSilentStreamIsResubscribedThenServedByREST(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.src.Live(snapshot.StreamBook, w.symbols)
		quiet := w.models[0].symbol
		volume := 0
		for range 3 {
			w.tick()
		}
		for range 150 { // 15 s: the market trades, its depth stream says nothing
			volume++
			w.src.Tickers([]venue.Stat{{Symbol: quiet, LastPrice: "1", High: "1", Low: "1", BaseVolume: strconv.Itoa(volume), QuoteVolume: "1"}})
			w.tick(quiet)
		}
		w.fs.mu.Lock()
		resubbed := slices.Clone(w.fs.resubbed)
		w.fs.mu.Unlock()
		if !slices.Equal(resubbed, []string{"book " + quiet}) {
			t.Fatalf("resubscribed %v, want the silent depth stream once", resubbed)
		}
		if w.src.Current(pairID(1), snapshot.StreamBook) {
			t.Fatal("a silent stream still counts as keeping the book current")
		}
		if !w.src.Current(pairID(2), snapshot.StreamBook) {
			t.Fatal("the other market lost its stream source")
		}
		books, _ := w.src.Sources()
		if books["rest"] != 1 || books["stream"] != 1 {
			t.Fatalf("book sources %v, want one stream and one REST", books)
		}
	})
}

// A book whose side is consumed towards its snapshot's edge asks for a new
// snapshot and goes on being served meanwhile with the levels it can vouch
// for, an exact prefix of the venue's; the new snapshot is laid under it
// without taking it out of sequence.
func TestShortBookIsRefreshedWhileServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 1, Config{SyncDepth: 150})
		defer w.stop()
		m := w.models[0]
		w.src.Live(snapshot.StreamBook, w.symbols)
		w.tick()
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		if n := w.v.count(venue.CallBook, m.symbol); n != 1 {
			t.Fatalf("%d snapshot reads, want 1", n)
		}
		w.v.mu.Lock()
		w.v.gate = make(chan struct{}) // hold the refresh's snapshot read
		w.v.mu.Unlock()
		w.src.Depth(m.takeAsks(60)) // 90 of the 150 asks vouched for remain
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		b := w.book(0)
		if !w.p.fresh(pairID(1), snapshot.StreamBook) {
			t.Fatal("a book waiting for a refresh is not served as current")
		}
		if _, asks := b.Levels(); asks != 90 {
			t.Fatalf("%d asks served while the refresh waits, want the 90 vouched for", asks)
		}
		want, _ := snapshot.NewBook(pairID(1), 0, m.snapshot(90).Bids, m.snapshot(90).Asks, time.Now())
		_, wantAsks, _ := want.Parts(90)
		_, gotAsks, _ := b.Parts(90)
		if string(gotAsks) != string(wantAsks) {
			t.Fatalf("asks served meanwhile are not a prefix of the venue's:\n%s\nwant\n%s", gotAsks, wantAsks)
		}
		if n := w.v.count(venue.CallBook, m.symbol); n != 2 {
			t.Fatalf("%d snapshot reads, want a refresh started", n)
		}
		w.tick() // an event while the snapshot is on its way
		w.v.mu.Lock()
		close(w.v.gate)
		w.v.gate = nil
		w.v.mu.Unlock()
		w.tick()
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		if got, want := string(w.book(0).Body()), m.body(pairID(1)); got != want {
			t.Fatalf("after the refresh: published\n%s\nwant\n%s", got, want)
		}
		if !w.src.Current(pairID(1), snapshot.StreamBook) {
			t.Fatal("the refresh took the book out of the stream's keeping")
		}
	})
}

// A pair new to the catalog is answered at once but listed in /pairs only
// once it holds a book and trades: /pairs never shows a ticker_id that is
// not answerable (in a cluster, Config.Replicated also waits for every
// replica to hold them).
func TestNewListingIsListedOnceAnswerable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.goLive(2400, 10)
		for range 5 {
			w.tick()
		}
		const id, sym = "P003_USDT", "P003USDT"
		model := newDepthModel(sym)
		w.v.mu.Lock()
		w.v.markets = append(w.v.markets, venue.Market{Symbol: sym, Base: "P003", Quote: "USDT", Perpetual: true, Trading: true})
		w.v.depth[sym] = model
		w.v.mu.Unlock()
		w.models, w.symbols = append(w.models, model), append(w.symbols, sym)
		if err := w.p.RefreshCatalog(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, listed := w.store.Pairs().Lookup(id); listed {
			t.Fatal("a new pair is listed before it holds a book and trades")
		}
		if !w.store.Listed([]byte(id), time.Now().UnixNano()) {
			t.Fatal("a new pair is not answered while incoming")
		}
		if !slices.Contains(w.fs.watched, sym) {
			t.Fatalf("the new pair's streams are not watched: %v", w.fs.watched)
		}
		w.src.Live(snapshot.StreamBook, []string{sym})
		w.src.Live(snapshot.StreamTrades, []string{sym})
		w.src.Trade(sym, venue.Trade{ID: 1, Time: 1, Price: "1000", Size: "1"})
		for step := 0; ; step++ {
			w.tick()
			_, listed := w.store.Pairs().Lookup(id)
			b, _ := w.store.Book([]byte(id), time.Now().UnixNano())
			tr, _ := w.store.Trades([]byte(id), time.Now().UnixNano())
			if listed && (b == nil || tr == nil) {
				t.Fatalf("listed with a book %v and trades %v", b != nil, tr != nil)
			}
			if listed {
				break
			}
			if step == 50 {
				t.Fatalf("a new pair holding a book (%v) and trades (%v) is not listed 5s on", b != nil, tr != nil)
			}
		}

		// One that never trades is listed after maxIncoming all the same.
		w.v.mu.Lock()
		w.v.markets = append(w.v.markets, venue.Market{Symbol: "P004USDT", Base: "P004", Quote: "USDT", Perpetual: true, Trading: true})
		w.v.mu.Unlock()
		if err := w.p.RefreshCatalog(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(maxIncoming - time.Second)
		synctest.Wait()
		if _, listed := w.store.Pairs().Lookup("P004_USDT"); listed {
			t.Fatal("a pair without data was listed before maxIncoming")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, listed := w.store.Pairs().Lookup("P004_USDT"); !listed {
			t.Fatal("a pair without data is not listed after maxIncoming")
		}
	})
}
