// Package role owns the part a process plays in reading the venue and
// answering for it: a process alone (Standalone) reads the venue with one
// poller for its life; a cluster member (Cluster) is, as its member says,
// the leader (a poller per term, fed by the standby relay and seeded from
// the store), a follower (it applies the leader's values and sends its
// wants and cold loads to the leader) or alone (NATS is away, and it reads
// the venue with its share of the budget). Each role is a type that gives
// the server its feed (Want, Load) and the operator endpoints readiness,
// metrics and the spot list; the process holds one value and asks it,
// never which role it plays.
package role

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/poller"
	"marketfeed/snapshot"
)

// Config is what every role of a process is built from.
type Config struct {
	// Poller is what each poller the process runs is built from: its
	// Venue, Store, Logger, Spot (the list at start) and the settings every
	// poller shares. A role sets Metrics (each poller has a set of its
	// own, since a cluster member runs one a term), Budget and Share (a
	// member alone reads with its share of Budget), Streams, Seed,
	// DepthEvery and Replicated.
	Poller poller.Config
	// Metrics receives what outlives a poller: the standby relay's gauges.
	Metrics *metrics.Set
}

// Readiness is a role's verdict on whether the process should get traffic,
// and why: what /readyz says, but for what the process adds of its own.
type Readiness struct {
	Ready  bool
	Reason string
	// Sources says where books, trades and tickers come from while the
	// venue's market streams are read.
	Sources *poller.Sources
	// Cluster says a cluster member's part; nil for a process alone.
	Cluster *ClusterStatus
}

// ClusterStatus is a cluster member's part in /readyz.
type ClusterStatus struct {
	Role    string `json:"role"`    // leader, follower, or alone while NATS is away
	Term    uint64 `json:"term"`    // the newest term seen: its leader's, as marketfeed_cluster_term
	Leader  string `json:"leader"`  // the lease's holder as last seen
	Synced  bool   `json:"synced"`  // holds every value the leader had published when it joined
	Members int    `json:"members"` // members seen within the lease's TTL, this one included
}

// RateLimiter is the public server's rate limiter, which a cluster's
// members share; *server.Server is one.
type RateLimiter interface {
	// ShareRateLimit has the limiter count what it allows, for the
	// others; false: there is no rate limit.
	ShareRateLimit() bool
	DrainRateCounts(f func(key uint64, n uint32))
	ChargeRate(key uint64, n uint32)
}

// answers is what the role being played answers for the process.
type answers interface {
	// Want and Load are the server's feed (see server.Feed).
	Want(id []byte, s snapshot.Stream, now int64)
	Load(ctx context.Context, id string, s snapshot.Stream, depth int) error
	Readiness() Readiness
	// WriteMetrics writes the role's metrics in Prometheus text.
	WriteMetrics(w io.Writer)
	// setSpot hands the poller running, if any, a new spot list.
	setSpot(ids []string)
	// warnSpot has the poller running, if any, warn again of the spot
	// ids the venue has no tradable market of.
	warnSpot()
	// serveWant and serveLoad answer another member's wants and cold
	// loads (see cluster.Config): a poller of this member's reads for it,
	// a book for every level a request may ask (a follower's load names
	// no depth: it asks when its copy serves fewer than its request).
	serveWant(id []byte, s snapshot.Stream)
	serveLoad(ctx context.Context, id string, s snapshot.Stream) error
	// poller is the poller running; nil where none runs.
	poller() *poller.Poller
}

// ingest is a poller running and the metrics it registers: a process
// alone has one for its life, a cluster member one each time it leads or
// reads the venue alone, since a poller runs once and its metrics are its
// own.
type ingest struct {
	p   *poller.Poller
	set *metrics.Set
}

// newIngest returns a poller built from cfg with share of its budget;
// with sets the fields that differ between roles.
func newIngest(cfg poller.Config, spot []string, share float64, with func(pc *poller.Config)) *ingest {
	in := &ingest{set: metrics.NewSet()}
	cfg.Metrics, cfg.Spot = in.set, spot
	cfg.Budget *= share
	cfg.Share = share
	with(&cfg)
	in.p = poller.New(cfg)
	return in
}

func (in *ingest) Want(id []byte, s snapshot.Stream, now int64) { in.p.Want(id, s, now) }

func (in *ingest) Load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	return in.p.Load(ctx, id, s, depth)
}

// serveWant marks what a follower's requests read, as of its message's
// arrival: the follower sends what was read within the last wantEvery.
func (in *ingest) serveWant(id []byte, s snapshot.Stream) { in.p.Want(id, s, time.Now().UnixNano()) }

func (in *ingest) serveLoad(ctx context.Context, id string, s snapshot.Stream) error {
	return in.p.Load(ctx, id, s, snapshot.MaxDepth)
}

// Readiness is the poller's verdict.
func (in *ingest) Readiness() Readiness {
	st := in.p.Status()
	return Readiness{Ready: st.Ready, Reason: st.Reason, Sources: st.Sources}
}

func (in *ingest) WriteMetrics(w io.Writer) { in.set.WritePrometheus(w) }
func (in *ingest) setSpot(ids []string)     { in.p.SetSpot(ids) }
func (in *ingest) warnSpot()                { in.p.WarnSpot() }
func (in *ingest) poller() *poller.Poller   { return in.p }
func (in *ingest) run(ctx context.Context)  { _ = in.p.Run(ctx) }

// spotList is the spot list a process was last given: the poller running
// has it, and the next poller starts from it.
type spotList struct {
	mu  sync.Mutex
	ids []string
}

func (l *spotList) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

func (l *spotList) set(ids []string) {
	l.mu.Lock()
	l.ids = slices.Clone(ids)
	l.mu.Unlock()
}
