package poller

import (
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/promhist"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Bucket bounds in seconds: a venue call is bounded by CallTimeout (default
// 10 s), a cold wait by the server's cold timeout (default 2 s).
var (
	callBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	waitBounds = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}
)

// pollerMetrics is what the poller counts as it goes. Everything that is a
// state rather than an event (ages, hot-set size, budget, pause) is a gauge
// computed when scraped, not kept up to date on every read.
type pollerMetrics struct {
	calls     [venue.NumCalls][venue.NumOutcomes]*metrics.Counter
	callTime  [venue.NumCalls]*promhist.Histogram
	deferred  [snapshot.NumStreams]*metrics.Counter    // by stream: reads a round could not afford
	coldLoads [snapshot.NumStreams][2]*metrics.Counter // by stream, then ok / failed
	coldWait  [snapshot.NumStreams]*promhist.Histogram // by stream

	weight [budget.NumPurposes]*metrics.Counter // REST weight spent, by purpose
}

func newPollerMetrics(set *metrics.Set, p *Poller) *pollerMetrics {
	m := new(pollerMetrics)
	for c := range venue.NumCalls {
		call := `call="` + c.String() + `"`
		for o := range venue.NumOutcomes {
			m.calls[c][o] = set.NewCounter(`marketfeed_venue_calls_total{` + call + `,outcome="` + o.String() + `"}`)
		}
		m.callTime[c] = promhist.New(set, "marketfeed_venue_call_duration_seconds", call, callBounds)
	}
	for s := range snapshot.NumStreams {
		stream := `stream="` + s.String() + `"`
		m.deferred[s] = set.NewCounter(`marketfeed_venue_reads_deferred_total{` + stream + `}`)
		m.coldLoads[s][0] = set.NewCounter(`marketfeed_cold_loads_total{` + stream + `,outcome="ok"}`)
		m.coldLoads[s][1] = set.NewCounter(`marketfeed_cold_loads_total{` + stream + `,outcome="failed"}`)
		m.coldWait[s] = promhist.New(set, "marketfeed_cold_load_wait_seconds", stream, waitBounds)
		set.NewGauge(`marketfeed_hot_pairs{`+stream+`}`, func() float64 {
			return float64(p.hot[s].Len())
		})
	}
	for pu := range budget.NumPurposes {
		// Purposes that share a name (a book's refresh from either share,
		// REST polls of books and trades) share its counter.
		m.weight[pu] = set.GetOrCreateCounter(`marketfeed_venue_weight_total{purpose="` + pu.String() + `"}`)
	}
	set.NewGauge("marketfeed_venue_max_stale_unmet", func() float64 {
		p.planned.mu.Lock()
		defer p.planned.mu.Unlock()
		return b2f(p.planned.staleUnmet && p.ledger.Limit() > 0)
	})
	for k := range budget.NumPauseKinds {
		set.NewGauge(`marketfeed_venue_pauses_total{reason="`+k.String()+`"}`, func() float64 {
			return float64(p.gate.PausesOf(k))
		})
	}
	set.NewGauge("marketfeed_venue_paused", func() float64 { return b2f(p.gate.Paused(time.Now())) })
	set.NewGauge("marketfeed_venue_permanent_failure", func() float64 { return b2f(p.gate.Permanent() != "") })
	set.NewGauge("marketfeed_venue_weight_limit", func() float64 { return float64(p.venueLimit.Load()) })
	set.NewGauge("marketfeed_venue_weight_budget", func() float64 { return float64(p.ledger.Limit()) })
	set.NewGauge("marketfeed_venue_weight_spent", func() float64 { return float64(p.ledger.Spent(time.Now())) })
	set.NewGauge("marketfeed_tickers_omitted", func() float64 { return float64(p.docs.omitted.Load()) })
	set.NewGauge("marketfeed_contracts_omitted", func() float64 { return float64(p.docs.contractsOmitted.Load()) })
	set.NewGauge("marketfeed_ready", func() float64 { return b2f(p.Status().Ready) })
	age := func(kind string, readAt func() int64) {
		set.NewGauge(`marketfeed_snapshot_age_seconds{kind="`+kind+`"}`, func() float64 {
			return time.Duration(max(time.Now().UnixNano()-readAt(), 0)).Seconds()
		})
	}
	// Pairs and tickers not read yet are as old as the poller.
	age("pairs", func() int64 {
		if ps := p.store.Pairs(); ps != nil {
			return ps.ReadAt()
		}
		return p.born.UnixNano()
	})
	age("tickers", func() int64 {
		if t := p.store.Tickers(); t != nil {
			return t.ReadAt()
		}
		return p.born.UnixNano()
	})
	for s := range snapshot.NumStreams {
		age(s.Part(), func() int64 { return p.hotReadAt(s, time.Now()) })
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// hotReadAt returns when the oldest snapshot of s among the hot pairs, the
// only ones anybody asks for, was read; a hot pair never read yet counts
// from its first request. No hot pair: now.
func (p *Poller) hotReadAt(s snapshot.Stream, now time.Time) int64 {
	readAt := now.UnixNano()
	cut := now.Add(-p.cfg.HotTTL).UnixNano()
	for id, hp := range *p.hot[s].pairs.Load() {
		if hp.wanted.Load() < cut {
			continue // cooling: no longer refreshed, and pruned at the next round
		}
		at, listed := p.store.ReadAt(s, []byte(id))
		if !listed {
			continue
		}
		if at == 0 {
			at = hp.since
		}
		readAt = min(readAt, at)
	}
	return readAt
}
