package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"marketfeed/poller/binance"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// newTestVenue serves the simulator over HTTP and returns the real adapter
// pointed at it.
func newTestVenue(t *testing.T, limit int) (*venueServer, *binance.Client, string) {
	t.Helper()
	vs := newVenueServer(sim.New(sim.Config{Seed: 1}), limit)
	ts := httptest.NewServer(vs)
	t.Cleanup(ts.Close)
	return vs, binance.New(binance.Binance, binance.Options{BaseURL: ts.URL, Timeout: 2 * time.Second}), ts.URL
}

func TestEveryCallDecodesWithTheRealAdapter(t *testing.T) {
	_, c, _ := newTestVenue(t, 0)
	ctx := t.Context()
	cat, err := c.Catalog(ctx)
	if err != nil || len(cat.Markets) < 40 {
		t.Fatalf("catalog: %d markets, %v", len(cat.Markets), err)
	}
	stats, err := c.Stats(ctx)
	if err != nil || len(stats) == 0 {
		t.Fatalf("stats: %d, %v", len(stats), err)
	}
	absent := 0
	for _, s := range stats {
		if s.BaseVolume == "" {
			absent++
		}
	}
	if absent == 0 {
		t.Error("no market without a base volume: the fallback is not exercised over HTTP")
	}
	if quotes, err := c.Quotes(ctx); err != nil || len(quotes) == 0 {
		t.Fatalf("quotes: %d, %v", len(quotes), err)
	}
	book, err := c.Book(ctx, "BTCUSDT", 100)
	if err != nil || len(book.Bids) != 100 || len(book.Asks) != 100 || book.Time == 0 {
		t.Fatalf("book: %d bids, %d asks, time %d, %v", len(book.Bids), len(book.Asks), book.Time, err)
	}
	trades, err := c.Trades(ctx, "BTCUSDT", 100)
	if err != nil || len(trades) == 0 {
		t.Fatalf("trades: %d, %v", len(trades), err)
	}
	// The trades from an id are those the newest trades hold from it on.
	from, err := c.TradesFrom(ctx, "BTCUSDT", trades[50].ID, 10)
	if err != nil || !reflect.DeepEqual(from, trades[50:60]) {
		t.Fatalf("trades from id %d: %v, %v; want %v", trades[50].ID, from, err, trades[50:60])
	}
	sides := map[bool]int{}
	for _, tr := range trades {
		sides[tr.Sell]++
	}
	if sides[true] == 0 || sides[false] == 0 {
		t.Errorf("trades have one aggressor side only: %v", sides)
	}
	var se *venue.StatusError
	if _, err := c.Book(ctx, "NOPEUSDT", 100); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("unknown symbol: %v, want a 400 StatusError", err)
	}
	if used, ok := c.UsedWeight(); !ok || used == 0 {
		t.Errorf("used weight = %d, %v: the header is missing", used, ok)
	}
}

// A fromId that is not an id is refused as the venue refuses it.
func TestBadFromIDIsRefused(t *testing.T) {
	_, _, base := newTestVenue(t, 0)
	for _, from := range []string{"-1", "x", "1.5", ""} {
		resp, err := http.Get(base + "/fapi/v1/aggTrades?symbol=BTCUSDT&limit=10&fromId=" + from)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":-1100`) {
			t.Errorf("fromId %q: %d %s, want 400 with code -1100", from, resp.StatusCode, body)
		}
	}
}

func TestWeightLimitAnswers429WithRetryAfter(t *testing.T) {
	_, c, _ := newTestVenue(t, 10)
	ctx := t.Context()
	if _, err := c.Book(ctx, "BTCUSDT", 100); err != nil { // 5
		t.Fatal(err)
	}
	if _, err := c.Book(ctx, "BTCUSDT", 100); err != nil { // 10
		t.Fatal(err)
	}
	_, err := c.Book(ctx, "BTCUSDT", 100) // 15 > 10
	var se *venue.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests || se.RetryAfter <= 0 {
		t.Fatalf("past the limit: %v, want 429 with Retry-After", err)
	}
}

func TestFaultsReachTheAdapterAsTheirKind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     fault
		check func(error) bool
	}{
		{"429 with Retry-After", fault{Status: 429, RetryAfter: 7 * time.Second}, func(err error) bool {
			var se *venue.StatusError
			return errors.As(err, &se) && se.Status == 429 && se.RetryAfter == 7*time.Second
		}},
		{"418", fault{Status: 418, RetryAfter: 120 * time.Second}, func(err error) bool {
			var se *venue.StatusError
			return errors.As(err, &se) && se.Status == 418
		}},
		{"503 html", fault{Status: 503}, func(err error) bool {
			var se *venue.StatusError
			return errors.As(err, &se) && se.Status == 503
		}},
		{"garbage", fault{Body: "garbage"}, func(err error) bool { return errors.Is(err, venue.ErrBadData) }},
		{"truncated", fault{Body: "truncated"}, func(err error) bool { return errors.Is(err, venue.ErrBadData) }},
		{"html 200", fault{Body: "html"}, func(err error) bool { return errors.Is(err, venue.ErrBadData) }},
		{"empty", fault{Body: "empty"}, func(err error) bool { return errors.Is(err, venue.ErrBadData) }},
		{"reset", fault{Body: "reset"}, func(err error) bool {
			var se *venue.StatusError
			return err != nil && !errors.As(err, &se) && !errors.Is(err, venue.ErrBadData)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, c, _ := newTestVenue(t, 0)
			vs.setFault(tc.f, time.Time{})
			_, err := c.Book(t.Context(), "BTCUSDT", 100)
			if !tc.check(err) {
				t.Fatalf("error %v is not of the expected kind", err)
			}
			vs.setFault(fault{}, time.Time{})
			if _, err := c.Book(t.Context(), "BTCUSDT", 100); err != nil {
				t.Fatalf("after healing: %v", err)
			}
		})
	}
}

func TestControlEndpointSetsAndHealsFaults(t *testing.T) {
	_, c, url := newTestVenue(t, 0)
	resp, err := http.Post(url+"/_control/fault?status=502", "", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("set fault: %v %v", resp, err)
	}
	var se *venue.StatusError
	if _, err := c.Quotes(t.Context()); !errors.As(err, &se) || se.Status != 502 {
		t.Fatalf("with the fault: %v", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, url+"/_control/fault", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("heal: %v %v", resp, err)
	}
	if _, err := c.Quotes(t.Context()); err != nil {
		t.Fatalf("healed: %v", err)
	}
	if resp, err := http.Post(url+"/_control/fault?delay=soon", "", nil); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad parameter: %v %v", resp, err)
	}
}
