package poller

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// hotPair is one pair's stream as the poller tracks it.
type hotPair struct {
	id string
	// since is when the pair turned hot (Unix ns): until its first read, the
	// age of its data.
	since int64
	// wanted is when a request last asked for the stream (Unix ns).
	wanted atomic.Int64
	// again is when a mark of wanted came within pressing of the one
	// before (Unix ns): see pressed.
	again atomic.Int64
	// reading is set while a read of the stream is in flight, so that
	// overlapping rounds do not read the pair twice at once.
	reading atomic.Bool
	// started is when the last read began (Unix ns): the scheduled tick for
	// reads of a round, the actual time for a cold load. Reads of one stream
	// are spaced by at least the cadence from it.
	started atomic.Int64
	// deferred is when a round last found the pair due and the budget held
	// its read back (Unix ns); 0 once a read starts. The pair waits for
	// venue weight: it is not being read (see Poller.Status).
	deferred atomic.Int64
}

// pressing is how close together two marks of a pair (see hotSet.want)
// must be, and how recent the second, for the pair to count as one clients
// keep reading: want marks a pair at most once a second, so a pair read
// without pause is marked every second or two, a pair an aggregator's
// sweep reads every 10 s never counts.
const pressing = 3 * time.Second

// hotSet is the set of pairs whose stream is refreshed at full cadence. Reads
// (Want, on every request) are one atomic load and one map lookup; writes copy
// the map, which happens only when a pair turns hot or cools.
type hotSet struct {
	mu    sync.Mutex // serialises writers
	pairs atomic.Pointer[map[string]*hotPair]
	// polled is how many hot pairs the last REST round found to read, the
	// others being kept by their stream: the demand REST reads put on the
	// budget (see Poller.capsPlan).
	polled atomic.Int64
}

func newHotSet() *hotSet {
	h := new(hotSet)
	empty := make(map[string]*hotPair)
	h.pairs.Store(&empty)
	return h
}

// want marks id as asked for at ns (Unix ns), adding it to the set if
// needed.
func (h *hotSet) want(id []byte, ns int64) {
	if p := (*h.pairs.Load())[string(id)]; p != nil {
		// Skip the store when the mark is recent: under heavy traffic on one
		// pair, every request writing one cache line would make the cores
		// fight over it for no information.
		if last := p.wanted.Load(); ns-last > int64(time.Second) {
			p.wanted.Store(ns)
			if ns-last <= int64(pressing) {
				p.again.Store(ns)
			}
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.pairs.Load()
	if p := old[string(id)]; p != nil {
		p.wanted.Store(ns)
		return
	}
	p := &hotPair{id: string(id), since: ns}
	p.wanted.Store(ns)
	next := maps.Clone(old)
	next[p.id] = p
	h.pairs.Store(&next)
}

// pressed reports whether clients keep reading the pair at now: asked for
// again within pressing of the time before, lately. A REST round reads such
// pairs first, with the whole of their class's share (see Poller.round).
func (p *hotPair) pressed(now time.Time) bool {
	return now.UnixNano()-p.again.Load() <= int64(pressing)
}

// get returns the tracked state of id, or nil.
func (h *hotSet) get(id string) *hotPair { return (*h.pairs.Load())[id] }

// snapshot returns the hot pairs, dropping those not wanted since cutoff or
// for which keep returns false (pairs that left the catalog).
func (h *hotSet) snapshot(cutoff time.Time, keep func(id string) bool) []*hotPair {
	cut := cutoff.UnixNano()
	cur := *h.pairs.Load()
	list := make([]*hotPair, 0, len(cur))
	drop := false
	for _, p := range cur {
		if p.wanted.Load() < cut || !keep(p.id) {
			drop = true
			continue
		}
		list = append(list, p)
	}
	if drop {
		h.mu.Lock()
		old := *h.pairs.Load()
		next := make(map[string]*hotPair, len(old))
		for k, p := range old {
			if p.wanted.Load() >= cut && keep(k) {
				next[k] = p
			}
		}
		h.pairs.Store(&next)
		h.mu.Unlock()
	}
	return list
}

// Len returns how many pairs are hot.
func (h *hotSet) Len() int { return len(*h.pairs.Load()) }
