package server

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

const (
	numShards = 64 // a power of two; spreads lock contention across cores

	// DefaultRateLimitKeys is the default bound on the keys the rate limiter
	// holds.
	DefaultRateLimitKeys = 1 << 20

	// sweepEvery is how often a shard drops its idle keys in passing. A key
	// is idle once its theoretical arrival time has passed.
	sweepEvery = 10 * time.Second

	// sweepGap is the least time between two sweeps forced by a full shard,
	// so that a flood of new addresses cannot make every insert a full scan.
	sweepGap = time.Second
)

// limiter is a GCRA rate limiter: each key holds one theoretical arrival time
// (TAT), in Unix nanoseconds. A request is allowed when, after adding one
// emission interval to the TAT, the TAT runs no further ahead of now than a
// full window (burst × interval); so a client may spend a whole minute's
// allowance at once and then one request per interval.
//
// A key whose TAT is not after now carries no state (it behaves exactly like
// a key never seen) and is deleted by the sweeps. Memory is bounded by a hard
// cap on keys per shard: at most maxKeys keys in all, each an 8-byte key and
// an 8-byte TAT in a Go map. With the map's control bytes and a load between
// 7/16 and 7/8 that is at most about 40 bytes a key (36 measured with the
// table full at the default), so the default of DefaultRateLimitKeys keys
// stays under 40 MiB whatever the number of distinct addresses. A full shard
// first sweeps (at most once per sweepGap) and then, if no key is idle,
// evicts an arbitrary key: that key's client gets a fresh allowance, which is
// the least harmful way to stay within the bound while more distinct clients
// are active than the table holds.
type limiter struct {
	interval int64 // ns between requests at the sustained rate
	window   int64 // interval × burst: how far ahead of now a TAT may run
	perShard int
	seed     uint64
	shards   [numShards]shard
}

type shard struct {
	mu        sync.Mutex
	tat       map[uint64]int64
	nextSweep int64 // Unix ns
	lastForce int64 // Unix ns of the last sweep forced by a full shard
	// counts are the requests allowed per key since the last Drain, for
	// the other replicas to charge (see Drain); nil unless counting. The
	// map is cleared, not replaced, so that it keeps its room and a
	// request allocates nothing once a key was seen.
	counts map[uint64]uint32
	_      [24]byte // 64 bytes a shard: neighbouring locks do not share a cache line
}

// newLimiter returns a limiter allowing perMinute requests a minute per key,
// all of them at once if need be, holding at most maxKeys keys.
func newLimiter(perMinute, maxKeys int) *limiter {
	interval := max(int64(time.Minute)/int64(perMinute), 1)
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails; a zero seed would only make shards predictable
	l := &limiter{
		interval: interval,
		window:   interval * int64(perMinute),
		perShard: max(maxKeys/numShards, 1),
		seed:     binary.LittleEndian.Uint64(seed[:]),
	}
	for i := range l.shards {
		l.shards[i].tat = make(map[uint64]int64)
	}
	return l
}

// shardOf picks a key's shard with a seeded mix, so that no client can aim
// many keys at one shard.
func (l *limiter) shardOf(k uint64) *shard {
	h := k ^ l.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return &l.shards[h&(numShards-1)]
}

// allow records a request for key k at now (Unix ns). When the request is
// refused it records nothing and returns how long until one would pass.
func (l *limiter) allow(k uint64, now int64) (ok bool, wait int64) {
	sh := l.shardOf(k)
	sh.mu.Lock()
	if now >= sh.nextSweep {
		sh.sweep(now)
		sh.nextSweep = now + int64(sweepEvery)
	}
	tat, seen := sh.tat[k]
	tat = max(tat, now)
	next := tat + l.interval
	if next-now > l.window {
		sh.mu.Unlock()
		return false, next - l.window - now
	}
	if !seen && len(sh.tat) >= l.perShard {
		sh.makeRoom(now, l.perShard)
	}
	sh.tat[k] = next
	if sh.counts != nil {
		sh.counts[k]++
	}
	sh.mu.Unlock()
	return true, 0
}

// count makes the limiter keep, per key, the requests it allows until the
// next Drain.
func (l *limiter) count() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		if sh.counts == nil {
			sh.counts = make(map[uint64]uint32)
		}
		sh.mu.Unlock()
	}
}

// drain hands f every key's requests allowed since the last drain, and
// forgets them. f runs with the key's shard locked: it must not call back.
func (l *limiter) drain(f func(key uint64, n uint32)) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, n := range sh.counts {
			f(k, n)
		}
		clear(sh.counts)
		sh.mu.Unlock()
	}
}

// charge records n requests of key k made at another replica, as if this
// one had allowed them at now: a GCRA state is a time, so they push the
// key's TAT on by n intervals. Replicas learn of one another's requests a
// moment late, so together they may allow a few more than the limit; the
// TAT may then run past the window, and the client is refused until its
// requests are back within the limit. It never runs more than two windows
// ahead: a client owes at most a minute beyond its burst.
func (l *limiter) charge(k uint64, n uint32, now int64) {
	sh := l.shardOf(k)
	sh.mu.Lock()
	tat, seen := sh.tat[k]
	tat = min(max(tat, now)+int64(n)*l.interval, now+2*l.window)
	if !seen && len(sh.tat) >= l.perShard {
		sh.makeRoom(now, l.perShard)
	}
	sh.tat[k] = tat
	sh.mu.Unlock()
}

// sweep deletes every idle key.
func (sh *shard) sweep(now int64) {
	for k, tat := range sh.tat {
		if tat <= now {
			delete(sh.tat, k)
		}
	}
}

// makeRoom brings a full shard below limit keys.
func (sh *shard) makeRoom(now int64, limit int) {
	if now-sh.lastForce >= int64(sweepGap) {
		sh.lastForce = now
		sh.sweep(now)
	}
	for k := range sh.tat {
		if len(sh.tat) < limit {
			break
		}
		delete(sh.tat, k) // map order is unspecified: an arbitrary key
	}
}

// len returns how many keys the limiter holds.
func (l *limiter) len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.tat)
		sh.mu.Unlock()
	}
	return n
}
