// Package budget decides who may spend how much of the venue's request
// weight, and when calls may be made at all: the Ledger of what was spent in
// the last minute, the one classification of spend (Purpose, each in a
// Class, with what it may borrow and what it leaves as data: purposes), the
// one function that turns the limit, the reserves, the demand and the fixed
// shares into every class's cap (CapsOf, which the ledger applies to the
// plan it is given), and the Gate that pauses calls when the venue says so
// or keeps failing.
package budget

import (
	"math"
	"sync"
	"time"
)

// Class groups venue calls whose share of the budget is capped together.
type Class int

// The classes of spend.
const (
	ClassBulk    Class = iota // catalog, stats, quotes: held only to the limit
	ClassBook                 // per-pair books
	ClassTrades               // per-pair trades
	ClassRefresh              // deeper snapshots under local books in sequence
	ClassProbe                // the reads that prove a quiet book is still current
	// NumClasses is the number of classes, for tables indexed by Class.
	NumClasses
)

// parentOf is the class whose share a class's spending also counts
// towards: a refresh is a book read, held to the book share with the
// snapshots that sync books (which come first) as well as to its own.
var parentOf = [NumClasses]Class{
	ClassBulk:    ClassBulk,
	ClassBook:    ClassBook,
	ClassTrades:  ClassTrades,
	ClassRefresh: ClassBook,
	// A probe has a share of its own outside the book share: a quiet
	// book being served must be proven current within max-stale even
	// while a cold start's syncs spend the whole book share.
	ClassProbe: ClassProbe,
}

// servingReserve is the weight only asks that may borrow it spend, while
// the ledger keeps it (SetServingReserve): part of a class's cap, kept from
// that class's cap and from the window's total; a twenty-fifth of the book
// class's (47 at Binance's limit and the default budget: two refreshes of
// 1000 levels, or four syncs). In a cold start's first minute, requests
// waiting for books not synced yet spent the whole book share within
// seconds, and the window freed nothing until the minute had passed: a book
// being served that ran dry or fell out of sequence meanwhile waited for
// it, answering 502 for most of it.
var servingReserve = struct {
	fraction fraction
	of       Class
}{fraction{1, 25}, ClassBook}

// Ledger holds the venue weight the poller may spend: at most the limit in
// any 60-second window, and for each class at most its cap. A sliding window
// rather than a token bucket, because a bucket lets a full bucket plus a
// minute of refill through in one minute, twice the limit, while the venue
// counts per minute.
//
// Callers ask for weight (Ask) and the ledger decides by the purposes
// table and the caps: it asks its one planner for the plan at every
// decision, so that no caller computes caps of its own.
type Ledger struct {
	// planner returns the plan the caps come from, less the limit, which
	// is the ledger's; nil: every class is held to the limit alone. Called
	// without mu held, since it may ask the ledger.
	planner func() Plan
	mu      sync.Mutex
	limit   int // weight allowed per window; 0: unlimited
	// others is the weight per window that other processes on the same
	// address may spend without it counting against this ledger (see
	// SetOthers).
	others int
	// serving is set when the serving reserve is kept (see
	// SetServingReserve).
	serving bool
	total   int
	byClass [NumClasses]int
	// fromOwn is the window's spend by purpose granted from its own
	// reserve (see Plan.Own); at NumPurposes, none ever is.
	fromOwn [NumPurposes + 1]int
	entries []spend // the calls of the last window, oldest first
}

type spend struct {
	at      time.Time
	weight  int
	class   Class
	purpose Purpose // NumPurposes: none (see add)
	fromOwn bool    // granted from its purpose's own reserve
}

// window is the span the venue counts weight over.
const window = time.Minute

// NewLedger returns an unlimited ledger whose caps come from the plans
// planner returns (nil: every class is held to the limit alone); SetLimit
// gives it the venue's limit.
func NewLedger(planner func() Plan) *Ledger { return &Ledger{planner: planner} }

// SetLimit changes the weight allowed per window; 0 means unlimited.
func (b *Ledger) SetLimit(limit int) {
	b.mu.Lock()
	b.limit = max(limit, 0)
	b.mu.Unlock()
}

// SetServingReserve keeps the serving reserve (see servingReserve) from
// every read but those that may borrow it (Serving ones), or no longer.
// Only a poller with market streams reads at Serving (the books being
// served that are about to stop, see Serving); without them, nothing would
// ever spend the reserve.
func (b *Ledger) SetServingReserve(on bool) {
	b.mu.Lock()
	b.serving = on
	b.mu.Unlock()
}

