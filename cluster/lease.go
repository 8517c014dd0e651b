package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// campaign holds or seeks the lease every fifth of its TTL until ctx is
// done, and runs lead while it holds it. It seeks the lease only once the
// watch has applied what the bucket held, so that the term it takes is
// newer than every value there. Between periods, a follower pings the
// lease's holder, and seeks the lease at once when it is gone (see
// presence.go).
//
// A term is one more than the newest this member has seen, in a value or
// in the lease, which carries its holder's term: every member reads the
// lease each period, so the next leader's term is above the last one's
// even when the NATS server restarted and its buckets, held in memory,
// began again with nothing in them.
func (m *Member) campaign(ctx context.Context, lead func(ctx context.Context)) {
	var (
		rev     uint64   // the lease's revision while this member holds it
		lease   []byte   // its value
		renewed int64    // when it was last renewed, Unix ns
		running *leading // lead's run while this member holds the lease
	)
	period := m.cfg.LeaseTTL / periodsPerTTL
	var (
		answering *nats.Subscription // the pings of this member's term, while it leads
		other     holder             // the lease's holder, while another leads
	)
	stepDown := func(why string) {
		if running == nil {
			return
		}
		m.log.Warn("lease lost: following", "term", m.term.Load(), "why", why)
		m.term.Store(0)
		running.stop()
		_ = answering.Unsubscribe()
		running, rev, answering = nil, 0, nil
		m.metrics.stepDowns.Inc()
	}
	defer func() { stepDown("shutting down") }()
	t := time.NewTicker(period)
	defer t.Stop()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	// failing counts the periods in a row in which NATS did not answer the
	// lease's renewal or creation as a working engine does (done, or the
	// key exists); past the lease's TTL the engine is lost, and the session
	// ends for the member to join again. A read is no witness: a bucket
	// that is gone reads as a key not found.
	failing := 0
	engine := func(err error) {
		if err == nil || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			failing = 0
			return
		}
		failing++
	}
	foreign := 0     // periods in a row the lease's holder was not a member
	var cutOff int64 // when the connection was last seen down, Unix ns; 0 while it is up
	for failing <= periodsPerTTL {
		if !m.cfg.Conn.IsConnected() {
			// No call can be answered: the period is not spent waiting
			// out each call's timeout. Cut off for as long as a leader
			// may go without renewing, every member ends its session,
			// the leader stepping down, so that each reads the venue
			// alone while its values are still fresh (see Run).
			now := m.cfg.Now().UnixNano()
			if cutOff == 0 {
				cutOff = now
			}
			// A follower waits a period longer than the leader, whose
			// reading is then surely over.
			limit := m.cfg.LeaseTTL - period
			if rev != 0 {
				limit -= period
			}
			if time.Duration(now-cutOff) >= limit {
				stepDown("disconnected from NATS")
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		cutOff = 0
		// Say this member is here, before seeking the lease: a holder
		// the others have not seen is not a member (see below).
		_, err := within(ctx, period, func(ctx context.Context) (uint64, error) {
			return m.members.Put(ctx, memberKey(m.cfg.Member), appendMember(nil, m.cfg.Member, m.appliedRev.Load()))
		})
		engine(err)
		switch {
		case rev != 0:
			next, err := within(ctx, period, func(ctx context.Context) (uint64, error) {
				return m.lease.Update(ctx, leaseKey, lease, rev)
			})
			engine(err)
			now := m.cfg.Now().UnixNano()
			switch {
			case err == nil:
				rev, renewed = next, now
			case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
				// A renewal that timed out may have landed after all: the
				// lease is still this member's if it holds its value.
				e, gerr := within(ctx, period, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
					return m.lease.Get(ctx, leaseKey)
				})
				if gerr != nil || !bytes.Equal(e.Value(), lease) {
					stepDown("another member holds the lease")
				} else {
					rev, renewed = e.Revision(), now
				}
			case time.Duration(now-renewed) >= m.cfg.LeaseTTL-2*period:
				// One renewal failing is not a lost lease; one that may
				// expire before the next try is: step down before another
				// member can lead.
				stepDown(err.Error())
			}
		case !m.synced.Load():
		default:
			term := m.newest.Load() + 1
			lease = appendLease(nil, m.cfg.Member, term)
			// Answering before the lease names the term: a follower that
			// reads it finds its holder there (see presence.go).
			sub, err := m.answerPings(term)
			if err != nil {
				engine(err)
				break
			}
			created, err := within(ctx, period, func(ctx context.Context) (uint64, error) {
				return m.lease.Create(ctx, leaseKey, lease)
			})
			engine(err)
			if err == nil {
				answering, other = sub, holder{}
				m.forgetPuts(nil)
				rev, renewed = created, m.cfg.Now().UnixNano()
				m.term.Store(term)
				m.raise(term)
				m.seeLeader(m.cfg.Member)
				m.metrics.takeOvers.Inc()
				m.log.Info("lease won: leading", "term", term)
				running = startLeading(ctx, lead)
				break
			}
			_ = sub.Unsubscribe()
			e, err := within(ctx, period, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
				return m.lease.Get(ctx, leaseKey)
			})
			switch {
			case err == nil:
				name, term, ok := parseLease(e.Value())
				if seen, known := m.member(name); ok && known && !seen {
					foreign++
				} else {
					foreign = 0
				}
				if !ok || foreign > 1 {
					// Not a lease a member holds: counted, never
					// followed, and removed (if it is still the same
					// value) for a member to take.
					m.drop(dropForeign, leaseKey, fmt.Errorf("lease %q", e.Value()))
					m.leader.Store(nil)
					_ = m.lease.Delete(ctx, leaseKey, jetstream.LastRevision(e.Revision()))
					foreign = 0
					break
				}
				m.raise(term)
				m.seeLeader(name)
				other.see(term)
			case errors.Is(err, jetstream.ErrKeyNotFound):
				m.leader.Store(nil)
				other.see(0)
			}
		}
		if !m.await(ctx, t.C, ping.C, &other, rev == 0) {
			return
		}
	}
}

// within runs one call to NATS with d to answer: a call it does not
// answer in time fails, rather than waiting out the client's default
// timeout, so that a lost engine is noticed within the lease's TTL.
func within[T any](ctx context.Context, d time.Duration, call func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return call(ctx)
}

// periodsPerTTL is how many renewal periods a lease's TTL holds.
const periodsPerTTL = 5

// leaseKey is the lease's key in its bucket.
const leaseKey = "leader"

// appendLease appends the lease's value: its holder's name and term.
func appendLease(dst []byte, name string, term uint64) []byte {
	return strconv.AppendUint(append(append(dst, name...), ' '), term, 10)
}

// parseLease splits a lease's value into its holder and term.
func parseLease(v []byte) (name string, term uint64, ok bool) {
	i := bytes.LastIndexByte(v, ' ')
	if i <= 0 {
		return "", 0, false
	}
	term, err := strconv.ParseUint(string(v[i+1:]), 10, 64)
	if err != nil || term == 0 {
		return "", 0, false
	}
	return string(v[:i]), term, true
}
