package server

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// The limiter alone, on a fake clock: its window, its Retry-After, its
// memory bounds. t0 is 5 s into a bucket; requests made at t0 leave the
// span at t0+leaves.

// bucketStart is when the bucket holding ns began.
func bucketStart(ns int64) int64 { return ns - ns%int64(bucketWidth) }

func TestLimiterAllowsAWholeMinuteAtOnceThenWaitsForItToLeave(t *testing.T) {
	l := newLimiter(600, DefaultRateLimitKeys)
	now := t0.UnixNano()
	for i := range 600 {
		if ok, _ := l.allow(1, now); !ok {
			t.Fatalf("request %d of the minute's allowance refused", i+1)
		}
	}
	ok, wait := l.allow(1, now)
	if ok || wait != int64(leaves) {
		t.Fatalf("601st: ok=%v wait=%v, want refused for %v", ok, time.Duration(wait), leaves)
	}
	if ok, wait := l.allow(1, now+int64(leaves)-1); ok || wait != 1 {
		t.Fatalf("1ns before they leave: ok=%v wait=%v, want refused for 1ns", ok, wait)
	}
	if ok, _ := l.allow(2, now); !ok {
		t.Fatal("another key was refused")
	}
	for i := range 600 {
		if ok, _ := l.allow(1, now+int64(leaves)); !ok {
			t.Fatalf("request %d once the first minute left: refused", i+1)
		}
	}
}

// Retry-After waits for as many buckets to leave as the client is over:
// 100 requests in each of six buckets, the seventh refused; one bucket
// leaving makes room for 100.
func TestLimiterWaitsForTheBucketsItIsOver(t *testing.T) {
	l := newLimiter(600, DefaultRateLimitKeys)
	start := bucketStart(t0.UnixNano())
	for b := range int64(6) {
		for range 100 {
			if ok, _ := l.allow(1, start+b*int64(bucketWidth)); !ok {
				t.Fatalf("bucket %d refused", b)
			}
		}
	}
	now := start + 6*int64(bucketWidth) + int64(3*time.Second)
	if ok, wait := l.allow(1, now); ok || wait != int64(7*time.Second) {
		t.Fatalf("ok=%v wait=%v, want refused until the first bucket leaves, 7s", ok, time.Duration(wait))
	}
	now += int64(7 * time.Second)
	for i := range 100 {
		if ok, _ := l.allow(1, now); !ok {
			t.Fatalf("request %d after the first bucket left: refused", i+1)
		}
	}
	if ok, wait := l.allow(1, now); ok || wait != int64(bucketWidth) {
		t.Fatalf("ok=%v wait=%v, want refused for a bucket", ok, time.Duration(wait))
	}
}

// Against a reference that keeps every request's time: no closed 60 s
// window ever holds more than the limit, a request is refused only when
// the last 70 s already hold the limit (stricter than the minute by one
// bucket at most), and the limiter's answer and wait are exactly those of
// the buckets.
func TestLimiterAgainstEveryRequestsTime(t *testing.T) {
	for _, limit := range []int{1, 7, 600} {
		r := rand.New(rand.NewPCG(uint64(limit), 11))
		l := newLimiter(limit, DefaultRateLimitKeys)
		var allowed []int64
		now := t0.UnixNano()
		// inSpan counts the requests allowed from bucket b-6 on.
		inSpan := func(b int64) int {
			n := 0
			for _, at := range allowed {
				if at/int64(bucketWidth) >= b-spanBuckets+1 {
					n++
				}
			}
			return n
		}
		within := func(d time.Duration) int {
			n := 0
			for _, at := range allowed {
				if at >= now-int64(d) {
					n++
				}
			}
			return n
		}
		for range 20000 {
			// Half the requests come in bursts, the rest about twice as
			// fast as the limit, with a long pause now and then: about
			// 1.05 times the limit a minute at 600, twice at 7.
			switch x := r.IntN(1000); {
			case x < 500:
			case x < 999:
				now += r.Int64N(int64(2 * time.Minute / time.Duration(limit)))
			default:
				now += r.Int64N(int64(90 * time.Second))
			}
			b := now / int64(bucketWidth)
			ok, wait := l.allow(1, now)
			if want := inSpan(b) < limit; ok != want {
				t.Fatalf("limit %d: allowed %v with %d in the span, want %v", limit, ok, inSpan(b), want)
			}
			if !ok {
				if n := within(70 * time.Second); n < limit {
					t.Fatalf("limit %d: refused with %d in the last 70s", limit, n)
				}
				next := b + 1
				for inSpan(next) >= limit {
					next++
				}
				if want := next*int64(bucketWidth) - now; wait != want {
					t.Fatalf("limit %d: wait %v, want %v", limit, time.Duration(wait), time.Duration(want))
				}
				continue
			}
			allowed = append(allowed, now)
			if n := within(time.Minute); n > limit {
				t.Fatalf("limit %d: %d allowed in the minute up to %v", limit, n, time.Duration(now-t0.UnixNano()))
			}
			if len(allowed) > 4*limit {
				allowed = allowed[len(allowed)-2*limit:] // older ones are out of every check
			}
		}
	}
}