// SetOthers sets the weight per window the venue may count for other
// processes on the same address without it counting here: their parts of
// one budget shared by several processes (cluster members reading the
// venue alone, each with its share). Beyond it, their weight counts here
// too (see Observe). 0: whatever else the venue counts is spent here.
func (b *Ledger) SetOthers(weight int) {
	b.mu.Lock()
	b.others = max(weight, 0)
	b.mu.Unlock()
}

// Limit returns the weight allowed per window; 0 means unlimited.
func (b *Ledger) Limit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

func (b *Ledger) expire(now time.Time) {
	cut := now.Add(-window)
	i := 0
	for ; i < len(b.entries) && !b.entries[i].at.After(cut); i++ {
		e := &b.entries[i]
		b.count(-e.weight, e.class, e.purpose, e.fromOwn)
	}
	if i > 0 {
		b.entries = append(b.entries[:0], b.entries[i:]...)
	}
}

// Priority is how much of its class's cap a read may spend: what it may
// borrow of the weight kept back (lends), as far as its purpose allows
// (purposes).
type Priority int

// The priorities of reads.
const (
	// Background reads nobody waits for: four fifths of a class that keeps
	// a fifth back for requests (see Caps.Of).
	Background Priority = iota
	// Sync reads every reader of a pair waits for, though no request
	// waits yet (the snapshot that brings a book into sequence): four
	// fifths, and the fifth kept for requests as well once it would
	// otherwise go unused: when the whole fifth is free again within
	// SyncRelease of the read. A cold start then spends the whole budget,
	// and requests that come during it still jump the queue, at once or
	// within SyncRelease.
	Sync
	// Waiting reads keep the pairs requests read current (the REST polls
	// of hot pairs): all of the class's cap but its serving reserve (see
	// servingReserve).
	Waiting
	// Requested reads are what a request waits for right now (a cold
	// load, the sync or backfill of a pair a request waits on): held to
	// the window's limit less the serving reserve, never to a class's
	// cap. The caps split the minute by the demand the last rounds saw,
	// which says nothing of a request that has just come: with eight books
	// polled and no trades read yet, the trades class had no cap at all,
	// and the first request for a pair's trades failed at once with most
	// of the minute unspent.
	Requested
	// Serving reads keep a book that clients are reading from going stale
	// (the refresh of a depleted book, the resync of a served book out of
	// sequence): what a Requested read may spend, and the serving reserve
	// too.
	Serving
	// NumPriorities is the number of priorities, for tables indexed by
	// Priority.
	NumPriorities
)

// reserved is the serving reserve under caps while the ledger keeps it.
func (b *Ledger) reserved(caps Caps) int {
	if !b.serving {
		return 0
	}
	return servingReserve.fraction.of(capped(caps[servingReserve.of]))
}

// SyncRelease is the longest a request waits because Sync reads took the
// part of a class's cap kept back for requests.
const SyncRelease = 15 * time.Second

// Ask is what a caller asks the ledger for: Weight spent on Purpose, at
// Priority.
type Ask struct {
	Purpose  Purpose
	Weight   int
	Priority Priority
}

// Take spends the ask's weight at now if it fits, and reports whether it
// did. It fits if the window's total stays within the limit, less the
// other purposes' own reserves (see Plan.Own) and the serving reserve
// unless the ask may borrow it, or, for a purpose with a reserve of its
// own, less the others' reserves alone while its own holds the ask; if it
// leaves what its purpose leaves (see rule.leaves); and, unless the ask may borrow the
// other classes' shares, if its class's spend stays within the class's
// cap (see withinCaps). The caps are the planner's, asked for now.
func (b *Ledger) Take(now time.Time, a Ask) bool {
	if a.Weight <= 0 {
		return true
	}
	plan := b.plan()
	r := &purposes[a.Purpose]
	may := r.borrows & lends[a.Priority]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		return true
	}
	b.expire(now)
	caps := b.capsLocked(plan)
	// The serving reserve is kept from the window's total as well as from
	// its class's cap: a class's cap is what the limit leaves the bulk
	// calls' plan, which they may have spent. The other purposes' own
	// reserves, as far as they are unspent, are kept from every read. A
	// read that does not fit so is taken from its own purpose's reserve if
	// that holds it: the serving reserve's reads may have spent theirs
	// below it.
	kept := b.keptFrom(plan, a.Purpose)
	serving := 0
	if may&borrowServing == 0 {
		serving = b.reserved(caps)
	}
	fromOwn := false
	if b.total+a.Weight > b.limit-kept-serving {
		if a.Weight > b.unspent(plan, a.Purpose) || b.total+a.Weight > b.limit-kept {
			return false
		}
		fromOwn = true
	}
	if !b.leaves(now, r.leaves, a.Priority, caps, a.Weight) {
		return false
	}
	if may&borrowShares == 0 && !b.withinCaps(now, a.Weight, r.class, caps, may) {
		return false
	}
	b.entries = append(b.entries, spend{now, a.Weight, r.class, a.Purpose, fromOwn})
	b.count(a.Weight, r.class, a.Purpose, fromOwn)
	return true
}

