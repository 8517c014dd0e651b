package cluster

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"marketfeed/snapshot"
)

// fakeEntry is a put into the snapshot bucket.
type fakeEntry struct {
	jetstream.KeyValueEntry
	key   string
	value []byte
	rev   uint64
}

func (e fakeEntry) Key() string                     { return e.key }
func (e fakeEntry) Value() []byte                   { return e.value }
func (e fakeEntry) Revision() uint64                { return e.rev }
func (e fakeEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// fakeWatcher is a watch of the snapshot bucket whose entries the test sends.
type fakeWatcher struct {
	updates chan jetstream.KeyValueEntry
	mu      sync.Mutex
	stopped bool
}

func (w *fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w *fakeWatcher) Stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return nil
}

func (w *fakeWatcher) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// fakeSnapshots is the snapshot bucket as far as the watch uses it: each
// WatchAll is a new fakeWatcher.
type fakeSnapshots struct {
	jetstream.KeyValue
	mu      sync.Mutex
	watches []*fakeWatcher
}

func (b *fakeSnapshots) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return b.watch(), nil
}

func (b *fakeSnapshots) watch() *fakeWatcher {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := &fakeWatcher{updates: make(chan jetstream.KeyValueEntry, 8)}
	b.watches = append(b.watches, w)
	return w
}

func (b *fakeSnapshots) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watches)
}

// A leader's store has every value it puts: its watch of the bucket stops
// when it wins a term, so that it does not receive them all back, and
// starts again once the member follows again after the term (not when the
// term ends with the session), the member applying what the bucket holds
// (the new leader's values) before it may stand again.
func TestTheWatchStopsForATermAndStartsAgainAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := snapshot.NewStore()
		m := newMember(Config{Member: "a", Store: store})
		bucket := &fakeSnapshots{}
		m.snaps = bucket
		first := bucket.watch()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.watch(ctx, first)
		}()

		now := time.Now()
		pairs := snapshot.NewPairs([]snapshot.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
			snapshot.PairsConfig{Venue: "sim"}, now)
		value := func(term uint64, v snapshot.Published) []byte {
			return appendValue(nil, header{term: term, venueTime: venueTimeOf(v), publishedAt: now.UnixNano()}, v)
		}
		book := func(price string) *snapshot.Book {
			b, err := snapshot.NewBook("BTC_USDT", now.UnixMilli(), []snapshot.Level{{Price: price, Size: "1"}}, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		first.updates <- fakeEntry{key: "pairs", value: value(1, pairs), rev: 1}
		first.updates <- nil // every value held at the start has come
		synctest.Wait()
		if !m.Synced() || store.Pairs() == nil {
			t.Fatalf("synced %v, pairs %v: the values the bucket held are not applied", m.Synced(), store.Pairs())
		}

		m.setTerm(2) // won
		synctest.Wait()
		if !first.isStopped() {
			t.Fatal("the watch runs on while the member leads")
		}

		m.synced.Store(false) // as stepping down does
		m.setTerm(0)
		synctest.Wait()
		if bucket.count() != 1 {
			t.Fatalf("%d watches begun before the member follows again: a term that ends with the session (NATS gone) would wait on one", bucket.count())
		}
		signal(m.rewatch) // as the campaign does when it follows again
		synctest.Wait()
		if bucket.count() != 2 {
			t.Fatalf("%d watches begun, want a second one once the member follows again", bucket.count())
		}
		next := bucket.watches[1]
		newer := book("101.5")
		next.updates <- fakeEntry{key: "pairs", value: value(1, pairs), rev: 1}
		next.updates <- fakeEntry{key: "book.BTC_USDT", value: value(3, newer), rev: 9}
		next.updates <- nil
		synctest.Wait()
		got, _ := store.Book([]byte("BTC_USDT"), time.Now().UnixNano())
		if !m.Synced() || got == nil || !bytes.Equal(got.Body(), newer.Body()) || m.appliedRev.Load() != 9 {
			t.Fatalf("after the term: synced %v, book %v, applied revision %d; want the new leader's book at 9", m.Synced(), got, m.appliedRev.Load())
		}

		// A term won and lost before the watch sees it (its one signal left
		// for the end): the watch runs on, and the member may stand again.
		m.term.Store(4)
		m.synced.Store(false) // as stepping down does
		m.setTerm(0)
		synctest.Wait()
		if next.isStopped() || !m.Synced() || bucket.count() != 2 {
			t.Fatalf("after a term the watch did not see: stopped %v, synced %v, %d watches", next.isStopped(), m.Synced(), bucket.count())
		}

		cancel()
		<-done
		if !next.isStopped() {
			t.Error("the watch was not stopped when the session ended")
		}
	})
}
