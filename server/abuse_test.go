package server

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Abuse of the rate limiter: millions of distinct client addresses, as a
// botnet or a spoofing client behind a trusted proxy would send. The
// limiter's memory is bounded by its key cap whatever the number of
// addresses; idle keys are evicted; a header from an untrusted peer and the
// host part of an IPv6 /64 buy no fresh allowance.

// limiterBytesPerKey is the bound the limiter documents: at most about 60
// bytes a key, so under 60 MiB at the default cap of 1,048,576 keys.
const limiterBytesPerKey = 60

// idleAfter is how long after its last request a key is idle at most: its
// bucket has left the span.
const idleAfter = spanBuckets * bucketWidth

// proxied sends requests from one peer with a chosen X-Forwarded-For value,
// reusing one request context so that the test measures the limiter, not
// the harness.
type proxied struct {
	srv *Server
	ctx fasthttp.RequestCtx
	buf []byte
}

func newProxied(srv *Server, peer string) *proxied {
	p := &proxied{srv: srv}
	addr, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		panic(err)
	}
	var req fasthttp.Request
	req.SetRequestURI("/api/public/pairs")
	p.ctx.Init(&req, addr, nil)
	return p
}

// do sends one request with X-Forwarded-For a and returns the status.
func (p *proxied) do(a netip.Addr) int {
	p.buf = a.AppendTo(p.buf[:0])
	p.ctx.Request.Header.SetBytesV(fasthttp.HeaderXForwardedFor, p.buf)
	p.ctx.Response.Reset()
	p.srv.Handler(&p.ctx)
	return p.ctx.Response.StatusCode()
}

