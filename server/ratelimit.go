package server

import (
	"crypto/rand"
	"encoding/binary"
	"math"
	"sync"
	"time"
)

const (
	numShards = 64 // a power of two; spreads lock contention across cores

	// DefaultRateLimitKeys is the default bound on the keys the rate limiter
	// holds.
	DefaultRateLimitKeys = 1 << 20

	// A key's requests are counted in buckets of bucketWidth; it holds
	// spanBuckets of them: the current bucket and the six before it, a span
	// of 60 to 70 s that always covers the last minute.
	bucketWidth = 10 * time.Second
	spanBuckets = 7

	// sweepEvery is how often a shard drops its idle keys in passing. A key
	// is idle once its newest bucket has left the span.
	sweepEvery = 10 * time.Second

	// sweepGap is the least time between two sweeps forced by a full shard,
	// so that a flood of new addresses cannot make every insert a full scan.
	sweepGap = time.Second
)

// rateLimiter is the server's view of a limiter: newLimiter picks the width
// of its counters from the limit.
type rateLimiter interface {
	// allow records a request for key k at now (Unix ns). When the request
	// is refused it records nothing and returns how long until one would
	// pass.
	allow(k uint64, now int64) (ok bool, wait int64)
	// charge records n requests of key k made at another replica, as if
	// this one had allowed them at now.
	charge(k uint64, n uint32, now int64)
	// count makes the limiter keep, per key, the requests it allows until
	// the next drain.
	count()
	// drain hands f every key's requests allowed since the last drain,
	// and forgets them. f runs with the key's shard locked: it must not
	// call back.
	drain(f func(key uint64, n uint32))
	// len returns how many keys the limiter holds.
	len() int
}

// limiter limits each key to its limit in any minute with a sliding window
// kept in buckets: a key holds a counter for each of the last spanBuckets
// buckets of bucketWidth, and a request is allowed while the requests in
// them, the current bucket and the six before it, are fewer than the limit.
// Those buckets span from 60 to 70 s back and always cover the last minute,
// so no 60 s window ever holds more than the limit, and a client may still
// spend its whole allowance at once (an aggregator's round once a minute).
// GCRA keeps one time a key, but gives that only with a minute's burst,
// which lets a new client have twice the limit in its first minute; with a
// small burst it refuses such rounds. The price of the buckets is that a
// request leaves the count up to 10 s after it has left the minute: at
// worst a client gets the limit per 70 s, never more than it per minute.
//
// A key whose buckets have all left the span carries no state (it behaves
// exactly like a key never seen) and is deleted by the sweeps. Memory is
// bounded by a hard cap on keys per shard: at most maxKeys keys in all,
// each an 8-byte key and a 16-byte window (seven 16-bit counters and the
// newest bucket's index) in a Go map, while the limit is at most 65,535 a
// minute. With the map's control bytes and a load between 7/16 and 7/8
// that is at most about 60 bytes a key (52 to 56 measured with the table
// full), so the default of DefaultRateLimitKeys keys stays under 60 MiB
// whatever the number of distinct addresses; a higher limit takes 32-bit
// counters and about 100 bytes a key (96 measured). A full shard first
// sweeps (at most once per sweepGap) and then, if no key is idle, evicts an
// arbitrary key: that key's client gets a fresh allowance, which is the
// least harmful way to stay within the bound while more distinct clients
// are active than the table holds.
type limiter[C counter] struct {
	limit    uint64 // requests allowed in a key's span
	perShard int
	seed     uint64
	shards   [numShards]shard[C]
}

// counter is the width of a bucket's count: 16 bits while the limit fits.
// A count saturates, which no limit it holds can tell from more.
type counter interface{ ~uint16 | ~uint32 }

// window is one key's requests: n[b%spanBuckets] is bucket b's, for the
// buckets from newest-6 to newest. newest is the index of the newest bucket
// written (Unix time / bucketWidth) modulo the counter's range: the sweeps
// keep every key held within a few buckets of now, so the difference is
// never ambiguous (see shard.sweep).
type window[C counter] struct {
	n      [spanBuckets]C
	newest C
}

type shard[C counter] struct {
	mu    sync.Mutex
	keys  map[uint64]window[C]
	swept int64 // Unix ns of the last sweep
	// counts are the requests allowed per key since the last drain, for
	// the other replicas to charge (see drain); nil unless counting. The
	// map is cleared, not replaced, so that it keeps its room and a
	// request allocates nothing once a key was seen.
	counts map[uint64]uint32
	_      [32]byte // 64 bytes a shard: neighbouring locks do not share a cache line
}

// newLimiter returns a limiter allowing perMinute requests in any minute
// per key, all of them at once if need be, holding at most maxKeys keys.
func newLimiter(perMinute, maxKeys int) rateLimiter {
	if perMinute <= math.MaxUint16 {
		return newWindows[uint16](perMinute, maxKeys)
	}
	return newWindows[uint32](min(perMinute, math.MaxUint32), maxKeys)
}

func newWindows[C counter](perMinute, maxKeys int) *limiter[C] {
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails; a zero seed would only make shards predictable
	l := &limiter[C]{
		limit:    uint64(perMinute),
		perShard: max(maxKeys/numShards, 1),
		seed:     binary.LittleEndian.Uint64(seed[:]),
	}
	for i := range l.shards {
		l.shards[i].keys = make(map[uint64]window[C])
	}
	return l
}

