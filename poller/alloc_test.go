//go:build !race

package poller

import (
	"testing"
	"time"

	"marketfeed/snapshot"
)

// Want runs on every /orderbook and /trades request: once a pair is hot it
// must not allocate.
func TestWantDoesNotAllocateForAHotPair(t *testing.T) {
	v := newFakeVenue(1)
	p, _ := newTestPoller(v, Config{})
	id := []byte(pairID(1))
	now := time.Now().UnixNano()
	p.Want(id, snapshot.StreamBook, now)
	if n := testing.AllocsPerRun(1000, func() { p.Want(id, snapshot.StreamBook, now) }); n != 0 {
		t.Fatalf("Want allocates %v times per call", n)
	}
}

// BenchmarkWant is Want alone, given the request's time as the server
// gives it.
func BenchmarkWant(b *testing.B) {
	v := newFakeVenue(1)
	p, _ := newTestPoller(v, Config{})
	id := []byte(pairID(1))
	now := time.Now().UnixNano()
	p.Want(id, snapshot.StreamBook, now)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Want(id, snapshot.StreamBook, now)
		}
	})
}
