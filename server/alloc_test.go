//go:build !race

package server

import (
	"net/netip"
	"runtime"
	"testing"
)

// The race detector allocates on its own, so these run without it.

func TestZeroAllocsPer200OnEveryRoute(t *testing.T) {
	f := hotFixture(t)
	for _, cl := range hotClients {
		for _, hc := range hotCases {
			t.Run(cl.name+"/"+hc.name, func(t *testing.T) {
				ctx, serve := hotCtx(f.srv, cl, hc.uri)
				wants := f.feed.wants.Load()
				allocs := testing.AllocsPerRun(1000, serve)
				if st := ctx.Response.StatusCode(); st != 200 {
					t.Fatalf("status %d: %s", st, ctx.Response.Body())
				}
				checkResponse(t, hc.uri, &ctx.Response)
				if allocs != 0 {
					t.Errorf("%v allocations per request, want 0", allocs)
				}
				if !wholeVenue[hc.name] && f.feed.wants.Load() == wants {
					t.Error("Want was not called")
				}
			})
		}
	}
	if f.srv.limit.len() == 0 {
		t.Fatal("the rate limiter saw no request")
	}
}

// wholeVenue are the routes that answer for every pair at once: they make
// no pair hot.
var wholeVenue = map[string]bool{"pairs": true, "tickers": true, "contracts": true, "contract_specs": true}

func TestZeroAllocsOnCommonErrors(t *testing.T) {
	f := hotFixture(t)
	for _, uri := range []string{
		"/api/public/orderbook?ticker_id=btc", "/api/public/trades?ticker_id=NOPE_USDT",
		"/api/public/fees", "/api/public/trades?ticker_id=BTC_USDT&limit=1e2",
	} {
		_, serve := hotCtx(f.srv, hotClients[2], uri)
		if allocs := testing.AllocsPerRun(1000, serve); allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", uri, allocs)
		}
	}
}

func TestZeroAllocsWhenRateLimited(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RateLimit = 1 })
	ctx, serve := hotCtx(f.srv, hotClients[0], "/api/public/pairs")
	serve()
	serve()
	if ctx.Response.StatusCode() != 429 {
		t.Fatalf("status %d, want 429", ctx.Response.StatusCode())
	}
	if got := header(&ctx.Response, "Retry-After"); got != "65" {
		t.Fatalf("Retry-After %q, want 65", got)
	}
	if allocs := testing.AllocsPerRun(1000, serve); allocs != 0 {
		t.Errorf("%v allocations per 429, want 0", allocs)
	}
}

func TestZeroAllocsExemptClient(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.RateLimit = 1
		c.RateLimitExempt = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	_, serve := hotCtx(f.srv, hotClients[0], "/api/public/tickers")
	if allocs := testing.AllocsPerRun(1000, serve); allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
}

// The memory bound of the limiter's doc comment, measured: the heap is
// what the race detector would distort.
func TestLimiterDefaultBoundHoldsAMillionKeysInMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the whole table")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newLimiter(600, DefaultRateLimitKeys)
	now := t0.UnixNano()
	for i := range uint64(2_000_000) {
		v6 := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		l.allow(key(netip.AddrFrom16(v6)), now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := l.len()
	if n > DefaultRateLimitKeys {
		t.Fatalf("%d keys, cap %d", n, DefaultRateLimitKeys)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d keys in %.1f MiB: %.1f bytes a key", n, float64(grown)/(1<<20), float64(grown)/float64(n))
	if grown > DefaultRateLimitKeys*limiterBytesPerKey {
		t.Fatalf("table holds %d MiB, documented bound %d MiB", grown>>20, DefaultRateLimitKeys*limiterBytesPerKey>>20)
	}
	runtime.KeepAlive(l)
}

// Counting each client's requests for the other replicas allocates nothing
// per request, drained or not: the counts' maps keep their room.
func TestZeroAllocsWhileSharingTheRateLimit(t *testing.T) {
	f := hotFixture(t)
	if !f.srv.ShareRateLimit() {
		t.Fatal("the hot fixture has no rate limit")
	}
	ctx, serve := hotCtx(f.srv, hotClients[0], hotCases[0].uri)
	var drained uint32
	count := func(_ uint64, n uint32) { drained += n }
	allocs := testing.AllocsPerRun(1000, func() {
		serve()
		f.srv.DrainRateCounts(count)
	})
	if st := ctx.Response.StatusCode(); st != 200 {
		t.Fatalf("status %d: %s", st, ctx.Response.Body())
	}
	if allocs != 0 {
		t.Errorf("%v allocations per request and drain, want 0", allocs)
	}
	if drained < 1000 {
		t.Fatalf("drained %d requests of 1001", drained)
	}
}
