// Package cluster makes marketfeed processes replicas of one another on NATS
// JetStream. The members elect one ingest leader through a lease, a key in
// a key-value bucket created if absent and renewed by compare-and-set well
// inside its TTL; its value names the leader and its term (see campaign). A
// leader whose connection is gone is replaced before its lease runs out
// (see presence.go). Only the leader reads the venue: it puts the wire form
// of every snapshot its store publishes (see value.go) into a second,
// in-memory bucket, one key per pair and stream, one per pair for its
// book's depth, plus one per whole-market document (the pair list, the
// tickers, the contracts: snapshot.Doc). Every member applies a
// watch of that bucket to its own store and serves from it, so every member
// answers with the same bytes and the same tags; the leader serves what it
// publishes as it publishes it. A value of a term older than the newest a
// member has applied, a damaged value, a foreign key or an oversize value
// is dropped and counted, never served. A follower asks the leader to read
// what its requests find cold (load.go), and tells it what they read
// (want.go). Members share one rate limit (ratelimit.go).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	lease   leaseBucket
	snaps   jetstream.KeyValue
	members jetstream.KeyValue
	js      jetstream.JetStream

	// term is the term this member leads in; 0 while it follows. newest is
	// the newest term it has seen: in a value applied, in the lease, or its
	// own.
	term   atomic.Uint64
	newest atomic.Uint64
	// termChanged is signalled when term changes, and rewatch when the
	// member follows again after a term, for the watch, which stops while
	// this member leads (see Member.watch).
	termChanged, rewatch chan struct{}
	leader               atomic.Pointer[string] // the lease's holder, as last seen
	synced               atomic.Bool            // the watch has delivered every value it held at the start

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
	// link ends the calls of the lease's campaign when the connection
	// goes down (see within).
	link *link

	// appliedRev is the snapshot bucket's revision this member's watch
	// has applied; firstPut, while it leads, the revision of each key's
	// first put in its term (see replicated.go).
	appliedRev atomic.Uint64
	putsMu     sync.Mutex
	firstPut   map[string]uint64

	queue   publishQueue
	metrics memberMetrics
	// tasks is the work NATS's handlers and the sessions hand off, which
	// Run waits for: a leader's reads for its followers' loads, and the
	// stopping of a session's watches.
	tasks tasks
}

// LastApplied is when the member last applied a value of another member's,
// Unix ns; 0 before the first.
func (m *Member) LastApplied() int64 { return m.lastApplied.Load() }

// Join connects a member to its cluster's buckets, creating them if they
// do not exist. Run makes it take part.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if cfg.Member == "" {
		return nil, errors.New("cluster: a member needs a name")
	}
	m := newMember(cfg)
	// Acknowledged puts (a key's first of a term, see Member.put) are
	// asynchronous: the publisher does not wait for one put's
	// acknowledgement before the next, which would add a round trip to
	// the lag of every value queued behind it; the handlers count them.
	js, err := jetstream.New(m.cfg.Conn,
		jetstream.WithPublishAsyncMaxPending(maxPendingPuts),
		jetstream.WithPublishAsyncTimeout(m.cfg.LeaseTTL),
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
	m.cfg.Store.OnPublish(m.published)
	return m, nil
}

// newMember is a member of cfg, its defaults taken, bound to no bucket yet.
func newMember(cfg Config) *Member {
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
	m := &Member{cfg: cfg, log: cfg.Logger.With("component", "cluster", "member", cfg.Member), logs: logthrottle.New(time.Minute),
		seen: map[string]sighting{}, firstPut: map[string]uint64{}, termChanged: make(chan struct{}, 1), rewatch: make(chan struct{}, 1),
		link: newLink()}
	m.queue.init()
	m.metrics = newMemberMetrics(cfg.Metrics, m)
	return m
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

// Alone reports whether NATS is away and this member reads the venue
// itself.
func (m *Member) Alone() bool { return m.alone.Load() }

// leading reports whether this member holds the lease.
func (m *Member) leading() bool { return m.term.Load() != 0 }

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

// seeLeader records name as the lease's holder.
func (m *Member) seeLeader(name string) { m.leader.Store(&name) }

// raise makes term the newest term seen, if it is newer.
func (m *Member) raise(term uint64) {
	for {
		cur := m.newest.Load()
		if term <= cur || m.newest.CompareAndSwap(cur, term) {
			return
		}
	}
}
