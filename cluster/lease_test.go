package cluster

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"marketfeed/snapshot"
)

// memLease is a lease bucket in memory: one key, compare-and-set as NATS
// does it, and a renewal failure to inject.
type memLease struct {
	value   []byte // nil: no lease
	rev     uint64
	fail    error // every Update's, while set
	deleted int
}

func (l *memLease) Create(_ context.Context, _ string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	if l.value != nil {
		return 0, jetstream.ErrKeyExists
	}
	l.value, l.rev = value, l.rev+1
	return l.rev, nil
}

func (l *memLease) Update(_ context.Context, _ string, value []byte, rev uint64) (uint64, error) {
	switch {
	case l.fail != nil:
		return 0, l.fail
	case l.value == nil || rev != l.rev:
		return 0, jetstream.ErrKeyRevisionMismatch
	}
	l.value, l.rev = value, l.rev+1
	return l.rev, nil
}

func (l *memLease) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	if l.value == nil {
		return nil, jetstream.ErrKeyNotFound
	}
	return leaseEntry{value: l.value, rev: l.rev}, nil
}

func (l *memLease) Delete(context.Context, string, ...jetstream.KVDeleteOpt) error {
	l.value = nil
	l.deleted++
	return nil
}

// leaseEntry is the lease as Get returns it; it has only a value and a
// revision.
type leaseEntry struct {
	jetstream.KeyValueEntry
	value []byte
	rev   uint64
}

func (e leaseEntry) Value() []byte    { return e.value }
func (e leaseEntry) Revision() uint64 { return e.rev }

// offlineCampaign is a campaign of member "a", with a lease of a second,
// on a lease bucket in memory and no NATS server: only its lease steps
// can run.
func offlineCampaign(t *testing.T, lease *memLease) *campaign {
	t.Helper()
	m := newMember(Config{Conn: &nats.Conn{}, Member: "a", Store: snapshot.NewStore(), LeaseTTL: time.Second})
	m.lease = lease
	return newCampaign(m, Roles{})
}

// hold makes c the holder of term 3 of the lease, renewed ago.
func hold(c *campaign, lease *memLease, ago time.Duration) *term {
	t := &term{number: 3, lease: appendLease(nil, c.m.cfg.Member, 3), renewed: c.m.cfg.Now().Add(-ago).UnixNano()}
	lease.value, lease.rev, t.rev = t.lease, 4, 4
	c.term = t
	c.m.term.Store(t.number)
	return t
}

// A leader's period goes on leading or steps down, by what its renewal
// finds.
func TestLeaderRenewalTransitions(t *testing.T) {
	const ttl, period = time.Second, time.Second / periodsPerTTL
	for _, tc := range []struct {
		name    string
		change  func(l *memLease) // what befell the lease since the last renewal
		ago     time.Duration     // the last renewal
		want    leaseState
		failing int
	}{
		{"renewed", func(*memLease) {}, period, stateLeading, 0},
		{"a renewal that timed out landed after all", func(l *memLease) { l.rev++ }, period, stateLeading, 0},
		{"another member took it", func(l *memLease) { l.value, l.rev = appendLease(nil, "b", 4), l.rev+1 }, period, stateFollowing, 0},
		{"it expired", func(l *memLease) { l.value = nil }, period, stateFollowing, 0},
		{"one renewal failed", func(l *memLease) { l.fail = context.DeadlineExceeded }, period, stateLeading, 1},
		{"renewals failed until it may expire", func(l *memLease) { l.fail = context.DeadlineExceeded }, ttl - 2*period, stateFollowing, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := new(memLease)
			led := make(chan struct{})
			c := offlineCampaign(t, lease)
			held := hold(c, lease, tc.ago)
			held.lead = startRoleRun(t.Context(), func(ctx context.Context) { <-ctx.Done(); close(led) })
			tc.change(lease)
			if got := c.renew(t.Context()); got != tc.want {
				t.Fatalf("renewal ends %v, want %v", got, tc.want)
			}
			if c.failing != tc.failing {
				t.Errorf("%d periods failing, want %d", c.failing, tc.failing)
			}
			switch tc.want {
			case stateLeading:
				if c.term != held || c.m.Term() != 3 || held.rev != lease.rev || !bytes.Equal(lease.value, held.lease) {
					t.Errorf("still leading, yet term %d, revision %d of the lease's %d", c.m.Term(), held.rev, lease.rev)
				}
			default:
				select {
				case <-led:
				default:
					t.Error("stepped down, yet OnLead still runs")
				}
				if c.term != nil || c.m.Term() != 0 || c.m.metrics.stepDowns.Get() != 1 {
					t.Errorf("stepped down, yet term %d, %d step-downs", c.m.Term(), c.m.metrics.stepDowns.Get())
				}
			}
		})
	}
}

