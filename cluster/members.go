package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// sighting is what the member bucket said of a member: when (Unix ns),
// and the snapshot revision it had applied (see replicated.go).
type sighting struct {
	at      int64
	applied uint64
}

// memberKey is a member's key in the member bucket: its name in base64url,
// since a name (host:port by default) may hold what a key may not.
func memberKey(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

// Members counts the members seen in the member bucket within the lease's
// TTL of the last time it said anything, this one included: while NATS is
// away, the members as they were when it went.
func (m *Member) Members() int {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	n := 1 // this one
	for name, s := range m.seen {
		if name != m.cfg.Member && time.Duration(m.heard-s.at) < m.cfg.LeaseTTL {
			n++
		}
	}
	return n
}

// member reports whether name was seen in the member bucket within the
// lease's TTL; known is false until the watch has run for that long, so
// that a member just joined judges nobody.
func (m *Member) member(name string) (seen, known bool) {
	now := m.cfg.Now().UnixNano()
	if at := m.watching.Load(); at <= 0 || time.Duration(now-at) < m.cfg.LeaseTTL {
		return false, false
	}
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	s, ok := m.seen[name]
	return ok && time.Duration(now-s.at) < m.cfg.LeaseTTL, true
}

// watchMembers records when each member was last seen until ctx is done.
func (m *Member) watchMembers(ctx context.Context, w jetstream.KeyWatcher) {
	defer m.stopWatch(w)
	m.watching.Store(m.cfg.Now().UnixNano())
	defer m.watching.Store(0)
	for {
		e, ok := nextEntry(ctx, w)
		if !ok {
			return
		}
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			continue
		}
		name, applied := parseMember(e.Value())
		if memberKey(name) != e.Key() {
			m.drop(dropForeign, e.Key(), fmt.Errorf("member %q under another key", name))
			continue
		}
		m.seenMu.Lock()
		m.heard = m.cfg.Now().UnixNano()
		m.seen[name] = sighting{at: m.heard, applied: applied}
		m.seenMu.Unlock()
	}
}

// AloneShare is the part of the venue's budget this member takes while it
// reads alone (see Roles.OnAlone): one over the members it last saw, as
// every member that lost NATS reads the venue with its part of one budget.
func (m *Member) AloneShare() float64 { return 1 / float64(m.Members()) }
