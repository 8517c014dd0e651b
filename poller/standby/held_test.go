package standby

import (
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// What a member holds of a pair's streams is what its store's values
// cover: its book's update id, and its newest trade's.
func TestHeldByIsWhatTheStoreCovers(t *testing.T) {
	store := snapshot.NewStore()
	store.PutDoc(testPairs(), time.Now())
	held := HeldBy(store)
	const id = "BTC_USDT"
	if got := held(snapshot.StreamBook, id); got != 0 {
		t.Errorf("an empty store covers book id %d", got)
	}
	store.PutBook(snapshot.NewCheckedBook(id, 1, 42, []venue.Level{{Price: "99", Size: "1"}}, []venue.Level{{Price: "101", Size: "1"}}, time.Now()))
	tr, err := snapshot.NewTrades(id, []venue.Trade{{ID: 7, Time: 1, Price: "100", Size: "1"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	store.PutTrades(tr)
	if got := held(snapshot.StreamBook, id); got != 42 {
		t.Errorf("book covered to %d, want 42", got)
	}
	if got := held(snapshot.StreamTrades, id); got != 7 {
		t.Errorf("trades covered to %d, want 7", got)
	}
}
