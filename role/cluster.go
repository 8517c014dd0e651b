package role

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/cluster"
	"marketfeed/poller"
	"marketfeed/poller/live"
	"marketfeed/poller/standby"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Engine is what the roles need of the cluster's member (*cluster.Member
// is one): its lifetime, which says when this member
// leads, follows or is alone, and what it carries to and from the others.
type Engine interface {
	// Run takes part in the cluster until ctx is done, calling r's
	// callbacks as this member's part changes.
	Run(ctx context.Context, r cluster.Roles) error
	// ShareRateLimit exchanges rc's counts with the other members until
	// ctx is done.
	ShareRateLimit(ctx context.Context, rc cluster.RateCounts) error
	// Want and Load send a follower's wants and cold loads to the leader.
	Want(id []byte, s snapshot.Stream, now int64)
	// served reports whether the member's copy serves the request (nil:
	// any value applied since does).
	Load(ctx context.Context, id string, s snapshot.Stream, served func() bool) error
	// Replicated reports whether every member holds what the leader
	// published of a pair.
	Replicated(id string) bool
	// AloneShare is the part of the budget a member reads the venue with
	// while NATS is away.
	AloneShare() float64
	// NewestTerm, Leader, Synced and Members are what /readyz says of the
	// member (see cluster.Member).
	NewestTerm() uint64
	Leader() string
	Synced() bool
	Members() int
}

// DepthEvery is how often a cluster's leader publishes each book's depth
// (see snapshot.Depth): the member elected next starts from it, and holds
// the events since it (see standby.HeldBy), so a longer period holds more
// events on every follower and a shorter one puts more bytes into the
// bucket (at 446 pairs of 500 levels a side, 14 KB each, some 1.2 MB a
// second at 5 s).
const DepthEvery = 5 * time.Second

// Cluster is a cluster member's role, which changes as the member's
// callbacks say (Lead, Follow, Alone): it answers as the role it plays
// now, held behind an atomic pointer, and as a follower while it plays no
// other.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	store  *snapshot.Store
	engine Engine
	// relay runs the member's market streams for its whole life and lends
	// them to its poller while it leads or is alone, so that a takeover
	// continues them; nil without streams.
	relay *standby.Relay
	// seed starts a new poller's pairs from the store's values (see
	// live.SeedFrom); nil without streams.
	seed  func(tickerID string) live.Seed
	spot  spotList
	rates RateLimiter // shared with the others; nil: not shared
	// closeConn closes the member's connection once it is done with it.
	closeConn func()

	now       atomic.Pointer[playing]
	following *playing
}

// playing is the role a member plays.
type playing struct{ answers }

// Join joins the cluster member's config describes, and returns the
// member's role: a follower until it is told otherwise. The member's
// wants and cold loads from the others are answered by the role being
// played; streams (nil: none) are the venue's market streams, run for the
// member's life. Once Join returns, the role owns member.Conn: Run closes
// it when done.
func Join(ctx context.Context, cfg Config, member cluster.Config, streams venue.Streams) (*Cluster, error) {
	c := newCluster(cfg, streams)
	member.Load, member.Want = c.serveLoad, c.serveWant
	m, err := cluster.Join(ctx, member)
	if err != nil {
		return nil, err
	}
	c.engine, c.closeConn = m, member.Conn.Close
	return c, nil
}

// newCluster returns a member's role, without its engine.
func newCluster(cfg Config, streams venue.Streams) *Cluster {
	c := &Cluster{cfg: cfg, log: cfg.Poller.Logger, store: cfg.Poller.Store, closeConn: func() {}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.spot.set(cfg.Poller.Spot)
	if streams != nil {
		c.relay = standby.New(streams, standby.HeldBy(c.store), cfg.Metrics)
		c.seed = live.SeedFrom(c.store, c.relay.Continues, cfg.Poller.MaxStale)
	}
	c.following = &playing{&follower{c}}
	c.now.Store(c.following)
	return c
}

// Run takes part in the cluster until ctx is done: the member's run, which
// calls Lead, Follow and Alone; the shared rate limit; and the market
// streams, followed on the store's pair list. It returns once each has,
// and closes the member's connection.
func (c *Cluster) Run(ctx context.Context) {
	defer c.closeConn()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := c.engine.Run(ctx, cluster.Roles{OnLead: c.Lead, OnFollow: c.Follow, OnAlone: c.Alone}); err != nil {
			c.log.Error("cluster", "err", err)
		}
	})
	if c.rates != nil {
		wg.Go(func() {
			if err := c.engine.ShareRateLimit(ctx, c.rates); err != nil {
				c.log.Error("cluster rate limit", "err", err)
			}
		})
	}
	if c.relay != nil {
		wg.Go(func() {
			if err := c.relay.Run(ctx); err != nil && ctx.Err() == nil {
				c.log.Error("market streams stopped", "err", err)
			}
		})
		wg.Go(func() { c.followPairs(ctx) })
	}
}

