// Package cluster makes marketfeed processes replicas of one another on NATS
// JetStream. The members elect one ingest leader through a lease, a key in
// a key-value bucket created if absent and renewed by compare-and-set well
// inside its TTL; its value names the leader and its term (see campaign). A
// leader whose connection is gone is replaced before its lease runs out
// (see presence.go). Only the leader reads the venue: it puts the wire form
// of every snapshot its store publishes (see value.go) into a second,
// in-memory bucket, one key per pair and stream, one per pair for its
// book's depth, plus the pair list and the tickers. Every member applies a
// watch of that bucket to its own store and serves from it, so every member
// answers with the same bytes and the same tags; the leader serves what it
// publishes as it publishes it. A value of a term older than the newest a
// member has applied, a damaged value, a foreign key or an oversize value
// is dropped and counted, never served. A follower asks the leader to read
// what its requests find cold (load.go), and tells it what they read
// (want.go). Members share one rate limit (ratelimit.go).
package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"marketfeed/internal/logthrottle"
	"marketfeed/snapshot"
)

// Config is what a Member needs; zero values take the defaults.
type Config struct {
	// Conn is the member's connection to NATS, with JetStream enabled.
	Conn *nats.Conn
	// Name names the cluster: the prefix of its buckets. Default
	// "marketfeed".
	Name string
	// Member names this member, unique among the members: it is the
	// lease's value while this member leads.
	Member string
	// Store is the member's store: the leader's values are read from it
	// as it publishes them, and every member's watch publishes into it.
	Store *snapshot.Store
	// Replicas is how many NATS servers hold each bucket (default 1): 3
	// on a cluster of three servers, so that losing one loses nothing.
	Replicas int
	// LeaseTTL is how long a lease outlives its last renewal (default
	// 5 s): a killed leader is replaced within it. It is renewed every
	// fifth of it.
	LeaseTTL time.Duration
	Logger   *slog.Logger // nil: discard
	// Metrics receives the member's metrics; nil: a private set.
	Metrics *metrics.Set
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Load, on the leader, reads a pair's stream for a follower's request
	// that found it cold (see Member.Load), returning once the value is
	// published or the read failed; nil: the leader refuses.
	Load func(ctx context.Context, tickerID string, s snapshot.Stream) error
	// Want, on the leader, marks a pair's stream as read by a follower's
	// requests (see Member.Want); nil: the leader ignores them.
	Want func(tickerID []byte, s snapshot.Stream)
}

// Member is one member of a cluster.
type Member struct {
	cfg     Config
	log     *slog.Logger
	lease   jetstream.KeyValue
	snaps   jetstream.KeyValue
	members jetstream.KeyValue
	js      jetstream.JetStream

	// term is the term this member leads in; 0 while it follows. newest is
	// the newest term it has seen: in a value applied, in the lease, or its
	// own.
	term   atomic.Uint64
	newest atomic.Uint64
	leader atomic.Pointer[string] // the lease's holder, as last seen
	synced atomic.Bool            // the watch has delivered every value it held at the start

	lastApplied atomic.Int64 // Unix ns
	lastVenue   atomic.Int64 // the venue time of the last value applied, Unix ms
	loads       loadWaiters  // a follower's loads waiting for their value
	wantsRead   wants        // what a follower's requests read, for the leader
	logs        *logthrottle.Throttle

	// seen is what the member bucket last said of each member, by name;
	// watching is when this member's watch of it began, 0 while it does
	// not run.
	seenMu   sync.Mutex
	seen     map[string]sighting
	heard    int64 // when the member bucket last said anything, Unix ns
	watching atomic.Int64
	// alone is set while NATS is away and this member reads the venue
	// itself (see Run).
	alone atomic.Bool

	// appliedRev is the snapshot bucket's revision this member's watch
	// has applied; firstPut, while it leads, the revision of each key's
	// first put in its term (see replicated.go).
	appliedRev atomic.Uint64
	putsMu     sync.Mutex
	firstPut   map[string]uint64

	queue   publishQueue
	metrics memberMetrics
}

// LastApplied is when the member last applied a value of another member's,
// Unix ns; 0 before the first.
func (m *Member) LastApplied() int64 { return m.lastApplied.Load() }

