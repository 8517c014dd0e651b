package cluster

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"marketfeed/snapshot"
)

// A pair new to the catalog is held back from /pairs until its book and
// trades can be answered (see poller.Config.Replicated). On one process its
// store says so. In a cluster every member must hold them before any member
// lists the pair: a client reading /pairs from one member and the book from
// another behind the same balancer must never be told the pair does not
// exist. So each member says in its member key, put every period, up to
// which revision of the snapshot bucket its watch has applied, and the
// leader notes the revision at which each key was first put in its term: a
// pair is replicated once every member seen within the lease's TTL has
// applied both its keys' first revisions.

// appendMember appends a member key's value: the member's name and the
// snapshot bucket's revision its watch has applied.
func appendMember(dst []byte, name string, applied uint64) []byte {
	return strconv.AppendUint(append(append(dst, name...), ' '), applied, 10)
}

// parseMember splits a member key's value into the member's name and the
// revision it applied. A value without a revision (a member of an earlier
// version) is all name, with none applied.
func parseMember(v []byte) (name string, applied uint64) {
	if i := bytes.LastIndexByte(v, ' '); i > 0 {
		if rev, err := strconv.ParseUint(string(v[i+1:]), 10, 64); err == nil {
			return string(v[:i]), rev
		}
	}
	return string(v), 0
}

// putAcked records the revision of an acknowledged put into the snapshot
// bucket, if it is its key's first in this term.
func (m *Member) putAcked(subject string, rev uint64) {
	key, ok := strings.CutPrefix(subject, m.putSubject(""))
	if !ok {
		return
	}
	m.putsMu.Lock()
	if _, seen := m.firstPut[key]; !seen {
		m.firstPut[key] = rev
	}
	m.putsMu.Unlock()
}

// firstPutAcked reports whether the first put of key in this term has been
// acknowledged.
func (m *Member) firstPutAcked(key string) bool {
	m.putsMu.Lock()
	defer m.putsMu.Unlock()
	_, ok := m.firstPut[key]
	return ok
}

// putSubject is the subject a put of key into the snapshot bucket goes to.
func (m *Member) putSubject(key string) string { return "$KV." + m.cfg.Name + "_snapshots." + key }

// forgetPuts forgets every first put: at the start of a term, and for the
// pairs a new pair list no longer holds, so that a pair listed again waits
// for its new values to reach every member.
func (m *Member) forgetPuts(list *snapshot.Pairs) {
	m.putsMu.Lock()
	defer m.putsMu.Unlock()
	if list == nil {
		clear(m.firstPut)
		return
	}
	held := make(map[string]bool, len(list.List())+len(list.Incoming()))
	for _, pairs := range [][]snapshot.Pair{list.List(), list.Incoming()} {
		for _, p := range pairs {
			held[p.TickerID] = true
		}
	}
	for key := range m.firstPut {
		if id, ok := pairOfKey(key); ok && !held[id] {
			delete(m.firstPut, key)
		}
	}
}

// Replicated reports whether every member seen within the lease's TTL has
// applied the value of every stream of the pair id that this member,
// leading, first put in its term: a new pair may then be listed on every
// member. False before every stream's put is acknowledged.
func (m *Member) Replicated(id string) bool {
	var need uint64
	m.putsMu.Lock()
	for s := range snapshot.NumStreams {
		rev, ok := m.firstPut[keyOfStream(s, id)]
		if !ok {
			m.putsMu.Unlock()
			return false
		}
		need = max(need, rev)
	}
	m.putsMu.Unlock()
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	for name, s := range m.seen {
		if name != m.cfg.Member && time.Duration(m.heard-s.at) < m.cfg.LeaseTTL && s.applied < need {
			return false
		}
	}
	return true
}