// unspent is what purpose's own reserve holds: its size less the reads it
// granted in the window (reads that fitted without it spend none of it).
func (b *Ledger) unspent(plan Plan, purpose Purpose) int {
	return max(plan.Own[purpose]-b.fromOwn[purpose], 0)
}

// keptFrom is what the own reserves of every purpose but purpose hold
// unspent (NumPurposes: of every purpose).
func (b *Ledger) keptFrom(plan Plan, purpose Purpose) int {
	n := 0
	for pu := range plan.Own {
		if Purpose(pu) != purpose {
			n += b.unspent(plan, Purpose(pu))
		}
	}
	return n
}

// leaves reports whether spending weight at prio at now leaves what l
// keeps.
func (b *Ledger) leaves(now time.Time, l leave, prio Priority, caps Caps, weight int) bool {
	if l.from == fromNothing || prio > l.upto {
		return true
	}
	room := b.limit - l.fraction.of(l.of.in(caps, b.limit))
	if b.total+weight > room {
		return false
	}
	return !l.paced || b.since(now.Add(-window/2))+weight <= room/2
}

// since is the weight spent after from, as this ledger counted it.
func (b *Ledger) since(from time.Time) int {
	n := 0
	for i := len(b.entries) - 1; i >= 0 && b.entries[i].at.After(from); i-- {
		n += b.entries[i].weight
	}
	return n
}

// withinCaps reports whether a read of weight of class that may borrow may
// stays within its class's cap and, for a class that counts towards a
// parent's share as well, within the parent's cap for background reads.
// The class's cap is all of it for a read that may borrow the fifth kept
// for requests, four fifths otherwise, or all of it once the fifth would
// go unused for one that may borrow it then; less the serving reserve,
// for the reserve's class, unless the read may borrow that too.
func (b *Ledger) withinCaps(now time.Time, weight int, class Class, caps Caps, may borrow) bool {
	all := caps.Of(class, true)
	if class == servingReserve.of && may&borrowServing == 0 {
		all -= b.reserved(caps)
	}
	switch own := b.byClass[class] + weight; {
	case own <= min(caps.Of(class, may&borrowFifth != 0), all):
	case may&borrowIdleFifth != 0 && own <= all && b.freeLocked(now, weight, all-caps.Of(class, false), class, all, b.limit).Sub(now) <= SyncRelease:
	default:
		return false
	}
	p := parentOf[class]
	return p == class || b.byClass[p]+weight <= caps.Of(p, false)
}

// plan asks the planner for the plan the caps come from.
func (b *Ledger) plan() Plan {
	if b.planner == nil {
		return Plan{}
	}
	return b.planner()
}

// capsLocked is every class's cap under plan and the ledger's limit.
func (b *Ledger) capsLocked(plan Plan) Caps {
	plan.Limit = b.limit
	return CapsOf(plan)
}

// Caps returns every class's cap as the ledger holds reads to them now.
func (b *Ledger) Caps() Caps {
	plan := b.plan()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capsLocked(plan)
}

// capped is a cap, or 0 for none (math.MaxInt): a share left unspent of a
// class with no cap of its own is none.
func capped(v int) int {
	if v == math.MaxInt {
		return 0
	}
	return v
}

// add records weight of class spent at now, on no purpose (the weight the
// venue counted beyond the ledger's, see Observe).
func (b *Ledger) add(now time.Time, weight int, class Class) {
	b.entries = append(b.entries, spend{now, weight, class, NumPurposes, false})
	b.count(weight, class, NumPurposes, false)
}

// count adds weight (negative when it expires) to the totals it counts
// towards: the window's, its class's and its class's parent's.
func (b *Ledger) count(weight int, class Class, purpose Purpose, fromOwn bool) {
	b.total += weight
	b.byClass[class] += weight
	if fromOwn {
		b.fromOwn[purpose] += weight
	}
	if p := parentOf[class]; p != class {
		b.byClass[p] += weight
	}
}

