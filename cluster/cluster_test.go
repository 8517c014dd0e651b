package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"marketfeed/internal/natstest"
	"marketfeed/snapshot"
)

func connect(t *testing.T, s *natsserver.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testPairs are the pairs the fake venue lists.
var testPairs = []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"}

// feeder is a leader's stand-in for the poller: it publishes the pair list,
// the tickers and, every few milliseconds, a new book and trade list of
// every pair into the store it is given, numbered so that every member's
// copy can be compared.
type feeder struct {
	mu     sync.Mutex
	round  int
	paused bool
}

// pause stops every leader's feeding until resume, so that what members
// serve can settle and be compared.
func (f *feeder) pause()  { f.mu.Lock(); f.paused = true; f.mu.Unlock() }
func (f *feeder) resume() { f.mu.Lock(); f.paused = false; f.mu.Unlock() }

// btcDocs are the tickers and contracts of pairs, BTC_USDT's alone, read
// at now.
func btcDocs(pairs *snapshot.Pairs, now time.Time) (*snapshot.Tickers, *snapshot.Contracts) {
	tk, _ := snapshot.NewTickers(pairs, []snapshot.Stat{{Symbol: "BTCUSDT", LastPrice: "50000", High: "51000", Low: "49000",
		BaseVolume: "10", QuoteVolume: "500000"}}, []snapshot.Quote{{Symbol: "BTCUSDT", Bid: "49999", Ask: "50001"}}, now)
	c, _ := snapshot.NewContracts(pairs, snapshot.ContractsInput{
		Stats: []snapshot.Stat{{Symbol: "BTCUSDT", LastPrice: "50000", High: "51000", Low: "49000", BaseVolume: "10", QuoteVolume: "500000"}},
		Books: []snapshot.Quote{{Symbol: "BTCUSDT", Bid: "49999", Ask: "50001"}},
		Marks: []snapshot.Contract{{Symbol: "BTCUSDT", MarkPrice: "50000.5", IndexPrice: "49990", FundingRate: "0.0001",
			NextFunding: now.UnixMilli() + 3600_000, Time: now.UnixMilli()}},
		ReadAt: now,
	})
	return tk, c
}

func (f *feeder) lead(store *snapshot.Store) func(ctx context.Context) {
	return func(ctx context.Context) {
		var markets []snapshot.Market
		for _, id := range testPairs {
			base := id[:len(id)-5]
			markets = append(markets, snapshot.Market{Symbol: base + "USDT", Base: base, Quote: "USDT", Perpetual: true, Trading: true})
		}
		now := time.Now()
		pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, now)
		store.PutDoc(pairs, now)
		tk, c := btcDocs(pairs, now)
		store.PutDoc(tk, now)
		store.PutDoc(c, now)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			f.mu.Lock()
			f.round++
			r, paused := f.round, f.paused
			f.mu.Unlock()
			for i, id := range testPairs {
				if paused {
					break
				}
				price := strconv.Itoa(1000*(i+1)+r) + ".5"
				b, err := snapshot.NewBook(id, now.UnixMilli()+int64(r), []snapshot.Level{{Price: price, Size: "1"}},
					[]snapshot.Level{{Price: strconv.Itoa(1000*(i+1)+r+1) + ".5", Size: "2"}}, time.Now())
				if err != nil {
					panic(err)
				}
				store.PutBook(b)
				tr, err := snapshot.NewTrades(id, []snapshot.Trade{{ID: int64(r), Time: now.UnixMilli() + int64(r), Price: price, Size: "3", Sell: r%2 == 0}}, time.Now())
				if err != nil {
					panic(err)
				}
				store.PutTrades(tr)
				store.PutDepth(snapshot.NewDepth(id, now.UnixMilli()+int64(r), 1000+int64(r), []snapshot.Level{{Price: price, Size: "1"}, {Price: "1.5", Size: "4"}},
					[]snapshot.Level{{Price: strconv.Itoa(1000*(i+1)+r+1) + ".5", Size: "2"}}, time.Now()))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// node is one member under test: its store, its metrics, and how to stop it.
type node struct {
	share atomic.Pointer[float64] // the share of the budget lead last ran with
	// following is set while OnFollow runs; overlap once OnLead began
	// while it did.
	following, overlap atomic.Bool
	m                  *Member
	store              *snapshot.Store
	set                *metrics.Set
	stop               context.CancelFunc
	done               chan struct{}
}

func startMember(t *testing.T, s *natsserver.Server, name string, f *feeder) *node {
	t.Helper()
	return startMemberTTL(t, s, name, f, time.Second)
}

// startMemberTTL is startMember with a lease of ttl.
func startMemberTTL(t *testing.T, s *natsserver.Server, name string, f *feeder, ttl time.Duration) *node {
	t.Helper()
	return startMemberWith(t, s, name, f, func(c *Config) { c.LeaseTTL = ttl })
}

// startMemberWith is startMember with its configuration changed by set.
func startMemberWith(t *testing.T, s *natsserver.Server, name string, f *feeder, set func(*Config)) *node {
	t.Helper()
	n := &node{store: snapshot.NewStore(), set: metrics.NewSet(), done: make(chan struct{})}
	cfg := Config{Conn: connect(t, s), Member: name, Store: n.store, LeaseTTL: time.Second, Metrics: n.set}
	set(&cfg)
	m, err := Join(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() {
		defer close(n.done)
		lead := func(ctx context.Context, share float64) {
			n.share.Store(&share)
			f.lead(n.store)(ctx)
		}
		_ = m.Run(ctx, Roles{
			OnLead: func(ctx context.Context) {
				if n.following.Load() {
					n.overlap.Store(true)
				}
				lead(ctx, 1)
			},
			OnFollow: func(ctx context.Context) {
				n.following.Store(true)
				<-ctx.Done()
				n.following.Store(false)
			},
			OnAlone: func(ctx context.Context) { lead(ctx, m.AloneShare()) },
		})
	}()
	t.Cleanup(func() { cancel(); <-n.done })
	return n
}

// served is what a store answers for every route: the bytes and tags a
// member serves.
func served(s *snapshot.Store) string {
	var b bytes.Buffer
	now := time.Now().UnixNano()
	if p := s.Pairs(); p != nil {
		fmt.Fprintf(&b, "pairs %s %s\n", p.Tag(), p.Body())
	}
	if tk := s.Tickers(); tk != nil {
		fmt.Fprintf(&b, "tickers %s %s\n", tk.Tag(), tk.Body())
	}
	if c := s.Contracts(); c != nil {
		fmt.Fprintf(&b, "contracts %s %s %s %s\n", c.Tag(), c.Body(), c.Specs().Tag(), c.Specs().Body())
	}
	for _, id := range testPairs {
		if bk, _ := s.Book([]byte(id), now); bk != nil {
			fmt.Fprintf(&b, "book %s %s\n", bk.Tag(), bk.Body())
		}
		if tr, _ := s.Trades([]byte(id), now); tr != nil {
			fmt.Fprintf(&b, "trades %s %s\n", tr.Tag(), tr.Body(snapshot.SideAll))
		}
		if d := s.Depth([]byte(id)); d != nil {
			fmt.Fprintf(&b, "depth %d %x\n", d.Seq(), d.AppendWire(nil))
		}
	}
	return b.String()
}

// eventually polls cond until it holds, failing the test after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaders(nodes []*node) []*node {
	var out []*node
	for _, n := range nodes {
		if n.m.leading() {
			out = append(out, n)
		}
	}
	return out
}

// settle waits until the leader among nodes has published a book and
// trades of every pair, then pauses the feeder and waits until every node
// serves the same bytes and tags as the first; it returns what they serve.
func settle(t *testing.T, f *feeder, nodes []*node) string {
	t.Helper()
	eventually(t, 5*time.Second, "the leader does not publish every pair", func() bool {
		l := leaders(nodes)
		return len(l) == 1 && l[0].m.metrics.puts.Get() >= uint64(2*len(testPairs)+2)
	})
	f.pause()
	defer f.resume()
	var want string
	defer func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s (leading %v, synced %v, newest term %d) serves:\n%s", n.m.cfg.Member, n.m.leading(), n.m.Synced(), n.m.newest.Load(), served(n.store))
			}
		}
	}()
	eventually(t, 5*time.Second, "members do not serve the same bytes", func() bool {
		want = served(nodes[0].store)
		if strings.Count(want, "\nbook ") < len(testPairs)-1 || strings.Count(want, "\ntrades ") < len(testPairs) ||
			strings.Count(want, "\ndepth ") < len(testPairs) {
			return false
		}
		for _, n := range nodes[1:] {
			if served(n.store) != want {
				return false
			}
		}
		return true
	})
	return want
}

