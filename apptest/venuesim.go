package apptest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// VenueMarkers are bytes that only a venue body carries. None may appear in
// an answer of ours.
var VenueMarkers = []string{
	"<html", "venue fault", "Attention required", "Invalid symbol", "-1121", `"msg"`, `"code":-`,
	"1e999,", "NaN", `"symbol"`, "lastUpdateId", "isBuyerMaker", "quoteVolume", "bidPrice",
}

// VenueSim is a running venuesim binary.
type VenueSim struct {
	t   testing.TB
	URL string // its base URL, for marketfeed's -venue-url
}

// StartVenueSim builds and starts cmd/venuesim on loopback. A weight limit
// well above what the hot pairs need keeps the budget from stretching
// cadence, so that what the tests measure is the faults alone.
func StartVenueSim(t *testing.T, args ...string) *VenueSim {
	t.Helper()
	bin := Build(t, t.TempDir(), "marketfeed/cmd/venuesim")
	url, _ := Start(t, bin, append([]string{"-listen", "127.0.0.1:0", "-weight-limit", "24000"}, args...)...)
	return &VenueSim{t: t, URL: url}
}

// Control sends a request to one of venuesim's control endpoints, which
// must answer 204.
func (v *VenueSim) Control(method, path string) {
	v.t.Helper()
	req, err := http.NewRequest(method, v.URL+path, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		v.t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
}

// Fault sets a fault; query is venuesim's, e.g. "status=503&flap=1s".
func (v *VenueSim) Fault(query string) { v.Control(http.MethodPost, "/_control/fault?"+query) }

// Heal clears every fault and returns when the venue answers with data again.
func (v *VenueSim) Heal() { v.Control(http.MethodDelete, "/_control/fault") }

// List delists a market or lists it again.
func (v *VenueSim) List(symbol string, listed bool) {
	v.Control(http.MethodPost, "/_control/market?symbol="+symbol+"&listed="+strconv.FormatBool(listed))
}

// VenueCall is one call the venue received.
type VenueCall struct {
	At    time.Time
	Path  string
	Fault bool
}

// Calls returns the calls the venue received since t, oldest first.
func (v *VenueSim) Calls(since time.Time) []VenueCall {
	v.t.Helper()
	resp, err := http.Get(v.URL + "/_control/calls?since_us=" + strconv.FormatInt(since.UnixMicro(), 10))
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Calls []struct {
			At    int64 `json:"at_us"`
			Path  string
			Fault bool
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		v.t.Fatal(err)
	}
	out := make([]VenueCall, len(body.Calls))
	for i, c := range body.Calls {
		out[i] = VenueCall{time.UnixMicro(c.At), c.Path, c.Fault}
	}
	return out
}
