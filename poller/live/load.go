package live

import (
	"context"
	"fmt"
	"time"

	"marketfeed/snapshot"
)

// Load makes a pair's stream-fed snapshot of k current for a waiting
// request: its book synced or its trades backfilled, ahead of every other
// pair, and a book that serves depth levels a side (see
// snapshot.Book.Serves): a book in sequence that vouches for fewer is read
// deeper for the request (see tierAsked). It reports false when the pair's
// stream is not delivering, so that the caller reads REST instead.
//
// The requests for one stream of a pair share one call (the poller's
// flights), so one mark of the wait is enough: the call that set it is the
// only one to clear it.
func (s *Source) Load(ctx context.Context, id string, k snapshot.Stream, depth int) (bool, error) {
	lp := s.byID(id)
	if lp == nil {
		return false, nil
	}
	waiting := &lp.kind(k).feed().waiting
	waiting.Store(time.Now().UnixNano())
	defer waiting.Store(0)
	if k.Deep() {
		defer func() {
			lp.mu.Lock()
			lp.asked = 0
			lp.mu.Unlock()
		}()
	}
	for {
		now := time.Now().UnixNano()
		if v, listed := s.cfg.Store.Pair(k, []byte(id), now); listed && v.FreshAt(now, s.cfg.MaxStale) && v.Serves(depth) {
			return true, nil
		}
		lp.mu.Lock()
		if !lp.streaming(k) {
			lp.mu.Unlock()
			return false, nil
		}
		if k.Deep() {
			lp.ask(depth)
		}
		next := lp.kind(k).feed().next()
		lp.mu.Unlock()
		s.poke() // start its read now, not at the next tick
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("load %s %s from the stream: %w", k, id, ctx.Err())
		case <-next:
		}
	}
}