// Three members elect one leader, and every member serves the leader's
// bytes with the leader's tags, the leader included.
func TestMembersServeTheLeadersBytes(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f), startMember(t, s, "c", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	leader := leaders(nodes)[0]
	eventually(t, 5*time.Second, "a member does not know the leader", func() bool {
		for _, n := range nodes {
			if n.m.Leader() != leader.m.cfg.Member {
				return false
			}
		}
		return true
	})
	got := settle(t, f, nodes)
	if !strings.Contains(got, "pairs ") || !strings.Contains(got, "tickers ") {
		t.Fatalf("members serve no pair list or tickers:\n%s", got)
	}
	for _, n := range nodes {
		if n != leader && n.m.metrics.applied.Get() == 0 {
			t.Errorf("follower %s applied nothing", n.m.cfg.Member)
		}
	}
	if leader.m.metrics.puts.Get() == 0 {
		t.Error("the leader put nothing")
	}
	if len(leaders(nodes)) != 1 {
		t.Fatalf("%d leaders", len(leaders(nodes)))
	}
}

// A member runs OnFollow while it is in the cluster and does not lead, and
// OnLead only once OnFollow has returned; when Run returns, neither runs.
func TestMembersFollowUntilTheyLead(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f), startMember(t, s, "c", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	roles := func(nodes []*node) bool {
		for _, n := range nodes {
			if n.following.Load() == n.m.leading() {
				return false
			}
		}
		return true
	}
	eventually(t, 5*time.Second, "a member follows while it leads, or neither", func() bool { return roles(nodes) })
	old := leaders(nodes)[0]
	old.stop()
	<-old.done
	var rest []*node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	eventually(t, 5*time.Second, "no new leader", func() bool { return len(leaders(rest)) == 1 })
	eventually(t, 5*time.Second, "after the leader left, a member follows while it leads, or neither", func() bool { return roles(rest) })
	for _, n := range rest {
		n.stop()
		<-n.done
	}
	for _, n := range nodes {
		if n.following.Load() || n.overlap.Load() {
			t.Errorf("%s: following %v after Run returned, led while following %v", n.m.cfg.Member, n.following.Load(), n.overlap.Load())
		}
	}
}

// Killed, a leader is replaced within the lease's TTL by a member of a
// newer term, whose values every member serves.
func TestLeaderKilledAnotherTakesOver(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f), startMember(t, s, "c", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	old := leaders(nodes)[0]
	before := settle(t, f, nodes)
	oldTerm := old.m.Term()
	old.stop() // no step-down of its own: its lease is left to expire, as a SIGKILL leaves it
	<-old.done
	var rest []*node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	killed := time.Now()
	eventually(t, 3*time.Second, "no new leader", func() bool { return len(leaders(rest)) == 1 })
	took := time.Since(killed)
	leader := leaders(rest)[0]
	if leader.m.Term() <= oldTerm {
		t.Fatalf("new term %d, old %d", leader.m.Term(), oldTerm)
	}
	t.Logf("new leader %s in term %d after %s (lease TTL %s)", leader.m.cfg.Member, leader.m.Term(), took.Round(time.Millisecond), time.Second)
	if took > time.Second+time.Second/5+500*time.Millisecond {
		t.Errorf("a new leader took %s, want within the TTL and a renewal", took)
	}
	after := settle(t, f, rest)
	if after == before {
		t.Fatal("the members serve what the old leader published, not the new one's")
	}
}

