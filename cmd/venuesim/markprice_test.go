package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

var plainDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// markPriceEvent is a markPriceUpdate payload.
type markPriceEvent struct {
	E      string `json:"e"`
	At     int64  `json:"E"`
	Sym    string `json:"s"`
	Mark   string `json:"p"`
	Settle string `json:"P"`
	Index  string `json:"i"`
	Rate   string `json:"r"`
	Next   int64  `json:"T"`
}

// TestContractCallsWithTheRealAdapter: premiumIndex and openInterest
// decode with the adapter, are charged their weights, and answer -1121 for
// a symbol the venue does not have or no longer lists.
func TestContractCallsWithTheRealAdapter(t *testing.T) {
	vs, c, base := newTestVenue(t, 0)
	ctx := t.Context()
	rows, invalid, err := c.Contracts(ctx)
	if err != nil || invalid != 0 {
		t.Fatalf("Contracts: %d invalid, %v", invalid, err)
	}
	cat, _ := vs.venue.Catalog(ctx)
	perps := 0
	for _, m := range cat.Markets {
		if m.Perpetual && m.Trading {
			perps++
		}
	}
	if len(rows) != perps || rows[0].Symbol == "" || rows[0].NextFunding <= rows[0].Time {
		t.Fatalf("Contracts: %d rows for %d tradable perpetuals: %+v", len(rows), perps, rows[0])
	}
	oi, err := c.OpenInterest(ctx, "BTCUSDT")
	if err != nil || oi.Symbol != "BTCUSDT" || oi.Amount == "" || oi.Time == 0 {
		t.Fatalf("OpenInterest: %+v, %v", oi, err)
	}

	body, status := get(t, base+"/fapi/v1/premiumIndex?symbol=ETHUSDT")
	var one premiumIndexRow
	if err := json.Unmarshal([]byte(body), &one); status != 200 || err != nil || one.Symbol != "ETHUSDT" || !plainDecimal.MatchString(one.LastFundingRate) {
		t.Fatalf("premiumIndex?symbol=ETHUSDT: %d %s (%v)", status, body, err)
	}
	postControl(t, base+"/_control/market?symbol=ETHUSDT&listed=false")
	for _, path := range []string{
		"/fapi/v1/premiumIndex?symbol=NOPEUSDT", "/fapi/v1/premiumIndex?symbol=ETHUSDT",
		"/fapi/v1/premiumIndex?symbol=BTCUSDT_260925", // a dated future has no funding
		"/fapi/v1/openInterest?symbol=NOPEUSDT", "/fapi/v1/openInterest?symbol=ETHUSDT", "/fapi/v1/openInterest",
	} {
		if body, status := get(t, base+path); status != 400 || !strings.Contains(body, `"code":-1121`) {
			t.Errorf("%s: %d %s, want 400 -1121", path, status, body)
		}
	}
	var se *venue.StatusError
	if _, err := c.OpenInterest(ctx, "ETHUSDT"); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("OpenInterest of a delisted market: %v", err)
	}
	after, _, err := c.Contracts(ctx)
	if err != nil || len(after) != perps-1 {
		t.Fatalf("after delisting: %d rows, %v", len(after), err)
	}
	for _, r := range after {
		if r.Symbol == "ETHUSDT" {
			t.Error("a delisted market's row is still listed")
		}
	}

	want := map[string]int{"/fapi/v1/premiumIndex": 10, "/fapi/v1/openInterest": 1}
	for _, call := range vs.callsSince(time.Time{}) {
		if call.Weight != want[call.Path] {
			t.Errorf("%s charged %d, want %d", call.Path, call.Weight, want[call.Path])
		}
	}
}

