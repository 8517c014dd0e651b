package cluster

import (
	"context"
	"sync"

	"marketfeed/snapshot"
)

// published is the store's hook: while this member leads, every value its
// store publishes is queued for the bucket. It never blocks the publisher.
func (m *Member) published(v snapshot.Published) {
	term := m.term.Load()
	if term == 0 {
		return
	}
	key := keyOf(v)
	if key == "" {
		return
	}
	if catalogKey(key) {
		m.forgetPuts(v.(*snapshot.Pairs)) // the catalog is the pair list
	}
	buf := valueBufs.Get().(*[]byte)
	*buf = appendValue((*buf)[:0], header{term: term, venueTime: venueTimeOf(v), publishedAt: m.cfg.Now().UnixNano()}, v)
	m.queue.put(key, buf)
}

// valueBufs holds the memory of values put without an acknowledgement
// (see Member.put), for the next values: a leader puts some 1,300 values a
// second at 446 pairs, and allocating each was a good part of what its
// garbage collector did beyond a process alone's.
var valueBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPendingPuts bounds the puts awaiting their acknowledgement: two full
// rounds of every pair's book and trades at 846 pairs. Past it, a put waits
// briefly and then fails and is counted; the key's next value follows.
const maxPendingPuts = 4096

// publish puts the queued values into the bucket until ctx is done: the
// newest value of each key, in the order keys were queued, without waiting
// for acknowledgements. A key published again before its turn is put once,
// with its newest value.
func (m *Member) publish(ctx context.Context) {
	for {
		batch := m.queue.take(ctx)
		if batch == nil {
			return
		}
		for _, kv := range batch {
			m.put(kv)
		}
	}
}

// put puts one value into the bucket. A key's puts are acknowledged, with
// the revision the bucket gave them, until its first put of the term is
// (see putAcked): a new pair is listed once every member has applied that
// revision. The key's later puts need no acknowledgement, and go as plain
// messages on the same connection, in the same order: an acknowledgement
// the leader then did nothing with cost it a message to read and decode,
// and a future to keep, for every put. A plain message's bytes are copied
// out as it is sent, and its memory goes back to valueBufs.
func (m *Member) put(kv keyValue) {
	subject := m.putSubject(kv.key)
	if m.firstPutAcked(kv.key) {
		err := m.cfg.Conn.Publish(subject, *kv.value)
		valueBufs.Put(kv.value)
		if err != nil {
			m.metrics.putErrors.Inc()
			return
		}
		m.metrics.puts.Inc()
		return
	}
	// The future keeps the value until the acknowledgement: its memory is
	// not reused.
	if _, err := m.js.PublishAsync(subject, *kv.value); err != nil {
		m.metrics.putErrors.Inc()
	}
}

// publishQueue holds the values not yet put, in the order of publication,
// but for a pair's book or trades queued again before the next pair list:
// that one replaces the value queued before, in its place. A value never
// moves across a pair list, and every pair list is put, so that a list
// holding a new pair back gives each member the pair's cell before its
// book and trades come, and the list showing the pair comes after them.
// The queue holds at most one value of each key per pair list queued.
type publishQueue struct {
	mu      sync.Mutex
	entries []keyValue
	since   map[string]int // by key, its entry since the last pair list queued
	ready   chan struct{}
}

type keyValue struct {
	key   string
	value *[]byte // from valueBufs
}

func (q *publishQueue) init() {
	q.since = make(map[string]int)
	q.ready = make(chan struct{}, 1)
}

func (q *publishQueue) put(key string, value *[]byte) {
	q.mu.Lock()
	switch i, ok := q.since[key]; {
	case catalogKey(key):
		q.entries = append(q.entries, keyValue{key, value})
		clear(q.since)
	case ok:
		valueBufs.Put(q.entries[i].value) // never sent
		q.entries[i].value = value
	default:
		q.since[key] = len(q.entries)
		q.entries = append(q.entries, keyValue{key, value})
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take waits for queued values and returns them all; nil when ctx is done.
func (q *publishQueue) take(ctx context.Context) []keyValue {
	for {
		q.mu.Lock()
		if len(q.entries) > 0 {
			batch := q.entries
			q.entries = make([]keyValue, 0, len(batch))
			clear(q.since)
			q.mu.Unlock()
			return batch
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-q.ready:
		}
	}
}
