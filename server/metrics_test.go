package server

import (
	"context"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"marketfeed/internal/promtext"
)

func TestMetricsCountRequestsByRouteAndStatus(t *testing.T) {
	set := metrics.NewSet()
	f := newFixture(t, func(c *Config) { c.Metrics = set })
	before := promtext.Scrape(t, set.WritePrometheus)
	// Every series exists before its first event, at 0.
	for _, series := range []string{
		`marketfeed_http_requests_total{route="orderbook",status="200"}`,
		`marketfeed_http_requests_total{route="pairs",status="429"}`,
		`marketfeed_http_requests_total{route="trades",status="502"}`,
		`marketfeed_http_requests_total{route="other",status="404"}`,
		`marketfeed_http_request_duration_seconds_count{route="tickers"}`,
		`marketfeed_ratelimit_clients`,
	} {
		if v, ok := before[series]; !ok || v != 0 {
			t.Errorf("%s = %v, %v before any request; want 0", series, v, ok)
		}
	}
	for _, uri := range []string{
		"/api/public/pairs", "/api/public/pairs/", "/api/public/tickers",
		"/api/public/orderbook?ticker_id=BTC_USDT&depth=5",
		"/api/public/orderbook?ticker_id=btc",
		"/api/public/trades?ticker_id=NOPE_USDT",
		"/api/public/historical_trades?ticker_id=ETH_USDT",
		"/api/public/fees",
	} {
		f.get(t, uri)
	}
	f.do(t, request{method: "POST", uri: "/api/public/tickers"})
	f.do(t, request{method: "OPTIONS", uri: "/api/public/trades"})
	f.clock.Advance(DefaultMaxStale + time.Second) // the venue fails: the book is too old
	f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")

	got := promtext.Scrape(t, set.WritePrometheus)
	for series, want := range map[string]float64{
		`marketfeed_http_requests_total{route="pairs",status="200"}`:                   2,
		`marketfeed_http_requests_total{route="tickers",status="200"}`:                 1,
		`marketfeed_http_requests_total{route="tickers",status="405"}`:                 1,
		`marketfeed_http_requests_total{route="orderbook",status="200"}`:               1,
		`marketfeed_http_requests_total{route="orderbook",status="400"}`:               1,
		`marketfeed_http_requests_total{route="orderbook",status="502"}`:               1,
		`marketfeed_http_requests_total{route="trades",status="404"}`:                  1,
		`marketfeed_http_requests_total{route="trades",status="204"}`:                  1,
		`marketfeed_http_requests_total{route="historical_trades",status="200"}`:       1,
		`marketfeed_http_requests_total{route="other",status="404"}`:                   1,
		`marketfeed_http_request_duration_seconds_count{route="pairs"}`:                2,
		`marketfeed_http_request_duration_seconds_count{route="orderbook"}`:            3,
		`marketfeed_http_request_duration_seconds_bucket{route="orderbook",le="+Inf"}`: 3,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	var total float64
	for series, v := range got {
		if strings.HasPrefix(series, "marketfeed_http_requests_total{") {
			total += v
		}
	}
	if total != 11 {
		t.Errorf("%v requests counted, want 11", total)
	}
}

func TestMetricsCountRateLimitedAndPanickedRequests(t *testing.T) {
	set := metrics.NewSet()
	f := newFixture(t, func(c *Config) { c.Metrics = set; c.RateLimit = 1 })
	f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	f.get(t, "/api/public/orderbook?ticker_id=BTC_USDT")
	f.do(t, request{uri: "/api/public/trades?ticker_id=BTC_USDT", peer: "192.0.2.2:1"})
	f.feed.panicOnWant.Store(true)
	f.do(t, request{uri: "/api/public/trades?ticker_id=BTC_USDT", peer: "192.0.2.3:1"})
	got := promtext.Scrape(t, set.WritePrometheus)
	for series, want := range map[string]float64{
		`marketfeed_http_requests_total{route="orderbook",status="200"}`: 1,
		`marketfeed_http_requests_total{route="orderbook",status="429"}`: 1,
		`marketfeed_http_requests_total{route="trades",status="200"}`:    1,
		`marketfeed_http_requests_total{route="trades",status="500"}`:    1,
		`marketfeed_ratelimit_clients`:                                   3,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}

// A request fasthttp cannot read never reaches the handler; it is counted
// all the same, under the route "other".
func TestMetricsCountRequestsTheServerCouldNotRead(t *testing.T) {
	set := metrics.NewSet()
	f := newFixture(t, func(c *Config) { c.Metrics = set })
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := f.srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://marketfeed/api/public/pairs")
	req.Header.Set("X-Padding", strings.Repeat("x", maxHeaderSize))
	if err := c.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode())
	}
	series := `marketfeed_http_requests_total{route="other",status="431"}`
	if got := promtext.Scrape(t, set.WritePrometheus)[series]; got != 1 {
		t.Fatalf("%s = %v, want 1", series, got)
	}
}

