package binance

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// This file decides when each connection is replaced: on its slot's turn
// of a rotation period short enough that no connection outlives MaxAge, or
// the age at which the venue was seen to close connections on its own
// schedule when that is shorter (a proxy in front of it, or a venue whose
// limit is shorter than configured). A replacement is subscribed before
// the old connection goes (see slot.replace and slot.handOver), so a
// connection replaced in time costs nothing; one the venue closes first is
// lost for as long as its redial takes, and with two lines costs nothing
// either unless the other line's connection is closed at the same moment.
// The turns are what keeps that from happening: the two lines' turns are
// half a period apart.

// Bounds of what the venue's closes teach. Variables, not constants, only
// so that documentation and tests can name them.
var (
	// minCloseAge is the youngest age at which a connection the venue
	// closes in order is taken for one closed on the venue's schedule. A
	// younger close is a refusal (a venue that closes right after the
	// subscription): it is not learned from, and the slot backs off as
	// after any failure, so that a venue that keeps doing it meets no storm
	// of connections.
	minCloseAge = 2 * time.Second
	// forgetCloses is how long what the venue's closes taught is kept after
	// the last of them. Replaced in time, connections are closed by the
	// venue no more, so this is also how long a closing age is trusted
	// without being seen again: then the next close, on a connection left
	// to reach it, teaches it anew, and a close that was a hiccup (a proxy
	// restarting) shortens the rotation for this long only.
	forgetCloses = 10 * time.Minute
)

// recentCloses bounds the closes kept: a venue that closes every
// connection young keeps adding them.
const recentCloses = 64

// closeAges learns the age at which the venue closes connections from the
// closes it made in order (a close frame, 1000 or 1001) at least
// minCloseAge and less than MaxAge after they opened.
type closeAges struct {
	mu   sync.Mutex
	seen []seenClose // oldest first
}

// seenClose is one connection the venue closed, when and at what age.
type seenClose struct {
	at  time.Time
	age time.Duration
}

// add records a close at age, seen at now.
func (c *closeAges) add(now time.Time, age time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == recentCloses {
		c.seen = slices.Delete(c.seen, 0, 1)
	}
	c.seen = append(c.seen, seenClose{at: now, age: age})
}

// learned returns the venue's closing age as of now: the youngest age on
// which two closes of the last forgetCloses agree, within a tenth of it;
// zero when no two do. A single close proves no schedule: a venue
// restarting, or a proxy dropping one connection, closes one at any age,
// while a schedule closes every connection at the same age. The closes of
// connections opened together at a cold start, or after a cut, agree at
// their first close; the closes of staggered connections come one by one
// and agree at the second.
func (c *closeAges) learned(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = slices.DeleteFunc(c.seen, func(s seenClose) bool { return now.Sub(s.at) >= forgetCloses })
	ages := make([]time.Duration, len(c.seen))
	for i, s := range c.seen {
		ages[i] = s.age
	}
	slices.Sort(ages)
	for i := 0; i+1 < len(ages); i++ {
		if ages[i+1]-ages[i] <= ages[i]/10 {
			return ages[i]
		}
	}
	return 0
}

// closedInOrder reports whether the venue closed a connection with a close
// frame that says it went away or was done with it: how a venue ends a
// connection on its schedule. A connection cut without a close frame (a
// network failure, a venue's drop) or closed for its rules, its load or an
// error teaches nothing of the venue's schedule.
func closedInOrder(err error) bool {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return true
	}
	return false
}

// Each connection lives at most limit: MaxAge, or four fifths of the
// venue's closing age once learned, which leaves a fifth of it for a
// replacement that fails and is tried again. The rotation period is four
// fifths of the limit, and a connection is replaced at its slot's first
// turn at least a quarter period after it opened: so it lives at most a
// quarter and a whole period, the limit, and a full period (64 % of the
// venue's closing age) from turn to turn.
const (
	limitOfCloseAge = 0.8
	periodOfLimit   = 0.8
)

