package sim

import "sync"

// Aggregate trade ids are consecutive, as the venue's are: a client tells a
// missed trade by an id skipped. A trade's id is the market's base plus the
// trades of every earlier heartbeat. Counting from the start of time is
// not possible, so ids count from the start of an era of eraBuckets
// heartbeats (about 1.8 hours), each era starting eraBuckets ×
// maxBucketTrades past the previous one: ids skip once an era, and a client
// reconnecting across that instant sees a gap where none was.
const (
	blockBuckets = 256
	eraBlocks    = 256
	eraBuckets   = blockBuckets * eraBlocks
)

// tradeIDs is a market's memory of where its trade ids stand: the trades
// before each block of its latest eras, and the last heartbeat whose first
// id was asked for, which the next heartbeat's follows from.
type tradeIDs struct {
	mu     sync.Mutex
	eras   [2]eraSums // the two eras last used: the current one and the one a read looks back into
	next   int        // which of eras the next new one replaces
	last   int64      // heartbeat of lastID
	lastID int64      // id of the first trade of heartbeat last; 0: none yet
}

// eraSums is, for one era, the trades in the blocks before each block.
type eraSums struct {
	era    int64
	ok     bool
	before [eraBlocks]int64
}

// tradeCount is how many trades heartbeat b's bucket holds: bucket's count
// without drawing the trades.
func (m *market) tradeCount(b int64) int {
	return m.countOf(stream(m.tradeKey, b))
}

// countOf turns a bucket's draw into its trade count.
func (m *market) countOf(h uint64) int {
	switch r := h & 0xff; {
	case r < m.idle:
		return 0
	case r < m.one:
		return 1
	case r < m.two:
		return 2
	}
	return maxBucketTrades
}

// tradeStart is the id of the first trade of heartbeat b's bucket (the id
// the bucket's first trade has, or would have).
func (m *market) tradeStart(b int64) int64 {
	ids := m.ids
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.lastID != 0 && b == ids.last+1 && floorMod(b, eraBuckets) != 0 {
		ids.lastID += int64(m.tradeCount(ids.last))
		ids.last = b
		return ids.lastID
	}
	era := floorDiv(b, eraBuckets)
	off := b - era*eraBuckets
	block := off / blockBuckets
	id := m.tradeBase + era*eraBuckets*maxBucketTrades + m.eraLocked(era).before[block]
	for x := era*eraBuckets + block*blockBuckets; x < b; x++ {
		id += int64(m.tradeCount(x))
	}
	ids.last, ids.lastID = b, id
	return id
}

// eraLocked returns the block sums of era, computing them on first use.
func (m *market) eraLocked(era int64) *eraSums {
	ids := m.ids
	for i := range ids.eras {
		if e := &ids.eras[i]; e.ok && e.era == era {
			return e
		}
	}
	e := &ids.eras[ids.next]
	ids.next = 1 - ids.next
	e.era, e.ok = era, true
	var sum int64
	start := era * eraBuckets
	for k := range eraBlocks {
		e.before[k] = sum
		for x := start + int64(k)*blockBuckets; x < start+int64(k+1)*blockBuckets; x++ {
			sum += int64(m.tradeCount(x))
		}
	}
	return e
}

// floorMod is a mod b in [0, b), for a negative a too.
func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
