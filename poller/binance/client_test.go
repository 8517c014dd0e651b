package binance

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

var presets = []Preset{Binance, Aster}

func newFakeVenue(t *testing.T) *fakeVenue {
	f := &fakeVenue{t: t}
	files := map[string][]byte{}
	for _, c := range calls {
		files[c.path] = readFixture(t, c.fixture)
	}
	// Aster serves aggregate trades under another path.
	files[Aster.AggTradesPath] = files[Binance.AggTradesPath]
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
		f.mu.Unlock()
		w.Header().Set("X-MBX-USED-WEIGHT-1M", strconv.FormatInt(f.weight.Add(7), 10))
		body, ok := files[strings.TrimPrefix(r.URL.Path, "/prefix")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeVenue) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func TestClientReadsFixtures(t *testing.T) {
	for _, p := range presets {
		t.Run(p.Name, func(t *testing.T) {
			f := newFakeVenue(t)
			c := New(p, Options{BaseURL: f.srv.URL})
			if w, ok := c.UsedWeight(); ok {
				t.Errorf("UsedWeight before any call = %d, true", w)
			}
			for i, cl := range calls {
				got, err := cl.do(context.Background(), c)
				if err != nil {
					t.Fatalf("%s: %v", cl.name, err)
				}
				want, err := cl.decode(readFixture(t, cl.fixture))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %+v, want %+v", cl.name, got, want)
				}
				// The used weight follows every answer.
				if w, ok := c.UsedWeight(); !ok || w != 7*(i+1) {
					t.Errorf("%s: UsedWeight = %d, %v; want %d", cl.name, w, ok, 7*(i+1))
				}
				reqs := f.requests()
				last := reqs[len(reqs)-1]
				path := cl.path
				if cl.name == "trades" {
					path = p.AggTradesPath
				}
				if want := (request{"GET", path, cl.query, "application/json"}); last != want {
					t.Errorf("%s: request %+v, want %+v", cl.name, last, want)
				}
			}
		})
	}
}

// TestClientBaseURL: a trailing slash is dropped and a path prefix kept.
func TestClientBaseURL(t *testing.T) {
	f := newFakeVenue(t)
	for _, base := range []string{f.srv.URL + "/", f.srv.URL + "/prefix", f.srv.URL + "/prefix/"} {
		c := New(Binance, Options{BaseURL: base})
		if _, err := c.Book(context.Background(), "BTCUSDT", 100); err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		reqs := f.requests()
		want := "/fapi/v1/depth"
		if strings.Contains(base, "prefix") {
			want = "/prefix" + want
		}
		if got := reqs[len(reqs)-1].path; got != want {
			t.Errorf("%s: path %q, want %q", base, got, want)
		}
	}
}

// roundTripFunc lets a test stand in for the network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientPresetURL: without BaseURL the preset's URL is used, through
// the HTTP client given in Options.
func TestClientPresetURL(t *testing.T) {
	for _, p := range presets {
		var got string
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return &http.Response{
				StatusCode: http.StatusOK,
				Header:     http.Header{"X-Mbx-Used-Weight-1m": {"12"}},
				Body:       io.NopCloser(bytes.NewReader(readFixture(t, "exchangeInfo.json"))),
				Request:    r,
			}, nil
		})}
		c := New(p, Options{HTTPClient: hc})
		if _, err := c.Catalog(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := p.URL + "/fapi/v1/exchangeInfo"; got != want {
			t.Errorf("%s: URL %q, want %q", p.Name, got, want)
		}
		if w, ok := c.UsedWeight(); !ok || w != 12 {
			t.Errorf("%s: UsedWeight = %d, %v", p.Name, w, ok)
		}
	}
}

func TestClientInvalidBaseURL(t *testing.T) {
	c := New(Binance, Options{BaseURL: "http://bad host\x7f"})
	_, err := c.Catalog(context.Background())
	if !errors.Is(err, errInvalidBaseURL) {
		t.Errorf("error %v, want errInvalidBaseURL", err)
	}
}

