package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestStepsDoubleToTheCapWithinTheirJitter(t *testing.T) {
	lo := Exponential{Base: 500 * time.Millisecond, Max: 30 * time.Second, Rand: func(int64) int64 { return 0 }}
	hi := lo
	hi.Rand = func(n int64) int64 { return n }
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := hi.Step(n); got != w {
			t.Errorf("step %d at most %s, want %s", n, got, w)
		}
		if got := lo.Step(n); got != w/2 {
			t.Errorf("step %d at least %s, want %s", n, got, w/2)
		}
	}
	for _, n := range []int{61, 62, 63, 64, 1000} {
		if got := hi.Step(n); got != 30*time.Second {
			t.Errorf("step %d = %s: overflowed past the cap", n, got)
		}
	}
	if got := hi.Step(-1); got != 500*time.Millisecond {
		t.Errorf("step -1 = %s, want the base", got)
	}
}

func TestJitterStaysWithinHalfAndFull(t *testing.T) {
	e := Exponential{Base: time.Second, Max: time.Minute}
	for range 1000 {
		if d := e.Jitter(10 * time.Second); d < 5*time.Second || d > 10*time.Second {
			t.Fatalf("jitter of 10s = %s", d)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Sleep = %v after %s, want nil after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != time.Second {
			t.Fatalf("Sleep = %v after %s, want the context's error after 1s", err, time.Since(start))
		}
	})
}

func TestRetriesGrowUntilReset(t *testing.T) {
	r := Retries{Exponential: Exponential{Base: time.Second, Max: 4 * time.Second, Rand: func(n int64) int64 { return n }}}
	var got []time.Duration
	for range 4 {
		got = append(got, r.Next())
	}
	r.Reset()
	got = append(got, r.Next())
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pauses %v, want %v", got, want)
		}
	}
}