// TestContractCallsCountAgainstTheLimit: the weight limit refuses a
// premiumIndex as it does any call.
func TestContractCallsCountAgainstTheLimit(t *testing.T) {
	_, c, _ := newTestVenue(t, 15)
	ctx := t.Context()
	if _, _, err := c.Contracts(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenInterest(ctx, "BTCUSDT"); err != nil {
		t.Fatal(err)
	}
	var se *venue.StatusError
	if _, _, err := c.Contracts(ctx); !errors.As(err, &se) || se.Status != http.StatusTooManyRequests {
		t.Fatalf("21 weight against a limit of 15: %v, want 429", err)
	}
	if w, _ := c.UsedWeight(); w != 21 {
		t.Errorf("used weight %d, want 21", w)
	}
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// TestMarkPriceStreams: the all-market and per-symbol mark price streams
// deliver on the market path, every tradable perpetual in the array, and
// nothing on the public path.
func TestMarkPriceStreams(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	v := sim.New(sim.Config{Seed: 1})
	mkt := st.dial(t, "/market/stream")
	subscribe(t, mkt, "!markPrice@arr@1s", "btcusdt@markPrice@1s")
	pub := st.dial(t, "/public/stream")
	subscribe(t, pub, "!markPrice@arr@1s", "btcusdt@markPrice@1s", "btcusdt@depth@100ms")

	ms := st.clock().UnixMilli()
	rows := v.ContractsAt(ms)
	st.vs.hub.markPrices(rows)
	st.vs.hub.Depth(chained("BTCUSDT", 1)[0])
	if f := readFrame(t, pub); f.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("%s delivered on /public", f.Stream)
	}

	f := readFrame(t, mkt)
	var events []markPriceEvent
	if err := json.Unmarshal(f.Data, &events); f.Stream != "!markPrice@arr@1s" || err != nil || len(events) != len(rows) {
		t.Fatalf("%s: %d events for %d rows (%v)", f.Stream, len(events), len(rows), err)
	}
	for i, e := range events {
		r := rows[i]
		if e != (markPriceEvent{"markPriceUpdate", ms, r.Symbol, r.MarkPrice, r.SettlePrice, r.IndexPrice, r.FundingRate, r.NextFunding}) {
			t.Errorf("event %+v for row %+v", e, r)
		}
		for _, d := range []string{e.Mark, e.Settle, e.Index, e.Rate} {
			if !plainDecimal.MatchString(d) {
				t.Errorf("%s: %q is not a plain decimal", e.Sym, d)
			}
		}
	}
	f = readFrame(t, mkt)
	var one markPriceEvent
	if err := json.Unmarshal(f.Data, &one); f.Stream != "btcusdt@markPrice@1s" || err != nil || one.Sym != "BTCUSDT" || one.E != "markPriceUpdate" {
		t.Fatalf("%s: %s (%v)", f.Stream, f.Data, err)
	}
}

// TestMarkPriceStreamFaults: a silenced stream, a muted symbol and a
// delisted market deliver nothing on the mark price streams, as on the
// others, while the rest goes on.
func TestMarkPriceStreamFaults(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/market/stream")
	subscribe(t, c, "!markPrice@arr@1s", "btcusdt@markPrice@1s", "ethusdt@markPrice@1s")
	h := st.vs.hub
	rows := sim.New(sim.Config{Seed: 1}).ContractsAt(st.clock().UnixMilli())
	symbols := func(f frame) []string {
		var events []markPriceEvent
		if err := json.Unmarshal(f.Data, &events); err != nil {
			var one markPriceEvent
			if err := json.Unmarshal(f.Data, &one); err != nil {
				t.Fatalf("%s: %s", f.Stream, f.Data)
			}
			events = append(events, one)
		}
		var out []string
		for _, e := range events {
			out = append(out, e.Sym)
		}
		return out
	}

	postControl(t, st.url+"/_control/silence?stream=!markPrice@arr@1s&for=1m")
	h.markPrices(rows)
	if f := readFrame(t, c); f.Stream != "btcusdt@markPrice@1s" {
		t.Fatalf("silenced stream delivered: %s", f.Stream)
	}
	if f := readFrame(t, c); f.Stream != "ethusdt@markPrice@1s" {
		t.Fatalf("after the symbol's stream: %s", f.Stream)
	}
	st.advance(time.Minute)

	postControl(t, st.url+"/_control/silence?symbol=BTCUSDT&for=1m")
	postControl(t, st.url+"/_control/market?symbol=ETHUSDT&listed=false")
	h.markPrices(rows)
	f := readFrame(t, c)
	got := symbols(f)
	if f.Stream != "!markPrice@arr@1s" || len(got) != len(rows)-2 || strings.Contains(strings.Join(got, " "), "BTCUSDT") ||
		strings.Contains(strings.Join(got, " "), "ETHUSDT") {
		t.Fatalf("muted BTCUSDT and delisted ETHUSDT: %s has %v", f.Stream, got)
	}
	// Neither symbol's own stream delivered: the next frame is the next
	// second's array, with BTCUSDT back once its silence is over.
	st.advance(time.Minute)
	h.markPrices(rows)
	f = readFrame(t, c)
	if got := symbols(f); f.Stream != "!markPrice@arr@1s" || len(got) != len(rows)-1 {
		t.Fatalf("after the silence: %s has %d rows, want %d", f.Stream, len(got), len(rows)-1)
	}
	if f := readFrame(t, c); f.Stream != "btcusdt@markPrice@1s" {
		t.Fatalf("after the silence: %s", f.Stream)
	}
}

// TestMarkPricesEverySecond: the publishing loop sends the rows of the
// hub's instant on its period (a second when venuesim runs) until stopped.
func TestMarkPricesEverySecond(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/market/ws/!markPrice@arr@1s")
	v := sim.New(sim.Config{Seed: 1})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { st.vs.hub.runMarkPrices(ctx, v.ContractsAt, 10*time.Millisecond) })
	defer func() { cancel(); wg.Wait() }()
	for range 2 {
		var events []markPriceEvent
		if err := json.Unmarshal(read(t, c), &events); err != nil || len(events) == 0 || events[0].At != st.clock().UnixMilli() {
			t.Fatalf("bare mark price payload: %d events (%v)", len(events), err)
		}
	}
}
