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
	if list, ok := v.(*snapshot.Pairs); ok {
		m.forgetPuts(list)
	}
	m.queue.put(key, appendValue(nil, header{term: term, venueTime: venueTimeOf(v), publishedAt: m.cfg.Now().UnixNano()}, v))
}

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
			if _, err := m.js.PublishAsync(m.putSubject(kv.key), kv.value); err != nil {
				m.metrics.putErrors.Inc()
			}
		}
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
	value []byte
}

func (q *publishQueue) init() {
	q.since = make(map[string]int)
	q.ready = make(chan struct{}, 1)
}

func (q *publishQueue) put(key string, value []byte) {
	q.mu.Lock()
	switch i, ok := q.since[key]; {
	case key == keyPairs:
		q.entries = append(q.entries, keyValue{key, value})
		clear(q.since)
	case ok:
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
