package role

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/cluster"
	"marketfeed/internal/promtext"
	"marketfeed/poller"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// fakeEngine is a cluster member without NATS: the test says which role
// it plays (play), and it records what a follower sends the leader.
type fakeEngine struct {
	share float64
	// plays carries the callbacks Run is to call, one at a time: each
	// runs until the next arrives or Run's ctx is done.
	plays chan func(cluster.Roles) func(context.Context)

	mu     sync.Mutex
	wants  []string
	loads  []string
	shared cluster.RateCounts
	// served is the last load's test of the follower's copy.
	served func() bool
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{share: 1, plays: make(chan func(cluster.Roles) func(context.Context))}
}

func (e *fakeEngine) Run(ctx context.Context, r cluster.Roles) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := func() {}
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case which := <-e.plays:
			stop()
			wg.Wait()
			pctx, cancel := context.WithCancel(ctx)
			stop = cancel
			wg.Go(func() { which(r)(pctx) })
		}
	}
}

// play has Run call the callback which picks, once the one before has
// returned.
func (e *fakeEngine) play(which func(cluster.Roles) func(context.Context)) { e.plays <- which }

func lead(r cluster.Roles) func(context.Context)    { return r.OnLead }
func follow(r cluster.Roles) func(context.Context)  { return r.OnFollow }
func goAlone(r cluster.Roles) func(context.Context) { return r.OnAlone }

func (e *fakeEngine) ShareRateLimit(ctx context.Context, rc cluster.RateCounts) error {
	e.mu.Lock()
	e.shared = rc
	e.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (e *fakeEngine) Want(id []byte, s snapshot.Stream, _ int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wants = append(e.wants, s.String()+" "+string(id))
}

func (e *fakeEngine) Load(_ context.Context, id string, s snapshot.Stream, served func() bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loads = append(e.loads, s.String()+" "+id)
	e.served = served
	return nil
}

func (e *fakeEngine) sent() (wants, loads []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.wants...), append([]string(nil), e.loads...)
}

func (e *fakeEngine) Replicated(string) bool { return true }
func (e *fakeEngine) AloneShare() float64    { return e.share }
func (e *fakeEngine) NewestTerm() uint64     { return 7 }
func (e *fakeEngine) Leader() string         { return "m1" }
func (e *fakeEngine) Synced() bool           { return true }
func (e *fakeEngine) Members() int           { return 2 }

const btc = "BTC_USDT"

// testConfig is a role's config on the embedded simulator.
func testConfig() Config {
	return Config{Poller: poller.Config{Venue: limited{sim.New(sim.Config{})}, Store: snapshot.NewStore(), Budget: 0.5, MaxStale: 10 * time.Second}}
}

// limited is the simulator with a weight limit, which the simulator has
// not: a poller's budget is a part of it.
type limited struct{ *sim.Venue }

func (v limited) Catalog(ctx context.Context) (venue.Catalog, error) {
	c, err := v.Venue.Catalog(ctx)
	c.WeightLimit = 2400
	return c, err
}

func testCluster(e Engine) *Cluster {
	c := newCluster(testConfig(), nil)
	c.engine = e
	return c
}

