package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"marketfeed/internal/venuetruth"
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

func TestMostInAMinuteSlidesOverEveryTime(t *testing.T) {
	// Ten at 0 s, one a second from 1 s to 59 s, ten at 60 s and at 61 s:
	// the minute from 1 s to 61 s holds 59 + 20.
	var times []time.Duration
	for range 10 {
		times = append(times, 0)
	}
	for i := 1; i < 60; i++ {
		times = append(times, time.Duration(i)*time.Second)
	}
	for _, at := range []time.Duration{60 * time.Second, 61 * time.Second} {
		for range 10 {
			times = append(times, at)
		}
	}
	if got := mostInAMinute(times); got != 79 {
		t.Fatalf("most in a minute %d, want 79", got)
	}
	if mostInAMinute(nil) != 0 {
		t.Fatal("most of nothing is not 0")
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

func TestBucketQuantilesAreTheBucketsTheyFallIn(t *testing.T) {
	// 324,597 values, as a follower of the benchmark run counted them.
	got := []bucket{{0.001, 7386}, {0.0025, 35530}, {0.005, 87485}, {0.01, 160526}, {0.025, 262991},
		{0.05, 308374}, {0.1, 322219}, {0.25, 324597}, {0.5, 324597}, {math.Inf(1), 324597}}
	p50, p99, n := bucketQuantiles(got)
	if p50 != 0.025 || p99 != 0.1 || n != 324597 {
		t.Fatalf("p50 %v p99 %v n %v; want 0.025, 0.1, 324597", p50, p99, n)
	}
	if _, _, n := bucketQuantiles(nil); n != 0 {
		t.Fatal("no buckets counted values")
	}
	if s := within(got[:3]); s != "within 0.001s 8.4 %, within 0.0025s 40.6 %, within 0.005s 100.0 %" {
		t.Fatalf("within: %q", s)
	}
}

// A round reads every pair's book and trades and both contract lists once,
// and counts every answer by status; the books' ages come from their
// timestamps, and the books sampled are judged against the venue's: a side
// shorter than the venue's is not equal.
func TestSweepRoundReadsEveryRoute(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.RequestURI()]++
		mu.Unlock()
		switch r.URL.Path {
		case "/api/public/orderbook":
			fmt.Fprintf(w, `{"ticker_id":%q,"timestamp":%d,"bids":[],"asks":[]}`, r.URL.Query().Get("ticker_id"), time.Now().UnixMilli())
		case "/api/public/contract_specs":
			w.WriteHeader(http.StatusBadGateway)
		case "/_control/book": // the venue: ETH has a level the served book lacks
			levels := ""
			if r.URL.Query().Get("symbol") == "ETHUSDT" {
				levels = `["3000.1","2"]`
			}
			fmt.Fprintf(w, `{"lastUpdateId":9,"bids":[%s],"asks":[]}`, levels)
		default:
			fmt.Fprint(w, `[]`)
		}
	}))
	defer srv.Close()
	c := client{http: srv.Client()}
	samples := venuetruth.NewSampler(1)
	samples.SetPhase("sweep")
	got := sweepOnce(context.Background(), c, srv.URL, []string{"BTC_USDT", "ETH_USDT"}, samples)
	want := map[string]int{
		"/api/public/contracts": 1, "/api/public/contract_specs": 1,
		"/api/public/orderbook?ticker_id=BTC_USDT": 1, "/api/public/trades?ticker_id=BTC_USDT": 1,
		"/api/public/orderbook?ticker_id=ETH_USDT": 1, "/api/public/trades?ticker_id=ETH_USDT": 1,
	}
	if !maps.Equal(seen, want) {
		t.Errorf("a round read %v, want %v", seen, want)
	}
	if got.statuses[200] != 5 || got.statuses[502] != 1 || len(got.ages) != 2 {
		t.Errorf("a round counted %v with %d book ages, want 5 200s, one 502 and 2 ages", got.statuses, len(got.ages))
	}
	got.truth, got.judged = samples.Judge(context.Background(), venuetruth.NewJudge(srv.URL, srv.Client()), bookDepth)["sweep"], true
	if !strings.HasSuffix(got.String(), "books equal to the venue 1 / 2 (1 short)") {
		t.Errorf("round %q, want 1 of 2 books equal to the venue's, 1 short", got)
	}
}
