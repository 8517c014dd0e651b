package sim

import (
	"testing"
	"time"

	"marketfeed/poller"
)

// How deep a local book's snapshot must be: a book synced from a snapshot
// of D levels a side can vouch only for the levels within that edge, and
// needs a new snapshot once the top is consumed below the 100 levels
// published. This replays ten minutes of heartbeats of several markets
// through a local book and counts those re-snapshots for each depth the
// venue sells (Binance: 100 levels weigh 5, 500 weigh 10, 1000 weigh 20).
func TestSnapshotDepthResyncs(t *testing.T) {
	if testing.Short() {
		t.Skip("replays ten minutes of heartbeats")
	}
	v := New(Config{Seed: 1})
	symbols := []string{"BTCUSDT", "ETHUSDT", "DOGEUSDT", "1000PEPEUSDT", "SOLUSDT", "ADAUSDT"}
	start := Heartbeat(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	const heartbeats = 6000 // ten minutes
	resyncs := map[int]int{}
	for _, depth := range []int{100, 500, 1000} {
		for _, sym := range symbols {
			b := poller.NewOrderBook()
			sync := func(k int64) {
				u, err := v.UpdateID(sym, k)
				if err != nil {
					t.Fatal(err)
				}
				snap, err := v.BookAt(sym, u, depth)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(snap, depth); err != nil {
					t.Fatal(err)
				}
			}
			sync(start)
			for k := start + 1; k <= start+heartbeats; k++ {
				u, err := v.DepthUpdate(sym, k)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Apply(u); err != nil {
					t.Fatalf("%s depth %d: %v", sym, depth, err)
				}
				if b.Short(100) {
					resyncs[depth]++
					b.Desync()
					sync(k)
				}
			}
		}
		t.Logf("snapshot depth %4d: %3d re-snapshots in 10 minutes of %d markets", depth, resyncs[depth], len(symbols))
	}
	if resyncs[500] > resyncs[100] || resyncs[1000] > resyncs[500] {
		t.Fatalf("a deeper snapshot needed more re-snapshots: %v", resyncs)
	}
}