// ShareRateLimit has the members charge one another's clients' requests
// to srv's rate limit, so that a client spread over them is limited as
// one (see cluster.Member.ShareRateLimit). Call it before Run, and before
// srv serves.
func (c *Cluster) ShareRateLimit(srv RateLimiter) {
	if srv.ShareRateLimit() {
		c.rates = srv
	}
}

// Lead plays the leader while ctx lasts: the member holds the lease, and
// runs a poller for the term with the whole budget, listing a new pair
// once every member holds it.
func (c *Cluster) Lead(ctx context.Context) {
	c.play(ctx, &leader{c.newIngest(1, c.engine.Replicated), c})
}

// Alone plays a member alone while ctx lasts: NATS is away, and it reads
// the venue with its share of the budget. It lists a new pair at once:
// there are no others to wait for.
func (c *Cluster) Alone(ctx context.Context) {
	c.play(ctx, &alone{c.newIngest(c.engine.AloneShare(), nil), c})
}

// Follow plays the follower while ctx lasts: the member applies the
// leader's values, and sends its wants and cold loads to the leader. It is
// also what the member plays whenever it plays no other.
func (c *Cluster) Follow(ctx context.Context) {
	c.now.Store(c.following)
	<-ctx.Done()
}

// play runs a role with a poller until ctx is done, then falls back to
// the follower unless another role has been taken meanwhile.
func (c *Cluster) play(ctx context.Context, r interface {
	answers
	run(ctx context.Context)
}) {
	p := &playing{r}
	c.now.Store(p)
	defer c.now.CompareAndSwap(p, c.following)
	r.run(ctx)
}

// newIngest returns a poller for a term, with share of the budget;
// replicated (nil: none) holds a new pair back until every member has it.
func (c *Cluster) newIngest(share float64, replicated func(string) bool) *ingest {
	return newIngest(c.cfg.Poller, c.spot.get(), share, func(pc *poller.Config) {
		pc.Replicated = replicated
		if c.relay != nil {
			// It goes on from the last leader's values and the streams
			// kept while following, and publishes its books' depths for
			// the member elected after it.
			pc.Streams, pc.Seed, pc.DepthEvery = c.relay.Streams(), c.seed, DepthEvery
		}
	})
}

