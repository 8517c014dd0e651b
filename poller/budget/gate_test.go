package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

func TestBackoffGrowsExponentiallyToACap(t *testing.T) {
	b := NewGate()
	b.steps.Rand = func(n int64) int64 { return n } // no jitter: the whole step
	now := time.Unix(0, 0)
	var got []time.Duration
	for range 9 {
		now = now.Add(time.Minute) // each failure is of a call started after the last pause
		got = append(got, b.Record(now, now, &venue.StatusError{Status: 503}))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pauses = %v, want %v", got, want)
		}
	}
	b.Record(now, now, nil)
	now = now.Add(time.Minute)
	if d := b.Record(now, now, errors.New("connection reset")); d != 500*time.Millisecond {
		t.Fatalf("first pause after a success = %s, want 500ms", d)
	}
}

// Reads in flight together all fail when the venue goes down; only the first
// failure is news. The next step of the back-off needs a call that started
// after the pause began.
func TestBackoffCountsConcurrentFailuresOnce(t *testing.T) {
	b := NewGate()
	b.steps.Rand = func(n int64) int64 { return n } // no jitter: the whole step
	start := time.Unix(0, 0)
	end := start.Add(100 * time.Millisecond)
	if d := b.Record(start, end, &venue.StatusError{Status: 502}); d != 500*time.Millisecond {
		t.Fatalf("first failure paused %s, want 500ms", d)
	}
	for i := range 7 {
		if d := b.Record(start, end.Add(time.Duration(i)*time.Millisecond), &venue.StatusError{Status: 502}); d != 0 {
			t.Fatalf("in-flight failure %d paused %s, want nothing new", i+2, d)
		}
	}
	later := end.Add(time.Second)
	if d := b.Record(later, later, &venue.StatusError{Status: 502}); d != time.Second {
		t.Fatalf("the next failure after the pause paused %s, want the second step, 1s", d)
	}
}

func TestBackoffByVenueAnswer(t *testing.T) {
	now := time.Unix(0, 0)
	for _, tc := range []struct {
		name      string
		err       error
		pause     time.Duration
		permanent bool
	}{
		{"403 firewall", &venue.StatusError{Status: 403}, 5 * time.Minute, false},
		{"451 region", &venue.StatusError{Status: 451}, restrictedPause, true},
		{"408 timeout", &venue.StatusError{Status: 408}, backoffBase, false},
		{"transport", context.DeadlineExceeded, backoffBase, false},
		{"400 bad symbol", &venue.StatusError{Status: 400}, 0, false},
		{"bad data", venue.ErrBadData, 0, false},
		{"our cancel", context.Canceled, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewGate()
			b.steps.Rand = func(n int64) int64 { return n } // no jitter: the whole step
			if d := b.Record(now, now, tc.err); d != tc.pause {
				t.Fatalf("pause = %s, want %s", d, tc.pause)
			}
			if got := b.Permanent() != ""; got != tc.permanent {
				t.Fatalf("permanent = %v, want %v", got, tc.permanent)
			}
			if err := b.Check(now.Add(tc.pause)); err != nil {
				t.Fatalf("still paused when the pause ends: %v", err)
			}
		})
	}
}

func TestBackoffLetsOneProbeASecondThroughATransientPause(t *testing.T) {
	b := NewGate()
	b.steps.Rand = func(n int64) int64 { return n } // no jitter: the whole step
	now := time.Unix(0, 0)
	for range 8 { // a long outage: the pause is at its 30 s cap
		now = now.Add(time.Minute)
		b.Record(now, now, &venue.StatusError{Status: 503})
	}
	if err := b.Check(now.Add(500 * time.Millisecond)); err == nil {
		t.Fatal("a call passed half a second into the pause")
	}
	probe := now.Add(time.Second)
	if err := b.Check(probe); err != nil {
		t.Fatalf("no probe a second into the pause: %v", err)
	}
	if err := b.Check(probe); err == nil {
		t.Fatal("a second call passed with the probe")
	}
	b.Record(probe, probe.Add(50*time.Millisecond), nil)
	if err := b.Check(probe.Add(60 * time.Millisecond)); err != nil {
		t.Fatalf("still paused after the probe succeeded: %v", err)
	}
}

func TestBackoffProbesNeverCutTheVenuesOwnPause(t *testing.T) {
	for _, status := range []int{429, 418, 403, 451} {
		b := NewGate()
		now := time.Unix(0, 0)
		pause := b.Record(now, now, &venue.StatusError{Status: status, RetryAfter: 30 * time.Second})
		for at := time.Second; at < pause; at += time.Second {
			if err := b.Check(now.Add(at)); err == nil {
				t.Fatalf("%d: a call passed %s into a %s pause the venue ordered", status, at, pause)
			}
		}
	}
}
