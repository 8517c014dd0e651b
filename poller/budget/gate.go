package budget

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"marketfeed/internal/backoff"
	"marketfeed/poller/venue"
)

// Pauses the venue's answers impose when they do not say how long.
const (
	defaultRateLimitPause = 60 * time.Second // 429 or 418 without Retry-After
	defaultForbiddenPause = 5 * time.Minute  // 403: the venue's firewall
	restrictedPause       = 15 * time.Minute // 451: retried rarely in case it lifts
	backoffBase           = 500 * time.Millisecond
	backoffCap            = 30 * time.Second
	// ProbeEvery is how often one call may pass during a transient pause to
	// learn whether the venue has healed: it bounds both the load of an
	// outage (a call a second) and the time to recover after it.
	ProbeEvery = time.Second
)

// PauseKind says why calls were paused, for metrics.
type PauseKind int

// The reasons for a pause.
const (
	PauseRateLimit  PauseKind = iota // 429 or 418
	PauseForbidden                   // 403
	PauseRestricted                  // 451
	PauseTransient                   // 5xx, 408, timeouts, transport errors
	// NumPauseKinds is the number of kinds, for tables indexed by PauseKind.
	NumPauseKinds
)

var pauseKindNames = [NumPauseKinds]string{"rate_limit", "forbidden", "restricted", "transient"}

// String is the kind's metric label.
func (k PauseKind) String() string { return pauseKindNames[k] }

// Gate is the venue-wide gate: after a rate-limit answer every call waits
// for the venue's Retry-After, and after repeated transient failures calls
// space out exponentially with jitter.
type Gate struct {
	mu         sync.Mutex
	until      time.Time
	pausedAt   time.Time // when the pause in force (or the last one) began
	backingOff bool      // the pause in force is a back-off, not the venue's order
	probed     time.Time // when the last probe passed
	reason     string
	failures   int    // consecutive transient failures
	permanent  string // why the venue refuses us for good (451), until a call succeeds
	pauses     int    // pauses started, for metrics and tests
	byKind     [NumPauseKinds]int
	// steps space transient pauses: half fixed, half random, which spreads
	// the retries of many replicas without ever retrying sooner than half
	// the period.
	steps backoff.Exponential
}

// NewGate returns an open gate.
func NewGate() *Gate {
	return &Gate{steps: backoff.Exponential{Base: backoffBase, Max: backoffCap}}
}

// Check returns venue.ErrPaused, wrapped with the reason, while calls are paused.
// During a back-off after transient failures one call a second passes as a
// probe: without it, a venue that healed one second into a 30 s back-off
// would stay unread, and the feed stale, for the other 29. The venue's own
// orders to stop (429, 418, 403, 451) are obeyed to the end, with no probe.
// Only the call itself may take the probe; callers deciding whether to
// prepare a call ask Blocked instead.
func (b *Gate) Check(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !now.Before(b.until) {
		return nil
	}
	if b.backingOff && now.Sub(b.probed) >= ProbeEvery {
		b.probed = now
		return nil
	}
	return fmt.Errorf("%w for %s: %s", venue.ErrPaused, b.until.Sub(now).Round(time.Millisecond), b.reason)
}

// Blocked reports whether a call made now would be refused, without taking
// the probe.
func (b *Gate) Blocked(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.until) && !(b.backingOff && now.Sub(b.probed) >= ProbeEvery)
}

// Record updates the gate with the outcome of a venue call that started at
// start and ended at now, and returns the pause it started, if any.
//
// A transient failure of a call that was already in flight when an earlier
// failure paused calls says nothing new about the venue: counting it would
// let one outage met by eight parallel reads jump the back-off eight steps
// at once, straight to its cap.
func (b *Gate) Record(start, now time.Time, err error) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.failures = 0
		b.permanent = ""
		if b.backingOff && now.Before(b.until) {
			b.until = now // a probe got through: the venue has healed
		}
		return 0
	}
	var pause time.Duration
	var reason string
	var kind PauseKind
	var se *venue.StatusError
	errors.As(err, &se)
	switch venue.OutcomeOf(err) {
	case venue.OutcomeRateLimited:
		pause = se.RetryAfter
		if pause <= 0 {
			pause = defaultRateLimitPause
		}
		reason = fmt.Sprintf("venue rate limit (%d)", se.Status)
		kind = PauseRateLimit
	case venue.OutcomeForbidden:
		pause = max(se.RetryAfter, defaultForbiddenPause)
		reason = "venue firewall refused us (403)"
		kind = PauseForbidden
	case venue.OutcomeRestricted:
		pause = restrictedPause
		reason = "venue refuses this region (451)"
		kind = PauseRestricted
		b.permanent = reason
	case venue.OutcomeServerError, venue.OutcomeTimeout, venue.OutcomeUnreachable:
		if start.Before(b.pausedAt) {
			return 0
		}
		reason = "venue unreachable or too slow"
		if se != nil {
			reason = fmt.Sprintf("venue error %d", se.Status)
		}
		b.failures++
		pause = b.steps.Step(b.failures - 1)
		kind = PauseTransient
	default:
		// We stopped the call ourselves, the venue refused this request
		// only (400 unknown symbol), or its data was unusable for this
		// read only: nothing to pause.
		return 0
	}
	if until := now.Add(pause); until.After(b.until) {
		b.until = until
		b.pausedAt = now
		b.backingOff = kind == PauseTransient
		b.probed = now
		b.reason = reason
		b.pauses++
		b.byKind[kind]++
	}
	return pause
}

// Permanent returns why the venue refuses us for good, or "".
func (b *Gate) Permanent() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.permanent
}

// PausesOf returns how many pauses of one kind have started.
func (b *Gate) PausesOf(k PauseKind) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKind[k]
}

// Paused reports whether calls are paused at now.
func (b *Gate) Paused(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.until)
}

// Pauses returns how many pauses have started.
func (b *Gate) Pauses() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pauses
}
