package server

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// The route label of a request: one value per API path as callers write it
// (/trades and /historical_trades share a handler but not a label, so an
// operator can see which aggregators use which), and "other" for every path
// that is not an API route or a request fasthttp could not read.
const (
	labelOther = iota
	labelPairs
	labelTickers
	labelOrderbook
	labelTrades
	labelHistorical
	labelContracts
	labelContractSpecs
	numRouteLabels
)

var routeLabels = [numRouteLabels]string{
	labelOther:         "other",
	labelPairs:         "pairs",
	labelTickers:       "tickers",
	labelOrderbook:     "orderbook",
	labelTrades:        "trades",
	labelHistorical:    "historical_trades",
	labelContracts:     "contracts",
	labelContractSpecs: "contract_specs",
}

var historicalName = []byte("historical_trades")

// routeLabel returns the route label of a request path.
func routeLabel(path []byte) int { return labelOf(routeOf(path), path) }

// labelOf returns the route label of a path already routed to r.
func labelOf(r route, path []byte) int {
	switch r {
	case routePairs:
		return labelPairs
	case routeTickers:
		return labelTickers
	case routeContracts:
		return labelContracts
	case routeContractSpecs:
		return labelContractSpecs
	case routeBook:
		return labelOrderbook
	case routeTrades:
		if bytes.HasPrefix(path[len(apiPrefix):], historicalName) {
			return labelHistorical
		}
		return labelTrades
	}
	return labelOther
}

// statusCodes are every status the server answers. Any other code (there is
// none today) is counted as "other" rather than dropped.
var statusCodes = [...]int{200, 204, 304, 400, 404, 405, 408, 413, 429, 431, 500, 502}

const numStatusSlots = len(statusCodes) + 1 // slot 0: other

// statusSlot maps a status code to its counter slot, so that counting an
// answer is an array index and an atomic add: no map, no formatting.
var statusSlot = func() (slots [600]uint8) {
	for i, code := range statusCodes {
		slots[code] = uint8(i + 1)
	}
	return slots
}()

func slotOf(status int) int {
	if status < 0 || status >= len(statusSlot) {
		return 0
	}
	return int(statusSlot[status])
}

// latencyBounds are the upper bounds of the request latency buckets. A 200
// from a snapshot takes about a microsecond; a first request that waits for
// its venue read takes up to the cold timeout (default 2 s): the buckets span
// both.
var latencyBounds = [...]time.Duration{
	5 * time.Microsecond, 10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// numBuckets is the number of latency buckets, +Inf included.
const numBuckets = len(latencyBounds) + 1

// metricShards spreads the request counters over several copies, picked by
// connection: requests served at once on different cores then add to
// different cache lines instead of all fighting over one. A power of two.
const metricShards = 8

// counterShard is one copy of the request counters. The histogram keeps one
// count per bucket, made cumulative only when scraped, so that an
// observation is one atomic add plus one for the sum.
type counterShard struct {
	requests [numRouteLabels][numStatusSlots]atomic.Uint64
	buckets  [numRouteLabels][numBuckets]atomic.Uint64
	sum      [numRouteLabels]atomic.Int64 // ns
	_        [64]byte                     // no cache line shared with the next shard
}

// serverMetrics counts the server's answers. Every series exists from New
// on, so that a request only indexes arrays, and so that every series a
// dashboard or an alert names is scraped as 0 before its first event.
//
// The counters are plain atomics written out by the set's metrics writer
// rather than the library's Counter and Histogram: the library's Histogram
// takes a mutex and computes a logarithm on every Update, and exposes
// VictoriaMetrics "vmrange" buckets that Prometheus's histogram_quantile
// cannot read; and a single counter per series would make every core
// answering requests write the same cache line. BenchmarkRequestAccounting
// and BenchmarkLatencyHistogram measure both choices.
type serverMetrics struct {
	shards [metricShards]counterShard
}

const (
	requestsName = "marketfeed_http_requests_total"
	latencyName  = "marketfeed_http_request_duration_seconds"
)

func newServerMetrics(set *metrics.Set, limit func() int) *serverMetrics {
	m := new(serverMetrics)
	set.RegisterMetricsWriter(func(w io.Writer) { _, _ = w.Write(m.appendTo(nil)) })
	set.NewGauge("marketfeed_ratelimit_clients", func() float64 { return float64(limit()) })
	return m
}

// observe counts one answer of a request on connection conn. It runs on
// every request: it must not allocate.
func (m *serverMetrics) observe(conn uint64, route, status int, d time.Duration) {
	sh := &m.shards[conn&(metricShards-1)]
	sh.requests[route][slotOf(status)].Add(1)
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	sh.buckets[route][i].Add(1)
	sh.sum[route].Add(int64(d))
}

// count counts one answer without a latency: a request no handler ran for.
func (m *serverMetrics) count(conn uint64, route, status int) {
	m.shards[conn&(metricShards-1)].requests[route][slotOf(status)].Add(1)
}

// appendTo appends every series in the Prometheus text format. A scrape
// that races with requests may see a sum a few requests ahead of the
// buckets; every series is still monotonic, which is what rate() needs.
func (m *serverMetrics) appendTo(b []byte) []byte {
	for r, route := range routeLabels {
		for slot := range numStatusSlots {
			status := "other"
			if slot > 0 {
				status = strconv.Itoa(statusCodes[slot-1])
			}
			var n uint64
			for i := range m.shards {
				n += m.shards[i].requests[r][slot].Load()
			}
			b = fmt.Appendf(b, "%s{route=%q,status=%q} %d\n", requestsName, route, status, n)
		}
	}
	b = append(b, "# TYPE "+latencyName+" histogram\n"...)
	for r, route := range routeLabels {
		var cumulative uint64
		var sum int64
		for i := range m.shards {
			sum += m.shards[i].sum[r].Load()
		}
		for bucket := range numBuckets {
			for i := range m.shards {
				cumulative += m.shards[i].buckets[r][bucket].Load()
			}
			le := "+Inf"
			if bucket < len(latencyBounds) {
				le = strconv.FormatFloat(latencyBounds[bucket].Seconds(), 'f', -1, 64)
			}
			b = fmt.Appendf(b, "%s_bucket{route=%q,le=%q} %d\n", latencyName, route, le, cumulative)
		}
		b = fmt.Appendf(b, "%s_sum{route=%q} %s\n", latencyName, route,
			strconv.FormatFloat(time.Duration(sum).Seconds(), 'g', -1, 64))
		b = fmt.Appendf(b, "%s_count{route=%q} %d\n", latencyName, route, cumulative)
	}
	return b
}
