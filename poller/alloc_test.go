//go:build !race

package poller

import (
	"testing"

	"marketfeed/snapshot"
)

// Want runs on every /orderbook and /trades request: once a pair is hot it
// must not allocate.
func TestWantDoesNotAllocateForAHotPair(t *testing.T) {
	v := newFakeVenue(1)
	p, _ := newTestPoller(v, Config{})
	id := []byte(pairID(1))
	p.Want(id, snapshot.StreamBook)
	if n := testing.AllocsPerRun(1000, func() { p.Want(id, snapshot.StreamBook) }); n != 0 {
		t.Fatalf("Want allocates %v times per call", n)
	}
}

func BenchmarkWant(b *testing.B) {
	v := newFakeVenue(1)
	p, _ := newTestPoller(v, Config{})
	id := []byte(pairID(1))
	p.Want(id, snapshot.StreamBook)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Want(id, snapshot.StreamBook)
		}
	})
}
