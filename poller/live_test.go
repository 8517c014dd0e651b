package poller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/promtext"
	"marketfeed/poller/budget"
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
	cfg.Venue = v
	return newStreamWorldOf(t, v, cfg)
}

// newStreamWorldOf is newStreamWorld on cfg.Venue, a venue whose books
// and calls are v's (v itself, or a venue that embeds it).
func newStreamWorldOf(t *testing.T, v *fakeVenue, cfg Config) *streamWorld {
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
	cfg.Store, cfg.Streams = store, fs
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
		heard := time.Now().Add(-100 * time.Millisecond) // the last tick's events
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
			if calls := w.v.syncs(m.symbol); calls != 1 {
				t.Fatalf("%s: %d syncs, want 1", m.symbol, calls)
			}
			// Published as read when the venue last vouched for it (its
			// last event), not when it was last published: a stream
			// that says nothing proves nothing.
			if at := time.Unix(0, b.ReadAt()); !at.Equal(heard) {
				t.Fatalf("%s: book read at %s, want at its last event, %s", m.symbol, at, heard)
			}
		}
		if n := w.v.count(venue.CallTrades, ""); n != 0 {
			t.Fatalf("%d trade reads without any trade stream being live", n)
		}
	})
}

// isPrefix reports whether got is a non-empty prefix of want.
func isPrefix(got, want []venue.Level) bool {
	return len(got) > 0 && len(got) <= len(want) && slices.Equal(got, want[:len(got)])
}

// A book is never published from a state built across a gap: after a lost
// event it stops being confirmed, resyncs from a new snapshot, and every
// body published meanwhile was a true state of the venue's book: each side
// the venue's best levels at the book's time, all of them or as many as the
// book could vouch for (synced from 100 levels, a side holds fewer once its
// top is taken, until its refresh).
func TestStreamGapResyncsWithoutPublishingAcrossIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.src.Live(snapshot.StreamBook, w.symbols)
		gapped := w.models[0]
		truth := map[int64]venue.Book{} // by venue time
		seen := map[string]*snapshot.Book{}
		observe := func() {
			b := gapped.snapshot(snapshot.MaxDepth)
			truth[b.Time] = b
			if b := w.book(0); b != nil {
				seen[string(b.Body())] = b
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
		for body, b := range seen {
			want, ok := truth[b.Time()]
			bids, asks := b.Sides()
			if !ok || !isPrefix(bids, want.Bids) || !isPrefix(asks, want.Asks) {
				t.Fatalf("published a book that the venue never had:\n%s", body)
			}
		}
		if got, want := string(w.book(0).Body()), gapped.body(pairID(1)); got != want {
			t.Fatalf("after the resync: published\n%s\nwant\n%s", got, want)
		}
		if calls := w.v.syncs(gapped.symbol); calls != 2 {
			t.Fatalf("%d snapshot reads for the gapped market, want 2 (the first sync and one resync)", calls)
		}
		if calls := w.v.syncs(w.models[1].symbol); calls != 1 {
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
				if !w.p.served(pairID(1), snapshot.StreamBook, 1) {
					t.Fatal("book not fresh while its stream is in sequence")
				}
				reads := w.v.syncs(w.symbols[0])
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
				if w.p.served(pairID(1), snapshot.StreamBook, 1) {
					t.Fatal("book still fresh past max-stale after its stream was lost")
				}
				w.src.Live(snapshot.StreamBook, w.symbols)
				for range 5 {
					w.tick()
				}
				time.Sleep(400 * time.Millisecond)
				synctest.Wait()
				if !w.p.served(pairID(1), snapshot.StreamBook, 1) {
					t.Fatal("book not fresh again after the stream came back")
				}
				if got, want := string(w.book(0).Body()), w.models[0].body(pairID(1)); got != want {
					t.Fatalf("after the stream came back: published\n%s\nwant\n%s", got, want)
				}
				wantReads, wantLost := reads, 0.0
				if missed > 0 {
					wantReads, wantLost = reads+1, 1
				}
				if got := w.v.syncs(w.symbols[0]); got != wantReads {
					t.Errorf("%d snapshot reads after the stream came back, want %d", got-reads, wantReads-reads)
				}
				want(t, promtext.Scrape(t, w.metrics.WritePrometheus), map[string]float64{
					`marketfeed_book_resyncs_total{cause="lost"}`: wantLost,
					`marketfeed_books_suspended_total`:            1,
				})
			})
		})
	}
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
			w.src.Rows(venue.TickerRows([]venue.Stat{{Symbol: quiet, LastPrice: "1", High: "1", Low: "1", BaseVolume: strconv.Itoa(volume), QuoteVolume: "1"}}))
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
		pairs, _ := w.src.Sources()
		books := pairs[snapshot.StreamBook]
		if books["rest"] != 1 || books["stream"] != 1 {
			t.Fatalf("book sources %v, want one stream and one REST", books)
		}
	})
}

