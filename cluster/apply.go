package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watch applies the snapshot bucket's values to the store until ctx is
// done or a watch ends on its own, while this member does not lead. The
// values the bucket held when a watch started come first, and are applied
// the catalog (the pair list, see snapshot.Doc.Catalog) first, so that
// every pair's book and trades find it listed.
//
// A leader's store has every value it puts: its watch is stopped for its
// term, and started again when the term ends. Receiving each of its own
// values back, only to drop it, cost a leader a copy of everything it put
// and the garbage collection of it.
func (m *Member) watch(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		leads := m.applyWatch(ctx, w)
		m.stopWatch(w)
		if !leads {
			return
		}
		// What the session's first following said is old news.
		select {
		case <-m.rewatch:
		default:
		}
		if !m.awaitFollowing(ctx) {
			return
		}
		var err error
		if w, err = m.snaps.WatchAll(ctx); err != nil {
			m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster watch failed", "err", err)
			return
		}
	}
}

// applyWatch applies w's values until this member leads, which it reports,
// or ctx is done or w ends.
func (m *Member) applyWatch(ctx context.Context, w jetstream.KeyWatcher) (leads bool) {
	var initial []jetstream.KeyValueEntry
	caughtUp := false // every value held at the start has been applied
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return false
		case <-m.termChanged:
			if m.term.Load() != 0 {
				return true
			}
			// A term that began and ended before the watch saw it: the
			// watch never stopped, and what stepping down cleared holds.
			if caughtUp {
				m.synced.Store(true)
			}
			continue
		case next, ok := <-w.Updates():
			if !ok {
				return false
			}
			e = next
		}
		switch {
		case e == nil: // every value held at the start has come
			var newest uint64
			for _, first := range []bool{true, false} {
				for _, e := range initial {
					if catalogKey(e.Key()) == first {
						m.apply(e)
						newest = max(newest, e.Revision())
					}
				}
			}
			initial, caughtUp = nil, true
			m.appliedRev.Store(newest)
			m.synced.Store(true)
		case !m.synced.Load():
			initial = append(initial, e)
		default:
			m.apply(e)
			m.appliedRev.Store(e.Revision())
		}
	}
}

// awaitFollowing waits until this member follows again after its term
// (see campaign.runAsFollower); false once ctx is done. A term that ends
// with the session (NATS gone, or shutting down) starts no watch: one
// begun while NATS does not answer would hold the session's end, and with
// it the member's reading alone, for the client's request timeout.
func (m *Member) awaitFollowing(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-m.rewatch:
		return true
	}
}

// apply publishes one entry of the snapshot bucket into the store, unless
// it is this member's own, stale, or not a snapshot value.
func (m *Member) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return // a delete or purge: what the store holds stays until listed otherwise
	}
	// Published by this member: its store has it already. Told by the
	// term before the checksum is checked, so that a leader spends nothing
	// on its own values coming back but their receipt.
	if mine := m.term.Load(); mine != 0 {
		if t, ok := termOf(e.Value()); ok && t == mine {
			return
		}
	}
	h, wire, err := parseValue(e.Value())
	if err != nil {
		m.drop(dropBad, e.Key(), err)
		return
	}
	if h.term < m.newest.Load() {
		m.drop(dropStale, e.Key(), fmt.Errorf("term %d, newest %d", h.term, m.newest.Load()))
		return
	}
	m.raise(h.term)
	now := m.cfg.Now().UnixNano()
	if err := applyWire(m.cfg.Store, e.Key(), wire, h.closed, now); err != nil {
		reason := dropBad
		switch {
		case errors.Is(err, errUnlisted):
			reason = dropUnlisted
		case errors.Is(err, errForeign):
			reason = dropForeign
		case errors.Is(err, errOlder):
			reason = dropOlder
		}
		m.drop(reason, e.Key(), err)
		return
	}
	m.metrics.applied.Inc()
	m.loads.applied(e.Key())
	m.lastApplied.Store(now)
	m.lastVenue.Store(h.venueTime)
	m.metrics.lag.Observe(time.Duration(now - h.publishedAt))
}

func (m *Member) drop(reason dropReason, key string, err error) {
	m.metrics.dropped[reason].Inc()
	m.log.Debug("value dropped", "key", key, "reason", dropNames[reason], "err", err)
}

// nextEntry waits for the watch's next entry; false once ctx is done or the
// watch has ended.
func nextEntry(ctx context.Context, w jetstream.KeyWatcher) (jetstream.KeyValueEntry, bool) {
	select {
	case <-ctx.Done():
		return nil, false
	case e, ok := <-w.Updates():
		return e, ok
	}
}

// stopWatch stops a watch of a bucket under the member's run (see
// Member.Run), not in the watch's goroutine: stopping asks NATS to drop
// the watch's consumer, which waits out a request's timeout while NATS is
// away, and must not hold the session's end, and with it the member's
// going alone.
func (m *Member) stopWatch(w jetstream.KeyWatcher) {
	if !m.tasks.Go(func(context.Context) { _ = w.Stop() }) {
		_ = w.Stop()
	}
}
