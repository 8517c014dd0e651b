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
				p.Want([]byte(pairID(1)), snapshot.StreamBook)
				if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook); err != nil {
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
		err := p.Load(ctx, pairID(1), snapshot.StreamBook)
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
		if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook); !errors.Is(err, ErrStopped) {
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
	if err := p.Load(t.Context(), "NOPE_USDT", snapshot.StreamBook); !errors.Is(err, ErrUnlisted) {
		t.Fatalf("Load(unlisted) = %v, want ErrUnlisted", err)
	}
}
