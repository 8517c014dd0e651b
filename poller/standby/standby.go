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
	"strings"
	"sync"
	"sync/atomic"

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
//
// An event takes only its pair's lock: the streams' goroutines deliver
// different pairs at once, and a leader's poller gets each event as the
// adapter lent it, as a process alone does. What is held of a pair is
// copied into memory the pair keeps and reuses, not allocated per event.
// The relay's own lock orders what changes the pairs as a whole (the pair
// lists, the sink, the hand-over); it is taken before a pair's, never
// after.
type Relay struct {
	streams venue.Streams
	held    Held

	// pairs is what is held by symbol, replaced as a whole under mu when a
	// symbol comes or goes, so that an event finds its pair without a lock.
	pairs atomic.Pointer[map[string]*pair]

	mu   sync.Mutex
	ids  map[string]string // ticker id by symbol, of the pairs followed
	sink venue.Sink        // the leading poller's source; nil while following
	// watched is the sink's last list: what it is handed once it runs.
	watched []string
}

// pair is what the relay holds of one symbol's streams.
type pair struct {
	mu sync.Mutex
	id string // its ticker id, "" while not followed
	// sink is the poller's source once it has been handed the pair: its
	// events go to it as they come. Until then they are held only.
	sink venue.Sink
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

// events holds one stream's events of type E, each held from an event of
// type In as the streams deliver it.
type events[E, In any] struct {
	list []E
	// id is the venue id an event takes its stream to: what the member's
	// values cover is compared with it.
	id   func(E) int64
	pass func(sink venue.Sink, symbol string, e E)
	// own returns what is held of in, in memory the list keeps when in's
	// is lent; held are the events the list holds, which it may move.
	own func(in In, held []E) E
	// period, if set, is told what was held when the member's coverage
	// moved: what one period between two of its values brought.
	period func(held []E)
	// covered is what the member's values covered at the last hold: all
	// the events held are past it.
	covered int64
}

func (h *events[E, In]) len() int { return len(h.list) }

func (h *events[E, In]) drop() { h.list, h.covered = h.list[:0], 0 }

func (h *events[E, In]) hand(sink venue.Sink, symbol string, covered int64) {
	for _, e := range h.list {
		if h.id(e) > covered {
			h.pass(sink, symbol, e)
		}
	}
	h.drop()
}

// hold keeps what in is, dropping what covered makes useless, if it is
// past it (id is its id). The list keeps the order events came in.
func (h *events[E, In]) hold(in In, id, covered int64) {
	if covered != h.covered {
		h.covered = covered
		if h.period != nil {
			h.period(h.list)
		}
		h.list = slices.DeleteFunc(h.list, func(held E) bool { return h.id(held) <= covered })
	}
	if id <= covered {
		return
	}
	if len(h.list) == maxHeld {
		h.list = append(h.list[:0], h.list[1:]...)
	}
	h.list = append(h.list, h.own(in, h.list))
}

// kinds is what differs between the streams a relay holds, one row per
// stream kind: its events (its gauges' label is the kind's VenueStream).
var kinds = [snapshot.NumStreams]struct {
	held func() held
}{
	snapshot.StreamBook: {func() held {
		arena := &depthArena{}
		return &events[heldDepth, venue.DepthUpdate]{
			id:     func(u heldDepth) int64 { return u.Last },
			pass:   arena.lend,
			own:    arena.own,
			period: arena.period,
		}
	}},
	snapshot.StreamTrades: {func() held {
		return &events[venue.Trade, venue.Trade]{
			id:   func(tr venue.Trade) int64 { return tr.ID },
			pass: func(sink venue.Sink, symbol string, tr venue.Trade) { sink.Trade(symbol, tr) },
			// A trade's strings are lent (see venue.Sink); trades come
			// far less often than depth events, and one held is a copy.
			own: func(tr venue.Trade, _ []venue.Trade) venue.Trade { return venue.CloneTrade(tr) },
		}
	}},
}

var _ venue.Sink = (*Relay)(nil)

// New returns a relay of streams; held says what the member's values cover.
// Its gauges go to set (nil: none): the followed pairs whose streams are
// live, and the events held for a takeover.
func New(streams venue.Streams, held Held, set *metrics.Set) *Relay {
	r := &Relay{streams: streams, held: held, ids: map[string]string{}}
	r.pairs.Store(&map[string]*pair{})
	if set != nil {
		for k := range snapshot.NumStreams {
			name := k.VenueStream()
			set.NewGauge(`marketfeed_standby_streams_live{stream="`+name+`"}`, func() float64 { return float64(r.count(k).live) })
			set.NewGauge(`marketfeed_standby_events_held{stream="`+name+`"}`, func() float64 { return float64(r.count(k).held) })
		}
	}
	return r
}

// count counts the followed pairs whose stream of kind is live, and the
// events held of them.
func (r *Relay) count(kind snapshot.Stream) (n struct{ live, held int }) {
	for _, p := range *r.pairs.Load() {
		p.mu.Lock()
		if p.live[kind] {
			n.live++
		}
		n.held += p.held[kind].len()
		p.mu.Unlock()
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
	for sym, p := range *r.pairs.Load() {
		p.mu.Lock()
		p.id = ids[sym]
		p.mu.Unlock()
	}
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
	r.take()
	r.hand(r.watched)
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	if r.sink == sink {
		// The next poller starts with no pair: what it is handed waits
		// for its own list, which it may send before or after its Run.
		r.sink, r.watched = nil, nil
		r.take()
	}
	r.mu.Unlock()
	return ctx.Err()
}

// take takes every pair back from the sink it was handed to: from then on
// its events are held only. Called with r.mu held.
func (r *Relay) take() {
	for _, p := range *r.pairs.Load() {
		p.mu.Lock()
		p.sink = nil
		p.mu.Unlock()
	}
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
	old := *r.pairs.Load()
	pairs := make(map[string]*pair, len(old))
	for sym, p := range old {
		if _, ok := r.ids[sym]; ok || watched[sym] {
			pairs[sym] = p
		}
	}
	if len(pairs) < len(old) {
		r.pairs.Store(&pairs)
	}
}

func (l lent) Resubscribe(kind snapshot.Stream, symbol string) { l.r.streams.Resubscribe(kind, symbol) }

// hand gives the sink, for each symbol it has not had yet, what is held:
// the acknowledgement of a live stream, then its events in order. From then
// on the symbol's events go to the sink as they come. Called with r.mu
// held; each pair is handed under its lock, so that no event overtakes
// what is handed before it.
func (r *Relay) hand(symbols []string) {
	pairs := r.add(symbols)
	for _, sym := range symbols {
		p := pairs[sym]
		p.mu.Lock()
		if p.sink == nil {
			p.sink = r.sink
			one := []string{sym}
			for k := range snapshot.NumStreams {
				if p.live[k] {
					r.sink.Live(k, one)
					p.held[k].hand(r.sink, sym, r.held(k, p.id))
				}
				p.held[k].drop()
			}
		}
		p.mu.Unlock()
	}
}

// add returns what is held by symbol, with a pair for each of symbols that
// had none. The streams deliver only the symbols subscribed, which the
// member follows or its poller watches; forget drops the others. Called
// with r.mu held.
func (r *Relay) add(symbols []string) map[string]*pair {
	pairs := *r.pairs.Load()
	cloned := false
	for _, sym := range symbols {
		if pairs[sym] != nil {
			continue
		}
		if !cloned {
			pairs, cloned = maps.Clone(pairs), true
		}
		p := &pair{id: r.ids[sym]}
		for k, row := range kinds {
			p.held[k] = row.held()
		}
		pairs[sym] = p
	}
	if cloned {
		r.pairs.Store(&pairs)
	}
	return pairs
}

// event returns what is held of the symbol of an event, taking r.mu only
// for a symbol it has not had yet. A depth event's symbol is lent (see
// venue.DepthUpdate): a pair added for it keeps a copy.
func (r *Relay) event(sym string) *pair {
	if p := (*r.pairs.Load())[sym]; p != nil {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add([]string{strings.Clone(sym)})[sym]
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
		p := (*r.pairs.Load())[sym]
		if p == nil {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.live[snapshot.StreamBook] {
			return false
		}
		for _, u := range p.held[snapshot.StreamBook].(*events[heldDepth, venue.DepthUpdate]).list {
			if u.Last > seq {
				return u.First <= seq+1
			}
		}
		return true
	}
	return false
}

// Depth passes a diff event on to the poller that has the pair, or else
// holds a copy of it if it is past the member's book of the pair.
//
// What a poller is handed is not held: its book has it, and when its
// streams stop the poller leaves every book in sequence in the member's
// store as a depth (live.Config.DepthEvery), which the next poller starts
// from, with the events held from then on. Holding them all the same, for
// a term that may end at any moment, was the leader's largest cost over a
// process alone after the put path: every event copied, and dropped again
// at the next depth.
func (r *Relay) Depth(u venue.DepthUpdate) {
	p := r.event(u.Symbol)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sink != nil {
		p.sink.Depth(u) // lent, as the adapter lent it
		return
	}
	if h, covered, ok := heldOf[heldDepth, venue.DepthUpdate](r, p, snapshot.StreamBook); ok {
		h.hold(u, u.Last, covered)
	}
}

// Trade passes a trade on to the poller that has the pair, and holds it if
// it is past the member's trades of the pair.
func (r *Relay) Trade(symbol string, tr venue.Trade) {
	p := r.event(symbol)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sink != nil {
		// And held: a trade window is published every second and left in
		// no depth, and trades come far less often than depth events.
		p.sink.Trade(symbol, tr)
	}
	if h, covered, ok := heldOf[venue.Trade, venue.Trade](r, p, snapshot.StreamTrades); ok {
		h.hold(tr, tr.ID, covered)
	}
}

// heldOf returns what is held of a pair's stream of kind, whose events
// are held as E from In, and what the member's values cover of it; ok is
// false while the stream is not live, when nothing is held. Called with
// p.mu held.
func heldOf[E, In any](r *Relay, p *pair, kind snapshot.Stream) (h *events[E, In], covered int64, ok bool) {
	if !p.live[kind] {
		return nil, 0, false
	}
	return p.held[kind].(*events[E, In]), r.held(kind, p.id), true
}

// Rows passes a whole-market stream's rows on while a poller runs; a
// follower has no use for them (the leader's whole-market documents are
// replicated).
func (r *Relay) Rows(rows venue.Rows) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil {
		r.sink.Rows(rows)
	}
}

// Live marks streams acknowledged, and passes it on for the symbols the
// sink has.
func (r *Relay) Live(kind snapshot.Stream, symbols []string) { r.mark(kind, symbols, true) }

// Lost marks streams lost: what was held of them no longer continues into
// what comes next, so it is dropped; the sink is told for the symbols it
// has.
func (r *Relay) Lost(kind snapshot.Stream, symbols []string) { r.mark(kind, symbols, false) }

// Spoiled passes on to the sink, while a poller runs, that an event of the
// streams could not be used (see venue.SpoiledSink).
func (r *Relay) Spoiled(kind snapshot.Stream, symbols []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sp, ok := r.sink.(venue.SpoiledSink); ok {
		sp.Spoiled(kind, symbols)
	}
}

func (r *Relay) mark(kind snapshot.Stream, symbols []string, live bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pass []string
	// The pairs stay locked until the sink is told: none of their events
	// overtakes the news.
	var locked []*pair
	defer func() {
		for _, p := range locked {
			p.mu.Unlock()
		}
	}()
	pairs := r.add(symbols)
	for _, sym := range symbols {
		p := pairs[sym]
		if !slices.Contains(locked, p) {
			p.mu.Lock()
			locked = append(locked, p)
		}
		if p.sink != nil {
			pass = append(pass, sym)
		}
		// What a stream's state is outlives the sink: a member that
		// steps down holds the events of the streams still live.
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
