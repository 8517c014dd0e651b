package poller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

func TestLoadSharesOneReadAmongConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(2)
		v.gate = make(chan struct{})
		p, store := newTestPoller(v, Config{})
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range 100 {
			wg.Go(func() {
				p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
				if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
					failed.Add(1)
				}
			})
		}
		synctest.Wait() // every caller is waiting on the one read
		if n := v.count(venue.CallBook, ""); n != 1 {
			t.Fatalf("book calls while 100 callers wait = %d, want 1", n)
		}
		close(v.gate)
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d callers failed", failed.Load())
		}
		if b, _ := store.Book([]byte(pairID(1)), time.Now().UnixNano()); b == nil {
			t.Fatal("no book published after the shared read")
		}
	})
}

func TestLoadWaitsNoLongerThanItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(2)
		v.gate = make(chan struct{}) // the venue never answers
		p, _ := newTestPoller(v, Config{CallTimeout: 5 * time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := p.Load(ctx, pairID(1), snapshot.StreamBook, snapshot.MaxDepth)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Load = %v, want deadline exceeded", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("waited %s, want the caller's 2s", waited)
		}
		p.end() // the read itself ends with the poller
	})
}

// Run owns the poller's one lifetime: once it has returned, every read it
// started has finished, and a request's cold load fails at once instead of
// starting a read nobody waits for.
func TestLoadAfterRunEndedFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(2)
		p, _ := newTestPoller(v, Config{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		before := v.count(venue.CallBook, "")
		if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth); !errors.Is(err, ErrStopped) {
			t.Fatalf("Load after Run = %v, want ErrStopped", err)
		}
		if n := v.count(venue.CallBook, ""); n != before {
			t.Fatalf("%d book reads after Run ended", n-before)
		}
	})
}

func TestLoadOfUnlistedPairFails(t *testing.T) {
	v := newFakeVenue(1)
	p, _ := newTestPoller(v, Config{})
	if err := p.Load(t.Context(), "NOPE_USDT", snapshot.StreamBook, snapshot.MaxDepth); !errors.Is(err, ErrUnlisted) {
		t.Fatalf("Load(unlisted) = %v, want ErrUnlisted", err)
	}
}

// A request is never refused for a budget class's sake while the minute has
// weight for its read: with eight books polled and not one trades read made
// yet, the demand split gave the trades class no cap at all, and the first
// request for a pair's trades failed at once with weight to spare.
func TestColdLoadIsNotRefusedByAClassCapWhileTheLimitHasRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(8)
		v.limit = 2400
		v.weights = [venue.NumCalls]int{venue.CallCatalog: 1, venue.CallStats: 40, venue.CallQuotes: 5, venue.CallBook: 5, venue.CallTrades: 20}
		p, store := newTestPoller(v, Config{Budget: 0.5})
		for i := 1; i <= 8; i++ {
			p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
		}
		p.Refresh(t.Context(), snapshot.StreamBook) // eight pairs' books are polled: all the demand is books'
		for i := 1; i <= 8; i++ {
			id := pairID(i)
			p.Want([]byte(id), snapshot.StreamTrades, time.Now().UnixNano())
			if err := p.Load(t.Context(), id, snapshot.StreamTrades, snapshot.MaxTrades); err != nil {
				t.Fatalf("trades of %s: %v, with %d of 1200 weight spent", id, err, p.ledger.Spent(time.Now()))
			}
			if tr, _ := store.Trades([]byte(id), time.Now().UnixNano()); tr == nil {
				t.Fatalf("trades of %s not published", id)
			}
		}
		if n := v.count(venue.CallTrades, ""); n != 8 {
			t.Fatalf("%d trades reads, want 8", n)
		}
	})
}

// Over REST alone, a book is read at 100 levels, which are the venue's top
// 100 or its whole side: it is published with both sides closed and
// serves every depth, so no request for fewer levels has it read again.
func TestRESTBookServesEveryDepth(t *testing.T) {
	v := newFakeVenue(1)
	p, store := newTestPoller(v, Config{})
	if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
		t.Fatal(err)
	}
	b, _ := store.Book([]byte(pairID(1)), time.Now().UnixNano())
	if b == nil || b.Open() != (snapshot.Open{}) || !b.Serves(snapshot.MaxDepth) {
		t.Fatalf("a REST book published as %v, want both sides closed, serving 100 levels", b)
	}
}
