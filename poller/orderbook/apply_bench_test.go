package orderbook

import (
	"fmt"
	"testing"
	"time"

	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// BenchmarkApplySim applies the simulated venue's diff events, the ones
// venuesim streams, to books synced from its 1000-level snapshots, in the
// order a connection gets them (every market's event of a heartbeat, then
// the next heartbeat's): 16 markets for 2000 heartbeats (200 s), whose
// books stay in the processor's caches, and 846 for 100 (10 s), whose
// books (54 MB of levels) do not, as in a feed of 846 pairs. One op is one
// event; levels/op is how many levels an event carries, both sides. Each
// twice: window=0 is venuesim's default diffs (about 14 levels a side, a
// few hundred levels deep), window=50 diffs of the venue's recorded shape
// (sim.Config.DepthWindow 50: about 4 a side, a few dozen deep). The
// events are built before the clock starts, and when they run out the
// books are synced again with the clock stopped.
func BenchmarkApplySim(b *testing.B) {
	for _, window := range []int{0, 50} {
		b.Run(fmt.Sprintf("window=%d/markets=16", window), func(b *testing.B) { benchApplySim(b, window, 16, 2000) })
		b.Run(fmt.Sprintf("window=%d/markets=846", window), func(b *testing.B) { benchApplySim(b, window, 846, 100) })
	}
}

func benchApplySim(b *testing.B, window, markets int, heartbeats int64) {
	v := sim.New(sim.Config{Seed: 1, Extra: markets, DepthWindow: window})
	k0 := sim.Heartbeat(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	syms := make([]string, markets)
	snaps := make([]venue.Book, markets)
	var events []venue.DepthUpdate
	var ofMarket []int
	levels := 0
	for m := range markets {
		syms[m] = fmt.Sprintf("SIM%03dUSDT", m+1)
		id, err := v.UpdateID(syms[m], k0)
		if err != nil {
			b.Fatal(err)
		}
		if snaps[m], err = v.BookAt(syms[m], id, 1000); err != nil {
			b.Fatal(err)
		}
	}
	for k := k0 + 1; k <= k0+heartbeats; k++ {
		for m, sym := range syms {
			u, err := v.DepthUpdate(sym, k)
			if err != nil {
				b.Fatal(err)
			}
			events = append(events, u)
			ofMarket = append(ofMarket, m)
			levels += len(u.Bids) + len(u.Asks)
		}
	}
	books := make([]*Book, markets)
	start := func() {
		for m := range books {
			books[m] = New()
			if err := books[m].Sync(snaps[m], 1000); err != nil {
				b.Fatal(err)
			}
		}
	}
	start()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(events) {
			b.StopTimer()
			start()
			i = 0
			b.StartTimer()
		}
		if err := books[ofMarket[i]].Apply(events[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(levels)/float64(len(events)), "levels/op")
}
