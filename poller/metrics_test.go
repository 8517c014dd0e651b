package poller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/promtext"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// want checks series values.
func want(t testing.TB, got map[string]float64, series map[string]float64) {
	t.Helper()
	for name, v := range series {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
		} else if math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, g, v)
		}
	}
}

func TestMetricsCountVenueCallsByOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(3)
		p, _ := newTestPoller(v, Config{Metrics: set})
		answers := map[string]error{
			pairID(1): nil,
			pairID(2): fmt.Errorf("read depth: %w", venue.ErrBadData),
			pairID(3): &venue.StatusError{Status: 400},
		}
		v.setFail(func(c venue.Call, symbol string) error {
			return answers[strings.Replace(symbol, "USDT", "_USDT", 1)]
		})
		for i := 1; i <= 3; i++ {
			p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
		}
		p.Refresh(t.Context(), snapshot.StreamBook)
		got := promtext.Scrape(t, set.WritePrometheus)
		want(t, got, map[string]float64{
			`marketfeed_venue_calls_total{call="catalog",outcome="ok"}`:             1,
			`marketfeed_venue_calls_total{call="book",outcome="ok"}`:                1,
			`marketfeed_venue_calls_total{call="book",outcome="bad_data"}`:          1,
			`marketfeed_venue_calls_total{call="book",outcome="refused"}`:           1,
			`marketfeed_venue_calls_total{call="trades",outcome="ok"}`:              0,
			`marketfeed_venue_call_duration_seconds_count{call="book"}`:             3,
			`marketfeed_venue_call_duration_seconds_bucket{call="book",le="0.005"}`: 3, // no time passes in the bubble
			`marketfeed_hot_pairs{stream="book"}`:                                   3,
			`marketfeed_hot_pairs{stream="trades"}`:                                 0,
		})
	})
}

func TestOutcomeOfEveryVenueAnswer(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{&venue.StatusError{Status: 429}, "rate_limited"},
		{&venue.StatusError{Status: 418}, "rate_limited"},
		{&venue.StatusError{Status: 403}, "forbidden"},
		{&venue.StatusError{Status: 451}, "restricted"},
		{&venue.StatusError{Status: 503}, "server_error"},
		{&venue.StatusError{Status: 408}, "server_error"},
		{&venue.StatusError{Status: 400}, "refused"},
		{fmt.Errorf("decode: %w", venue.ErrBadData), "bad_data"},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), "timeout"},
		{context.Canceled, "canceled"},
		{errors.New("connection refused"), "unreachable"},
	} {
		if got := venue.OutcomeOf(tc.err).String(); got != tc.want {
			t.Errorf("outcome of %v = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestMetricsShowPausesAndWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(2)
		v.limit = 2400
		v.weights[venue.CallCatalog], v.weights[venue.CallBook] = 1, 5
		p, _ := newTestPoller(v, Config{Metrics: set, Budget: 0.5})
		p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
		p.Refresh(t.Context(), snapshot.StreamBook)
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_venue_weight_limit`:                      2400,
			`marketfeed_venue_weight_budget`:                     1200,
			`marketfeed_venue_weight_spent`:                      5, // the catalog read came before the limit was known
			`marketfeed_venue_paused`:                            0,
			`marketfeed_venue_pauses_total{reason="rate_limit"}`: 0,
		})

		var once sync.Once
		v.setFail(func(venue.Call, string) error {
			var err error
			once.Do(func() { err = &venue.StatusError{Status: 429, RetryAfter: 30 * time.Second} })
			return err
		})
		time.Sleep(350 * time.Millisecond)
		p.Refresh(t.Context(), snapshot.StreamBook)
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_venue_calls_total{call="book",outcome="rate_limited"}`: 1,
			`marketfeed_venue_paused`:                            1,
			`marketfeed_venue_pauses_total{reason="rate_limit"}`: 1,
			`marketfeed_venue_pauses_total{reason="transient"}`:  0,
		})
		time.Sleep(30 * time.Second)
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_venue_paused`:                            0,
			`marketfeed_venue_pauses_total{reason="rate_limit"}`: 1,
			`marketfeed_venue_weight_spent`:                      10, // both book reads, within the minute
		})
		time.Sleep(30 * time.Second)
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_venue_weight_spent`: 0, // the minute moved past every call
		})
	})
}

func TestMetricsShowPermanentFailureAndReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(1)
		p, _ := newTestPoller(v, Config{Metrics: set, Spot: []string{pairID(1)}})
		if err := p.docs.refreshTickers(t.Context()); err != nil {
			t.Fatal(err)
		}
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{`marketfeed_ready`: 1, `marketfeed_venue_permanent_failure`: 0})
		v.setFail(func(venue.Call, string) error { return &venue.StatusError{Status: 451} })
		_ = p.RefreshCatalog(t.Context())
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_ready`:                                   0,
			`marketfeed_venue_permanent_failure`:                 1,
			`marketfeed_venue_pauses_total{reason="restricted"}`: 1,
		})
	})
}

func TestSnapshotAgesAreComputedWhenScraped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(3)
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store, Metrics: set, Spot: []string{pairID(1)}})
		time.Sleep(4 * time.Second)
		// Nothing read yet: the data is as old as the poller; no hot pair.
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_snapshot_age_seconds{kind="pairs"}`:   4,
			`marketfeed_snapshot_age_seconds{kind="tickers"}`: 4,
			`marketfeed_snapshot_age_seconds{kind="books"}`:   0,
			`marketfeed_snapshot_age_seconds{kind="trades"}`:  0,
		})
		if err := p.RefreshCatalog(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := p.docs.refreshTickers(t.Context()); err != nil {
			t.Fatal(err)
		}
		p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
		p.Want([]byte(pairID(2)), snapshot.StreamBook, time.Now().UnixNano())
		p.Want([]byte(pairID(3)), snapshot.StreamTrades, time.Now().UnixNano())
		time.Sleep(2 * time.Second)
		// Hot pairs never read are as old as their first request.
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_snapshot_age_seconds{kind="pairs"}`:   3,
			`marketfeed_snapshot_age_seconds{kind="tickers"}`: 2,
			`marketfeed_snapshot_age_seconds{kind="books"}`:   2,
			`marketfeed_snapshot_age_seconds{kind="trades"}`:  2,
		})
		if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := p.Load(t.Context(), pairID(2), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
			t.Fatal(err)
		}
		if err := p.Load(t.Context(), pairID(3), snapshot.StreamTrades, snapshot.MaxTrades); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		// Books: the oldest of the hot pairs, read 1.5 s ago.
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_snapshot_age_seconds{kind="books"}`:  1.5,
			`marketfeed_snapshot_age_seconds{kind="trades"}`: 0.5,
			`marketfeed_hot_pairs{stream="book"}`:            2,
			`marketfeed_hot_pairs{stream="trades"}`:          1,
		})
		// A pair nobody asked for within the hot TTL no longer counts.
		time.Sleep(61 * time.Second)
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_snapshot_age_seconds{kind="books"}`: 0,
		})
	})
}

func TestMetricsCountColdLoadsAndTheirWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(2)
		v.gate = make(chan struct{})
		p, _ := newTestPoller(v, Config{Metrics: set})
		var wg sync.WaitGroup
		for range 3 { // three callers, one venue read
			wg.Go(func() {
				if err := p.Load(t.Context(), pairID(1), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(300 * time.Millisecond) // the venue takes 300 ms to answer
		close(v.gate)
		wg.Wait()
		v.setFail(func(venue.Call, string) error { return venue.ErrBadData })
		if err := p.Load(t.Context(), pairID(2), snapshot.StreamTrades, snapshot.MaxTrades); err == nil {
			t.Fatal("a failing venue read loaded")
		}
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_cold_loads_total{stream="book",outcome="ok"}`:           1,
			`marketfeed_cold_loads_total{stream="book",outcome="failed"}`:       0,
			`marketfeed_cold_loads_total{stream="trades",outcome="failed"}`:     1,
			`marketfeed_cold_load_wait_seconds_count{stream="book"}`:            3,
			`marketfeed_cold_load_wait_seconds_sum{stream="book"}`:              0.9,
			`marketfeed_cold_load_wait_seconds_bucket{stream="book",le="0.25"}`: 0,
			`marketfeed_cold_load_wait_seconds_bucket{stream="book",le="0.5"}`:  3,
			`marketfeed_cold_load_wait_seconds_bucket{stream="book",le="+Inf"}`: 3,
			`marketfeed_cold_load_wait_seconds_count{stream="trades"}`:          1,
		})
	})
}

func TestMetricsCountReadsTheBudgetDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(5)
		v.limit = 20
		v.weights[venue.CallBook] = 5
		p, _ := newTestPoller(v, Config{Metrics: set, Budget: 1})
		for i := 1; i <= 5; i++ {
			p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
		}
		p.Refresh(t.Context(), snapshot.StreamBook)
		got := promtext.Scrape(t, set.WritePrometheus)
		read := got[`marketfeed_venue_calls_total{call="book",outcome="ok"}`]
		deferred := got[`marketfeed_venue_reads_deferred_total{stream="book"}`]
		if read == 0 || deferred == 0 || read+deferred != 5 {
			t.Fatalf("%v books read and %v deferred of 5 hot pairs; want both and a total of 5", read, deferred)
		}
	})
}

// A book the venue sent but the snapshot builder refuses (out of order) is
// unusable data: counted so, never as a good read, and nothing published.
func TestRefusedBookCountsAsBadData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := metrics.NewSet()
		v := newFakeVenue(1)
		p, store := newTestPoller(v, Config{Metrics: set})
		p.venue = &badBookVenue{fakeVenue: v}
		err := p.read(context.Background(), snapshot.StreamBook, snapshot.Pair{TickerID: pairID(1), Symbol: "P001USDT"}, time.Now())
		if !errors.Is(err, venue.ErrBadData) {
			t.Fatalf("err %v, want ErrBadData", err)
		}
		if b, _ := store.Book([]byte(pairID(1)), time.Now().UnixNano()); b != nil {
			t.Fatal("a refused book was published")
		}
		want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{
			`marketfeed_venue_calls_total{call="book",outcome="bad_data"}`: 1,
			`marketfeed_venue_calls_total{call="book",outcome="ok"}`:       0,
		})
	})
}

// badBookVenue answers every book with asks out of order.
type badBookVenue struct{ *fakeVenue }

func (v *badBookVenue) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	return venue.Book{Time: 1, Bids: []venue.Level{{Price: "10", Size: "1"}}, Asks: []venue.Level{{Price: "12", Size: "1"}, {Price: "11", Size: "1"}}}, nil
}

// With a venue's weights and a short max-stale, the bulk calls keep to
// their shares of the budget instead of planning more than all of it: the
// per-pair reads keep most of the budget, and the process says max-stale
// cannot be honoured.
func TestShortMaxStaleLeavesPerPairReadsTheirShare(t *testing.T) {
	set := metrics.NewSet()
	v := newFakeVenue(3)
	v.limit = 2400
	v.weights = [venue.NumCalls]int{venue.CallCatalog: 1, venue.CallStats: 40, venue.CallQuotes: 5, venue.CallBook: 5, venue.CallTrades: 20}
	p, _ := newTestPoller(v, Config{Metrics: set, MaxStale: 3 * time.Second})
	caps := p.ledger.Caps()
	book, trades := caps[budget.ClassBook], caps[budget.ClassTrades]
	if book+trades < 1200/2 {
		t.Fatalf("per-pair reads may spend %d + %d of a 1200 budget; the bulk calls took more than their shares", book, trades)
	}
	if p.planned.bulkReserve > 1200/2 {
		t.Fatalf("bulk calls planned at %d a minute of a 1200 budget", p.planned.bulkReserve)
	}
	want(t, promtext.Scrape(t, set.WritePrometheus), map[string]float64{"marketfeed_venue_max_stale_unmet": 1})
}
