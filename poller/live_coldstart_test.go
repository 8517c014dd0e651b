package poller

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

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
			done <- w.p.Load(ctx, pairID(last), snapshot.StreamBook, snapshot.MaxDepth)
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
						w.p.hot[s].want([]byte(pairID(j+1)), time.Now().UnixNano())
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