// TestClientLimits: the limit sent is one the venue accepts and covers the
// request; the answer is cut to what was asked for.
func TestClientLimits(t *testing.T) {
	var levels []string
	for i := range 120 {
		levels = append(levels, `["`+strconv.Itoa(1000-i)+`","1"]`)
	}
	deepBook := `{"T":1767225600450,"bids":[` + strings.Join(levels, ",") + `],"asks":[["2000","1"]]}`
	var query atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query.Store(r.URL.RawQuery)
		if r.URL.Path == "/fapi/v1/depth" {
			_, _ = io.WriteString(w, deepBook)
			return
		}
		_, _ = w.Write(readFixture(t, "trades.json"))
	}))
	defer srv.Close()
	c := New(Binance, Options{BaseURL: srv.URL})
	ctx := context.Background()

	for _, tc := range []struct {
		depth int
		query string
		bids  int
	}{
		{1, "symbol=BTCUSDT&limit=5", 1},
		{5, "symbol=BTCUSDT&limit=5", 5},
		{30, "symbol=BTCUSDT&limit=50", 30},
		{100, "symbol=BTCUSDT&limit=100", 100},
		{101, "symbol=BTCUSDT&limit=500", 101},
		{5000, "symbol=BTCUSDT&limit=1000", 120},
	} {
		book, err := c.Book(ctx, "BTCUSDT", tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("depth %d: query %q, want %q", tc.depth, got, tc.query)
		}
		if len(book.Bids) != tc.bids || len(book.Asks) != 1 {
			t.Errorf("depth %d: %d bids, %d asks; want %d, 1", tc.depth, len(book.Bids), len(book.Asks), tc.bids)
		}
	}

	for _, tc := range []struct {
		limit  int
		query  string
		trades int
	}{
		{3, "symbol=ETHUSDT&limit=3", 3},
		{100, "symbol=ETHUSDT&limit=100", 5},
		{5000, "symbol=ETHUSDT&limit=1000", 5},
	} {
		trades, err := c.Trades(ctx, "ETHUSDT", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("limit %d: query %q, want %q", tc.limit, got, tc.query)
		}
		if len(trades) != tc.trades {
			t.Fatalf("limit %d: %d trades, want %d", tc.limit, len(trades), tc.trades)
		}
		// The most recent ones, still oldest first.
		if last := trades[len(trades)-1]; last.Time != 1767225600011 {
			t.Errorf("limit %d: last trade at %d", tc.limit, last.Time)
		}
	}

	// A read from an id asks for exactly the ids wanted and keeps the
	// oldest ones, those right after the id, if the venue sends more.
	for _, tc := range []struct {
		from   int64
		limit  int
		query  string
		trades int
	}{
		{6102345671, 2, "symbol=ETHUSDT&fromId=6102345671&limit=2", 2},
		{6102345671, 100, "symbol=ETHUSDT&fromId=6102345671&limit=100", 5},
		{0, 5000, "symbol=ETHUSDT&fromId=0&limit=1000", 5},
	} {
		trades, err := c.TradesFrom(ctx, "ETHUSDT", tc.from, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := query.Load(); got != tc.query {
			t.Errorf("from %d limit %d: query %q, want %q", tc.from, tc.limit, got, tc.query)
		}
		if len(trades) != tc.trades || trades[0].ID != 6102345671 {
			t.Fatalf("from %d limit %d: %d trades from id %d, want %d from 6102345671", tc.from, tc.limit, len(trades), trades[0].ID, tc.trades)
		}
	}

	// A symbol is escaped in the query and arrives intact.
	if _, err := c.Trades(ctx, "币安人生USDT", 10); err != nil {
		t.Fatal(err)
	}
	if got, want := query.Load(), "symbol=%E5%B8%81%E5%AE%89%E4%BA%BA%E7%94%9FUSDT&limit=10"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
}