// Join connects a member to its cluster's buckets, creating them if they
// do not exist. Run makes it take part.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if cfg.Name == "" {
		cfg.Name = "marketfeed"
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Member == "" {
		return nil, errors.New("cluster: a member needs a name")
	}
	m := &Member{cfg: cfg, log: cfg.Logger.With("component", "cluster", "member", cfg.Member), logs: logthrottle.New(time.Minute),
		seen: map[string]sighting{}, firstPut: map[string]uint64{}}
	m.queue.init()
	m.metrics = newMemberMetrics(cfg.Metrics, m)
	// Puts are asynchronous: the publisher does not wait for one put's
	// acknowledgement before the next, which would add a round trip to
	// the lag of every value queued behind it; the handlers count them.
	js, err := jetstream.New(cfg.Conn,
		jetstream.WithPublishAsyncMaxPending(maxPendingPuts),
		jetstream.WithPublishAsyncTimeout(cfg.LeaseTTL),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, msg *nats.Msg, ack *jetstream.PubAck) {
			m.metrics.puts.Inc()
			m.putAcked(msg.Subject, ack.Sequence)
		}),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { m.metrics.putErrors.Inc() }))
	if err != nil {
		return nil, fmt.Errorf("cluster: jetstream: %w", err)
	}
	m.js = js
	if err := m.open(ctx); err != nil {
		return nil, err
	}
	cfg.Store.OnPublish(m.published)
	return m, nil
}

// open creates the cluster's buckets if they do not exist, and binds the
// member to them: at Join, and again after the NATS server lost them (it
// holds them in memory, so a restart begins with none).
func (m *Member) open(ctx context.Context) error {
	lease, err := m.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: m.cfg.Name + "_lease", History: 1, TTL: m.cfg.LeaseTTL, Storage: jetstream.MemoryStorage, Replicas: m.cfg.Replicas,
		Description: "the ingest leader's lease",
	})
	if err != nil {
		return fmt.Errorf("cluster: lease bucket: %w", err)
	}
	snaps, err := m.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: m.cfg.Name + "_snapshots", History: 1, Storage: jetstream.MemoryStorage, MaxValueSize: maxValue, Replicas: m.cfg.Replicas,
		Description: "the leader's snapshots, one key per pair and stream",
	})
	if err != nil {
		return fmt.Errorf("cluster: snapshot bucket: %w", err)
	}
	members, err := m.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: m.cfg.Name + "_members", History: 1, TTL: m.cfg.LeaseTTL, Storage: jetstream.MemoryStorage, Replicas: m.cfg.Replicas,
		Description: "the members, each put every renewal period",
	})
	if err != nil {
		return fmt.Errorf("cluster: member bucket: %w", err)
	}
	m.lease, m.snaps, m.members = lease, snaps, members
	return nil
}

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
	// Stopping asks NATS to drop the watch's consumer, which waits out a
	// request's timeout while NATS is away: it does not hold the session's
	// end, and with it the member's going alone.
	defer func() { go func() { _ = w.Stop() }() }()
	m.watching.Store(m.cfg.Now().UnixNano())
	defer m.watching.Store(0)
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
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
}

// Alone reports whether NATS is away and this member reads the venue
// itself.
func (m *Member) Alone() bool { return m.alone.Load() }

// errDisconnected is a call not made: the connection to NATS is down.
var errDisconnected = errors.New("disconnected from NATS")

// Leading reports whether this member holds the lease.
func (m *Member) Leading() bool { return m.term.Load() != 0 }

// Term is the term this member leads in, 0 while it follows.
func (m *Member) Term() uint64 { return m.term.Load() }

// NewestTerm is the newest term this member has seen: its own while it
// leads, its leader's while it follows. It is what an operator compares
// across members (marketfeed_cluster_term, and the term in /readyz).
func (m *Member) NewestTerm() uint64 { return m.newest.Load() }

// Leader is the name of the lease's holder as this member last saw it; ""
// when none.
func (m *Member) Leader() string {
	if l := m.leader.Load(); l != nil {
		return *l
	}
	return ""
}

// Synced reports whether the member's store holds every value the bucket
// held when its watch started.
func (m *Member) Synced() bool { return m.synced.Load() }