// shardOf picks a key's shard with a seeded mix, so that no client can aim
// many keys at one shard.
func (l *limiter[C]) shardOf(k uint64) *shard[C] {
	h := k ^ l.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return &l.shards[h&(numShards-1)]
}

// bucketOf is the index of the bucket holding now: Unix time in units of
// bucketWidth. The window's counter for bucket b is n[b%spanBuckets].
func bucketOf(now int64) uint64 { return uint64(now) / uint64(bucketWidth) }

func (l *limiter[C]) allow(k uint64, now int64) (ok bool, wait int64) {
	b := bucketOf(now)
	sh := l.shardOf(k)
	sh.mu.Lock()
	var w window[C]
	seen := sh.load(k, now, b, &w)
	sum := w.sum()
	if sum >= l.limit {
		sh.mu.Unlock()
		return false, w.wait(now, b, sum-l.limit)
	}
	if !seen && len(sh.keys) >= l.perShard {
		sh.makeRoom(now, l.perShard)
	}
	w.add(b, 1)
	sh.keys[k] = w
	if sh.counts != nil {
		sh.counts[k]++
	}
	sh.mu.Unlock()
	return true, 0
}

// charge counts another replica's requests in the key's current bucket:
// replicas learn of one another's requests within an exchange period, so
// together they may allow a few more than the limit, what a client sends
// in that period; the client is then refused until its requests are back
// within the limit. A request charged leaves the span as one allowed here
// would, so a client owes at most 70 s however much it is charged.
func (l *limiter[C]) charge(k uint64, n uint32, now int64) {
	b := bucketOf(now)
	sh := l.shardOf(k)
	sh.mu.Lock()
	var w window[C]
	seen := sh.load(k, now, b, &w)
	if !seen && len(sh.keys) >= l.perShard {
		sh.makeRoom(now, l.perShard)
	}
	w.add(b, uint64(n))
	sh.keys[k] = w
	sh.mu.Unlock()
}

// load sets *w to key k's window brought to now, in bucket b, and reports
// whether the shard holds the key. It sweeps the shard first when a sweep
// is due, so a key it finds was written a few buckets ago at most.
func (sh *shard[C]) load(k uint64, now int64, b uint64, w *window[C]) bool {
	if now-sh.swept >= int64(sweepEvery) {
		sh.sweep(now)
	}
	var seen bool
	if *w, seen = sh.keys[k]; !seen {
		w.newest = C(b)
		return false
	}
	gap := C(b) - w.newest
	switch {
	case gap > ^C(0)>>1:
		// The clock stepped back: count on in the buckets held.
	case gap >= spanBuckets:
		*w = window[C]{newest: C(b)}
	default:
		for i := range uint64(gap) {
			w.n[(b-i)%spanBuckets] = 0 // a bucket not written since it last left the span
		}
		w.newest = C(b)
	}
	return true
}

// sum is the requests in the window's span.
func (w *window[C]) sum() uint64 {
	var s uint64
	for i := range w.n {
		s += uint64(w.n[i])
	}
	return s
}

// add counts n requests in bucket b.
func (w *window[C]) add(b, n uint64) {
	i := b % spanBuckets
	w.n[i] = C(min(uint64(w.n[i])+n, uint64(^C(0))))
}

// wait returns how long after now, in bucket b, until over requests more
// than are allowed have left the window's span: the oldest bucket leaves
// as the next begins.
func (w *window[C]) wait(now int64, b, over uint64) int64 {
	next := b + 1
	for {
		gone := uint64(w.n[next%spanBuckets]) // bucket next-7's
		if gone > over {
			return int64(next*uint64(bucketWidth)) - now
		}
		over -= gone
		next++
	}
}

// sweep deletes every idle key. The sweep before it ran at sh.swept, and
// every key written since was written before sh.swept+sweepEvery (a later
// write would have swept first), so when that is a whole span ago every
// key is idle; otherwise every key is a few buckets old at most.
func (sh *shard[C]) sweep(now int64) {
	b := bucketOf(now)
	if bucketOf(sh.swept+int64(sweepEvery))+spanBuckets <= b {
		clear(sh.keys)
	} else {
		for k, w := range sh.keys {
			if gap := C(b) - w.newest; gap >= spanBuckets && gap <= ^C(0)>>1 {
				delete(sh.keys, k)
			}
		}
	}
	sh.swept = now
}

// makeRoom brings a full shard below limit keys. It sweeps first, but only
// once the bucket has changed since the last sweep: within one bucket a
// sweep finds no key idle that the last one left (a key goes idle only as
// buckets pass), and a full shard of active clients would otherwise scan
// all its keys every sweepGap for nothing.
func (sh *shard[C]) makeRoom(now int64, limit int) {
	if now-sh.swept >= int64(sweepGap) && bucketOf(now) != bucketOf(sh.swept) {
		sh.sweep(now)
	}
	for k := range sh.keys {
		if len(sh.keys) < limit {
			break
		}
		delete(sh.keys, k) // map order is unspecified: an arbitrary key
	}
}

func (l *limiter[C]) count() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		if sh.counts == nil {
			sh.counts = make(map[uint64]uint32)
		}
		sh.mu.Unlock()
	}
}

func (l *limiter[C]) drain(f func(key uint64, n uint32)) {
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

func (l *limiter[C]) len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}
