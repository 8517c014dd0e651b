package venuetruth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func levels(prices ...int) []Level {
	out := make([]Level, len(prices))
	for i, p := range prices {
		out[i] = Level{strconv.Itoa(p), "1.5"}
	}
	return out
}

func TestCompare(t *testing.T) {
	venueBids := levels(100, 99, 98, 97, 96)
	venueAsks := levels(101, 102, 103, 104, 105)
	otherQty := levels(100, 99, 98)
	otherQty[1][1] = "2.5"
	for _, tc := range []struct {
		name       string
		bids, asks []Level
		depth      int
		want       Verdict
	}{
		{"both sides to the depth asked", levels(100, 99, 98), levels(101, 102, 103), 3, Equal},
		{"a short side, an exact prefix", levels(100, 99), levels(101, 102, 103), 3, Short},
		{"a short ask side", levels(100, 99, 98), levels(101), 3, Short},
		{"an empty side where the venue has levels", nil, levels(101, 102, 103), 3, Short},
		{"a different price", levels(100, 99, 97), levels(101, 102, 103), 3, Differs},
		{"a different quantity", otherQty, levels(101, 102, 103), 3, Differs},
		{"a level more than asked", levels(100, 99, 98, 97), levels(101, 102, 103), 3, Differs},
		{"a level the venue does not have", levels(100, 99, 98, 97, 96, 95), levels(101, 102, 103, 104, 105), 10, Differs},
		{"the venue has fewer levels than asked: all of them", levels(100, 99, 98, 97, 96), levels(101, 102, 103, 104, 105), 100, Equal},
		{"the venue has fewer levels than asked, one missing", levels(100, 99, 98, 97), levels(101, 102, 103, 104, 105), 100, Short},
		{"short and different: different wins", levels(100, 98), levels(101), 3, Differs},
	} {
		if got := Compare(tc.bids, tc.asks, venueBids, venueAsks, tc.depth); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A venue side that is empty is matched by an empty side only.
	if got := Compare(nil, levels(101), nil, venueAsks, 1); got != Equal {
		t.Errorf("empty venue side, empty served side: %v, want equal", got)
	}
}

func TestTallyString(t *testing.T) {
	var a, b Tally
	a.Add(Equal)
	a.Add(Short)
	b.Add(Differs)
	b.Add(Equal)
	b.Failed++
	a.Merge(b)
	if got, want := a.String(), "2 / 4 (1 short, 1 differ, 1 not judged)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if a.AllEqual() || (&Tally{}).AllEqual() {
		t.Error("AllEqual with unequal books or none sampled")
	}
	var c Tally
	c.Add(Equal)
	if !c.AllEqual() || c.String() != "1 / 1" {
		t.Errorf("one equal: %v %q", c.AllEqual(), c.String())
	}
}

// TestSamplerJudgesAgainstTheVenue runs the sampler and the judge against a
// venue that answers its book at a venue time.
func TestSamplerJudgesAgainstTheVenue(t *testing.T) {
	var asked []string
	venue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/_control/book" || q.Get("symbol") != "BTCUSDT" || q.Get("depth") != "3" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		asked = append(asked, q.Get("time_ms"))
		w.Write([]byte(`{"lastUpdateId":7,"bids":[["100","1.5"],["99","1.5"],["98","1.5"]],"asks":[["101","1.5"],["102","1.5"],["103","1.5"]]}`))
	}))
	defer venue.Close()
	j := NewJudge(venue.URL, venue.Client())
	s := NewSampler(2)
	equal := []byte(`{"ticker_id":"BTC_USDT","timestamp":1700000000123,"bids":[["100","1.5"],["99","1.5"],["98","1.5"]],"asks":[["101","1.5"],["102","1.5"],["103","1.5"]]}`)
	short := []byte(`{"ticker_id":"BTC_USDT","timestamp":1700000000456,"bids":[["100","1.5"],["99","1.5"]],"asks":[["101","1.5"],["102","1.5"],["103","1.5"]]}`)
	s.Offer(equal) // before any phase: not kept
	s.SetPhase("cold")
	s.Offer(short) // the 2nd: kept
	s.Offer(equal)
	s.SetPhase("steady")
	s.Offer(equal) // the 4th: kept
	s.Offer(short)
	s.Offer([]byte(`{"ticker_id":"NOPE_USDT","timestamp":1}`)) // the 6th: the venue refuses it
	got := s.Judge(context.Background(), j, 3)
	if c := got["cold"]; c.Sampled != 1 || c.Short != 1 {
		t.Errorf("cold: %+v, want one short", c)
	}
	if st := got["steady"]; st.Sampled != 1 || st.Equal != 1 || st.Failed != 1 || st.Err == nil {
		t.Errorf("steady: %+v, want one equal and one not judged", st)
	}
	if len(asked) != 2 || asked[0] != "1700000000456" || asked[1] != "1700000000123" {
		t.Errorf("venue asked at %v, want the served books' timestamps", asked)
	}
	if again := s.Judge(context.Background(), j, 3); len(again) != 0 {
		t.Errorf("judged again: %v", again)
	}
}