// A key held through a long silence, longer than its bucket index's
// counter wraps (65,536 buckets, about 7.6 days), is not mistaken for a
// recent one; and a clock stepped back keeps a key's count.
func TestLimiterLongSilenceAndClockStepBack(t *testing.T) {
	l := newLimiter(1, DefaultRateLimitKeys)
	now := t0.UnixNano()
	l.allow(1, now)
	if ok, _ := l.allow(1, now-int64(time.Second)); ok {
		t.Fatal("a clock stepped back a second handed out a fresh allowance")
	}
	if ok, _ := l.allow(1, now+65536*int64(bucketWidth)); !ok {
		t.Fatal("refused after 65,536 buckets of silence: an old bucket was taken for the current one")
	}
}

// A limit over 65,535 a minute takes 32-bit counters and is kept as well.
func TestLimiterWideCounters(t *testing.T) {
	const limit = 100_000
	l := newLimiter(limit, DefaultRateLimitKeys)
	now := t0.UnixNano()
	for i := range limit {
		if ok, _ := l.allow(1, now); !ok {
			t.Fatalf("request %d refused", i+1)
		}
	}
	if ok, wait := l.allow(1, now); ok || wait != int64(leaves) {
		t.Fatalf("over the limit: ok=%v wait=%v", ok, time.Duration(wait))
	}
}

// touchShards makes a request with 10,000 fresh keys from k on: every
// shard sees one and runs its sweep if one is due.
func touchShards(l rateLimiter, k uint64, now int64) int {
	const n = 10000 // 64 shards all touched, but with odds of 1 in 1e66
	for i := range uint64(n) {
		l.allow(k+i, now)
	}
	return n
}

func TestLimiterEvictsIdleKeys(t *testing.T) {
	l := newLimiter(600, DefaultRateLimitKeys)
	now := t0.UnixNano()
	for k := range uint64(10000) {
		l.allow(k, now)
	}
	if n := l.len(); n != 10000 {
		t.Fatalf("%d keys, want 10000", n)
	}
	// Just before their bucket leaves the span they are kept.
	fresh := touchShards(l, 1<<40, now+int64(leaves)-1)
	if n := l.len(); n != 10000+fresh {
		t.Fatalf("%d keys, want all %d kept while in the span", n, 10000+fresh)
	}
	// At the next sweep, after it left, they are gone.
	fresh += touchShards(l, 1<<41, now+int64(leaves+sweepEvery))
	if n := l.len(); n != fresh {
		t.Fatalf("%d keys after the sweep, want only the %d fresh ones", n, fresh)
	}

	// A key still inside its span is kept, with its count: 10s after
	// spending its minute it has earned nothing, not a fresh 600.
	l = newLimiter(600, DefaultRateLimitKeys)
	for range 600 {
		l.allow(7, now)
	}
	touchShards(l, 1<<40, now+int64(sweepEvery)) // sweeps every shard
	if ok, _ := l.allow(7, now+int64(sweepEvery)); ok {
		t.Fatal("busy key allowed a request after the sweep: it lost its count")
	}
}

func TestLimiterHardCapBoundsKeys(t *testing.T) {
	const maxKeys = 64 * 1024
	l := newLimiter(600, maxKeys)
	now := t0.UnixNano()
	// A million distinct addresses at one instant: none is idle, so only
	// the cap holds the table.
	for i := range uint64(1_000_000) {
		k := key(netip.AddrFrom4([4]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
		if ok, _ := l.allow(k, now); !ok {
			t.Fatalf("new key %d refused", i)
		}
		if i%100_000 == 0 {
			if n := l.len(); n > maxKeys {
				t.Fatalf("%d keys after %d addresses, cap %d", n, i, maxKeys)
			}
		}
	}
	if n := l.len(); n > maxKeys || n < maxKeys/2 {
		t.Fatalf("%d keys, want at most the cap %d and most of it used", n, maxKeys)
	}
}

// The window's buckets must cover a minute: the current one and the six
// before it, whatever the time within the current one.
func TestLimiterSpanCoversAMinute(t *testing.T) {
	if (spanBuckets-1)*bucketWidth != time.Minute {
		t.Fatalf("%d buckets of %v do not cover exactly a minute before the current one", spanBuckets, bucketWidth)
	}
	if start := bucketStart(t0.UnixNano()); t0.UnixNano()-start != int64(5*time.Second) || leaves != spanBuckets*bucketWidth-5*time.Second {
		t.Fatalf("t0 is %v into its bucket; the tests assume 5s", time.Duration(t0.UnixNano()-start))
	}
}
