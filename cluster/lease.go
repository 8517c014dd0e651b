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

// The lease is a key in its bucket, created if absent and renewed by
// compare-and-set every fifth of its TTL. A member campaigns for it in
// named states, each a loop that returns the next state when its own
// ends: it follows, says each period that it is here and, once its watch
// has applied what the bucket held, stands as a candidate, so that the
// term it takes is newer than every value there. A candidate takes the
// lease if it is free, and otherwise reads who holds it; between periods, a
// follower pings the lease's holder, and seeks the lease at once when it
// is gone (see presence.go). A leader renews it each period. A member
// whose connection to NATS is down is cut off, and one whose NATS does not
// answer as an engine has lost it: the session ends (see Member.Run).
//
// A term is one more than the newest this member has seen, in a value or
// in the lease, which carries its holder's term: every member reads the
// lease each period, so the next leader's term is above the last one's
// even when the NATS server restarted and its buckets, held in memory,
// began again with nothing in them.

// leaseState is where a member's campaign for the lease stands.
type leaseState int

const (
	// stateFollowing is a member that does not hold the lease and waits
	// for its watch to sync before it stands.
	stateFollowing leaseState = iota
	// stateCandidate seeks the lease for a period: it takes the lease if
	// it is free, and otherwise reads who holds it.
	stateCandidate
	// stateLeading holds the lease and renews it every period.
	stateLeading
	// stateCutOff has no connection to NATS, and waits for it in the part
	// it had: a period as a follower, as long as it may go without
	// renewing as a leader.
	stateCutOff
	// stateLost is a session over: NATS did not answer as an engine for
	// the lease's TTL, or the connection stayed down.
	stateLost
	// stateStopped is a session whose context is done.
	stateStopped
	numLeaseStates
)

var leaseStateNames = [numLeaseStates]string{"following", "candidate", "leading", "cut off", "lost", "stopped"}

func (s leaseState) String() string { return leaseStateNames[s] }

// leaseBucket is what the campaign uses of the lease's bucket.
type leaseBucket interface {
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
}

// term is what this member holds while it leads.
type term struct {
	number  uint64
	rev     uint64             // the lease's revision
	lease   []byte             // the lease's value: this member and number
	renewed int64              // when the lease was last renewed, Unix ns
	pings   *nats.Subscription // its pings and loads (see presence.go)
	lead    *roleRun           // OnLead's run
}

// campaign is one session's pursuit of the lease.
type campaign struct {
	m          *Member
	roles      Roles
	connected  func() bool // whether the connection to NATS is up, as the calls see it (see link)
	period     time.Duration
	tick, ping <-chan time.Time
	term       *term    // the term this member leads in; nil while it does not
	other      holder   // the lease's holder, while another leads
	follow     *roleRun // OnFollow's run, while this member does not lead
	// failing counts the periods in a row in which NATS did not answer the
	// lease's renewal or creation as a working engine does (done, or the
	// key exists); past the lease's TTL the engine is lost. A read is no
	// witness: a bucket that is gone reads as a key not found.
	failing int
	foreign int // periods in a row the lease's holder was not a member
}

func newCampaign(m *Member, r Roles) *campaign {
	return &campaign{m: m, roles: r, connected: m.link.up, period: m.cfg.LeaseTTL / periodsPerTTL}
}

// run campaigns until ctx is done or the session is lost, and then steps
// down and stops the role it runs.
func (c *campaign) run(ctx context.Context) {
	t := time.NewTicker(c.period)
	defer t.Stop()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	c.tick, c.ping = t.C, ping.C
	defer c.end()
	for state := stateFollowing; state != stateLost && state != stateStopped; {
		if c.term == nil && c.follow == nil {
			c.follow = startRoleRun(ctx, c.roles.OnFollow)
		}
		switch state {
		case stateFollowing:
			state = c.runAsFollower(ctx)
		case stateCandidate:
			state = c.runAsCandidate(ctx)
		case stateLeading:
			state = c.runAsLeader(ctx)
		case stateCutOff:
			state = c.runCutOff(ctx)
		}
	}
}

