// Package standby keeps a cluster member's market streams flowing for the
// member's whole life, and lends them to the poller of each term it leads.
//
// A member that follows holds the leader's last values of every pair, and
// its own subscriptions to the venue's diff depth and trade streams. What
// it holds of those streams is only what came after the values it holds
// (the events whose update ids, and the trades whose ids, are past them),
// so memory stays a few events a pair while the leader publishes. When the
// member is elected, its poller starts each pair from the values it holds
// (see live.Seed) and the Relay hands it, pair by pair as the poller lists
// them, the events held since, then the live ones: the chain from the
// leader's last book goes on with no snapshot read and no new connection,
// which is what makes a takeover warm. A member that opened its streams
// only when elected would have missed the events between the old leader's
// last publication and its first frame, and would need a REST snapshot of
// every book and a backfill of every window.
//
// The venue's stream limits are per connection and per address: each
// member holds one set of connections, as one process does.
package standby

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// maxHeld bounds what is held of one pair's stream while no poller takes
// it: a takeover comes within the lease's TTL of the last leader's last
// publication, some 5 s, and a book is seeded from a depth published up
// to 5 s before that, which is 100 events of a depth stream at its
// fastest (100 ms); the rest is margin. Past it, the oldest go, and the
// seeded book syncs from REST instead.
const maxHeld = 200

// Held returns the id the member's values of a pair already cover (see
// snapshot.Store.Covered), 0 for none. What the streams deliver up to it
// is not held.
type Held func(kind snapshot.Stream, tickerID string) int64

// Relay is a venue's market streams run for a member's life: the events of
// the followed pairs past what the member holds, held while the member
// follows, and lent to its poller while it leads (Streams).
type Relay struct {
	streams venue.Streams
	held    Held

	mu    sync.Mutex
	ids   map[string]string // ticker id by symbol, of the pairs followed
	pairs map[string]*pair  // by symbol
	sink  venue.Sink        // the leading poller's source; nil while following
	// given are the symbols the sink has been handed: their events go to
	// it as they come. The others' are held until it lists them.
	given map[string]bool
	// watched is the sink's last list: what it is handed once it runs.
	watched []string
}

// pair is what the relay holds of one symbol's streams.
type pair struct {
	live [snapshot.NumStreams]bool // acknowledged and not lost since
	held [snapshot.NumStreams]held // the events past the member's values
}

// held is what is held of one stream's events, oldest first, whatever
// their type.
type held interface {
	len() int
	drop()
	// hand passes the events past covered on to sink, and drops them all.
	hand(sink venue.Sink, symbol string, covered int64)
}

// events holds one stream's events of type E.
type events[E any] struct {
	list []E
	// id is the venue id an event takes its stream to: what the member's
	// values cover is compared with it.
	id   func(E) int64
	pass func(sink venue.Sink, symbol string, e E)
}

func (h *events[E]) len() int { return len(h.list) }
func (h *events[E]) drop()    { h.list = nil }

func (h *events[E]) hand(sink venue.Sink, symbol string, covered int64) {
	for _, e := range h.list {
		if h.id(e) > covered {
			h.pass(sink, symbol, e)
		}
	}
	h.list = nil
}

// hold keeps e, dropping what covered makes useless, if e is past it.
func (h *events[E]) hold(e E, covered int64) {
	h.list = slices.DeleteFunc(h.list, func(held E) bool { return h.id(held) <= covered })
	if h.id(e) > covered {
		if len(h.list) == maxHeld {
			h.list = append(h.list[:0], h.list[1:]...)
		}
		h.list = append(h.list, e)
	}
}

// kinds is what differs between the streams a relay holds, one row per
// stream kind: the label of its gauges, and its events.
var kinds = [snapshot.NumStreams]struct {
	label string
	held  func() held
}{
	snapshot.StreamBook: {"depth", func() held {
		return &events[venue.DepthUpdate]{
			id:   func(u venue.DepthUpdate) int64 { return u.Last },
			pass: func(sink venue.Sink, _ string, u venue.DepthUpdate) { sink.Depth(u) },
		}
	}},
	snapshot.StreamTrades: {"trades", func() held {
		return &events[venue.Trade]{
			id:   func(tr venue.Trade) int64 { return tr.ID },
			pass: func(sink venue.Sink, symbol string, tr venue.Trade) { sink.Trade(symbol, tr) },
		}
	}},
}

