package poller

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/internal/promtext"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// probeMaxStale is the probe tests' max-stale: a book is probed after 2 s
// of quiet.
const probeMaxStale = 6 * time.Second

// newProbeWorld is a stream world of n books at probeMaxStale, each synced
// and a few events in.
func newProbeWorld(t *testing.T, n int, cfg Config) *streamWorld {
	cfg.MaxStale = probeMaxStale
	w := newStreamWorld(t, n, cfg)
	w.goLive(2400, 5)
	for range 5 {
		w.tick()
	}
	return w
}

// A quiet book that requests read goes on answering: every few seconds a
// probe of a few levels proves it current, and it is published as read at
// the probe. A quiet book nobody reads is not probed and ages out; the
// first request for it waits for its probe and is answered.
func TestQuietBookIsProvenCurrentByProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newProbeWorld(t, 2, Config{})
		defer w.stop()
		read, quiet := pairID(1), pairID(2)
		w.p.Want([]byte(read), snapshot.StreamBook, time.Now().UnixNano())
		time.Sleep(3 * probeMaxStale) // the market is quiet: no event
		synctest.Wait()
		if !w.store.FreshAt(snapshot.StreamBook, []byte(read), time.Now().UnixNano(), probeMaxStale) {
			t.Fatal("a quiet book that requests read aged out: no probe proved it current")
		}
		b := w.book(0)
		if age := time.Since(time.Unix(0, b.ReadAt())); age > 2500*time.Millisecond {
			t.Fatalf("book read %s ago, want within a probe period (2 s) and its read", age)
		}
		if got, want := string(b.Body()), w.models[0].body(read); got != want {
			t.Fatalf("probed book\n%s\nwant the venue's\n%s", got, want)
		}
		if n := w.v.probes(w.symbols[0]); n < 7 || n > 9 {
			t.Fatalf("%d probes in 18 s of quiet, want one every 2 s", n)
		}
		if n := w.v.probes(w.symbols[1]); n != 0 {
			t.Fatalf("%d probes of a book nobody reads", n)
		}
		if w.store.FreshAt(snapshot.StreamBook, []byte(quiet), time.Now().UnixNano(), probeMaxStale) {
			t.Fatal("a quiet book nobody reads is still fresh with nothing to prove it")
		}
		if err := w.p.Load(t.Context(), quiet, snapshot.StreamBook, snapshot.MaxDepth); err != nil {
			t.Fatalf("first request for a quiet book: %v", err)
		}
		if !w.store.FreshAt(snapshot.StreamBook, []byte(quiet), time.Now().UnixNano(), probeMaxStale) || w.v.probes(w.symbols[1]) != 1 {
			t.Fatalf("after its request: fresh %v with %d probes, want fresh after one",
				w.store.FreshAt(snapshot.StreamBook, []byte(quiet), time.Now().UnixNano(), probeMaxStale), w.v.probes(w.symbols[1]))
		}
		if n := w.v.syncs(""); n != 2 {
			t.Fatalf("%d syncs, want one a book", n)
		}
	})
}

// A subscription that goes silent while the venue's book moves is found out
// by the book's first probe: the book is not confirmed again, its stream is
// subscribed again, and until it delivers the pair is served by REST reads
// of the venue's book, never the silent stream's stale one.
func TestSilentSubscriptionIsFoundOutByAProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newProbeWorld(t, 2, Config{})
		defer w.stop()
		id, sym := pairID(1), w.symbols[0]
		w.p.Want([]byte(id), snapshot.StreamBook, time.Now().UnixNano())
		silentAt := w.book(0).Time()
		for range 50 { // 5 s: the venue's book moves, its stream says nothing
			w.tick(sym)
		}
		m := promtext.Scrape(t, w.metrics.WritePrometheus)
		if got := m[`marketfeed_book_probes_total{outcome="behind"}`]; got != 1 {
			t.Fatalf("probes that found the venue's book ahead: %v, want 1", got)
		}
		if got := m[`marketfeed_book_resyncs_total{cause="silent"}`]; got != 1 {
			t.Fatalf("silent resyncs: %v, want 1", got)
		}
		w.fs.mu.Lock()
		resubbed := slices.Clone(w.fs.resubbed)
		w.fs.mu.Unlock()
		if !slices.Contains(resubbed, "book "+sym) {
			t.Fatalf("resubscribed %v, want the silent book's stream", resubbed)
		}
		if w.src.Streaming(id, snapshot.StreamBook) {
			t.Fatal("the silent stream still keeps the pair")
		}
		for range 10 {
			w.tick(sym)
		}
		b := w.book(0)
		if b.Time() <= silentAt || !w.store.FreshAt(snapshot.StreamBook, []byte(id), time.Now().UnixNano(), probeMaxStale) {
			t.Fatalf("served a book of venue time %d (the silence began at %d), fresh %v: want REST reads of the venue's book",
				b.Time(), silentAt, w.store.FreshAt(snapshot.StreamBook, []byte(id), time.Now().UnixNano(), probeMaxStale))
		}
		// The stream delivers again: the book syncs and the stream keeps it.
		for range 20 {
			w.tick()
		}
		if !w.src.Current(id, snapshot.StreamBook) {
			t.Fatal("the stream that delivers again does not keep the book")
		}
	})
}

