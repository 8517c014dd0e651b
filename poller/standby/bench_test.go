package standby

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// sinkFunc is a venue.Sink that counts the depth events it gets and does
// nothing else: what a benchmark of the relay leaves of the poller.
type sinkFunc struct{ depth atomic.Int64 }

func (s *sinkFunc) Depth(venue.DepthUpdate)                     { s.depth.Add(1) }
func (s *sinkFunc) Trade(string, venue.Trade)                   {}
func (s *sinkFunc) Rows(venue.Rows)                             {}
func (s *sinkFunc) Live(snapshot.Stream, []string)              {}
func (s *sinkFunc) Lost(snapshot.Stream, []string)              {}
func (s *sinkFunc) Run(ctx context.Context, _ venue.Sink) error { <-ctx.Done(); return ctx.Err() }
func (s *sinkFunc) Watch([]string)                              {}
func (s *sinkFunc) Resubscribe(snapshot.Stream, string)         {}

// benchPairs is the number of pairs a benchmark's events go round, and
// benchEvery the events of a pair between two of the member's depths: a
// depth every 5 s of a stream at 100 ms.
const (
	benchPairs = 64
	benchEvery = 50
)

// benchMarket is a relay of benchPairs pairs whose streams are live, and
// an event of each pair to send it, lent as an adapter lends its frame;
// the member's depth of a pair covers its events up to the last multiple
// of benchEvery, as a leader's depth publications do.
type benchMarket struct {
	r       *Relay
	symbols []string
	events  []venue.DepthUpdate
	last    []atomic.Int64 // by pair: the last update id sent
}

func newBenchMarket(b testing.TB) *benchMarket {
	b.Helper()
	m := &benchMarket{last: make([]atomic.Int64, benchPairs)}
	markets := make([]venue.Market, benchPairs)
	index := map[string]int{}
	for i := range markets {
		base := fmt.Sprintf("C%03d", i)
		markets[i] = venue.Market{Symbol: base + "USDT", Base: base, Quote: "USDT", Perpetual: true, Trading: true}
		m.symbols = append(m.symbols, markets[i].Symbol)
		index[base+"_USDT"] = i
		levels := make([]venue.Level, 20)
		for j := range levels {
			levels[j] = venue.Level{Price: strconv.Itoa(60000+j) + ".10", Size: "0." + strconv.Itoa(1000+j)}
		}
		m.events = append(m.events, venue.DepthUpdate{Symbol: markets[i].Symbol, Bids: levels[:10], Asks: levels[10:]})
	}
	held := func(k snapshot.Stream, id string) int64 {
		if i, ok := index[id]; ok && k == snapshot.StreamBook {
			last := m.last[i].Load()
			return last - last%benchEvery
		}
		return 0
	}
	m.r = New(&sinkFunc{}, held, nil)
	m.r.Follow(snapshot.NewPairs(markets, snapshot.PairsConfig{Venue: "sim"}, time.Now()))
	m.r.Live(snapshot.StreamBook, m.symbols)
	return m
}

// lead lends the relay's streams to sink, as to an elected member's
// poller listing every pair, until the benchmark ends.
func (m *benchMarket) lead(b testing.TB, sink venue.Sink) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.r.Streams().Run(ctx, sink); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	for !lending(m.r, sink) {
		time.Sleep(time.Millisecond)
	}
	m.r.Streams().Watch(m.symbols)
}

// send sends pair i's next event.
func (m *benchMarket) send(i int) {
	u := m.events[i]
	u.Last = m.last[i].Add(1)
	u.First, u.Prev = u.Last, u.Last-1
	m.r.Depth(u)
}

// The depth event path of a relay: a leader's, whose poller has every pair
// (the event passed on, and held past the member's last depth), and a
// follower's (held only); in parallel, two streams' goroutines of a
// leader delivering different pairs at once.
func BenchmarkRelayDepth(b *testing.B) {
	b.Run("leader", func(b *testing.B) {
		m := newBenchMarket(b)
		sink := &sinkFunc{}
		m.lead(b, sink)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.send(i % benchPairs)
			i++
		}
		if sink.depth.Load() == 0 {
			b.Fatal("the poller got no event")
		}
	})
	b.Run("follower", func(b *testing.B) {
		m := newBenchMarket(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.send(i % benchPairs)
			i++
		}
	})
	b.Run("leader-parallel", func(b *testing.B) {
		m := newBenchMarket(b)
		m.lead(b, &sinkFunc{})
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine its own pairs: a symbol's events come one at
			// a time, as the adapter delivers them.
			g, i := int(next.Add(1)), 0
			for pb.Next() {
				m.send((g + i*8) % benchPairs)
				i++
			}
		})
	})
}

// lending reports whether r's streams run with sink.
func lending(r *Relay, sink venue.Sink) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sink == sink
}