var _ venue.Sink = (*Relay)(nil)

// New returns a relay of streams; held says what the member's values cover.
// Its gauges go to set (nil: none): the followed pairs whose streams are
// live, and the events held for a takeover.
func New(streams venue.Streams, held Held, set *metrics.Set) *Relay {
	r := &Relay{streams: streams, held: held, ids: map[string]string{}, pairs: map[string]*pair{}, given: map[string]bool{}}
	if set != nil {
		for k, row := range kinds {
			k, name := snapshot.Stream(k), row.label
			set.NewGauge(`marketfeed_standby_streams_live{stream="`+name+`"}`, func() float64 { return float64(r.count(k).live) })
			set.NewGauge(`marketfeed_standby_events_held{stream="`+name+`"}`, func() float64 { return float64(r.count(k).held) })
		}
	}
	return r
}

// count counts the followed pairs whose stream of kind is live, and the
// events held of them.
func (r *Relay) count(kind snapshot.Stream) (n struct{ live, held int }) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pairs {
		if p.live[kind] {
			n.live++
		}
		n.held += p.held[kind].len()
	}
	return n
}

// Run runs the streams until ctx is done.
func (r *Relay) Run(ctx context.Context) error { return r.streams.Run(ctx, r) }

// Follow subscribes the streams of a pair list the leader published, its
// incoming pairs included, while no poller of the member's own lists them.
func (r *Relay) Follow(pairs *snapshot.Pairs) {
	ids := make(map[string]string, len(pairs.List())+len(pairs.Incoming()))
	for _, p := range slices.Concat(pairs.List(), pairs.Incoming()) {
		if _, dup := ids[p.Symbol]; !dup {
			ids[p.Symbol] = p.TickerID
		}
	}
	symbols := slices.Sorted(maps.Keys(ids))
	r.mu.Lock()
	r.ids = ids
	leading := r.sink != nil
	r.forget()
	r.mu.Unlock()
	if !leading {
		r.streams.Watch(symbols)
	}
}

// Streams returns the streams as a poller of the member's runs them: Run
// hands its sink what is held and what comes, until its ctx ends; Watch
// subscribes its list.
func (r *Relay) Streams() venue.Streams { return lent{r} }

// lent is the relay as the leading poller's streams.
type lent struct{ r *Relay }

func (l lent) Run(ctx context.Context, sink venue.Sink) error {
	r := l.r
	r.mu.Lock()
	r.sink = sink
	clear(r.given)
	r.hand(r.watched)
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	if r.sink == sink {
		// The next poller starts with no pair: what it is handed waits
		// for its own list, which it may send before or after its Run.
		r.sink, r.watched = nil, nil
		clear(r.given)
	}
	r.mu.Unlock()
	return ctx.Err()
}

func (l lent) Watch(symbols []string) {
	r := l.r
	r.mu.Lock()
	r.watched = slices.Clone(symbols)
	r.forget()
	if r.sink != nil {
		r.hand(symbols)
	}
	r.mu.Unlock()
	r.streams.Watch(symbols)
}

// forget drops what is held of the symbols neither followed nor watched
// by a poller. Called with r.mu held.
func (r *Relay) forget() {
	watched := make(map[string]bool, len(r.watched))
	for _, sym := range r.watched {
		watched[sym] = true
	}
	for sym := range r.pairs {
		if _, ok := r.ids[sym]; !ok && !watched[sym] {
			delete(r.pairs, sym)
		}
	}
}

func (l lent) Resubscribe(kind snapshot.Stream, symbol string) { l.r.streams.Resubscribe(kind, symbol) }

// hand gives the sink, for each symbol it has not had yet, what is held:
// the acknowledgement of a live stream, then its events in order. From then
// on the symbol's events go to the sink as they come. Called with r.mu
// held, so that no event overtakes what is handed before it.
func (r *Relay) hand(symbols []string) {
	for _, sym := range symbols {
		if r.given[sym] {
			continue
		}
		r.given[sym] = true
		p := r.pairs[sym]
		if p == nil {
			continue
		}
		one := []string{sym}
		for k := range snapshot.NumStreams {
			if p.live[k] {
				r.sink.Live(k, one)
				p.held[k].hand(r.sink, sym, r.held(k, r.ids[sym]))
			}
			p.held[k].drop()
		}
	}
}