// rotationLimit is the oldest a connection may grow: maxAge, or a share of
// the venue's closing age when that is known (closeAge > 0) and shorter.
func rotationLimit(maxAge, closeAge time.Duration) time.Duration {
	if closeAge <= 0 {
		return maxAge
	}
	return min(maxAge, time.Duration(limitOfCloseAge*float64(closeAge)))
}

// slotPhase is where in the rotation period the turns of a line's k-th
// slot fall, as a fraction of it: line A's slots within the first quarter,
// line B's half a period later, each line's spread by the golden-ratio
// sequence, which never repeats and spreads any number of slots evenly. A
// line A slot and a line B slot are thus never due within a quarter
// period of each other, so that a venue that closes connections at an age
// shorter than learned closes the two lines' connections at different
// times.
func slotPhase(line, k int) float64 {
	_, g := math.Modf(float64(k) * (math.Sqrt(5) - 1) / 2)
	return float64(line)/2 + g/4
}

// turn returns when a connection opened at opened is replaced: the first
// of its slot's turns, epoch + (phase + m) × period for a whole m, at
// least a quarter period after it opened. A replacement made at a turn is
// replaced at the next, a period later; a connection opened at another
// time (after a close) falls back into its slot's turns at once.
func turn(epoch, opened time.Time, period time.Duration, phase float64) time.Time {
	first := epoch.Add(time.Duration(phase * float64(period)))
	d := opened.Add(period / 4).Sub(first)
	m := d / period // rounded towards zero: one more when d is positive and not a whole period
	if d > m*period {
		m++
	}
	return first.Add(m * period)
}

// maxHandover bounds how long a replaced connection is kept beside its
// replacement while it reads what the venue had sent it (see
// slot.handOver). Should the venue close it meanwhile, at the closing age
// learned, nothing more is lost than if it had been closed. A variable
// only so that documentation and tests can name it.
var maxHandover = time.Second

// period is the rotation period as of now.
func (s *Streams) period(now time.Time) time.Duration {
	return max(time.Duration(periodOfLimit*float64(rotationLimit(s.maxAge, s.closeAge(now)))), time.Millisecond)
}

// replaceAt returns when sl's connection opened at opened is to be
// replaced, as of now.
func (s *Streams) replaceAt(sl *slot, opened, now time.Time) time.Time {
	return turn(s.epoch, opened, s.period(now), sl.phase)
}

// closeAge returns the venue's closing age as learned at now (zero: none).
// When that changed, it says so in the log, once, and has every slot
// reschedule its connection's replacement.
func (s *Streams) closeAge(now time.Time) time.Duration {
	age := s.closes.learned(now)
	old := time.Duration(s.learnedAge.Swap(int64(age)))
	if old == age {
		return age
	}
	limit := rotationLimit(s.maxAge, age)
	if age > 0 {
		s.log.Info("the venue closes market stream connections at this age; each is replaced before it",
			"close_age", age, "replaced_within", limit)
	} else {
		s.log.Info("the venue no longer seen closing market stream connections early; each is replaced within the configured age again",
			"forgotten", old, "replaced_within", limit)
	}
	s.mu.Lock()
	for _, l := range s.lines {
		for _, g := range l.groups {
			for _, sl := range g {
				sl.poke()
			}
		}
	}
	s.mu.Unlock()
	return age
}

// closedBy takes in c, whose reader has ended without the slot closing it,
// and reports whether the venue closed it on its schedule: in order, at
// least minCloseAge after it opened. A close younger than MaxAge is learned
// from (see closeAges); either way the slot dials again at once, as after
// a planned replacement that came too late.
func (s *Streams) closedBy(c *wsConn) (scheduled bool) {
	lived := c.ended.Sub(c.opened)
	if c.broken.Load() || !closedInOrder(c.err) || lived < minCloseAge {
		return false
	}
	if lived < s.maxAge {
		s.closes.add(c.ended, lived)
		s.closeAge(time.Now())
	}
	return true
}
