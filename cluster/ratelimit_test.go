package cluster

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"marketfeed/internal/natstest"
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
