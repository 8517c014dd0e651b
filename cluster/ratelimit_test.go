package cluster

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"marketfeed/internal/natstest"
	"marketfeed/server"
	"marketfeed/snapshot"
)

// fakeRates is a rate limiter that has allowed what a test sets, and
// records what it is charged.
type fakeRates struct {
	mu      sync.Mutex
	pending map[uint64]uint32
	charged map[uint64]uint32
}

func newFakeRates() *fakeRates {
	return &fakeRates{pending: map[uint64]uint32{}, charged: map[uint64]uint32{}}
}

func (f *fakeRates) allowed(key uint64, n uint32) {
	f.mu.Lock()
	f.pending[key] += n
	f.mu.Unlock()
}

func (f *fakeRates) DrainRateCounts(fn func(uint64, uint32)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range f.pending {
		fn(k, n)
	}
	clear(f.pending)
}

func (f *fakeRates) ChargeRate(key uint64, n uint32) {
	f.mu.Lock()
	f.charged[key] += n
	f.mu.Unlock()
}

func (f *fakeRates) chargedOf(key uint64) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.charged[key]
}

// What one member allowed a client is charged at every other member
// within a period or two, and never at the member itself; so many clients
// that a period's counts span several messages all arrive.
func TestMembersShareOneRateLimit(t *testing.T) {
	s := natstest.Start(t)
	f := new(feeder)
	nodes := []*node{startMember(t, s, "a", f), startMember(t, s, "b", f), startMember(t, s, "c", f)}
	rates := []*fakeRates{newFakeRates(), newFakeRates(), newFakeRates()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			if err := n.m.ShareRateLimit(ctx, rates[i]); err != nil {
				t.Error(err)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	const clients = 20000 // about 200 KB of counts: four messages or more
	for k := range uint64(clients) {
		rates[0].allowed(k+1, uint32(k%7+1))
	}
	rates[1].allowed(1<<40, 3)
	for _, i := range []int{1, 2} {
		eventually(t, 5*time.Second, "a member was not charged every client of another", func() bool {
			for k := range uint64(clients) {
				if rates[i].chargedOf(k+1) != uint32(k%7+1) {
					return false
				}
			}
			return true
		})
	}
	eventually(t, 5*time.Second, "b's client was not charged at a", func() bool { return rates[0].chargedOf(1<<40) == 3 })
	if n := rates[0].chargedOf(1); n != 0 {
		t.Fatalf("a was charged %d of its own requests", n)
	}
	if got := nodes[2].m.metrics.ratesCharged.Get(); got != clients+1 {
		t.Fatalf("c counts %d keys charged, want %d", got, clients+1)
	}
}

// A rate message cut short or damaged anywhere is refused or charges only
// what came before the damage, and never panics.
func TestDamagedRateMessagesChargeNothingFalse(t *testing.T) {
	msg := appendRateHead(nil, "a")
	for k := range uint64(50) {
		msg = appendRateKey(msg, k+1, uint32(k+1))
	}
	for n := range len(msg) {
		rc := newFakeRates()
		_, _, _ = chargeRates(msg[:n], "b", rc)
		for k, c := range rc.charged {
			if c != uint32(k) {
				t.Fatalf("cut at %d: key %d charged %d", n, k, c)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		bad := append([]byte(nil), msg...)
		for range 1 + r.IntN(4) {
			bad[r.IntN(len(bad))] = byte(r.Uint32())
		}
		_, _, _ = chargeRates(bad, "b", newFakeRates())
	}
	if _, _, err := chargeRates([]byte("junk"), "b", newFakeRates()); err == nil {
		t.Fatal("a message without the magic byte was taken")
	}
}

// signalled passes a member's limiter on, counting the keys it drains and
// signalling each charge, so that a test knows when a period's counts have
// arrived.
type signalled struct {
	rc      RateCounts
	drained int
	charged chan struct{}
}

func (s *signalled) DrainRateCounts(f func(uint64, uint32)) {
	s.rc.DrainRateCounts(func(k uint64, n uint32) { s.drained++; f(k, n) })
}

func (s *signalled) ChargeRate(key uint64, n uint32) {
	s.rc.ChargeRate(key, n)
	s.charged <- struct{}{}
}

// The contract's check across replicas: three members behind a round-robin
// balancer, one address sending 900 requests evenly over a minute, each
// member in turn, and the members exchanging their counts over NATS every
// RateEvery, each on a phase of its own. They answer 600 or a few more
// (what the client sends in a period, charged late), not 900. The servers
// are the real ones with their real limiter (only a test joins the two
// packages); the clock is the test's, moved a millisecond at a time, and
// each period waits until its counts have been charged at the other
// members, so the minute takes well under a second and the exchange is
// as late as it is in production, never later.
func TestMembersHoldOneAddressToTheLimitInAnyMinute(t *testing.T) {
	s := natstest.Start(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }

	type replica struct {
		srv   *server.Server
		rates *signalled
		share *rateShare
		phase int // ms into each period at which it publishes
	}
	var replicas []*replica
	for i, name := range []string{"a", "b", "c"} {
		store := snapshot.NewStore()
		pairs := snapshot.NewPairs([]snapshot.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Trading: true}},
			snapshot.PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, t0)
		store.PutDoc(pairs, t0)
		m, err := Join(t.Context(), Config{Conn: connect(t, s), Member: name, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{srv: server.New(server.Config{Store: store, RateLimit: 600, Now: now}), phase: i * 83}
		if !r.srv.ShareRateLimit() {
			t.Fatal("no rate limit to share")
		}
		r.rates = &signalled{rc: r.srv, charged: make(chan struct{}, 16)}
		if r.share, err = m.shareRates(r.rates); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.share.stop)
		// A round trip: the server has the subscription before any
		// member publishes, or it would miss the first period.
		if err := m.cfg.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, r)
	}
	// publish is one member's period: the others have charged its
	// counts when it returns.
	publish := func(from *replica) {
		from.rates.drained = 0
		from.share.publish()
		for _, to := range replicas {
			if to == from {
				continue
			}
			for range from.rates.drained {
				select {
				case <-to.rates.charged:
				case <-time.After(10 * time.Second):
					t.Fatal("a period's counts were not charged within 10s")
				}
			}
		}
	}

	var req fasthttp.Request
	req.SetRequestURI("/api/public/pairs")
	client := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
	const sent = 900
	var answered []time.Duration
	next := 0 // the next request
	for ms := range 60_000 {
		at := time.Duration(ms) * time.Millisecond
		clock.Store(t0.Add(at).UnixNano())
		if next < sent && at >= time.Duration(next)*time.Minute/sent {
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, client, nil)
			replicas[next%len(replicas)].srv.Handler(&ctx)
			if ctx.Response.StatusCode() == 200 {
				answered = append(answered, at)
			}
			next++
		}
		for _, r := range replicas {
			if (ms-r.phase)%int(RateEvery/time.Millisecond) == 0 {
				publish(r)
			}
		}
	}
	t.Logf("%d of %d requests, evenly over 60 s round robin over 3 members, answered 200", len(answered), next)
	if next != sent {
		t.Fatalf("sent %d, want %d", next, sent)
	}
	if n := len(answered); n < 540 || n > 630 {
		t.Fatalf("%d answered 200, want 540 to 630", n)
	}
}
