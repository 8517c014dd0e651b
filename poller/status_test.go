package poller

import (
	"encoding/json"
	"testing"

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
