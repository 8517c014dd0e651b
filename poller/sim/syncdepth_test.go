package sim

import (
	"slices"
	"testing"
	"time"

	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
)

// How deep a local book's snapshot must be: a book synced from a snapshot
// of D levels a side can vouch only for the levels within that edge, and
// asks for a new snapshot once the top is consumed to within 150 levels of
// it (the poller's refreshBelow), before it runs short of the 100 levels
// published. This replays ten minutes of heartbeats of built-in and
// synthetic markets through a local book and counts those snapshots, and
// their weight, for each depth the venue sells (Binance: 100 levels weigh
// 5, 500 weigh 10, 1000 weigh 20).
func TestSnapshotDepthResyncs(t *testing.T) {
	if testing.Short() {
		t.Skip("replays ten minutes of heartbeats")
	}
	v := New(Config{Seed: 1, Extra: 6})
	symbols := []string{"BTCUSDT", "ETHUSDT", "DOGEUSDT", "1000PEPEUSDT", "SOLUSDT", "ADAUSDT",
		"SIM001USDT", "SIM002USDT", "SIM003USDT", "SIM004USDT", "SIM005USDT", "SIM006USDT"}
	weight := map[int]int{100: 5, 500: 10, 1000: 20}
	start := Heartbeat(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	const heartbeats = 6000 // ten minutes
	resyncs := map[int]int{}
	for _, depth := range []int{100, 500, 1000} {
		refreshBelow := min(150, depth)
		for _, sym := range symbols {
			b := orderbook.New()
			snapshotAt := func(k int64) venue.Book {
				u, err := v.UpdateID(sym, k)
				if err != nil {
					t.Fatal(err)
				}
				snap, err := v.BookAt(sym, u, depth)
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
			if err := b.Sync(snapshotAt(start), depth); err != nil {
				t.Fatal(err)
			}
			for k := start + 1; k <= start+heartbeats; k++ {
				u, err := v.DepthUpdate(sym, k)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Apply(u); err != nil {
					t.Fatalf("%s depth %d: %v", sym, depth, err)
				}
				if b.Short(refreshBelow) {
					// The snapshot is read at once and laid under the
					// book, which stays in sequence.
					resyncs[depth]++
					b.Record()
					if err := b.Refresh(snapshotAt(k), depth); err != nil {
						t.Fatal(err)
					}
				}
				if b.Short(100) {
					t.Fatalf("%s depth %d: fewer than 100 levels right after a refresh", sym, depth)
				}
				if k%50 == 0 {
					// What the book would publish is the venue's true top
					// 100, whatever it kept from before a refresh; now and
					// then, everything it vouches for (up to the 1000 the
					// venue shows) is checked too.
					n := 100
					if k%500 == 0 {
						n = min(b.Vouched(), 1000)
					}
					truth, err := v.BookAt(sym, b.LastUpdateID(), n)
					if err != nil {
						t.Fatal(err)
					}
					if bids, asks := b.Top(n); !slices.Equal(bids, truth.Bids) || !slices.Equal(asks, truth.Asks) {
						t.Fatalf("%s depth %d, heartbeat %d: the local book's top %d is not the venue's", sym, depth, k, n)
					}
				}
			}
		}
		t.Logf("snapshot depth %4d: %5d refreshes in 10 minutes of %d markets: %.1f weight a minute per market",
			depth, resyncs[depth], len(symbols), float64(resyncs[depth]*weight[depth])/10/float64(len(symbols)))
	}
	if resyncs[500] > resyncs[100] || resyncs[1000] > resyncs[500] {
		t.Fatalf("a deeper snapshot needed more re-snapshots: %v", resyncs)
	}
}
