package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// maxCatchUp is how many heartbeats a stream that fell behind (a slow sink,
// a stalled process) replays one by one. Further behind, each watched
// market gets one diff event spanning the whole gap, chained like any other,
// and the trades of only the last maxCatchUp heartbeats: a venue's stream
// does not replay minutes of trades either, and the poller backfills them.
const maxCatchUp = 50

// wholeMarketEvery is the cadence of the streams of every market at once
// (the tickers, the mark prices), in heartbeats: once a second, as a
// venue's.
const wholeMarketEvery = 1000 / tickMs

// Streams is the simulated venue's market streams, in process: no
// connection, no encoding, the same events a Binance-compatible venue's
// depth, aggregate trade, all-market ticker and mark price streams carry
// (kinds and wholeMarket). Watch and
// Resubscribe may be called from any goroutine; Run is meant to run once at
// a time.
type Streams struct {
	v *Venue

	mu      sync.Mutex
	watched []*market // sorted by symbol; replaced, never changed in place
	live    [snapshot.NumStreams][]string
	lost    []string
}

// Streams returns the venue's market streams. Each call returns streams of
// their own, watching nothing.
func (v *Venue) Streams() *Streams { return &Streams{v: v} }

var _ venue.Streams = (*Streams)(nil)

// Watch sets the symbols whose depth and trade streams are delivered. Newly
// watched symbols are reported Live at the next heartbeat; symbols the venue
// does not list are reported Lost, as a refused subscription is.
func (s *Streams) Watch(symbols []string) {
	syms := slices.Clone(symbols)
	slices.Sort(syms)
	syms = slices.Compact(syms)
	watched := make([]*market, 0, len(syms))
	s.mu.Lock()
	defer s.mu.Unlock()
	was := make(map[*market]bool, len(s.watched))
	for _, m := range s.watched {
		was[m] = true
	}
	for _, sym := range syms {
		m, ok := s.v.bySymbol[sym]
		if !ok {
			s.lost = append(s.lost, sym)
			continue
		}
		watched = append(watched, m)
		if !was[m] {
			for k := range s.live {
				s.live[k] = append(s.live[k], sym)
			}
		}
	}
	s.watched = watched
}

// Resubscribe reports a watched symbol's stream Live again at the next
// heartbeat; the simulated streams never go silent, so there is nothing
// else to redo. An unwatched symbol is ignored.
func (s *Streams) Resubscribe(kind snapshot.Stream, symbol string) {
	kindOf(kind) // a kind with no row is a programming error
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.watched {
		if m.info.Symbol == symbol {
			s.live[kind] = append(s.live[kind], symbol)
			return
		}
	}
}

// Run delivers the streams into sink until ctx is done, and returns ctx's
// error. On every 100 ms tick of a time.Ticker it reads the venue clock and
// delivers, for each heartbeat since the last one delivered and for each
// watched symbol in symbol order, the heartbeat's diff event and the trades
// of the heartbeat that just ended; once a second it delivers the rows of
// every whole-market stream. Every watched symbol is reported Live when Run
// starts. Events chain across the whole run: a heartbeat is never skipped
// (see maxCatchUp for a run that fell far behind). A venue clock that stands
// still or goes back delivers nothing until it passes the last heartbeat.
func (s *Streams) Run(ctx context.Context, sink venue.Sink) error {
	tk := time.NewTicker(tickMs * time.Millisecond)
	defer tk.Stop()
	last := floorDiv(s.v.now().UnixMilli(), tickMs)
	// A run is a fresh connection: every watched symbol becomes live once,
	// whatever Watch queued before.
	s.mu.Lock()
	syms := make([]string, len(s.watched))
	for i, m := range s.watched {
		syms[i] = m.info.Symbol
	}
	for k := range s.live {
		s.live[k] = slices.Clone(syms)
	}
	s.mu.Unlock()
	s.report(sink)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
		}
		now := s.v.now().UnixMilli()
		s.report(sink)
		if k := floorDiv(now, tickMs); k > last {
			s.deliver(sink, last, k, now)
			last = k
		}
	}
}

// report passes on the Live and Lost reports that Watch and Resubscribe
// queued. The sink is called without the lock held.
func (s *Streams) report(sink venue.Sink) {
	s.mu.Lock()
	live, lost := s.live, s.lost
	s.live, s.lost = [snapshot.NumStreams][]string{}, nil
	s.mu.Unlock()
	if len(lost) > 0 {
		for k := range snapshot.NumStreams {
			sink.Lost(k, lost)
		}
	}
	for kind, syms := range live {
		if len(syms) > 0 {
			sink.Live(snapshot.Stream(kind), syms)
		}
	}
}

// deliver sends the heartbeats after last up to k. A report queued by Watch
// meanwhile is not lost: the next tick passes it on.
func (s *Streams) deliver(sink venue.Sink, last, k, now int64) {
	s.mu.Lock()
	watched := s.watched
	s.mu.Unlock()
	if k-last > maxCatchUp {
		for _, row := range kinds {
			row.deliver(sink, watched, last, k)
		}
	} else {
		for j := last + 1; j <= k; j++ {
			for _, row := range kinds {
				row.deliver(sink, watched, j-1, j)
			}
		}
	}
	for _, w := range wholeMarket {
		if floorDiv(k, w.every) > floorDiv(last, w.every) {
			w.deliver(sink, s.v, now)
		}
	}
}

// wholeMarket is what differs between the streams of every market at
// once, one row each, delivered in this order: every how many heartbeats
// the stream delivers, and what it delivers at the instant now (Unix ms).
var wholeMarket = [...]struct {
	every   int64
	deliver func(sink venue.Sink, v *Venue, now int64)
}{
	// The 24 h statistics of every market.
	{wholeMarketEvery, func(sink venue.Sink, v *Venue, now int64) { sink.Rows(venue.TickerRows(v.stats(now))) }},
	// The mark price, index and funding of every perpetual.
	{wholeMarketEvery, func(sink venue.Sink, v *Venue, now int64) { sink.Rows(venue.MarkRows(v.ContractsAt(now))) }},
}

// kinds is what differs between a market's streams, one row per stream
// kind: what it delivers of the heartbeats after from up to to. A kind with
// no row is refused (see kindOf), never taken for another.
var kinds = [snapshot.NumStreams]struct {
	deliver func(sink venue.Sink, watched []*market, from, to int64)
}{
	// One diff event per market, however many heartbeats it spans: the
	// chain goes on as a venue's does.
	snapshot.StreamBook: {func(sink venue.Sink, watched []*market, from, to int64) {
		for _, m := range watched {
			sink.Depth(m.depthUpdate(from, to))
		}
	}},
	// The trades of each heartbeat, of the last maxCatchUp at most: a
	// venue's stream does not replay minutes of trades either.
	snapshot.StreamTrades: {func(sink venue.Sink, watched []*market, from, to int64) {
		for b := max(from, to-maxCatchUp); b < to; b++ {
			for _, m := range watched {
				for _, tr := range m.bucketTrades(b) {
					sink.Trade(m.info.Symbol, tr)
				}
			}
		}
	}},
}

// kindOf checks that kind has a row, and panics if not: it is a
// programming error, caught by the package's tests.
func kindOf(kind snapshot.Stream) {
	if kind < 0 || kind >= snapshot.NumStreams || kinds[kind].deliver == nil {
		panic(fmt.Sprintf("sim: no stream of kind %v", kind))
	}
}