// Run takes part in the cluster until ctx is done: it applies the snapshot
// bucket's watch to the store, campaigns for the lease, and while it holds
// it runs lead with a context that ends when the lease is lost, and share
// 1, and puts what the store publishes into the bucket.
//
// When NATS stops answering for longer than the lease's TTL, or its
// buckets are gone, the member steps down and joins again as soon as it
// can, without a restart. If NATS does not answer the first try, the
// member runs lead on its own until it does, with share the inverse of the
// members it last saw: every member that lost NATS reads the venue itself
// with its part of one budget, rather than serving what it holds until
// that is too old to serve. Run returns when ctx is done and lead has
// returned.
func (m *Member) Run(ctx context.Context, lead func(ctx context.Context, share float64)) error {
	var wg sync.WaitGroup
	wg.Go(func() { m.publish(ctx) })
	wg.Go(func() { m.sendWants(ctx) })
	defer wg.Wait()
	for {
		m.session(ctx, func(ctx context.Context) { lead(ctx, 1) })
		var alone *leading
		stopAlone := func() {
			if alone != nil {
				alone.stop()
				m.alone.Store(false)
			}
		}
		for first := true; ; first = false {
			// The first try is at once: a session that ended because the
			// connection is down goes alone without waiting a period.
			wait := m.cfg.LeaseTTL / periodsPerTTL
			if first {
				wait = 0
			}
			select {
			case <-ctx.Done():
				stopAlone()
				return nil
			case <-time.After(wait):
			}
			err := errDisconnected
			if m.cfg.Conn.IsConnected() {
				_, err = within(ctx, m.cfg.LeaseTTL, func(ctx context.Context) (struct{}, error) {
					return struct{}{}, m.open(ctx)
				})
			}
			if err == nil {
				break
			}
			m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster unreachable: reading the venue alone", "err", err)
			if alone == nil {
				share := 1 / float64(m.Members())
				m.log.Warn("cluster unreachable: reading the venue alone", "share", share)
				m.alone.Store(true)
				m.metrics.alone.Inc()
				alone = startLeading(ctx, func(ctx context.Context) { lead(ctx, share) })
			}
		}
		stopAlone()
		m.logs.Forget("cluster")
		m.metrics.rejoins.Inc()
		m.log.Info("cluster joined again")
	}
}

// session is one stretch of membership: a watch of the snapshot bucket and
// the campaign, until ctx is done or the engine is lost.
func (m *Member) session(ctx context.Context, lead func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := m.snaps.WatchAll(ctx)
	if err != nil {
		m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster watch failed", "err", err)
		return
	}
	mw, err := m.members.WatchAll(ctx)
	if err != nil {
		m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster watch failed", "err", err)
		return
	}
	m.synced.Store(false)
	// Revisions begin again on a NATS server that lost the bucket: this
	// member has applied none of the new ones.
	m.appliedRev.Store(0)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel() // a watch that ends ends the session
		m.watch(ctx, w)
	})
	wg.Go(func() { m.watchMembers(ctx, mw) })
	m.campaign(ctx, lead)
	cancel()
	wg.Wait()
}

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

func (m *Member) seeLeader(name string) { m.leader.Store(&name) }

// leading is lead's run while the member holds the lease.
type leading struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startLeading(ctx context.Context, lead func(ctx context.Context)) *leading {
	ctx, cancel := context.WithCancel(ctx)
	l := &leading{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		lead(ctx)
	}()
	return l
}

// stop ends lead's run and waits for it.
func (l *leading) stop() {
	l.cancel()
	<-l.done
}

// raise makes term the newest term seen, if it is newer.
func (m *Member) raise(term uint64) {
	for {
		cur := m.newest.Load()
		if term <= cur || m.newest.CompareAndSwap(cur, term) {
			return
		}
	}
}

// watch applies the snapshot bucket's values to the store until ctx is
// done. The values the bucket held when the watch started come first, and
// are applied pair list first, so that every pair's book and trades find
// it listed.
func (m *Member) watch(ctx context.Context, w jetstream.KeyWatcher) {
	// Stopping asks NATS to drop the watch's consumer, which waits out a
	// request's timeout while NATS is away: it does not hold the session's
	// end, and with it the member's going alone.
	defer func() { go func() { _ = w.Stop() }() }()
	var initial []jetstream.KeyValueEntry
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return
		case u, ok := <-w.Updates():
			if !ok {
				return
			}
			e = u
		}
		switch {
		case e == nil: // every value held at the start has come
			var newest uint64
			for _, first := range []bool{true, false} {
				for _, e := range initial {
					if (e.Key() == keyPairs) == first {
						m.apply(e)
						newest = max(newest, e.Revision())
					}
				}
			}
			initial = nil
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

// apply publishes one entry of the snapshot bucket into the store, unless
// it is this member's own, stale, or not a snapshot value.
func (m *Member) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return // a delete or purge: what the store holds stays until listed otherwise
	}
	h, wire, err := parseValue(e.Value())
	if err != nil {
		m.drop(dropBad, e.Key(), err)
		return
	}
	if mine := m.term.Load(); mine != 0 && h.term == mine {
		return // published by this member: its store has it already
	}
	if h.term < m.newest.Load() {
		m.drop(dropStale, e.Key(), fmt.Errorf("term %d, newest %d", h.term, m.newest.Load()))
		return
	}
	m.raise(h.term)
	now := m.cfg.Now().UnixNano()
	if err := applyWire(m.cfg.Store, e.Key(), wire, now); err != nil {
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