func TestFollowerSendsWantsAndLoadsToTheLeader(t *testing.T) {
	e := newFakeEngine()
	c := testCluster(e)
	c.Want([]byte(btc), snapshot.StreamBook, time.Now().UnixNano())
	if err := c.Load(t.Context(), btc, snapshot.StreamTrades, snapshot.MaxTrades); err != nil {
		t.Fatal(err)
	}
	wants, loads := e.sent()
	if len(wants) != 1 || wants[0] != snapshot.StreamBook.String()+" "+btc {
		t.Errorf("wants sent to the leader = %q", wants)
	}
	if len(loads) != 1 || loads[0] != snapshot.StreamTrades.String()+" "+btc {
		t.Errorf("loads sent to the leader = %q", loads)
	}
	// A book its copy of which serves fewer levels than a request asks is
	// a load too: the leader reads it for every level a request may ask.
	if err := c.Load(t.Context(), btc, snapshot.StreamBook, 40); err != nil {
		t.Fatal(err)
	}
	if _, loads = e.sent(); len(loads) != 2 || loads[1] != snapshot.StreamBook.String()+" "+btc {
		t.Errorf("loads sent to the leader = %q", loads)
	}
	// The load is done once the follower's own copy serves the depth
	// asked: a short book the leader published before its read does not.
	e.mu.Lock()
	served := e.served
	e.mu.Unlock()
	level := func(p string) []snapshot.Level { return []snapshot.Level{{Price: p, Size: "1"}} }
	c.store.PutDoc(snapshot.NewPairs([]snapshot.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
		snapshot.PairsConfig{}, time.Now()), time.Now())
	c.store.PutBook(snapshot.NewLocalBook(btc, time.Now().UnixMilli(), 1, level("9"), level("10"), snapshot.Open{Bids: true}, time.Now()))
	if served() {
		t.Error("a book whose open side holds 1 level serves a request for 40")
	}
	c.store.PutBook(snapshot.NewLocalBook(btc, time.Now().UnixMilli(), 2, level("9"), level("10"), snapshot.Open{}, time.Now()))
	if !served() {
		t.Error("a whole book of 1 level a side does not serve a request for 40")
	}
	// It reads nothing for another follower.
	if err := c.serveLoad(t.Context(), btc, snapshot.StreamBook); !errors.Is(err, errFollowing) {
		t.Errorf("a follower's answer to a load = %v, want errFollowing", err)
	}
	if c.Poller() != nil {
		t.Error("a follower runs a poller")
	}
}

func TestFollowerIsReadyOnceItHoldsThePairList(t *testing.T) {
	c := testCluster(newFakeEngine())
	r := c.Readiness()
	if r.Ready || r.Cluster == nil || r.Cluster.Role != "follower" {
		t.Fatalf("a follower with no pair list: %+v", r)
	}
	if got := promtext.Scrape(t, c.WriteMetrics)["marketfeed_ready"]; got != 0 {
		t.Errorf("marketfeed_ready = %v, want 0", got)
	}
	c.store.PutDoc(snapshot.NewPairs(nil, snapshot.PairsConfig{}, time.Now()), time.Now())
	r = c.Readiness()
	want := ClusterStatus{Role: "follower", Term: 7, Leader: "m1", Synced: true, Members: 2}
	if !r.Ready || r.Reason != "ok" || *r.Cluster != want {
		t.Errorf("a follower holding a pair list: %+v %+v", r, r.Cluster)
	}
	if got := promtext.Scrape(t, c.WriteMetrics)["marketfeed_ready"]; got != 1 {
		t.Errorf("marketfeed_ready = %v, want 1", got)
	}
}

// settled waits until the bubble's goroutines are blocked, and returns the
// role the member plays then.
func settled(c *Cluster) Readiness {
	synctest.Wait()
	return c.Readiness()
}

func TestLeaderAnswersFromItsPoller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEngine()
		c := testCluster(e)
		stop := start(c.Lead)
		r := settled(c)
		if r.Cluster == nil || r.Cluster.Role != "leader" || c.Poller() == nil {
			t.Fatalf("leading: %+v", r)
		}
		if st := c.Poller().Status(); r.Ready != st.Ready || r.Reason != st.Reason {
			t.Errorf("a leader's readiness %+v is not its poller's %+v", r, st)
		}
		// A follower's cold load, and the server's own, are read by the
		// leader's poller into the store; nothing goes to the engine.
		if err := c.serveLoad(t.Context(), btc, snapshot.StreamBook); err != nil {
			t.Fatalf("load for a follower: %v", err)
		}
		if err := c.Load(t.Context(), btc, snapshot.StreamTrades, snapshot.MaxTrades); err != nil {
			t.Fatalf("load: %v", err)
		}
		now := time.Now().UnixNano()
		if b, _ := c.store.Book([]byte(btc), now); b == nil {
			t.Error("no book published after a follower's load")
		}
		if tr, _ := c.store.Trades([]byte(btc), now); tr == nil {
			t.Error("no trades published after a load")
		}
		c.Want([]byte(btc), snapshot.StreamBook, time.Now().UnixNano())
		if wants, loads := e.sent(); len(wants)+len(loads) != 0 {
			t.Errorf("a leader sent %q %q to the engine", wants, loads)
		}
		if _, ok := promtext.Scrape(t, c.WriteMetrics)["marketfeed_venue_weight_budget"]; !ok {
			t.Error("a leader's metrics are not its poller's")
		}
		stop()
		if r := c.Readiness(); r.Cluster.Role != "follower" || c.Poller() != nil {
			t.Errorf("after the term: %+v", r)
		}
	})
}

func TestAloneReadsWithItsShareOfTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEngine()
		c := testCluster(e)
		budget := func() float64 {
			return promtext.Scrape(t, c.WriteMetrics)["marketfeed_venue_weight_budget"]
		}
		stop := start(c.Lead)
		settled(c)
		whole := budget()
		stop()

		e.share = 0.5
		stop = start(c.Alone)
		if r := settled(c); r.Cluster == nil || r.Cluster.Role != "alone" {
			t.Fatalf("alone: %+v", r)
		}
		if got := budget(); whole == 0 || got != whole/2 {
			t.Errorf("alone with half the members: budget %v, the leader's %v", got, whole)
		}
		if err := c.Load(t.Context(), btc, snapshot.StreamBook, snapshot.MaxDepth); err != nil {
			t.Fatalf("load alone: %v", err)
		}
		if _, loads := e.sent(); len(loads) != 0 {
			t.Errorf("alone, loads went to the engine: %q", loads)
		}
		stop()
	})
}

func TestClusterPlaysWhatTheMemberSays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEngine()
		c := testCluster(e)
		closed := false
		c.closeConn = func() { closed = true }
		c.ShareRateLimit(limiter{})
		stop := start(c.Run)
		for _, step := range []struct {
			play func(cluster.Roles) func(context.Context)
			role string
		}{
			{follow, "follower"}, {lead, "leader"}, {follow, "follower"}, {goAlone, "alone"}, {lead, "leader"},
		} {
			e.play(step.play)
			if r := settled(c); r.Cluster == nil || r.Cluster.Role != step.role {
				t.Fatalf("told to play the %s: %+v", step.role, r)
			}
			if running := c.Poller() != nil; running != (step.role != "follower") {
				t.Errorf("the %s runs a poller: %v", step.role, running)
			}
		}
		e.mu.Lock()
		shared := e.shared
		e.mu.Unlock()
		if shared == nil {
			t.Error("the rate limit is not shared")
		}
		stop()
		if !closed {
			t.Error("Run returned with the connection open")
		}
		if r := c.Readiness(); r.Cluster.Role != "follower" {
			t.Errorf("after Run: %+v", r.Cluster)
		}
	})
}

func TestStandaloneReadsTheVenueAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		s := NewStandalone(cfg, nil)
		s.ShareRateLimit(limiter{})
		stop := start(s.Run)
		synctest.Wait()
		r := s.Readiness()
		if st := s.Poller().Status(); r.Cluster != nil || r.Ready != st.Ready || r.Reason != st.Reason {
			t.Errorf("readiness %+v, the poller's %+v", r, st)
		}
		if err := s.Load(t.Context(), btc, snapshot.StreamBook, snapshot.MaxDepth); err != nil {
			t.Fatal(err)
		}
		if b, _ := cfg.Poller.Store.Book([]byte(btc), time.Now().UnixNano()); b == nil {
			t.Error("no book published after a load")
		}
		s.SetSpot([]string{btc})
		if got := s.Spot(); len(got) != 1 || got[0] != btc {
			t.Errorf("spot = %q", got)
		}
		stop()
	})
}

// start runs f until stop, which waits for it to return.
func start(f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f(ctx)
		close(done)
	}()
	return func() {
		cancel()
		<-done
	}
}

// limiter is a rate limit to share.
type limiter struct{}

func (limiter) ShareRateLimit() bool                 { return true }
func (limiter) DrainRateCounts(func(uint64, uint32)) {}
func (limiter) ChargeRate(uint64, uint32)            {}
