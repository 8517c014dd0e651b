package poller

import (
	"math"
	"sync"
	"time"
)

// spendClass groups venue calls whose share of the budget is capped together.
type spendClass int

const (
	classBulk    spendClass = iota // catalog, stats, quotes
	classBook                      // per-pair books
	classTrades                    // per-pair trades
	classRefresh                   // deeper snapshots under local books in sequence
	numClasses
)

// parentOf is the class whose share a class's spending also counts
// towards: a refresh is a book read, held to the book share with the
// snapshots that sync books (which come first) as well as to its own.
var parentOf = [numClasses]spendClass{
	classBulk:    classBulk,
	classBook:    classBook,
	classTrades:  classTrades,
	classRefresh: classBook,
}

// budget holds the venue weight the poller may spend: at most limit in any
// 60-second window, and for each class at most the cap its caller passes.
// A sliding window rather than a token bucket, because a bucket lets a full
// bucket plus a minute of refill through in one minute, twice the limit,
// while the venue counts per minute.
type budget struct {
	mu      sync.Mutex
	limit   int // weight allowed per window; 0: unlimited
	window  time.Duration
	total   int
	byClass [numClasses]int
	entries []spend // the calls of the last window, oldest first
}

type spend struct {
	at     time.Time
	weight int
	class  spendClass
}

func newBudget() *budget { return &budget{window: time.Minute} }

// setLimit changes the weight allowed per window; 0 means unlimited.
func (b *budget) setLimit(limit int) {
	b.mu.Lock()
	b.limit = max(limit, 0)
	b.mu.Unlock()
}

// Limit returns the weight allowed per window; 0 means unlimited.
func (b *budget) Limit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

func (b *budget) expire(now time.Time) {
	cut := now.Add(-b.window)
	i := 0
	for i < len(b.entries) && !b.entries[i].at.After(cut) {
		e := b.entries[i]
		b.total -= e.weight
		b.byClass[e.class] -= e.weight
		if p := parentOf[e.class]; p != e.class {
			b.byClass[p] -= e.weight
		}
		i++
	}
	if i > 0 {
		b.entries = append(b.entries[:0], b.entries[i:]...)
	}
}

func (b *budget) fits(weight int, class spendClass, classCap int) bool {
	return b.total+weight <= b.limit && b.byClass[class]+weight <= classCap
}

// take spends weight at now if the window's total stays within the limit and
// the class's spend within classCap. It reports whether the weight was spent.
func (b *budget) take(now time.Time, weight int, class spendClass, classCap int) bool {
	return b.takeWithin(now, weight, class, classCap, math.MaxInt)
}

// takeWithin is take for a class that counts towards its parent's share as
// well as its own (see parentOf): the weight must fit classCap and, with
// everything the parent's share holds, parentCap.
func (b *budget) takeWithin(now time.Time, weight int, class spendClass, classCap, parentCap int) bool {
	if weight <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		return true
	}
	b.expire(now)
	if !b.fits(weight, class, classCap) || b.byClass[parentOf[class]]+weight > parentCap {
		return false
	}
	b.add(now, weight, class)
	return true
}

func (b *budget) add(now time.Time, weight int, class spendClass) {
	b.entries = append(b.entries, spend{now, weight, class})
	b.total += weight
	b.byClass[class] += weight
	if p := parentOf[class]; p != class {
		b.byClass[p] += weight
	}
}

// freeAt returns the earliest time at which take could succeed if nothing
// else spends, or the zero time if it never can.
func (b *budget) freeAt(now time.Time, weight int, class spendClass, classCap int) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 || weight <= 0 {
		return now
	}
	b.expire(now)
	if weight > b.limit || weight > classCap {
		return time.Time{}
	}
	total, own := b.total, b.byClass[class]
	for _, e := range b.entries {
		if total+weight <= b.limit && own+weight <= classCap {
			break
		}
		total -= e.weight
		if e.class == class || parentOf[e.class] == class {
			own -= e.weight
		}
		now = e.at.Add(b.window)
	}
	return now
}

// Spent returns the weight spent in the window ending at now.
func (b *budget) Spent(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	return b.total
}

// observe reconciles the budget with the weight the venue says this client
// has used in its current minute. Weight the venue counted that the budget
// did not (another process on the same address, calls cut off mid-flight) is
// recorded as spent now, so the poller slows down instead of overrunning.
func (b *budget) observe(now time.Time, used int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		return
	}
	b.expire(now)
	if extra := used - b.total; extra > 0 {
		b.add(now, extra, classBulk)
	}
}
