// Package promhist is a Prometheus histogram with plain cumulative "le"
// buckets, built from the metrics library's counters: the series every
// Prometheus query and dashboard reads, where the library's own histogram
// writes VictoriaMetrics' vmrange buckets.
package promhist

import (
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Histogram is a Prometheus histogram built from the library's counters,
// one per cumulative bucket. An observation costs one atomic add per bucket
// at or above the value, which is nothing at the poller's few events a
// second, and the series are the plain `le` buckets Prometheus reads.
type Histogram struct {
	bounds  []float64
	buckets []*metrics.Counter // buckets[i] counts values <= bounds[i]; the last one is +Inf
	sum     *metrics.FloatCounter
	count   *metrics.Counter
}

// New registers the histogram name{labels} with the bucket bounds (seconds)
// on set.
func New(set *metrics.Set, name, labels string, bounds []float64) *Histogram {
	h := &Histogram{bounds: bounds}
	for _, b := range bounds {
		le := strconv.FormatFloat(b, 'f', -1, 64)
		h.buckets = append(h.buckets, set.NewCounter(name+"_bucket{"+labels+`,le="`+le+`"}`))
	}
	h.buckets = append(h.buckets, set.NewCounter(name+"_bucket{"+labels+`,le="+Inf"}`))
	h.sum = set.NewFloatCounter(name + "_sum{" + labels + "}")
	h.count = set.NewCounter(name + "_count{" + labels + "}")
	return h
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	for i, b := range h.bounds {
		if s <= b {
			h.buckets[i].Inc()
		}
	}
	h.buckets[len(h.bounds)].Inc()
	h.sum.Add(s)
	h.count.Inc()
}
