// Package backoff is the one jittered exponential back-off: the venue gate's
// pauses after transient failures, the market streams' reconnects and a
// stream-fed pair's failed reads all space out with it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential doubles a pause from Base up to Max, with "equal jitter": each
// pause is between half and all of its step, so that clients that failed
// together do not come back together, and none retries sooner than half the
// step.
type Exponential struct {
	Base, Max time.Duration
	// Rand returns a value in [0, n]; nil: math/rand/v2. Tests set it.
	Rand func(n int64) int64
}

// Step returns the pause after the n-th consecutive failure, counting from
// 0: min(Max, Base<<n) with jitter.
func (e Exponential) Step(n int) time.Duration {
	d := e.Max
	if n < 0 {
		n = 0
	}
	// Base<<n overflows long before n reaches 62; once past Max the step
	// stays there.
	if n < 62 && e.Base > 0 && e.Base <= e.Max>>n {
		d = e.Base << n
	}
	return e.Jitter(d)
}

// Jitter returns a pause between half and all of d.
func (e Exponential) Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	r := e.Rand
	if r == nil {
		r = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	return d/2 + time.Duration(r(int64(d/2)))
}

// Sleep waits for d, or until ctx is done, whose error it then returns.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retries counts consecutive failures and gives the pause after each.
type Retries struct {
	Exponential
	n int
}

// Next returns the pause after one more failure.
func (r *Retries) Next() time.Duration {
	d := r.Step(r.n)
	r.n++
	return d
}

// Reset starts over after a success.
func (r *Retries) Reset() { r.n = 0 }
