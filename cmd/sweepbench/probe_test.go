package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The cold-start probe counts a book that answered and later failed (a
// status other than 200, or a 200 that is not a book), and one that answered
// and later served a book older than it allows, as relapses; only the last
// is stale. A book that has not answered yet may fail as often as it likes.
func TestProbeBooksCountsRelapsesAndStaleBooks(t *testing.T) {
	// Each pair's answers, round by round; the last repeats.
	const fresh, stale, fails, garbage = "fresh", "stale", "fails", "garbage"
	script := map[string][]string{
		"A_USDT": {fresh, stale, fresh},          // answers, then a book 10 s old
		"B_USDT": {fails, fresh, fails, fresh},   // answers in round 2, fails in round 3
		"C_USDT": {fails, fails, fails, fresh},   // answers in round 4: the probe's end
		"D_USDT": {fails, fails, fresh, garbage}, // answers in round 3, then a 200 that is no book
	}
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("ticker_id")
		mu.Lock()
		answers := script[id]
		answer := answers[min(asked[id], len(answers)-1)]
		asked[id]++
		mu.Unlock()
		at := time.Now()
		switch answer {
		case fails:
			w.WriteHeader(http.StatusBadGateway)
			return
		case stale:
			at = at.Add(-10 * time.Second)
		case garbage:
			fmt.Fprint(w, "<html>")
			return
		}
		fmt.Fprintf(w, `{"ticker_id":%q,"timestamp":%d,"bids":[["1","1"]],"asks":[["2","1"]]}`, id, at.UnixMilli())
	}))
	defer srv.Close()

	pairs := []string{"A_USDT", "B_USDT", "C_USDT", "D_USDT"}
	got, err := probeBooks(t.Context(), srv.URL, pairs, len(pairs), time.Millisecond, time.Now().Add(time.Minute),
		2*time.Second, func([]byte) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if got.pending != 0 || got.relapsed != 3 || got.relapses != 3 || got.stale != 1 || !slices.Equal(got.relapsedIDs, []string{"A_USDT", "B_USDT", "D_USDT"}) {
		t.Fatalf("probe = %+v, want every pair answered, A, B and D relapsed once each, only A's relapse stale", got)
	}
	for i, want := range []string{"A_USDT: a book 10", "B_USDT: 502 at ", "D_USDT: 200 with no book at "} {
		if i >= len(got.relapsedHow) || !strings.HasPrefix(got.relapsedHow[i], want) {
			t.Fatalf("relapses told as %q, want each to begin %q in turn", got.relapsedHow, want)
		}
	}
	if asked["C_USDT"] != 4 {
		t.Fatalf("C asked %d times, want 4: the probe ends when the last pair answers", asked["C_USDT"])
	}
}