func TestLatencyHistogramIsCumulativeAndSumsSeconds(t *testing.T) {
	m := newServerMetrics(metrics.NewSet(), func() int { return 0 })
	for i, d := range []time.Duration{time.Microsecond, 5 * time.Microsecond, 7 * time.Microsecond, 3 * time.Millisecond, time.Minute} {
		m.observe(uint64(i), labelTickers, 200, d) // five connections: the shards add up
	}
	m.count(9, labelOther, 431)
	got := promtext.Must(t, string(m.appendTo(nil)))
	const name = "marketfeed_http_request_duration_seconds"
	for series, want := range map[string]float64{
		name + `_bucket{route="tickers",le="0.000005"}`:                2, // the bound itself is inside its bucket
		name + `_bucket{route="tickers",le="0.00001"}`:                 3,
		name + `_bucket{route="tickers",le="0.0025"}`:                  3,
		name + `_bucket{route="tickers",le="0.005"}`:                   4,
		name + `_bucket{route="tickers",le="5"}`:                       4,
		name + `_bucket{route="tickers",le="+Inf"}`:                    5,
		name + `_count{route="tickers"}`:                               5,
		name + `_count{route="other"}`:                                 0,
		`marketfeed_http_requests_total{route="tickers",status="200"}`: 5,
		`marketfeed_http_requests_total{route="other",status="431"}`:   1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	wantSum := (time.Microsecond + 5*time.Microsecond + 7*time.Microsecond + 3*time.Millisecond + time.Minute).Seconds()
	if sum := got[name+`_sum{route="tickers"}`]; math.Abs(sum-wantSum) > 1e-12 {
		t.Errorf("sum = %v, want %v", sum, wantSum)
	}
	perRoute := len(latencyBounds) + 3 + numStatusSlots // buckets with +Inf, sum, count, requests
	if n := len(got); n != numRouteLabels*perRoute {
		t.Errorf("%d series, want %d", n, numRouteLabels*perRoute)
	}
}

func TestRouteLabels(t *testing.T) {
	for path, want := range map[string]string{
		"/api/public/pairs":              "pairs",
		"/api/public/tickers/":           "tickers",
		"/api/public/orderbook":          "orderbook",
		"/api/public/trades":             "trades",
		"/api/public/historical_trades/": "historical_trades",
		"/api/public/fees":               "other",
		"/":                              "other",
	} {
		if got := routeLabels[routeLabel([]byte(path))]; got != want {
			t.Errorf("%s: route label %q, want %q", path, got, want)
		}
	}
	for _, code := range statusCodes {
		if slotOf(code) == 0 {
			t.Errorf("status %d has no counter", code)
		}
	}
	for _, code := range []int{-1, 0, 201, 503, 600, 1000} {
		if slotOf(code) != 0 {
			t.Errorf("status %d is not counted as other", code)
		}
	}
}

// BenchmarkRequestAccounting measures what counting adds to one request in
// a server: the clock read at the end (fasthttp took the one at the start),
// the route label, one counter, one histogram bucket and the sum. In
// parallel, "connections" has each goroutine count as its own connection,
// as a server's do; "one_shard" has them all write the same counters, as
// one counter per series would.
func BenchmarkRequestAccounting(b *testing.B) {
	m := newServerMetrics(metrics.NewSet(), func() int { return 0 })
	path := []byte("/api/public/orderbook")
	start := time.Now()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.observe(1, routeLabel(path), 200, time.Since(start))
		}
	})
	var conns atomic.Uint64
	b.Run("parallel/connections", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			conn := conns.Add(1)
			for pb.Next() {
				m.observe(conn, routeLabel(path), 200, time.Since(start))
			}
		})
	})
	b.Run("parallel/one_shard", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.observe(1, routeLabel(path), 200, time.Since(start))
			}
		})
	})
}

// BenchmarkLatencyHistogram compares an observation of the server's
// histogram with the metrics library's Histogram.Update, serially and with
// every core observing at once.
func BenchmarkLatencyHistogram(b *testing.B) {
	d := 1500 * time.Nanosecond
	b.Run("own/serial", func(b *testing.B) {
		m := newServerMetrics(metrics.NewSet(), func() int { return 0 })
		for b.Loop() {
			m.observe(1, labelPairs, 200, d)
		}
	})
	b.Run("own/parallel", func(b *testing.B) {
		m := newServerMetrics(metrics.NewSet(), func() int { return 0 })
		var conns atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			conn := conns.Add(1)
			for pb.Next() {
				m.observe(conn, labelPairs, 200, d)
			}
		})
	})
	b.Run("library/serial", func(b *testing.B) {
		h := metrics.NewSet().NewHistogram("x")
		for b.Loop() {
			h.Update(d.Seconds())
		}
	})
	b.Run("library/parallel", func(b *testing.B) {
		h := metrics.NewSet().NewHistogram("x")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Update(d.Seconds())
			}
		})
	})
}
