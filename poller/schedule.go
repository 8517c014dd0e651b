package poller

import (
	"time"

	"github.com/robfig/cron/v3"
)

// Every is a cron.Schedule that fires every d, aligned to multiples of d since
// the Unix epoch. cron/v3's own "@every" rounds any period below a second up
// to one second, which would make the 350 ms book cadence 1 s; this keeps the
// period exact. Alignment makes the tick times predictable, which the poller
// uses to space reads of one pair by whole periods.
type Every time.Duration

var _ cron.Schedule = Every(0)

// Next returns the first multiple of the period strictly after t.
func (e Every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	if d <= 0 {
		d = time.Second
	}
	return time.Unix(0, alignDown(t, d)+int64(d)).In(t.Location())
}

// alignDown returns the last multiple of d since the Unix epoch at or before
// t, in Unix nanoseconds. time.Time.Truncate would align to year 1 instead,
// which for periods that do not divide a day puts ticks at odd instants.
func alignDown(t time.Time, d time.Duration) int64 {
	ns := t.UnixNano()
	r := ns % int64(d)
	if r < 0 {
		r += int64(d)
	}
	return ns - r
}
