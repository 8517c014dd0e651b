package main

import (
	"slices"
	"testing"
	"time"
)

func TestQuantilesAreNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := range 100 {
		ds = append(ds, time.Duration(100-i)*time.Millisecond)
	}
	p50, p99, most := quantiles(ds)
	if p50 != 51*time.Millisecond || p99 != 100*time.Millisecond || most != 100*time.Millisecond {
		t.Fatalf("quantiles of 1..100 ms: %v %v %v", p50, p99, most)
	}
	if a, b, c := quantiles(nil); a != 0 || b != 0 || c != 0 {
		t.Fatal("quantiles of nothing are not zero")
	}
}

func TestSlidingMinutesCountEachWindow(t *testing.T) {
	// One a second for 90 s.
	var times []time.Duration
	for i := range 90 {
		times = append(times, time.Duration(i)*time.Second)
	}
	got := slidingMinutes(times, 90*time.Second, 10*time.Second)
	if want := []int{60, 60, 60, 60}; !slices.Equal(got, want) {
		t.Fatalf("sliding minutes %v, want %v", got, want)
	}
}

func TestShareOf200(t *testing.T) {
	if got := share200(map[int]int{200: 999, 502: 1}); got != 99.9 {
		t.Fatalf("share %v, want 99.9", got)
	}
	if share200(nil) != 0 {
		t.Fatal("share of nothing is not 0")
	}
}
