package poller

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/internal/promtext"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Sources reads in JSON as it always has: each kind's counts under its
// part's name, between the tickers' source and the book sync.
func TestSourcesJSON(t *testing.T) {
	src := Sources{Tickers: "stream", BookSync: &BookSync{Waiting: 2, PerMinute: 30, ETA: 4}}
	src.Pairs[snapshot.StreamBook] = map[string]int{"stream": 3, "syncing": 2, "rest": 0}
	src.Pairs[snapshot.StreamTrades] = map[string]int{"stream": 5, "syncing": 0, "rest": 0}
	got, err := json.Marshal(&src)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"tickers":"stream","books":{"rest":0,"stream":3,"syncing":2},"trades":{"rest":0,"stream":5,"syncing":0},` +
		`"book_sync":{"waiting":2,"per_minute":30,"eta_seconds":4}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var back Sources
	if err := json.Unmarshal(got, &back); err != nil || back.BookSync == nil || *back.BookSync != *src.BookSync ||
		back.Tickers != src.Tickers || back.Pairs[snapshot.StreamBook]["syncing"] != 2 || back.Pairs[snapshot.StreamTrades]["stream"] != 5 {
		t.Errorf("read back as %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"tickers":"rest","bids":{}}`), &back); err == nil {
		t.Error("an unknown member was read")
	}
	src.BookSync = nil
	if got, _ := json.Marshal(src); string(got) != `{"tickers":"stream","books":{"rest":0,"stream":3,"syncing":2},"trades":{"rest":0,"stream":5,"syncing":0}}` {
		t.Errorf("without a book sync: %s", got)
	}
}

// During a stream drop the books without a usable stream are read over REST
// only as the budget allows: one whose due read the budget holds back is
// reported as waiting for budget, not as read over REST (/readyz once said
// "rest" for books no read was reaching), by the status and the metric
// alike, and as read over REST again once a read reaches it.
func TestStatusSaysWhichPairsWaitForBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newStreamWorld(t, 2, Config{})
		defer w.stop()
		w.v.mu.Lock()
		w.v.limit = 2400
		w.v.weights[venue.CallBook] = 2000 // more than a minute's budget: every read is held back
		w.v.mu.Unlock()
		if err := w.p.RefreshCatalog(context.Background()); err != nil {
			t.Fatal(err)
		}
		books := func() map[string]int { return w.p.Status().Sources.Pairs[snapshot.StreamBook] }
		if got := books(); got["rest"] != 2 || got["budget"] != 0 {
			t.Fatalf("before any request: %v, want both pairs rest (read when asked for)", got)
		}
		for i := range 2 {
			w.p.Want([]byte(pairID(i+1)), snapshot.StreamBook, time.Now().UnixNano())
		}
		w.p.Refresh(t.Context(), snapshot.StreamBook)
		if got := books(); got["budget"] != 2 || got["rest"] != 0 {
			t.Errorf("hot pairs whose reads the budget held back: %v, want budget 2, rest 0", got)
		}
		want(t, promtext.Scrape(t, w.metrics.WritePrometheus), map[string]float64{
			`marketfeed_pairs{part="books",source="budget"}`: 2,
			`marketfeed_pairs{part="books",source="rest"}`:   0,
		})
		w.v.mu.Lock()
		w.v.weights[venue.CallBook] = 1
		w.v.mu.Unlock()
		time.Sleep(time.Second) // the next round's tick
		w.p.Refresh(t.Context(), snapshot.StreamBook)
		synctest.Wait()
		if got := books(); got["budget"] != 0 || got["rest"] != 2 {
			t.Errorf("hot pairs read over REST: %v, want rest 2, budget 0", got)
		}
	})
}
