package cluster

import (
	"bytes"
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/snapshot"
)

// A process keeps hot, read at full cadence, the pairs its requests read
// (Poller.Want); the rest are read when a request finds them cold. In a
// cluster, a follower's requests are not the leader's: without market
// streams the leader would keep hot only the pairs asked of it, a third of
// a round-robin balancer's requests and none of those a hashing balancer
// sends elsewhere, and every follower's pair would go cold and be read
// again on request. So a follower records the pairs its requests read and
// sends them to the leader every wantEvery, on the leader's term subject,
// and the leader marks them as its own requests do.

// wantEvery is how often a follower sends what its requests read: well
// inside the time a pair stays hot after its last request.
const wantEvery = time.Second

// wantPrefix starts a wants message; each line after it is "<stream>
// <ticker_id>".
const wantPrefix = "want\n"

// wantForget is how long a pair no request read stays in a follower's
// record: past it, the entry goes, so that the record holds what requests
// read lately, not every pair ever read.
const wantForget = time.Minute

// wanted is when a follower's requests last read each stream of a pair
// (Unix ns; 0: never).
type wanted struct {
	id string
	at [snapshot.NumStreams]atomic.Int64
}

// wants is a follower's record of what its requests read. Marking, on every
// request, is one atomic load and one map lookup; the map is copied only
// when a pair is first read, or forgotten.
type wants struct {
	mu   sync.Mutex // serialises writers
	byID atomic.Pointer[map[string]*wanted]
	sent int64 // when the last message was made, Unix ns; under mu
}

// mark records that a request read the stream s of pair id at now.
func (w *wants) mark(id []byte, s snapshot.Stream, now int64) {
	if m := w.byID.Load(); m != nil {
		if e := (*m)[string(id)]; e != nil {
			// Once a second is enough for a record sent once a second, and
			// spares the cores one cache line under a pair's heavy traffic.
			if now-e.at[s].Load() > int64(wantEvery/2) {
				e.at[s].Store(now)
			}
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.load()
	if e := old[string(id)]; e != nil {
		e.at[s].Store(now)
		return
	}
	e := &wanted{id: string(id)}
	e.at[s].Store(now)
	next := make(map[string]*wanted, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[e.id] = e
	w.byID.Store(&next)
}

func (w *wants) load() map[string]*wanted {
	if m := w.byID.Load(); m != nil {
		return *m
	}
	return nil
}

// take returns the message of what was read since the last one, nil for
// nothing, and forgets the pairs no request read for wantForget.
func (w *wants) take(now int64) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	since := w.sent
	w.sent = now
	var msg []byte
	cur := w.load()
	keep := cur
	for id, e := range cur {
		newest := int64(0)
		for s := range snapshot.NumStreams {
			at := e.at[s].Load()
			newest = max(newest, at)
			if at > since {
				if msg == nil {
					msg = append(msg, wantPrefix...)
				}
				msg = append(append(append(append(msg, s.String()...), ' '), e.id...), '\n')
			}
		}
		if now-newest > int64(wantForget) {
			if len(keep) == len(cur) {
				keep = maps.Clone(cur)
			}
			delete(keep, id)
		}
	}
	if len(keep) != len(cur) {
		w.byID.Store(&keep)
	}
	return msg
}

// Want records, on a member that follows, that a request read the stream s
// of pair id at now (Unix ns, the request's time: see server.Feed), for the
// leader to keep it hot (see wantEvery). It allocates nothing but the first
// time a pair is read.
func (m *Member) Want(id []byte, s snapshot.Stream, now int64) {
	if s < 0 || s >= snapshot.NumStreams || m.leading() {
		return
	}
	m.wantsRead.mark(id, s, now)
}

// sendWants sends the leader what this member's requests read, every
// wantEvery while it follows, until ctx is done.
func (m *Member) sendWants(ctx context.Context) {
	tick := time.NewTicker(wantEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := m.wantsRead.take(m.cfg.Now().UnixNano())
		term := m.newest.Load()
		if msg == nil || term == 0 || m.leading() || m.Alone() {
			continue
		}
		if err := m.cfg.Conn.Publish(leaderSubject(m.cfg.Name, term), msg); err == nil {
			m.metrics.wants[wantSent].Add(bytes.Count(msg, []byte{'\n'}) - 1)
		}
	}
}

// serveWants marks, through cfg.Want, what a follower's message says its
// requests read; a line that names no stream and pair is refused and
// counted.
func (m *Member) serveWants(msg []byte) {
	for line := range bytes.Lines(msg[len(wantPrefix):]) {
		s, id, ok := parseStreamPair(bytes.TrimSuffix(line, []byte{'\n'}))
		if !ok || m.cfg.Want == nil {
			m.metrics.wants[wantRefused].Inc()
			continue
		}
		m.cfg.Want([]byte(id), s)
		m.metrics.wants[wantMarked].Inc()
	}
}

// Wants counted, as the metrics name them.
const (
	wantSent    = iota // by a follower: a stream of a pair its requests read
	wantMarked         // by the leader: one it marked
	wantRefused        // by the leader: a line no follower sends
	numWantCounts
)

var wantCountNames = [numWantCounts]string{"sent", "marked", "refused"}