// A leader whose connection is gone (a SIGKILL, a lost host) is replaced
// well before its lease runs out: the followers find no one answering its
// term, remove its lease and campaign. A live leader, pinged all along, is
// never unseated.
func TestGoneLeaderIsReplacedBeforeItsLeaseRunsOut(t *testing.T) {
	const ttl = 5 * time.Second
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMemberTTL(t, s, "a", f, ttl), startMemberTTL(t, s, "b", f, ttl), startMemberTTL(t, s, "c", f, ttl)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	old := leaders(nodes)[0]
	var rest []*node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	for _, n := range rest {
		eventually(t, 5*time.Second, n.m.cfg.Member+" never had its pings answered", func() bool {
			return n.m.metrics.pings[pingAnswered].Get() >= 2*pingMisses
		})
	}
	for _, n := range nodes {
		if won, vacated := n.m.metrics.takeOvers.Get(), n.m.metrics.vacated.Get(); n != old && won != 0 || vacated != 0 {
			t.Fatalf("%s won the lease %d times and removed %d while a live leader answered", n.m.cfg.Member, won, vacated)
		}
	}
	oldTerm := old.m.Term()
	old.m.cfg.Conn.Close() // NATS drops what the process held, as when it is killed
	killed := time.Now()
	eventually(t, ttl, "no new leader", func() bool { return len(leaders(rest)) == 1 })
	took := time.Since(killed)
	leader := leaders(rest)[0]
	vacated := rest[0].m.metrics.vacated.Get() + rest[1].m.metrics.vacated.Get()
	t.Logf("new leader %s in term %d after %s (lease TTL %s); leases removed: %d", leader.m.cfg.Member, leader.m.Term(), took.Round(time.Millisecond), ttl, vacated)
	if leader.m.Term() <= oldTerm {
		t.Errorf("new term %d, old %d", leader.m.Term(), oldTerm)
	}
	if vacated == 0 {
		t.Errorf("no follower removed the gone leader's lease")
	}
	if took > ttl/2 {
		t.Errorf("a new leader took %s, want well within the lease's %s", took, ttl)
	}
}

// A member that joins late gets every value the bucket holds, the pair
// list first, so every pair's book and trades are served.
func TestLateMemberCatchesUp(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	first := startMember(t, s, "a", f)
	eventually(t, 5*time.Second, "no leader", first.m.leading)
	settle(t, f, []*node{first})
	f.pause()
	late := startMember(t, s, "late", f)
	eventually(t, 5*time.Second, "the late member never synced", late.m.Synced)
	if got, want := served(late.store), served(first.store); got != want {
		t.Fatalf("the late member serves\n%s\nthe leader\n%s", got, want)
	}
}

