package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"marketfeed/snapshot"
)

// A request a member finds cold (a pair whose book or trades it holds none
// of, or none fresh) is answered by a process alone after a read of the
// venue that the request waits for, at most the server's cold timeout, and
// that takes the budget ahead of background reads. A follower does not read
// the venue, so it asks the leader for that read instead, on the subject
// the leader of the term answers pings on (see presence.go): the payload
// names the stream and the pair; the leader answers once its poller has
// published the value (an empty answer) or failed (the reason), and the
// follower then waits for the value to come through its watch. Without
// it a follower answered 502 where the leader, or a process alone, would
// have waited for the read: a pair the leader has not read yet (a REST-only
// venue reads the pairs requests ask for), or a book that ran dry during a
// cold start, whose refresh a waiting request moves ahead.

// loadPrefix starts a load request's payload: "load <stream> <ticker_id>".
const loadPrefix = "load "

// maxLoadWait bounds a leader's read for a follower's request: the
// requests wait the server's cold timeout (2 s by default) at most.
const maxLoadWait = 5 * time.Second

// Load outcomes, as the metrics name them.
const (
	loadOK = iota
	loadFailed
	loadRefused // a payload no follower sends
	numLoadResults
)

var loadResultNames = [numLoadResults]string{"ok", "failed", "refused"}

// errNoLeader is a follower's load while no leader is known.
var errNoLeader = errors.New("cluster: no leader to read the venue")

// Load asks the leader to read a pair's stream now, for a request that
// found it cold on this member, and returns once this member has applied a
// value of it published since that serves the request (served reports
// whether the member's copy now does; nil: any value does), or the leader
// said the read failed, or ctx is done. It is for a member that follows;
// the leader and a member reading alone load through their own poller.
//
// A value applied meanwhile need not be the one the leader's read brought:
// the leader keeps publishing a book while its read for a request is under
// way, and a book short of the depth asked is published short (marked
// open) until the read is laid under it. So a follower waits for a value
// that serves the request, not for the next one; the answer comes over
// plain NATS and the value through the watch, in either order.
func (m *Member) Load(ctx context.Context, tickerID string, s snapshot.Stream, served func() bool) error {
	term := m.newest.Load()
	if term == 0 || m.leading() {
		return errNoLeader
	}
	if s < 0 || s >= snapshot.NumStreams {
		return fmt.Errorf("cluster: no key for stream %v", s)
	}
	key := keyOfStream(s, tickerID)
	applied := m.loads.await(key)
	defer func() { m.loads.forget(key, applied) }()
	answer, err := m.cfg.Conn.RequestWithContext(ctx, leaderSubject(m.cfg.Name, term), []byte(loadPrefix+s.String()+" "+tickerID))
	switch {
	case err != nil:
		m.metrics.loads[loadFailed].Inc()
		return fmt.Errorf("cluster: asking the leader of term %d: %w", term, err)
	case len(answer.Data) > 0:
		m.metrics.loads[loadFailed].Inc()
		return fmt.Errorf("cluster: the leader's read: %s", answer.Data)
	}
	for {
		select {
		case <-applied:
		case <-ctx.Done():
			m.metrics.loads[loadFailed].Inc()
			return ctx.Err()
		}
		if served == nil || served() {
			m.metrics.loads[loadOK].Inc()
			return nil
		}
		// Waiting again before looking once more, so that a value
		// applied in between is not missed.
		applied = m.loads.await(key)
		if served() {
			m.metrics.loads[loadOK].Inc()
			return nil
		}
	}
}

// answer is the handler of the leader's term subject: a ping is answered at
// once, a load once the read is done (under the member's run, and refused
// outside it), and a follower's wants (see wantEvery) are marked.
func (m *Member) answer(msg *nats.Msg) {
	switch {
	case len(msg.Data) == 0:
		_ = msg.Respond(nil)
	case bytes.HasPrefix(msg.Data, []byte(wantPrefix)):
		m.serveWants(msg.Data)
	default:
		if !m.tasks.Go(func(ctx context.Context) { m.serveLoad(ctx, msg) }) {
			m.metrics.loadsServed[loadFailed].Inc()
			_ = msg.Respond([]byte("shutting down"))
		}
	}
}

// serveLoad reads what a follower's load names through cfg.Load, under
// the member's run (ctx), and answers with the error, if any: never the
// venue's body, which the poller keeps to itself, only its reason.
func (m *Member) serveLoad(ctx context.Context, msg *nats.Msg) {
	s, id, ok := parseLoad(msg.Data)
	if !ok || m.cfg.Load == nil {
		m.metrics.loadsServed[loadRefused].Inc()
		_ = msg.Respond([]byte("not a load request"))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, maxLoadWait)
	defer cancel()
	if err := m.cfg.Load(ctx, id, s); err != nil {
		m.metrics.loadsServed[loadFailed].Inc()
		_ = msg.Respond([]byte(err.Error()))
		return
	}
	m.metrics.loadsServed[loadOK].Inc()
	_ = msg.Respond(nil)
}

// parseLoad reads a load request's payload.
func parseLoad(b []byte) (s snapshot.Stream, tickerID string, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(loadPrefix))
	if !ok {
		return 0, "", false
	}
	return parseStreamPair(rest)
}

// parseStreamPair reads "<stream> <ticker_id>".
func parseStreamPair(b []byte) (s snapshot.Stream, tickerID string, ok bool) {
	name, id, ok := bytes.Cut(b, []byte{' '})
	if !ok || !snapshot.ValidTickerID(id) {
		return 0, "", false
	}
	for s := range snapshot.NumStreams {
		if s.String() == string(name) {
			return s, string(id), true
		}
	}
	return 0, "", false
}

// loadWaiters are the follower's loads waiting for a key's next value.
type loadWaiters struct {
	mu    sync.Mutex
	byKey map[string][]chan struct{}
}

// await returns a channel closed when the key's next value is applied.
func (w *loadWaiters) await(key string) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.byKey == nil {
		w.byKey = make(map[string][]chan struct{})
	}
	w.byKey[key] = append(w.byKey[key], ch)
	w.mu.Unlock()
	return ch
}

// forget withdraws ch, if it is still waiting.
func (w *loadWaiters) forget(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	waiting := w.byKey[key]
	for i, c := range waiting {
		if c == ch {
			waiting = append(waiting[:i], waiting[i+1:]...)
			break
		}
	}
	if len(waiting) == 0 {
		delete(w.byKey, key)
	} else {
		w.byKey[key] = waiting
	}
}

// applied releases the loads waiting for key.
func (w *loadWaiters) applied(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.byKey[key] {
		close(ch)
	}
	delete(w.byKey, key)
}