// pair returns what is held of a symbol. The streams deliver only the
// symbols subscribed, which the member follows or its poller watches;
// forget drops the others. Called with r.mu held.
func (r *Relay) pair(sym string) *pair {
	p := r.pairs[sym]
	if p == nil {
		p = &pair{}
		for k, row := range kinds {
			p.held[k] = row.held()
		}
		r.pairs[sym] = p
	}
	return p
}

// Continues reports whether what is held of a pair's diff depth stream
// goes on from update id seq: the stream is live and the first event held
// past seq follows it, or none is held past it. A book started at seq from
// a value the member holds is then brought up to date by what the relay
// hands its poller; otherwise its first event would find a gap. The events
// held go back to what the member's values cover (see Held), but one
// trimmed before a value arrived that covers less is gone.
func (r *Relay) Continues(tickerID string, seq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for sym, id := range r.ids {
		if id != tickerID {
			continue
		}
		p := r.pairs[sym]
		if p == nil || !p.live[snapshot.StreamBook] {
			return false
		}
		for _, u := range p.held[snapshot.StreamBook].(*events[venue.DepthUpdate]).list {
			if u.Last > seq {
				return u.First <= seq+1
			}
		}
		return true
	}
	return false
}

// Depth passes a diff event on to the poller that has the pair, and holds
// a clone of it if it is past the member's book of the pair.
func (r *Relay) Depth(u venue.DepthUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil && r.given[u.Symbol] {
		r.sink.Depth(u)
	}
	// Held even while a poller takes it: the events past the member's
	// last value are what the next poller (this one's term may end at
	// any moment) needs, and this one cannot give them back.
	if h, covered, ok := heldOf[venue.DepthUpdate](r, snapshot.StreamBook, u.Symbol); ok {
		if u.Last > covered {
			u = u.Clone() // the sink's event is the connection's to reuse
		}
		h.hold(u, covered)
	}
}

// Trade passes a trade on to the poller that has the pair, and holds it if
// it is past the member's trades of the pair.
func (r *Relay) Trade(symbol string, tr venue.Trade) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil && r.given[symbol] {
		r.sink.Trade(symbol, tr) // and held, as a depth event is
	}
	if h, covered, ok := heldOf[venue.Trade](r, snapshot.StreamTrades, symbol); ok {
		h.hold(tr, covered)
	}
}

// heldOf returns what is held of a symbol's stream of kind, whose events
// are of type E, and what the member's values cover of it; ok is false
// while the stream is not live, when nothing is held. Called with r.mu
// held.
func heldOf[E any](r *Relay, kind snapshot.Stream, symbol string) (h *events[E], covered int64, ok bool) {
	p := r.pair(symbol)
	if !p.live[kind] {
		return nil, 0, false
	}
	return p.held[kind].(*events[E]), r.held(kind, r.ids[symbol]), true
}

// Tickers passes the all-market ticker stream on while a poller runs; a
// follower has no use for it (the leader's tickers are replicated).
func (r *Relay) Tickers(rows []venue.Stat) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil {
		r.sink.Tickers(rows)
	}
}

// Contracts passes the mark price stream on while a poller runs; a
// follower has no use for it (the leader's contracts are replicated).
func (r *Relay) Contracts(rows []venue.Contract) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil {
		r.sink.Contracts(rows)
	}
}

// Live marks streams acknowledged, and passes it on for the symbols the
// sink has.
func (r *Relay) Live(kind snapshot.Stream, symbols []string) { r.mark(kind, symbols, true) }

// Lost marks streams lost: what was held of them no longer continues into
// what comes next, so it is dropped; the sink is told for the symbols it
// has.
func (r *Relay) Lost(kind snapshot.Stream, symbols []string) { r.mark(kind, symbols, false) }

func (r *Relay) mark(kind snapshot.Stream, symbols []string, live bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pass []string
	for _, sym := range symbols {
		if r.sink != nil && r.given[sym] {
			pass = append(pass, sym)
		}
		// What a stream's state is outlives the sink: a member that
		// steps down holds the events of the streams still live.
		p := r.pair(sym)
		p.live[kind] = live
		if !live {
			p.held[kind].drop()
		}
	}
	switch {
	case len(pass) == 0:
	case live:
		r.sink.Live(kind, pass)
	default:
		r.sink.Lost(kind, pass)
	}
}