// A quiet spot pair's book is probed though nobody reads it: its mid is the
// pair's ticker, which must not age out of the tickers' freshness and have
// the bulk quotes stand in for it.
func TestQuietSpotBookIsProbedForItsTicker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newProbeWorld(t, 2, Config{Spot: []string{pairID(1)}})
		defer w.stop()
		time.Sleep(3 * probeMaxStale)
		synctest.Wait()
		if n := w.v.probes(w.symbols[0]); n < 7 {
			t.Fatalf("%d probes of the quiet spot book in 18 s, want one every 2 s", n)
		}
		if n := w.v.probes(w.symbols[1]); n != 0 {
			t.Fatalf("%d probes of a quiet perpetual nobody reads", n)
		}
		spot, _ := w.store.Pairs().Lookup(pairID(1))
		quotes, at, all := w.src.Quotes([]snapshot.Pair{spot}, time.Now())
		if !all || len(quotes) != 1 || time.Since(at[0]) > 2500*time.Millisecond {
			t.Fatalf("spot quote %v at %v (all fresh: %v), want one proven within a probe period", quotes, at, all)
		}
	})
}

// A stream that lags is not a silent one: a probe that finds the venue's
// book ahead while the stream's reader is held up for a few seconds
// confirms nothing, but once the late events come, the book goes on in
// sequence with no resync and no resubscription.
func TestLaggingStreamIsNotTakenForASilentOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newProbeWorld(t, 1, Config{})
		defer w.stop()
		id, m := pairID(1), w.models[0]
		w.p.Want([]byte(id), snapshot.StreamBook, time.Now().UnixNano())
		var late []venue.DepthUpdate
		for range 25 { // 2.5 s: events made, held up on their way
			late = append(late, m.next())
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		for _, u := range late {
			w.src.Depth(u)
		}
		for range 30 {
			w.tick()
		}
		time.Sleep(400 * time.Millisecond) // a publication period
		synctest.Wait()
		got := promtext.Scrape(t, w.metrics.WritePrometheus)
		if got[`marketfeed_book_probes_total{outcome="behind"}`] != 1 {
			t.Fatalf("probes that found the book behind: %v, want 1", got[`marketfeed_book_probes_total{outcome="behind"}`])
		}
		if got[`marketfeed_book_resyncs_total{cause="silent"}`] != 0 || len(w.fs.resubbed) != 0 {
			t.Fatalf("a lagging stream was taken for silent: %v silent resyncs, resubscribed %v",
				got[`marketfeed_book_resyncs_total{cause="silent"}`], w.fs.resubbed)
		}
		if !w.src.Current(id, snapshot.StreamBook) || w.v.syncs("") != 1 {
			t.Fatalf("after the late events: current %v, %d syncs; want the book in sequence from its one sync",
				w.src.Current(id, snapshot.StreamBook), w.v.syncs(""))
		}
		b, want := w.book(0), m.snapshot(snapshot.MaxDepth)
		if bids, asks := b.Sides(); b.Time() != want.Time || !isPrefix(bids, want.Bids) || !isPrefix(asks, want.Asks) {
			t.Fatalf("published\n%s\nwant the venue's book at %d", b.Body(), want.Time)
		}
	})
}