// A book whose side is consumed towards its snapshot's edge asks for a new
// snapshot and is published meanwhile with the levels it can vouch for, an
// exact prefix of the venue's, that side open: it serves requests for no
// more levels than it holds (a request for more has it read, see
// snapshot.Book.Serves); the new snapshot is laid under it without taking
// it out of sequence.
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
		if !w.p.served(pairID(1), snapshot.StreamBook, 1) {
			t.Fatal("a book waiting for a refresh is not served as current")
		}
		if _, asks := b.Levels(); asks != 90 || !b.Open().Asks || !b.Serves(90) || b.Serves(91) {
			t.Fatalf("%d asks published while the refresh waits (open %+v, serves 90: %v, 91: %v), want the 90 vouched for, no more served",
				asks, b.Open(), b.Serves(90), b.Serves(91))
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

// When the venue drops every stream, REST rounds stand in for them for the
// pairs requests read, and leave half the window to the syncs every book
// needs once its stream is back, spread over the minute: they spend under
// their own purpose, keep reading, and never take the window past half the
// budget, however many pairs are read.
func TestStandInsForLostStreamsLeaveHalfTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 40, Config{})
		defer w.stop()
		w.goLive(2400, 5)
		for range 20 {
			w.tick()
		}
		for i := range w.symbols {
			if !w.src.Current(pairID(i+1), snapshot.StreamBook) {
				t.Fatalf("%s not in sequence before the loss", pairID(i+1))
			}
		}
		for i := range w.symbols {
			w.p.Want([]byte(pairID(i+1)), snapshot.StreamBook, time.Now().UnixNano())
		}
		w.src.Lost(snapshot.StreamBook, w.symbols)
		limit, most := w.p.ledger.Limit(), 0
		for range 180 { // every pair due every 350 ms: 2,850 weight a minute wanted
			time.Sleep(time.Second)
			synctest.Wait()
			most = max(most, w.p.ledger.Spent(time.Now()))
			for i := range w.symbols {
				w.p.Want([]byte(pairID(i+1)), snapshot.StreamBook, time.Now().UnixNano())
			}
		}
		standIn := w.weightOf(t, budget.PurposeStandInBook)
		if poll := w.weightOf(t, budget.PurposePollBook); poll != 0 || standIn < 5*limit/4 {
			t.Fatalf("stand-in weight %d, poll weight %d over 3 minutes: want the rounds' reads as stand-ins, near half the budget a minute", standIn, poll)
		}
		if most > limit/2+5 {
			t.Fatalf("the window held %d of %d at most, want at most half", most, limit)
		}
	})
}

// A request for more levels than a book in sequence vouches for waits for
// the book to be read deeper, and gets it; one for no more than it vouches
// for is answered at once, with no read of its own.
func TestLoadOfAShortBookWaitsForItsDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 1, Config{SyncDepth: 150})
		defer w.stop()
		m := w.models[0]
		w.src.Live(snapshot.StreamBook, w.symbols)
		w.tick()
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		w.v.mu.Lock()
		w.v.gate = make(chan struct{}) // hold the book's next snapshot read
		w.v.mu.Unlock()
		w.src.Depth(m.takeAsks(60)) // 90 of the 150 asks vouched for remain
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		reads := w.v.count(venue.CallBook, m.symbol)
		if err := w.p.Load(t.Context(), pairID(1), snapshot.StreamBook, 90); err != nil {
			t.Fatalf("a request for the 90 levels vouched for: %v", err)
		}
		if n := w.v.count(venue.CallBook, m.symbol); n != reads {
			t.Fatalf("%d book reads for a request the book serves, want none", n-reads)
		}
		done := make(chan error, 1)
		go func() { done <- w.p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a request for 100 levels returned (%v) before the book was read deeper", err)
		default:
		}
		w.v.mu.Lock()
		close(w.v.gate)
		w.v.gate = nil
		w.v.mu.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if b := w.book(0); !b.Serves(snapshot.MaxDepth) {
			t.Fatalf("after the request's wait the book (open %+v) does not serve 100 levels", b.Open())
		}
	})
}