// A period begins unless the engine is lost (the session ends, a leader
// stepping down) or the connection is down (the member is cut off).
func TestPeriodBeginTransitions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failing   int
		connected bool
		leading   bool
		want      leaseState
	}{
		{"disconnected follower", 0, false, false, stateCutOff},
		{"disconnected leader", periodsPerTTL, false, true, stateCutOff},
		{"engine lost, follower", periodsPerTTL + 1, true, false, stateLost},
		{"engine lost, leader", periodsPerTTL + 1, false, true, stateLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := new(memLease)
			c := offlineCampaign(t, lease)
			c.failing, c.connected = tc.failing, func() bool { return tc.connected }
			if tc.leading {
				hold(c, lease, 0)
			}
			got, ok := c.begin(t.Context())
			if ok || got != tc.want {
				t.Fatalf("begin: %v (ok %v), want %v", got, ok, tc.want)
			}
			if stillLeads := c.term != nil; stillLeads != (tc.leading && tc.want == stateCutOff) {
				t.Errorf("leading %v after going %v", stillLeads, got)
			}
		})
	}
}

// A member cut off from NATS goes back to its part when the connection
// returns, and ends its session when it does not: a follower, whose
// values stopped with the connection, after a period; a leader, which
// serves its own reads, once it may go no longer without renewing (the
// lease's TTL less two periods since its last renewal), stepping down. A
// tick that waited in the ticker from before the cut-off ends no period.
func TestCutOffTransitions(t *testing.T) {
	const period = time.Second / periodsPerTTL
	for _, tc := range []struct {
		name      string
		leading   bool
		renewed   time.Duration // a leader's last renewal, before the cut-off
		tickAhead bool          // a tick fired unread before the cut-off
		back      time.Duration // when the connection returns; 0: never
		want      leaseState
		after     time.Duration
	}{
		{"follower, connection back", false, 0, false, period, stateFollowing, period},
		{"follower, connection back too late", false, 0, false, 2 * period, stateLost, period},
		{"leader, connection back", true, 0, false, 2 * period, stateLeading, 2 * period},
		{"follower, connection gone", false, 0, false, 0, stateLost, period},
		{"leader, connection gone", true, 0, false, 0, stateLost, 3 * period},
		{"leader renewed two periods before, connection gone", true, 2 * period, false, 0, stateLost, period},
		{"follower with a tick from before, connection gone", false, 0, true, 0, stateLost, period / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lease := new(memLease)
				c := offlineCampaign(t, lease)
				tick := time.NewTicker(period)
				defer tick.Stop()
				c.tick = tick.C
				if tc.tickAhead {
					time.Sleep(period + period/2) // a tick fires unread; the next comes half a period after the cut-off
				}
				start := time.Now()
				c.connected = func() bool { return tc.back != 0 && time.Since(start) >= tc.back }
				if tc.leading {
					hold(c, lease, tc.renewed)
				}
				if got := c.runCutOff(t.Context()); got != tc.want {
					t.Fatalf("cut off: %v, want %v", got, tc.want)
				}
				if took := time.Since(start); took != tc.after {
					t.Errorf("cut off for %s, want %s", took, tc.after)
				}
				if leads := c.term != nil; leads != (tc.want == stateLeading) {
					t.Errorf("leading %v after going %v", leads, tc.want)
				}
			})
		})
	}
}

// A follower follows the lease's holder while it is a member, and removes
// a lease no member holds: one it cannot read, or one whose holder has not
// been seen for two periods in a row.
func TestFollowerReadsTheHolder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lease   []byte // nil: none
		member  bool   // the holder was seen in the member bucket
		periods int
		leader  string // the leader followed after periods
		deleted int
	}{
		{"no lease", nil, false, 1, "", 0},
		{"a member's lease", appendLease(nil, "b", 7), true, 3, "b", 0},
		{"a lease of no term", []byte("no term here"), true, 1, "", 1},
		{"a non-member's lease, once", appendLease(nil, "x", 7), false, 1, "x", 0},
		{"a non-member's lease, twice", appendLease(nil, "x", 7), false, 2, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &memLease{value: tc.lease, rev: 1}
			c := offlineCampaign(t, lease)
			now := c.m.cfg.Now().UnixNano()
			c.m.watching.Store(now - int64(time.Hour)) // long enough to judge
			if tc.member {
				c.m.seen["b"] = sighting{at: now}
			}
			for range tc.periods {
				c.readHolder(t.Context())
			}
			if got := c.m.Leader(); got != tc.leader {
				t.Errorf("follows %q, want %q", got, tc.leader)
			}
			if lease.deleted != tc.deleted {
				t.Errorf("lease removed %d times, want %d", lease.deleted, tc.deleted)
			}
			if tc.leader != "" && (c.other.term != 7 || c.m.NewestTerm() != 7) {
				t.Errorf("holder's term %d, newest %d, want 7", c.other.term, c.m.NewestTerm())
			}
		})
	}
}