// A value of an older term, a damaged value, a value under a foreign key
// and a book under another pair's key are dropped and counted, and what
// the member serves stays as it was.
func TestStaleForeignAndBadValuesAreDropped(t *testing.T) {
	s := natstest.Start(t)
	// A value of term 3 in the bucket before anyone leads: the first
	// leader's term is above it, and a value can have an older one.
	seed, err := Join(t.Context(), Config{Conn: connect(t, s), Member: "seed", Store: snapshot.NewStore(), LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := snapshot.NewTickers(snapshot.NewPairs(nil, snapshot.PairsConfig{}, time.Now()), nil, nil, time.Now())
	if _, err := seed.snaps.Put(t.Context(), "tickers", appendValue(nil, header{term: 3, publishedAt: 1}, tk)); err != nil {
		t.Fatal(err)
	}
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	settle(t, f, nodes)
	f.pause()
	var follower *node
	for _, n := range nodes {
		if !n.m.leading() {
			follower = n
		}
	}
	before := served(follower.store)
	term := follower.m.newest.Load()
	if term != 4 {
		t.Fatalf("term %d, want 4: one above the newest in the bucket", term)
	}
	eth, err := snapshot.NewBook("ETH_USDT", 1, []snapshot.Level{{Price: "1", Size: "1"}}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	btc, err := snapshot.NewBook("BTC_USDT", 1, []snapshot.Level{{Price: "1", Size: "1"}}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Read an hour ago: older than the book the member holds, as the
	// bucket's values are to a member that read the venue alone.
	old, err := snapshot.NewBook("BTC_USDT", 1, []snapshot.Level{{Price: "1", Size: "1"}}, nil, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	depth := func(id string, seq int64) *snapshot.Depth {
		return snapshot.NewDepth(id, 1, seq, []snapshot.Level{{Price: "1", Size: "1"}}, nil, time.Now())
	}
	held := follower.store.Depth([]byte("BTC_USDT")).Seq()
	js := follower.m.snaps
	for _, tc := range []struct {
		key    string
		value  []byte
		reason dropReason
	}{
		{"book.BTC_USDT", appendValue(nil, header{term: term - 1, publishedAt: 1}, btc), dropStale},
		{"book.BTC_USDT", []byte("not a value"), dropBad},
		{"book.BTC_USDT", append(appendValue(nil, header{term: term, publishedAt: 1}, btc), 'x'), dropBad},
		{"book.BTC_USDT", appendValue(nil, header{term: term, publishedAt: 1}, eth), dropForeign},
		{"evil", appendValue(nil, header{term: term, publishedAt: 1}, btc), dropForeign},
		{"book.DOGE_USDT", appendValue(nil, header{term: term, publishedAt: 1}, rawWire("junk")), dropBad},
		{"book.BTC_USDT", appendValue(nil, header{term: term, publishedAt: 1}, old), dropOlder},
		{"depth.BTC_USDT", appendValue(nil, header{term: term, publishedAt: 1}, depth("ETH_USDT", held+1)), dropForeign},
		{"depth.BTC_USDT", appendValue(nil, header{term: term, publishedAt: 1}, depth("BTC_USDT", held-1)), dropOlder},
		{"depth.BTC_USDT", appendValue(nil, header{term: term, publishedAt: 1}, btc), dropBad},
		{"depth.DOGE_USDT", appendValue(nil, header{term: term, publishedAt: 1}, depth("DOGE_USDT", 1)), dropUnlisted},
	} {
		dropped := follower.m.metrics.dropped[tc.reason].Get()
		if _, err := js.Put(t.Context(), tc.key, tc.value); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "not dropped as "+dropNames[tc.reason]+": "+tc.key, func() bool {
			return follower.m.metrics.dropped[tc.reason].Get() == dropped+1
		})
		if got := served(follower.store); got != before {
			t.Fatalf("after a %s value under %s the member serves\n%s\nnot\n%s", dropNames[tc.reason], tc.key, got, before)
		}
	}
	if _, err := js.Put(t.Context(), "book.BTC_USDT", make([]byte, maxValue+1)); err == nil {
		t.Error("the bucket took a value over the size limit")
	}
}

// A lease value no member writes is counted and never taken for a leader;
// once it expires, a member leads.
func TestForeignLeaseIsCountedAndOutlived(t *testing.T) {
	s := natstest.Start(t)
	squat, err := Join(t.Context(), Config{Conn: connect(t, s), Member: "squat", Store: snapshot.NewStore(), LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := squat.lease.Create(t.Context(), leaseKey, []byte("no term here")); err != nil {
		t.Fatal(err)
	}
	f := new(feeder)
	n := startMember(t, s, "a", f)
	eventually(t, 5*time.Second, "the foreign lease was not counted", func() bool {
		return n.m.metrics.dropped[dropForeign].Get() > 0
	})
	if n.m.Leader() != "" {
		t.Fatalf("the foreign lease's holder is taken for the leader %q", n.m.Leader())
	}
	eventually(t, 5*time.Second, "no member leads after the foreign lease expired", n.m.leading)
}

// A NATS server restarted with nothing in it: the members join again
// without a restart of their own, elect a leader of a newer term, and every
// member serves what it publishes.
func TestMembersRejoinARestartedEngine(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	before := settle(t, f, nodes)
	term := nodes[0].m.newest.Load()
	natstest.Restart(t, s)
	eventually(t, 20*time.Second, "no member joined again", func() bool {
		return nodes[0].m.metrics.rejoins.Get() > 0 && nodes[1].m.metrics.rejoins.Get() > 0
	})
	eventually(t, 10*time.Second, "no leader after the restart", func() bool {
		l := leaders(nodes)
		return len(l) == 1 && l[0].m.Term() > term
	})
	// Values in flight when the server went away are lost: wait for the
	// new leader to put a round of every pair since.
	leader := leaders(nodes)[0]
	puts := leader.m.metrics.puts.Get()
	eventually(t, 10*time.Second, "the new leader puts nothing", func() bool {
		return leader.m.metrics.puts.Get() >= puts+uint64(2*len(testPairs)+2)
	})
	if after := settle(t, f, nodes); after == before {
		t.Fatal("the members serve what was published before the restart")
	}
}

// rawWire is a wire form of any bytes, for values no leader writes.
type rawWire []byte

func (w rawWire) AppendWire(dst []byte) []byte { return append(dst, w...) }

// flakyLease fails the lease's renewals while told to.
type flakyLease struct {
	leaseBucket
	fail   atomic.Int32 // renewals still to fail; -1: every one
	failed atomic.Int32
}

func (l *flakyLease) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if n := l.fail.Load(); n != 0 {
		if n > 0 {
			l.fail.Add(-1)
		}
		l.failed.Add(1)
		return 0, context.DeadlineExceeded
	}
	return l.leaseBucket.Update(ctx, key, value, rev)
}

// One renewal that fails does not end a term: the lease is still held. A
// leader whose renewals keep failing steps down before its lease can
// expire, so that no other member leads beside it.
func TestLeaderKeepsItsTermThroughAFailedRenewal(t *testing.T) {
	s := natstest.Start(t)
	store := snapshot.NewStore()
	m, err := Join(t.Context(), Config{Conn: connect(t, s), Member: "a", Store: store, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lease := &flakyLease{leaseBucket: m.lease}
	m.lease = lease
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx, Roles{OnLead: func(ctx context.Context) { <-ctx.Done() }}) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 5*time.Second, "no leader", m.leading)
	term := m.Term()
	lease.fail.Store(1)
	eventually(t, 5*time.Second, "the renewal never failed", func() bool { return lease.failed.Load() == 1 })
	revision := func() uint64 {
		e, err := lease.leaseBucket.Get(t.Context(), leaseKey)
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	failedAt := revision()
	eventually(t, 5*time.Second, "no renewal after the failed one", func() bool { return revision() > failedAt })
	if !m.leading() || m.Term() != term || m.metrics.stepDowns.Get() != 0 {
		t.Fatalf("after one failed renewal: leading %v, term %d (was %d), step-downs %d", m.leading(), m.Term(), term, m.metrics.stepDowns.Get())
	}
	lease.fail.Store(-1)
	failing := time.Now()
	eventually(t, 5*time.Second, "a leader whose renewals fail never stepped down", func() bool { return !m.leading() })
	if took := time.Since(failing); took >= time.Second {
		t.Fatalf("stepped down %s after its renewals began to fail, want before the 1s lease expires", took)
	}
}

// Every member sees every other in the member bucket, and a member gone
// for the lease's TTL is no longer counted.
func TestMembersCountEachOther(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f), startMember(t, s, "host-3:8080", f)}
	for _, n := range nodes {
		eventually(t, 5*time.Second, n.m.cfg.Member+" does not count three members", func() bool { return n.m.Members() == 3 })
	}
	nodes[2].stop()
	<-nodes[2].done
	eventually(t, 5*time.Second, "a member gone is still counted", func() bool { return nodes[0].m.Members() == 2 })
}

// A lease renewed by something that is not a member (no key in the member
// bucket) is counted, never followed, and removed for a member to take:
// otherwise it would hold the cluster without a leader for as long as it
// renews.
func TestLeaseOfANonMemberIsRemoved(t *testing.T) {
	s := natstest.Start(t)
	squat, err := Join(t.Context(), Config{Conn: connect(t, s), Member: "squat", Store: snapshot.NewStore(), LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The intruder answers its term's pings, as a live leader does: only
	// its not being a member can unseat it.
	if _, err := squat.answerPings(7); err != nil {
		t.Fatal(err)
	}
	rev, err := squat.lease.Create(t.Context(), leaseKey, appendLease(nil, "intruder", 7))
	if err != nil {
		t.Fatal(err)
	}
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		for {
			time.Sleep(100 * time.Millisecond) // the intruder's own renewal period
			if rev, err = squat.lease.Update(context.Background(), leaseKey, appendLease(nil, "intruder", 7), rev); err != nil {
				return // removed
			}
		}
	}()
	n := startMember(t, s, "a", new(feeder))
	eventually(t, 10*time.Second, "no member leads while a non-member renews the lease", n.m.leading)
	<-renewing
	if n.m.metrics.dropped[dropForeign].Get() == 0 {
		t.Fatal("the non-member's lease was not counted")
	}
	if n.m.Term() <= 7 {
		t.Fatalf("term %d: not above the non-member's 7", n.m.Term())
	}
}

// While NATS is away, every member reads the venue itself with its share of
// the budget (the members it last saw sharing it), rather than serving what
// it holds until that is too old; when NATS is back they stop, join again,
// and one leads with the whole budget.
func TestMembersReadTheVenueAloneWhileNATSIsAway(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f)}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	for _, n := range nodes {
		eventually(t, 5*time.Second, "the members do not count each other", func() bool { return n.m.Members() == 2 })
	}
	restart := natstest.Stop(t, s)
	for _, n := range nodes {
		eventually(t, 10*time.Second, n.m.cfg.Member+" does not read the venue alone", func() bool {
			share := n.share.Load()
			return n.m.Alone() && !n.m.leading() && share != nil && *share == 0.5
		})
	}
	restart()
	eventually(t, 20*time.Second, "the members never joined again", func() bool {
		return !nodes[0].m.Alone() && !nodes[1].m.Alone()
	})
	eventually(t, 10*time.Second, "no leader after NATS came back", func() bool {
		l := leaders(nodes)
		return len(l) == 1 && *l[0].share.Load() == 1
	})
}

// Values are put in the order of publication: every pair list, and of a
// pair's book or trades queued again before the next list only the newest,
// in the first one's place. A list that holds a new pair back and the list
// that shows it are both put, around the pair's book and trades, though
// both were queued before the first was put: otherwise a member would get
// the showing list first (a listed pair it cannot answer), or the book and
// trades before any list with the pair (dropped as unlisted).
func TestPublishQueueKeepsTheOrderOfPublication(t *testing.T) {
	var q publishQueue
	q.init()
	put := func(key, value string) {
		b := []byte(value)
		q.put(key, &b)
	}
	put("pairs", "holding DOGE")
	put("book.DOGE_USDT", "book")
	put("trades.DOGE_USDT", "trades")
	put("book.DOGE_USDT", "newer book")
	put("pairs", "listing DOGE")
	put("book.DOGE_USDT", "newest book")
	var got []string
	for _, kv := range q.take(t.Context()) {
		got = append(got, kv.key+"="+string(*kv.value))
	}
	want := []string{"pairs=holding DOGE", "book.DOGE_USDT=newer book", "trades.DOGE_USDT=trades", "pairs=listing DOGE", "book.DOGE_USDT=newest book"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("put %q, want %q", got, want)
	}
}

// A key's first put of the term is acknowledged, with the revision the
// bucket gave it (what a listing waits for every member to apply); its
// later puts go unacknowledged, and land all the same, the newest last:
// once the leader stops publishing, the bucket holds its last book, at a
// later revision than the first put's.
func TestLaterPutsLandWithoutAcknowledgement(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	n := startMember(t, s, "a", f)
	eventually(t, 5*time.Second, "no leader", n.m.leading)
	eventually(t, 5*time.Second, "BTC_USDT's first book not acknowledged", func() bool { return n.m.firstPutAcked("book.BTC_USDT") })
	n.m.putsMu.Lock()
	first := n.m.firstPut["book.BTC_USDT"]
	n.m.putsMu.Unlock()
	eventually(t, 5*time.Second, "no round of books after the first", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.round > 20
	})
	f.pause()
	eventually(t, 5*time.Second, "the bucket does not hold the leader's last book", func() bool {
		e, err := n.m.snaps.Get(t.Context(), "book.BTC_USDT")
		if err != nil {
			return false
		}
		_, wire, err := parseValue(e.Value())
		last, _ := n.store.Book([]byte("BTC_USDT"), time.Now().UnixNano())
		return err == nil && e.Revision() > first && bytes.Equal(wire, last.AppendWire(nil))
	})
}

// The leader calls a pair replicated, and so listable, only once every
// member seen within the lease's TTL says it applied the pair's first book
// and trades: a member that lags holds the listing back until it catches
// up or stops being seen.
func TestPairIsReplicatedOnceEveryMemberAppliedIt(t *testing.T) {
	s := natstest.Start(t)
	n := startMember(t, s, "a", new(feeder))
	eventually(t, 5*time.Second, "no leader", n.m.leading)
	eventually(t, 5*time.Second, "BTC_USDT not replicated on a cluster of one", func() bool { return n.m.Replicated("BTC_USDT") })
	if n.m.Replicated("XRP_USDT") {
		t.Fatal("a pair never published is replicated")
	}
	// Another member that says it has applied nothing yet.
	other, err := Join(t.Context(), Config{Conn: connect(t, s), Member: "slow", Store: snapshot.NewStore(), LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	say := func(applied uint64) {
		t.Helper()
		if _, err := other.members.Put(t.Context(), memberKey("slow"), appendMember(nil, "slow", applied)); err != nil {
			t.Fatal(err)
		}
	}
	say(0)
	eventually(t, 5*time.Second, "BTC_USDT replicated while a member has applied nothing", func() bool { return !n.m.Replicated("BTC_USDT") })
	// It catches up.
	say(n.m.appliedRev.Load() + 1_000_000)
	eventually(t, 5*time.Second, "BTC_USDT not replicated once every member applied it", func() bool { return n.m.Replicated("BTC_USDT") })
	// It falls behind again, then stops saying it is there: after the
	// lease's TTL it no longer holds the listing back.
	say(0)
	eventually(t, 5*time.Second, "a lagging member did not hold BTC_USDT back", func() bool { return !n.m.Replicated("BTC_USDT") })
	eventually(t, 5*time.Second, "a member gone for the lease's TTL still holds BTC_USDT back", func() bool { return n.m.Replicated("BTC_USDT") })
}

func TestMemberValues(t *testing.T) {
	for _, tc := range []struct {
		value   string
		name    string
		applied uint64
	}{
		{"a 12", "a", 12},
		{"host:8080 0", "host:8080", 0},
		{"two words 7", "two words", 7},
		{"plain", "plain", 0}, // a member of an earlier version
		{"a b", "a b", 0},     // no revision
		{" 5", " 5", 0},       // no name
		{"a -1", "a -1", 0},   // not a revision
		{"a 18446744073709551616", "a 18446744073709551616", 0},
	} {
		name, applied := parseMember([]byte(tc.value))
		if name != tc.name || applied != tc.applied {
			t.Errorf("parseMember(%q) = %q, %d; want %q, %d", tc.value, name, applied, tc.name, tc.applied)
		}
	}
	if name, applied := parseMember(appendMember(nil, "x y", 99)); name != "x y" || applied != 99 {
		t.Errorf("appendMember round trip: %q, %d", name, applied)
	}
}

// A follower's load is read by the leader, and returns once the value the
// leader published for it has reached the follower; a failed read comes
// back with its reason; a request no follower sends is refused and counted.
func TestFollowersLoadIsReadByTheLeader(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	var fail atomic.Bool
	var stores sync.Map // member name: its store, for its Load to publish into
	load := func(name string) func(ctx context.Context, id string, st snapshot.Stream) error {
		return func(ctx context.Context, id string, st snapshot.Stream) error {
			if fail.Load() {
				return errors.New("venue weight budget spent")
			}
			store, _ := stores.Load(name)
			b, err := snapshot.NewBook(id, 7, []snapshot.Level{{Price: "7.5", Size: "7"}}, nil, time.Now())
			if err != nil || st != snapshot.StreamBook {
				return fmt.Errorf("unexpected load of %s %v: %v", id, st, err)
			}
			store.(*snapshot.Store).PutBook(b)
			return nil
		}
	}
	var nodes []*node
	for _, name := range []string{"a", "b"} {
		n := startMemberWith(t, s, name, f, func(c *Config) { c.Load = load(name) })
		stores.Store(name, n.store)
		nodes = append(nodes, n)
	}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	settle(t, f, nodes)
	f.pause()
	leader, follower := leaders(nodes)[0], nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	// Nothing of the feeder's is on its way that would stand for the
	// value the load waits for.
	eventually(t, 5*time.Second, "the follower does not catch up", func() bool { return served(follower.store) == served(leader.store) })
	if err := leader.m.Load(t.Context(), "ETH_USDT", snapshot.StreamBook, nil); !errors.Is(err, errNoLeader) {
		t.Errorf("the leader's own load: %v, want %v", err, errNoLeader)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := follower.m.Load(ctx, "ETH_USDT", snapshot.StreamBook, nil); err != nil {
		t.Fatalf("a follower's load: %v", err)
	}
	b, _ := follower.store.Book([]byte("ETH_USDT"), time.Now().UnixNano())
	if b == nil || !strings.Contains(string(b.Body()), `"bids":[["7.5","7"]]`) {
		t.Fatalf("after its load the follower serves %v, want the book the leader read for it", b)
	}

	fail.Store(true)
	if err := follower.m.Load(ctx, "ETH_USDT", snapshot.StreamBook, nil); err == nil || !strings.Contains(err.Error(), "venue weight budget spent") {
		t.Errorf("a failed read: %v, want the leader's reason", err)
	}
	for _, bad := range []string{"load book not-a-pair", "load funding BTC_USDT", "read book BTC_USDT"} {
		answer, err := follower.m.cfg.Conn.RequestWithContext(ctx, leaderSubject(follower.m.cfg.Name, leader.m.Term()), []byte(bad))
		if err != nil || string(answer.Data) != "not a load request" {
			t.Errorf("%q: answered %v, %v; want it refused", bad, answer, err)
		}
	}
	if got := leader.m.metrics.loadsServed; got[loadOK].Get() != 1 || got[loadFailed].Get() != 1 || got[loadRefused].Get() != 3 {
		t.Errorf("the leader counted %d served, %d failed, %d refused; want 1, 1, 3", got[loadOK].Get(), got[loadFailed].Get(), got[loadRefused].Get())
	}
	if got := follower.m.metrics.loads; got[loadOK].Get() != 1 || got[loadFailed].Get() != 1 {
		t.Errorf("the follower counted %d loads and %d failed; want 1 and 1", got[loadOK].Get(), got[loadFailed].Get())
	}
}

// A follower's load for a book its copy serves short of the depth asked
// returns only once its copy serves that depth: the leader goes on
// publishing the book short while its read for the request is under way,
// and such a value, applied before the leader's answer, is not the one the
// request waits for.
func TestFollowersLoadWaitsForAValueThatServesIt(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	var stores sync.Map // member name: its store, for its Load to publish into
	var nodes []*node
	book := func(id string, open snapshot.Open, levels int) *snapshot.Book {
		bids := make([]snapshot.Level, levels)
		for i := range bids {
			bids[i] = snapshot.Level{Price: strconv.Itoa(1000 - i), Size: "1"}
		}
		return snapshot.NewLocalBook(id, time.Now().UnixMilli(), 1, bids, nil, open, time.Now())
	}
	follower := func() *node {
		for _, n := range nodes {
			if !n.m.leading() {
				return n
			}
		}
		return nil
	}
	serves := func(n *node, depth int) bool {
		b, _ := n.store.Book([]byte("ETH_USDT"), time.Now().UnixNano())
		return b != nil && b.Serves(depth)
	}
	load := func(name string) func(ctx context.Context, id string, st snapshot.Stream) error {
		return func(ctx context.Context, id string, st snapshot.Stream) error {
			store, _ := stores.Load(name)
			leader := store.(*snapshot.Store)
			// Published short first, as a leader's book is while its
			// read for the request waits for weight; the follower
			// applies it before the answer.
			leader.PutBook(book(id, snapshot.Open{Bids: true}, 30))
			for !serves(follower(), 30) || serves(follower(), snapshot.MaxDepth) {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
			// The read's whole book once the answer is on its way.
			go func() {
				for nodes[0].m.metrics.loadsServed[loadOK].Get()+nodes[1].m.metrics.loadsServed[loadOK].Get() == 0 {
					time.Sleep(time.Millisecond)
				}
				leader.PutBook(book(id, snapshot.Open{Bids: true}, snapshot.MaxDepth))
			}()
			return nil
		}
	}
	for _, name := range []string{"a", "b"} {
		n := startMemberWith(t, s, name, f, func(c *Config) { c.Load = load(name) })
		stores.Store(name, n.store)
		nodes = append(nodes, n)
	}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	settle(t, f, nodes)
	f.pause()
	fl := follower()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := fl.m.Load(ctx, "ETH_USDT", snapshot.StreamBook, func() bool { return serves(fl, snapshot.MaxDepth) }); err != nil {
		t.Fatalf("a follower's load: %v", err)
	}
	if !serves(fl, snapshot.MaxDepth) {
		b, _ := fl.store.Book([]byte("ETH_USDT"), time.Now().UnixNano())
		bids, _ := b.Levels()
		t.Fatalf("after its load the follower's book holds %d levels of an open side, want %d", bids, snapshot.MaxDepth)
	}
}

func TestParseLoad(t *testing.T) {
	for in, want := range map[string]string{
		"load book BTC_USDT":   "book BTC_USDT",
		"load trades ETH_USDT": "trades ETH_USDT",
		"load book ":           "",
		"load book BTC_USDT ":  "",
		"load stream(?) X_Y":   "",
		"loadbook BTC_USDT":    "",
		"":                     "",
	} {
		s, id, ok := parseLoad([]byte(in))
		got := ""
		if ok {
			got = s.String() + " " + id
		}
		if got != want {
			t.Errorf("parseLoad(%q) = %q, want %q", in, got, want)
		}
	}
}

// What a follower's requests read reaches the leader within a period or
// two, which marks it as its own requests' reads; lines no follower sends
// are refused and counted.
func TestFollowersWantsReachTheLeader(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	var marked sync.Map // "stream id": marked by the leader
	var nodes []*node
	for _, name := range []string{"a", "b"} {
		nodes = append(nodes, startMemberWith(t, s, name, f, func(c *Config) {
			c.Want = func(id []byte, st snapshot.Stream) { marked.Store(st.String()+" "+string(id), true) }
		}))
	}
	eventually(t, 5*time.Second, "no leader", func() bool { return len(leaders(nodes)) == 1 })
	settle(t, f, nodes)
	leader, follower := leaders(nodes)[0], nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	leader.m.Want([]byte("SOL_USDT"), snapshot.StreamBook, leader.m.cfg.Now().UnixNano()) // the leader's own: its poller's business
	follower.m.Want([]byte("ETH_USDT"), snapshot.StreamTrades, follower.m.cfg.Now().UnixNano())
	follower.m.Want([]byte("BTC_USDT"), snapshot.StreamBook, follower.m.cfg.Now().UnixNano())
	eventually(t, 3*wantEvery, "the leader did not mark the follower's wants", func() bool {
		_, eth := marked.Load("trades ETH_USDT")
		_, btc := marked.Load("book BTC_USDT")
		return eth && btc
	})
	if _, ok := marked.Load("book SOL_USDT"); ok {
		t.Error("the leader sent its own wants to itself")
	}
	if sent := follower.m.metrics.wants[wantSent].Get(); sent != 2 {
		t.Errorf("the follower counted %d sent, want 2", sent)
	}
	if err := follower.m.cfg.Conn.Publish(leaderSubject(follower.m.cfg.Name, leader.m.Term()), []byte(wantPrefix+"funding BTC_USDT\nbook not-a-pair\nbook SOL_USDT\n")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the leader did not refuse the lines no follower sends", func() bool {
		return leader.m.metrics.wants[wantRefused].Get() == 2
	})
	if _, ok := marked.Load("book SOL_USDT"); !ok {
		t.Error("the good line among bad ones was not marked")
	}
}

// A follower's record sends what was read since the last message, once,
// and forgets a pair no request read for wantForget; marking a pair
// already recorded allocates nothing.
func TestWantsRecord(t *testing.T) {
	var w wants
	const s = int64(time.Second)
	w.mark([]byte("BTC_USDT"), snapshot.StreamBook, 1*s)
	w.mark([]byte("BTC_USDT"), snapshot.StreamTrades, 2*s)
	w.mark([]byte("ETH_USDT"), snapshot.StreamBook, 2*s)
	lines := func(msg []byte) []string {
		if msg == nil {
			return nil
		}
		if !bytes.HasPrefix(msg, []byte(wantPrefix)) {
			t.Fatalf("a message without its prefix: %q", msg)
		}
		out := strings.Split(strings.TrimSuffix(string(msg[len(wantPrefix):]), "\n"), "\n")
		slices.Sort(out)
		return out
	}
	if got := lines(w.take(3 * s)); !slices.Equal(got, []string{"book BTC_USDT", "book ETH_USDT", "trades BTC_USDT"}) {
		t.Fatalf("first message %q", got)
	}
	if got := w.take(4 * s); got != nil {
		t.Fatalf("a message with nothing read since: %q", got)
	}
	w.mark([]byte("ETH_USDT"), snapshot.StreamBook, 5*s)
	if got := lines(w.take(6 * s)); !slices.Equal(got, []string{"book ETH_USDT"}) {
		t.Fatalf("second message %q", got)
	}
	w.take(2*s + int64(wantForget) + 1)
	if _, ok := w.load()["BTC_USDT"]; ok {
		t.Error("a pair no request read for a minute is still recorded")
	}
	if _, ok := w.load()["ETH_USDT"]; !ok {
		t.Error("a pair read within the minute was forgotten")
	}
	id := []byte("ETH_USDT")
	if n := testing.AllocsPerRun(100, func() { w.mark(id, snapshot.StreamTrades, 7*s) }); n != 0 {
		t.Errorf("marking a recorded pair allocates %v times", n)
	}
}

// A value's header says its term, venue time and publication time, and
// its checksum refuses any byte of it changed; a value of another version
// or without its magic byte is refused, but those of the versions before
// are read, each checked by its own sum.
func TestValueHeader(t *testing.T) {
	b, err := snapshot.NewBook("BTC_USDT", 1767225600456, []snapshot.Level{{Price: "1", Size: "1"}}, nil, time.Unix(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	h := header{term: 7, venueTime: venueTimeOf(b), publishedAt: 99}
	v := appendValue(nil, h, b)
	got, wire, err := parseValue(v)
	if err != nil || got != (header{term: 7, venueTime: 1767225600456, publishedAt: 99}) || !bytes.Equal(wire, b.AppendWire(nil)) {
		t.Fatalf("parsed %+v, %d bytes of wire, %v", got, len(wire), err)
	}
	if term, ok := termOf(v); !ok || term != 7 {
		t.Errorf("termOf = %d, %v; want 7, true", term, ok)
	}
	if _, ok := termOf(append([]byte{magicV2}, v[1:]...)); ok {
		t.Error("termOf read a value of another version")
	}
	tr, err := snapshot.NewTrades("BTC_USDT", nil, time.Unix(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	if vt := venueTimeOf(tr); vt != 5000 {
		t.Errorf("a trade list's venue time is %d, want its read time, 5000 ms", vt)
	}
	for i := range v {
		damaged := bytes.Clone(v)
		damaged[i] ^= 0x40
		if _, _, err := parseValue(damaged); !errors.Is(err, errBadValue) {
			t.Fatalf("byte %d of %d changed: %v, want errBadValue", i, len(v), err)
		}
	}
	// A value of the version before, as its leader wrote it: the same but
	// for the book's wire form, which ends without its open sides' bits.
	oldWire := b.AppendWire(nil)
	oldWire = oldWire[:len(oldWire)-1]
	rest := append(bytes.Clone(v[2+sumLen:len(v)-len(wire)]), oldWire...)
	v4 := binary.LittleEndian.AppendUint32([]byte{valueMagic, versionClosed}, crc32.Checksum(rest, castagnoli))
	v4 = append(v4, rest...)
	old := h
	old.closed = true
	if got, gotWire, err := parseValue(v4); err != nil || got != old || !bytes.Equal(gotWire, oldWire) {
		t.Fatalf("a value of the version before parsed as %+v, %d bytes of wire, %v", got, len(gotWire), err)
	}
	if _, ok := termOf(v4); ok {
		t.Error("termOf read a value of the version before")
	}
	// A value of two versions before: the same but for the SHA-256 content
	// hash in place of the checksum.
	sum := sha256.Sum256(rest)
	v3 := append(append([]byte{valueMagic, versionSHA}, sum[:shaLen]...), rest...)
	if got, gotWire, err := parseValue(v3); err != nil || got != old || !bytes.Equal(gotWire, oldWire) {
		t.Fatalf("a value of two versions before parsed as %+v, %d bytes of wire, %v", got, len(gotWire), err)
	}
	if _, ok := termOf(v3); ok {
		t.Error("termOf read a value of the version before")
	}
	for _, i := range []int{2, 2 + shaLen, len(v3) - 1} {
		damaged := bytes.Clone(v3)
		damaged[i] ^= 0x40
		if _, _, err := parseValue(damaged); !errors.Is(err, errBadValue) {
			t.Fatalf("byte %d of a value of two versions before changed: %v, want errBadValue", i, err)
		}
	}
	// A value of three versions before: a wire form without the gzip form
	// and the open sides' bits this version's books end with.
	gz := b.Gzip()
	wire = b.AppendWire(nil)
	wire = wire[:len(wire)-1-len(gz)-len(binary.AppendUvarint(nil, uint64(len(gz))))]
	v2 := binary.AppendVarint(binary.AppendUvarint([]byte{magicV2}, 6), 5_000_000_000)
	v2 = append(binary.LittleEndian.AppendUint32(v2, crc32.Checksum(wire, crc32.MakeTable(crc32.Castagnoli))), wire...)
	got, gotWire, err := parseValue(v2)
	if err != nil || got != (header{term: 6, venueTime: 5000, publishedAt: 5_000_000_000, closed: true}) {
		t.Fatalf("a value of three versions before parsed as %+v, %v", got, err)
	}
	if old, err := snapshot.DecodeBook(append(gotWire, 0)); err != nil || !bytes.Equal(old.Body(), b.Body()) || !bytes.Equal(old.Gzip(), gz) {
		t.Errorf("the book of a value of three versions before: %v", err)
	}
	v2[len(v2)-1] ^= 1
	if _, _, err := parseValue(v2); !errors.Is(err, errBadValue) {
		t.Errorf("a damaged value of three versions before: %v, want errBadValue", err)
	}
	for name, bad := range map[string][]byte{
		"another version": append([]byte{valueMagic, valueVersion + 1}, v[2:]...),
		"no magic byte":   append([]byte{0xb1}, v[1:]...),
		"cut short":       v[:len(v)-1],
		"empty":           nil,
		"oversize":        make([]byte, maxValue+1),
	} {
		if _, _, err := parseValue(bad); !errors.Is(err, errBadValue) {
			t.Errorf("%s: %v, want errBadValue", name, err)
		}
	}
}

// A member serves a book to the depths its leader would: a book's open
// sides come through its value, and a book of a leader of the version
// before, whose forms had no open sides, is applied with its sides closed,
// as that leader served it.
func TestAppliedBookKeepsItsOpenSides(t *testing.T) {
	now := time.Now()
	ladder := func(n int, bids bool) []snapshot.Level {
		out := make([]snapshot.Level, n)
		for i := range out {
			p := 5000 + i
			if bids {
				p = 4999 - i
			}
			out[i] = snapshot.Level{Price: strconv.Itoa(p), Size: "1"}
		}
		return out
	}
	b := snapshot.NewLocalBook("BTC_USDT", now.UnixMilli(), 9, ladder(78, true), ladder(100, false), snapshot.Open{Bids: true}, now)
	for _, c := range []struct {
		name   string
		wire   []byte
		closed bool
		serves bool
	}{
		{"this version's", b.AppendWire(nil), false, false},
		{"the version before's", b.AppendWire(nil)[:len(b.AppendWire(nil))-1], true, true},
	} {
		store := snapshot.NewStore()
		store.PutDoc(snapshot.NewPairs([]snapshot.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
			snapshot.PairsConfig{Venue: "sim"}, now), now)
		if err := applyWire(store, keyOfStream(snapshot.StreamBook, "BTC_USDT"), c.wire, c.closed, now.UnixNano()); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _ := store.Book([]byte("BTC_USDT"), now.UnixNano())
		if got == nil || got.Serves(snapshot.MaxDepth) != c.serves || !got.Serves(78) {
			t.Errorf("%s book: serves 100 levels %v, want %v", c.name, got != nil && got.Serves(snapshot.MaxDepth), c.serves)
		}
	}
}