// runAsFollower begins periods until the member's watch has synced. A
// member that steps down follows here, and its watch starts again (see
// Member.watch); one that steps down because NATS is gone ends its session
// instead, with no watch to wait for.
func (c *campaign) runAsFollower(ctx context.Context) leaseState {
	signal(c.m.rewatch)
	for {
		if next, ok := c.begin(ctx); !ok {
			return next
		}
		if c.m.synced.Load() {
			return stateCandidate
		}
		if !c.await(ctx) {
			return stateStopped
		}
	}
}

// runAsCandidate seeks the lease for the rest of a period.
func (c *campaign) runAsCandidate(ctx context.Context) leaseState {
	c.stand(ctx)
	if !c.await(ctx) {
		return stateStopped
	}
	return c.holding()
}

// runAsLeader renews the lease every period until it is lost.
func (c *campaign) runAsLeader(ctx context.Context) leaseState {
	for {
		if next, ok := c.begin(ctx); !ok {
			return next
		}
		next := c.renew(ctx)
		if !c.await(ctx) {
			return stateStopped
		}
		if next != stateLeading {
			return next
		}
	}
}

// runCutOff waits for the connection to NATS to come back. No call can be
// answered meanwhile: a period is not spent waiting out each call's
// timeout. A follower waits one period: what it serves is what the leader
// put, which stopped coming with the connection, and it ages from then
// on; past the period it ends its session and reads the venue alone (see
// Member.Run), warm, from what it holds and its own streams. Waiting as
// long as a leader may go without renewing, as it did, a follower served
// books up to 5.7 s old across a NATS server's kill, which answer 502
// under a -max-stale of 5 s. A leader serves what its own poller reads,
// current whatever NATS does: it waits until it may go no longer without
// renewing (the lease's TTL less two periods since its last renewal, as
// renew steps down), so that a blip of its connection leaves its term
// standing, and then steps down and reads alone with its share. Meanwhile
// the venue counts a follower's share besides the leader's budget, for a
// few seconds, and each member's ledger sees the other's weight in the
// venue's count (budget.Ledger.Observe).
func (c *campaign) runCutOff(ctx context.Context) leaseState {
	// A tick that came before the member was found cut off, and waits in
	// the ticker, ends no period of the cut-off: a follower would leave at
	// once on a blip.
	entered := time.Now()
	for {
		select {
		case <-ctx.Done():
			return stateStopped
		case at := <-c.tick:
			if at.Before(entered) {
				continue
			}
		}
		if c.connected() {
			return c.holding()
		}
		if c.term == nil || time.Duration(c.m.cfg.Now().UnixNano()-c.term.renewed) >= c.m.cfg.LeaseTTL-2*c.period {
			break
		}
	}
	c.stepDown("disconnected from NATS")
	return stateLost
}

// holding is the state of a member in the cluster: leading while it holds
// a term, following otherwise.
func (c *campaign) holding() leaseState {
	if c.term != nil {
		return stateLeading
	}
	return stateFollowing
}

// begin begins a period: it says this member is here, before it seeks or
// renews the lease, since a holder the others have not seen is not a
// member (see readHolder). It reports false, and the state to go to, when
// the engine is lost or the connection is down.
func (c *campaign) begin(ctx context.Context) (leaseState, bool) {
	if c.failing > periodsPerTTL {
		c.stepDown("NATS does not answer")
		return stateLost, false
	}
	if !c.connected() {
		return stateCutOff, false
	}
	m := c.m
	_, err := within(ctx, m.link, c.period, func(ctx context.Context) (uint64, error) {
		return m.members.Put(ctx, memberKey(m.cfg.Member), appendMember(nil, m.cfg.Member, m.appliedRev.Load()))
	})
	c.engine(err)
	return 0, true
}

// engine counts a call's answer towards a lost engine (see failing).
func (c *campaign) engine(err error) {
	if err == nil || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		c.failing = 0
		return
	}
	c.failing++
}

// await waits for the next period, pinging the lease's holder while this
// member does not lead (see Member.await); false when ctx is done.
func (c *campaign) await(ctx context.Context) bool {
	return c.m.await(ctx, c.tick, c.ping, &c.other, c.term == nil)
}