// v4 returns the i-th address of 0.0.0.0/0 outside the reserved blocks the
// client-IP parser refuses (multicast and unspecified).
func v4(i uint32) netip.Addr {
	i += 1 << 24 // skip 0.0.0.0/8
	return netip.AddrFrom4([4]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
}

// v6 returns an address in the i-th /64 of 2001:db8::/32, host part h.
func v6(i uint32, h uint64) netip.Addr {
	var b [16]byte
	b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8
	b[4], b[5], b[6], b[7] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	for k := range 8 {
		b[15-k] = byte(h >> (8 * k))
	}
	return netip.AddrFrom16(b)
}

// heapInUse returns the bytes of live heap objects. Two collections: the
// first only moves sync.Pool contents aside, the second frees them.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestMillionClientAddressesThroughATrustedProxy sends one request from each
// of 1,000,000 distinct addresses through a trusted proxy at one instant,
// then 1,000,000 others 70 s later, then lets 70 s pass. With the
// default key cap every address gets its allowance; the limiter holds at
// most the cap, its memory stays within 60 bytes a key and does not grow
// with the second million (the idle first million is evicted to make
// room); after the quiet 70 s the idle keys are gone.
func TestMillionClientAddressesThroughATrustedProxy(t *testing.T) {
	n := uint32(1_000_000 / abuseScale)
	if testing.Short() {
		n = 100_000
	}
	f := newFixture(t, behind(limited(func(c *Config) { c.MaxStale = time.Hour; c.PairsMaxStale = time.Hour })))
	p := newProxied(f.srv, "10.0.0.1:443")
	before := heapInUse()
	start := time.Now()
	for i := range n {
		if st := p.do(v4(i)); st != 200 {
			t.Fatalf("address %d (%s): %d, want 200 (its first request)", i, v4(i), st)
		}
	}
	first := time.Since(start)
	keys1, heap1 := f.srv.limit.len(), heapInUse()-before

	f.clock.Advance(idleAfter)
	for i := range n {
		if st := p.do(v4(n + i)); st != 200 {
			t.Fatalf("second wave, address %d: %d, want 200", i, st)
		}
	}
	keys2, heap2 := f.srv.limit.len(), heapInUse()-before

	f.clock.Advance(idleAfter)
	// One request per shard runs its sweep; a thousand fresh addresses
	// touch every one of the 64 shards.
	for i := range uint32(1000) {
		p.do(v4(2*n + i))
	}
	keys3 := f.srv.limit.len()
	runtime.KeepAlive(f)

	bound := int64(DefaultRateLimitKeys) * limiterBytesPerKey
	t.Logf("%d addresses through a trusted proxy in %s: %d keys, %s (%.1f bytes a key)",
		n, first.Round(time.Millisecond), keys1, mib(heap1), float64(heap1)/float64(keys1))
	t.Logf("%s later, %d other addresses: %d keys, %s; a quiet %s later: %d keys (%s bound at the default cap of %d keys)",
		idleAfter,
		n, keys2, mib(heap2), idleAfter, keys3, mib(bound), DefaultRateLimitKeys)
	if keys1 != int(n) {
		t.Errorf("%d keys after %d addresses under a cap of %d: every address should have its own", keys1, n, DefaultRateLimitKeys)
	}
	if heap1 > bound || heap2 > bound {
		t.Errorf("limiter memory %s, then %s; bound %s", mib(heap1), mib(heap2), mib(bound))
	}
	if keys2 > int(n)+int(n)/10 {
		t.Errorf("%d keys after the second wave: the idle first wave was not evicted", keys2)
	}
	if heap2 > heap1+heap1/4 {
		t.Errorf("memory grew from %s to %s with the second wave: idle keys should make room", mib(heap1), mib(heap2))
	}
	if keys3 > 1000 {
		t.Errorf("%d keys after a quiet %s, want only the last 1,000 addresses' (idle keys evicted)", keys3, idleAfter)
	}
}

// TestMillionClientAddressesStayWithinASmallCap: the cap, not the number of
// addresses, bounds the limiter. 1,000,000 addresses at one instant against
// a cap of 65,536 keys: every request is still answered, the table never
// holds more than the cap, and its memory stays within about 60 bytes a key
// (10 % allowed over: a small table is rounded up to a power of two).
func TestMillionClientAddressesStayWithinASmallCap(t *testing.T) {
	const keyCap = 1 << 16
	n := uint32(1_000_000 / abuseScale)
	if testing.Short() {
		n = 100_000
	}
	f := newFixture(t, behind(limited(func(c *Config) { c.RateLimitKeys = keyCap })))
	p := newProxied(f.srv, "10.0.0.1:443")
	before := heapInUse()
	for i := range n {
		if st := p.do(v4(i)); st != 200 {
			t.Fatalf("address %d: %d, want 200", i, st)
		}
		if i%100_000 == 0 {
			if k := f.srv.limit.len(); k > keyCap {
				t.Fatalf("%d keys after %d addresses, cap %d", k, i, keyCap)
			}
		}
	}
	keys, heap := f.srv.limit.len(), heapInUse()-before
	runtime.KeepAlive(f) // the limiter is what was measured: live until now
	bound := int64(keyCap) * limiterBytesPerKey * 11 / 10
	t.Logf("%d addresses, cap %d: %d keys, %s (%.1f bytes a key; bound %s)", n, keyCap, keys, mib(heap), float64(heap)/keyCap, mib(bound))
	if keys > keyCap || heap > bound {
		t.Errorf("%d keys, %s: over the cap %d or the bound %s", keys, mib(heap), keyCap, mib(bound))
	}
}

// TestSpoofedAddressesBuyNoAllowance: a million distinct X-Forwarded-For
// values from a peer that is not a trusted proxy, and a million addresses
// of one IPv6 /64 through a trusted proxy, each count as one client: 600
// requests pass, the rest are 429, and the limiter holds one key for each.
func TestSpoofedAddressesBuyNoAllowance(t *testing.T) {
	n := uint32(1_000_000 / abuseScale)
	if testing.Short() {
		n = 100_000
	}
	for _, tc := range []struct {
		name, peer string
		addr       func(i uint32) netip.Addr
	}{
		{"X-Forwarded-For from an untrusted peer", "192.0.2.7:5000", v4},
		{"one IPv6 /64 through a trusted proxy", "10.0.0.1:443", func(i uint32) netip.Addr { return v6(7, uint64(i)*0x9e3779b97f4a7c15+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, behind(limited(func(c *Config) { c.MaxStale = time.Hour; c.PairsMaxStale = time.Hour })))
			p := newProxied(f.srv, tc.peer)
			counts := map[int]int{}
			for i := range n {
				counts[p.do(tc.addr(i))]++
			}
			t.Logf("%d distinct addresses: %v, %d limiter keys", n, counts, f.srv.limit.len())
			if counts[200] != 600 || counts[429] != int(n)-600 || f.srv.limit.len() != 1 {
				t.Errorf("statuses %v with %d keys; want 600 × 200, the rest 429, one key", counts, f.srv.limit.len())
			}
		})
	}
}