// followPairs keeps the relay's subscriptions on the pairs the store
// lists, until ctx is done. It runs whatever the role: while this member
// leads, the pairs it lists are those the next term starts from.
func (c *Cluster) followPairs(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last *snapshot.Pairs
	for {
		if p := c.store.Pairs(); p != nil && p != last {
			c.relay.Follow(p)
			last = p
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *Cluster) playing() answers { return c.now.Load().answers }

// Want marks a pair's stream hot where it is read: in this member's poller
// while it has one, at the leader's otherwise. now is the request's time
// (see server.Feed).
func (c *Cluster) Want(id []byte, s snapshot.Stream, now int64) { c.playing().Want(id, s, now) }

// Load reads a pair's stream through this member's poller while it has
// one; a follower asks the leader to read, and waits for the value to
// reach it.
func (c *Cluster) Load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	return c.playing().Load(ctx, id, s, depth)
}

// Readiness is the verdict of the role played.
func (c *Cluster) Readiness() Readiness { return c.playing().Readiness() }

// WriteMetrics writes the metrics of the role played.
func (c *Cluster) WriteMetrics(w io.Writer) { c.playing().WriteMetrics(w) }

// Spot returns the spot list the next poller starts with.
func (c *Cluster) Spot() []string { return c.spot.get() }

// SetSpot replaces the spot list, for the poller running and the next.
func (c *Cluster) SetSpot(ids []string) {
	c.spot.set(ids)
	c.playing().setSpot(ids)
}

// WarnSpot has the poller running, if any, warn again of the spot list's
// ids the venue has no tradable market of.
func (c *Cluster) WarnSpot() { c.playing().warnSpot() }

// Poller returns the poller running; nil while the member follows.
func (c *Cluster) Poller() *poller.Poller { return c.playing().poller() }

// Relay returns the member's market streams; nil without streams.
func (c *Cluster) Relay() *standby.Relay { return c.relay }

// serveWant marks a pair hot for another member, in the poller running.
func (c *Cluster) serveWant(id []byte, s snapshot.Stream) { c.playing().serveWant(id, s) }

// serveLoad reads a pair's stream for another member, through the poller
// running.
func (c *Cluster) serveLoad(ctx context.Context, id string, s snapshot.Stream) error {
	return c.playing().serveLoad(ctx, id, s)
}

// playingAs adds to a role's verdict the member's part in the cluster.
func (c *Cluster) playingAs(role string, r Readiness) Readiness {
	e := c.engine
	r.Cluster = &ClusterStatus{Role: role, Term: e.NewestTerm(), Leader: e.Leader(), Synced: e.Synced(), Members: e.Members()}
	return r
}

// leader is a member holding the lease: its poller reads the venue for the
// cluster, and answers the followers' wants and cold loads.
type leader struct {
	*ingest
	c *Cluster
}

func (l *leader) Readiness() Readiness { return l.c.playingAs("leader", l.ingest.Readiness()) }

// alone is a member that lost NATS: its poller reads the venue with the
// member's share of the budget.
type alone struct {
	*ingest
	c *Cluster
}

func (a *alone) Readiness() Readiness { return a.c.playingAs("alone", a.ingest.Readiness()) }

// errFollowing is a load's error where no poller runs: on a member that
// follows (it asks the leader instead), or a leader between its terms.
var errFollowing = errors.New("a cluster member that follows does not read the venue")

// follower is a member that applies the leader's values and reads no
// venue: its wants and cold loads go to the leader through the member.
type follower struct{ c *Cluster }

func (f *follower) Want(id []byte, s snapshot.Stream, now int64) { f.c.engine.Want(id, s, now) }

// Load asks the leader to read: as a cold load, and for a book the
// follower's copy of which serves fewer levels than depth, the leader reads
// it for every level a request may ask (see ingest.serveLoad). It returns
// once the follower's copy is fresh and serves depth, so that the server,
// which reads the store again, does not find a value the leader published
// before its read (see cluster.Member.Load).
func (f *follower) Load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	return f.c.engine.Load(ctx, id, s, func() bool {
		v, listed := f.c.store.Pair(s, []byte(id), time.Now().UnixNano())
		return !listed || v.FreshAt(time.Now().UnixNano(), f.c.cfg.Poller.MaxStale) && v.Serves(depth)
	})
}

// Readiness: ready once it holds a pair list, and still while NATS is
// away: it serves what it holds, as a process alone does while the venue
// fails.
func (f *follower) Readiness() Readiness {
	r := Readiness{Reason: "following: no pair list from the leader yet"}
	if f.c.store.Pairs() != nil {
		r.Ready, r.Reason = true, "ok"
	}
	return f.c.playingAs("follower", r)
}

// WriteMetrics says whether the member is ready: a follower runs no
// poller, whose metrics say so, and an alert on marketfeed_ready must
// cover every member.
func (f *follower) WriteMetrics(w io.Writer) {
	metrics.WriteGaugeUint64(w, "marketfeed_ready", b2u(f.Readiness().Ready))
}

func (f *follower) setSpot([]string)                  {}
func (f *follower) warnSpot()                         {}
func (f *follower) serveWant([]byte, snapshot.Stream) {}
func (f *follower) poller() *poller.Poller            { return nil }

func (f *follower) serveLoad(context.Context, string, snapshot.Stream) error {
	return errFollowing
}

// b2u is a gauge's value for a condition: 1 when it holds.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

var _ Engine = (*cluster.Member)(nil)
