package live

import (
	"fmt"
	"testing"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// BenchmarkTradeWindowAdd is a trade from the stream into a full window,
// the usual case once a pair has traded for a while: the newest trade goes
// in and the oldest out. Its strings are lent, as the adapter lends a
// frame's, and kept by the window. With 846 pairs the trades go to each
// window in turn, as the market's do, so that a window is rarely in the
// cache when its trade comes.
func BenchmarkTradeWindowAdd(b *testing.B) {
	for _, pairs := range []int{1, 846} {
		b.Run(fmt.Sprintf("pairs=%d", pairs), func(b *testing.B) {
			windows := make([]tradeWindow, pairs)
			frame := []byte("60000.100.005")
			tr := venue.Trade{Time: 1767225600450, Price: string(frame[:8]), Size: string(frame[8:])}
			id := int64(1_000_000_000_000)
			for range snapshot.MaxTrades {
				id++
				tr.ID = id
				for i := range windows {
					windows[i].add(tr)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == 0 {
					id++
					tr.ID = id
				}
				if !windows[i].add(tr) {
					b.Fatal("a newer trade was not added")
				}
				if i++; i == pairs {
					i = 0
				}
			}
		})
	}
}