// FreeAt returns the earliest time at which a Requested Take of weight
// could succeed if nothing else spends, or the zero time if it never can.
func (b *Ledger) FreeAt(now time.Time, weight int) time.Time {
	plan := b.plan()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 || weight <= 0 {
		return now
	}
	b.expire(now)
	limit := b.limit - b.keptFrom(plan, NumPurposes)
	if lends[Requested]&borrowServing == 0 {
		limit -= b.reserved(b.capsLocked(plan))
	}
	if weight > limit {
		return time.Time{}
	}
	return b.freeLocked(now, 0, weight, ClassBulk, math.MaxInt, limit)
}

// freeLocked is the earliest time at which weight fits limit and class's
// classCap again if pending weight is spent at now and nothing after.
func (b *Ledger) freeLocked(now time.Time, pending, weight int, class Class, classCap, limit int) time.Time {
	fits := func(total, own int) bool { return total+weight <= limit && own+weight <= classCap }
	total, own := b.total+pending, b.byClass[class]+pending
	at := now
	for _, e := range b.entries {
		if fits(total, own) {
			return at
		}
		total -= e.weight
		if e.class == class || parentOf[e.class] == class {
			own -= e.weight
		}
		at = e.at.Add(window)
	}
	if fits(total, own) {
		return at
	}
	return now.Add(window) // only once the pending weight expires
}

// Spent returns the weight spent in the window ending at now.
func (b *Ledger) Spent(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	return b.total
}

// Observe reconciles the ledger with the weight the venue says this client
// has used in its current minute. Weight the venue counted that the ledger
// did not (another process on the same address, calls cut off mid-flight),
// past the others' parts (SetOthers), is recorded as spent now, so the
// poller slows down instead of overrunning.
func (b *Ledger) Observe(now time.Time, used int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		return
	}
	b.expire(now)
	if extra := used - b.total - b.others; extra > 0 {
		b.add(now, extra, ClassBulk)
	}
}

// Caps is what each class may spend in a minute; math.MaxInt: no cap of its
// own (only the limit).
type Caps [NumClasses]int

// Unlimited is the caps of a venue without a weight limit.
var Unlimited = Caps{math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt}

// Of is the cap a read of class is held to: all of the class's cap for a
// read a request waits for (or a REST poll of a pair requests keep hot),
// four fifths of it for a background read, so that requests always find
// room. A class that keeps nothing back (heldBack) is all of its cap
// either way: no request waits for its reads.
func (c Caps) Of(class Class, urgent bool) int {
	v := c[class]
	if urgent || v == math.MaxInt || !heldBack[class] {
		return v
	}
	return v * 4 / 5
}

// heldBack says which classes keep a fifth of their cap for requests.
var heldBack = [NumClasses]bool{ClassBook: true, ClassTrades: true}

// Plan is what every class's cap is computed from.
type Plan struct {
	// Limit is the weight a minute the budget allows; 0: unlimited. A
	// ledger puts its own limit here, whatever its planner says.
	Limit int
	// Reserve is the weight a minute held back for the bulk calls.
	Reserve int
	// Demand is the weight a minute each class would spend at full
	// cadence, for the classes that split what the limit leaves after
	// the reserve.
	Demand [NumClasses]float64
	// Split says which classes share what the limit leaves by demand.
	Split [NumClasses]bool
	// Share is a fixed cap for a class that has one (refreshes); 0: none.
	Share [NumClasses]int
	// Own is the weight kept for a purpose's reads from every read of
	// another purpose, whatever its priority (see purposes): a read or
	// two, so that what it stands for is never refused for other reads'
	// sake; 0: none. A read of the purpose that does not fit otherwise
	// spends it, and it is whole again once that read leaves the window.
	Own [NumPurposes]int
}

// CapsOf returns every class's cap. The classes that split share what the
// limit leaves after the reserve: when their demand fits, each may use all
// the others do not need; when it does not, the rest is split in proportion
// to demand, so that none starves another. A class with a fixed share is
// held to it; the bulk class only to the limit.
func CapsOf(p Plan) Caps {
	if p.Limit == 0 {
		return Unlimited
	}
	caps := Unlimited
	left := max(p.Limit-p.Reserve, 0)
	var sum float64
	n := 0
	for c := range NumClasses {
		if p.Split[c] {
			sum += p.Demand[c]
			n++
		}
	}
	given := 0
	for c := range NumClasses {
		switch {
		case p.Share[c] > 0:
			caps[c] = p.Share[c]
		case !p.Split[c]:
		case sum <= float64(left):
			caps[c] = left - int(sum-p.Demand[c])
		default:
			n--
			if n == 0 {
				caps[c] = left - given // the last takes the rounding
			} else {
				caps[c] = int(float64(left) * p.Demand[c] / sum)
				given += caps[c]
			}
		}
	}
	return caps
}