// stand takes the lease if it is free, in a term above the newest seen,
// and otherwise reads who holds it.
func (c *campaign) stand(ctx context.Context) {
	m := c.m
	number := m.newest.Load() + 1
	lease := appendLease(nil, m.cfg.Member, number)
	// Answering before the lease names the term: a follower that reads it
	// finds its holder there (see presence.go).
	sub, err := m.answerPings(number)
	if err != nil {
		c.engine(err)
		return
	}
	rev, err := within(ctx, m.link, c.period, func(ctx context.Context) (uint64, error) {
		return m.lease.Create(ctx, leaseKey, lease)
	})
	c.engine(err)
	if err != nil {
		_ = sub.Unsubscribe()
		c.readHolder(ctx)
		return
	}
	c.win(ctx, &term{number: number, rev: rev, lease: lease, renewed: m.cfg.Now().UnixNano(), pings: sub})
}

// win begins the term t just won: the member's role goes from following
// to leading.
func (c *campaign) win(ctx context.Context, t *term) {
	m := c.m
	c.term, c.other = t, holder{}
	m.forgetPuts(nil)
	m.setTerm(t.number)
	m.raise(t.number)
	m.seeLeader(m.cfg.Member)
	m.metrics.takeOvers.Inc()
	m.log.Info("lease won: leading", "term", t.number)
	c.follow.stop()
	c.follow = nil
	t.lead = startRoleRun(ctx, c.roles.OnLead)
}

// readHolder reads who holds the lease, which this member could not take.
// A lease no member holds is counted, never followed, and removed (if it is
// still the same value) for a member to take.
func (c *campaign) readHolder(ctx context.Context) {
	m := c.m
	e, err := within(ctx, m.link, c.period, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return m.lease.Get(ctx, leaseKey)
	})
	switch {
	case err == nil:
		name, number, ok := parseLease(e.Value())
		if seen, known := m.member(name); ok && known && !seen {
			c.foreign++
		} else {
			c.foreign = 0
		}
		if !ok || c.foreign > 1 {
			m.drop(dropForeign, leaseKey, fmt.Errorf("lease %q", e.Value()))
			m.leader.Store(nil)
			_, _ = within(ctx, m.link, c.period, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, m.lease.Delete(ctx, leaseKey, jetstream.LastRevision(e.Revision()))
			})
			c.foreign = 0
			return
		}
		m.raise(number)
		m.seeLeader(name)
		c.other.see(number)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		m.leader.Store(nil)
		c.other.see(0)
	}
}

// renew renews the lease of the term held: the member goes on leading, or
// steps down and follows.
func (c *campaign) renew(ctx context.Context) leaseState {
	m, t := c.m, c.term
	next, err := within(ctx, m.link, c.period, func(ctx context.Context) (uint64, error) {
		return m.lease.Update(ctx, leaseKey, t.lease, t.rev)
	})
	c.engine(err)
	now := m.cfg.Now().UnixNano()
	switch {
	case err == nil:
		t.rev, t.renewed = next, now
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		// A renewal that timed out may have landed after all: the lease is
		// still this member's if it holds its value.
		e, err := within(ctx, m.link, c.period, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
			return m.lease.Get(ctx, leaseKey)
		})
		if err != nil || !bytes.Equal(e.Value(), t.lease) {
			c.stepDown("another member holds the lease")
			return stateFollowing
		}
		t.rev, t.renewed = e.Revision(), now
	case time.Duration(now-t.renewed) >= m.cfg.LeaseTTL-2*c.period:
		// One renewal failing is not a lost lease; one that may expire
		// before the next try is: step down before another member can
		// lead.
		c.stepDown(err.Error())
		return stateFollowing
	}
	return stateLeading
}

// stepDown ends the term held, if any: its lead's run and its pings.
func (c *campaign) stepDown(why string) {
	t := c.term
	if t == nil {
		return
	}
	c.m.log.Warn("lease lost: following", "term", t.number, "why", why)
	// The watch starts again (see Member.watch): the member stands again
	// only once it has applied what the bucket holds.
	c.m.synced.Store(false)
	c.m.setTerm(0)
	t.lead.stop()
	_ = t.pings.Unsubscribe()
	c.term = nil
	c.m.metrics.stepDowns.Inc()
}

// end ends the campaign's part: a term held, or the member's following.
func (c *campaign) end() {
	c.stepDown("shutting down")
	c.follow.stop()
	c.follow = nil
}

// setTerm sets the term this member leads in, 0 for none, and tells the
// watch.
func (m *Member) setTerm(number uint64) {
	m.term.Store(number)
	signal(m.termChanged)
}

// signal signals ch, a channel of one, unless it is signalled already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
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