// TestClientInvalidRequest: a request the venue cannot answer is refused
// before it is sent, with an error that is not a venue failure.
func TestClientInvalidRequest(t *testing.T) {
	f := newFakeVenue(t)
	c := New(Binance, Options{BaseURL: f.srv.URL})
	ctx := context.Background()
	for name, do := range map[string]func() error{
		"book depth 0":   func() error { _, err := c.Book(ctx, "BTCUSDT", 0); return err },
		"book no symbol": func() error { _, err := c.Book(ctx, "", 100); return err },
		"trades limit 0": func() error { _, err := c.Trades(ctx, "BTCUSDT", 0); return err },
		"trades -1":      func() error { _, err := c.Trades(ctx, "BTCUSDT", -1); return err },
		"trades no sym":  func() error { _, err := c.Trades(ctx, "", 100); return err },
		"from limit 0":   func() error { _, err := c.TradesFrom(ctx, "BTCUSDT", 1, 0); return err },
		"from id -1":     func() error { _, err := c.TradesFrom(ctx, "BTCUSDT", -1, 10); return err },
	} {
		err := do()
		var se *venue.StatusError
		if err == nil || errors.Is(err, venue.ErrBadData) || errors.As(err, &se) {
			t.Errorf("%s: error %v, want a request error", name, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// TestUsedWeightEveryStatus: the header is read from error answers too, and
// a value that is not a count leaves the last one in place.
func TestUsedWeightEveryStatus(t *testing.T) {
	var status atomic.Int64
	var header atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A lowercase name on the wire is the same header.
		w.Header()["x-mbx-used-weight-1m"] = []string{header.Load().(string)}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	c := New(Aster, Options{BaseURL: srv.URL})
	for _, tc := range []struct {
		status int
		header string
		want   int
		ok     bool
	}{
		{http.StatusTeapot, "junk", 0, false},
		{http.StatusTooManyRequests, "2401", 2401, true},
		{http.StatusServiceUnavailable, "", 2401, true},
		{http.StatusForbidden, "-3", 2401, true},
		{http.StatusTeapot, " 2500 ", 2500, true},
		{http.StatusOK, "0", 0, true},
	} {
		status.Store(int64(tc.status))
		header.Store(tc.header)
		_, _ = c.Book(context.Background(), "BTCUSDT", 100)
		if w, ok := c.UsedWeight(); w != tc.want || ok != tc.ok {
			t.Errorf("status %d header %q: UsedWeight = %d, %v; want %d, %v", tc.status, tc.header, w, ok, tc.want, tc.ok)
		}
	}
}

// expectation checks one failed call.
type expectation func(t *testing.T, err error)

// TestClientCancel: the caller's cancellation ends a call at once and stays
// recognisable.
func TestClientCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := New(Binance, Options{BaseURL: srv.URL})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := c.Trades(ctx, "BTCUSDT", 100)
	wantTransport(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}

	// Already cancelled: no request at all.
	_, err = c.Catalog(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestClientConcurrent runs every call at once, for the race detector.
func TestClientConcurrent(t *testing.T) {
	f := newFakeVenue(t)
	c := New(Binance, Options{BaseURL: f.srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		for _, cl := range calls {
			wg.Go(func() {
				if _, err := cl.do(context.Background(), c); err != nil {
					t.Errorf("%s: %v", cl.name, err)
				}
				c.UsedWeight()
			})
		}
	}
	wg.Wait()
	if w, ok := c.UsedWeight(); !ok || w <= 0 {
		t.Errorf("UsedWeight = %d, %v", w, ok)
	}
}

// The caller's deadline owns a call: the client's own timeout does not
// shorten a call the caller bounded, and bounds only a caller that set no
// deadline.
func TestCallersDeadlineOwnsTheCall(t *testing.T) {
	var seen []time.Time
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		d, ok := r.Context().Deadline()
		if !ok {
			t.Error("a call without any deadline")
		}
		seen = append(seen, d)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	c := New(Binance, Options{BaseURL: "http://venue.invalid", Timeout: 50 * time.Millisecond, HTTPClient: &http.Client{Transport: rt}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	want, _ := ctx.Deadline()
	_, _ = c.Catalog(ctx)
	before := time.Now()
	_, _ = c.Catalog(context.Background())
	after := time.Now()
	if len(seen) != 2 {
		t.Fatalf("%d calls, want 2", len(seen))
	}
	if !seen[0].Equal(want) {
		t.Fatalf("deadline %v, want the caller's %v", seen[0], want)
	}
	if seen[1].Before(before.Add(50*time.Millisecond)) || seen[1].After(after.Add(50*time.Millisecond)) {
		t.Fatalf("without a caller's deadline the call's deadline was %v after it began, want the client's 50ms", seen[1].Sub(before))
	}
}
