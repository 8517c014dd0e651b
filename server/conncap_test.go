package server

import (
	"testing"
	"time"
)

// TestDeadlineCoalesced: a deadline asked for is applied by the next read
// or write, slack late at most and never early; one asked for within the
// slack of the one applied costs nothing; an earlier one, or none, is
// applied at once.
func TestDeadlineCoalesced(t *testing.T) {
	const slack = 500 * time.Millisecond
	var applied []time.Time
	set := func(t time.Time) error {
		applied = append(applied, t)
		return nil
	}
	var d deadline
	apply := func(want time.Time, wantApplied ...time.Time) {
		t.Helper()
		applied = nil
		d.want(want)
		if err := d.apply(set, int64(slack)); err != nil {
			t.Fatal(err)
		}
		if len(applied) != len(wantApplied) || (len(applied) == 1 && !applied[0].Equal(wantApplied[0])) {
			t.Errorf("deadline %v: applied %v, want %v", want, applied, wantApplied)
		}
	}
	at := t0.Add(5 * time.Second)
	apply(at, at.Add(slack))                                              // the first: slack late
	apply(at.Add(100 * time.Millisecond))                                 // within the slack: kept
	apply(at.Add(slack))                                                  // at its edge: kept
	apply(at.Add(slack+time.Nanosecond), at.Add(2*slack+time.Nanosecond)) // past it: moved
	apply(at.Add(-time.Second), at.Add(-time.Second+slack))               // earlier: moved back
	apply(time.Time{}, time.Time{})                                       // none: cleared exactly
	apply(time.Time{})                                                    // still none: nothing to do

	// Asked for and not yet applied: only the last one counts.
	applied = nil
	d.want(at)
	d.want(at.Add(time.Hour))
	if err := d.apply(set, int64(slack)); err != nil || len(applied) != 1 || !applied[0].Equal(at.Add(time.Hour+slack)) {
		t.Errorf("two deadlines asked for, then a read: applied %v (%v), want %v", applied, err, at.Add(time.Hour+slack))
	}
}
