package live

import (
	"math"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/promhist"
	"marketfeed/snapshot"
)

// sourceMetrics is what the source counts as it goes; states (pairs by
// source, short books) are gauges computed when scraped.
type sourceMetrics struct {
	resyncs    map[string]*metrics.Counter              // by cause
	silent     [snapshot.NumStreams][2]*metrics.Counter // by stream: resubscribed, fell back to REST
	publishLag *promhist.Histogram                      // venue time of a book to its publication
	// suspended counts books kept across a lost connection.
	suspended *metrics.Counter
	// tradeGaps counts trade windows that missed trades while their
	// stream was lost; gapReads the reads of the missing ids; gapsCut the
	// gaps given up because the venue had no such ids.
	tradeGaps, gapReads, gapsCut *metrics.Counter
	// seeded counts the books and trade windows started from a seed.
	seeded [snapshot.NumStreams]*metrics.Counter
	// probes counts the probes of quiet books by outcome.
	probes [numProbeOutcomes]*metrics.Counter
	// depthReads and depthWeight count the snapshots read under books in
	// sequence (their streams healthy), and their weight, by tier (see
	// depthReadReasons): what steady state spends to keep every book as
	// deep as it is served.
	depthReads  [numTiers]*metrics.Counter
	depthWeight [numTiers]*metrics.Counter
}

// depthReadReasons names, by tier, why a book in sequence is read deeper:
// a request waits for more levels than it vouches for, its top came near
// the edge of what it vouches for, a side ran dry, or it was started from
// few levels. The tiers of books out of sequence and the probes have none.
var depthReadReasons = [numTiers]string{tierAsked: "request", tierAskedShallow: "request", tierRefresh: "short", tierDepleted: "dry", tierDry: "dry", tierDeepen: "deepen"}

// The outcomes of a probe (see Source.fetchProbe).
const (
	probeConfirmed = iota // the venue's update id was the book's: quiet, current
	probeBehind           // the venue had updates the stream had not delivered yet
	numProbeOutcomes
)

var probeOutcomes = [numProbeOutcomes]string{"confirmed", "behind"}

// A stream-fed book is published at its slot of the 350 ms schedule after
// the event that changed it, plus the venue's own delay (seconds).
var lagBounds = []float64{0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 2, 5}

func newSourceMetrics(set *metrics.Set, s *Source) *sourceMetrics {
	m := &sourceMetrics{resyncs: make(map[string]*metrics.Counter, len(resyncCauses))}
	for _, cause := range resyncCauses {
		m.resyncs[cause] = set.NewCounter(`marketfeed_book_resyncs_total{cause="` + cause + `"}`)
	}
	for k := range snapshot.NumStreams {
		stream := `stream="` + k.VenueStream() + `"`
		m.silent[k][0] = set.NewCounter(`marketfeed_stream_silences_total{` + stream + `,action="resubscribed"}`)
		m.silent[k][1] = set.NewCounter(`marketfeed_stream_silences_total{` + stream + `,action="rest"}`)
		m.seeded[k] = set.NewCounter(`marketfeed_seeded_total{part="` + k.Part() + `"}`)
		for src, name := range sourceNames {
			set.NewGauge(`marketfeed_pairs{part="`+k.Part()+`",source="`+name+`"}`, func() float64 {
				return float64(s.counts()[k][src])
			})
		}
	}
	for tier, reason := range depthReadReasons {
		if reason != "" {
			m.depthReads[tier] = set.GetOrCreateCounter(`marketfeed_book_depth_reads_total{reason="` + reason + `"}`)
			m.depthWeight[tier] = set.GetOrCreateCounter(`marketfeed_book_depth_read_weight_total{reason="` + reason + `"}`)
		}
	}
	for o, name := range probeOutcomes {
		m.probes[o] = set.NewCounter(`marketfeed_book_probes_total{outcome="` + name + `"}`)
	}
	m.suspended = set.NewCounter("marketfeed_books_suspended_total")
	m.tradeGaps = set.NewCounter("marketfeed_trade_window_gaps_total")
	m.gapReads = set.NewCounter("marketfeed_trade_window_gap_reads_total")
	m.gapsCut = set.NewCounter("marketfeed_trade_window_gaps_cut_total")
	m.publishLag = promhist.New(set, "marketfeed_book_publication_lag_seconds", `source="stream"`, lagBounds)
	set.NewGauge("marketfeed_books_short", func() float64 { return float64(s.ShortBooks()) })
	set.NewGauge("marketfeed_trade_window_holes", func() float64 { return float64(s.holes()) })
	set.NewGauge("marketfeed_books_sync_per_minute", func() float64 { return s.SyncProgress().PerMinute })
	set.NewGauge("marketfeed_books_sync_eta_seconds", func() float64 {
		if eta := s.SyncProgress().ETA; eta >= 0 {
			return eta.Seconds()
		}
		return math.Inf(1)
	})
	return m
}

// source is where a pair's snapshots come from.
type source int

const (
	sourceStream  source = iota // the stream keeps it current
	sourceSyncing               // the stream is live; a snapshot or backfill is pending
	sourceREST                  // no usable stream: REST reads when asked for
	sourceBudget                // no usable stream, and the REST read asked for is held back for want of weight
	numSources
)

var sourceNames = [numSources]string{"stream", "syncing", "rest", "budget"}

// counts counts the pairs by where their snapshots of each kind come from.
func (s *Source) counts() (n [snapshot.NumStreams][numSources]int) {
	now := time.Now()
	s.each(func(lp *pair) {
		for k, row := range kinds {
			src := sourceREST
			switch {
			case row.of(lp).current():
				src = sourceStream
			case row.of(lp).feed().delivering():
				src = sourceSyncing
			case s.cfg.Demand.HeldBack(snapshot.Stream(k), lp.tickerID, now):
				src = sourceBudget
			}
			n[k][src]++
		}
	})
	return n
}

// Sources counts the pairs of each stream kind by where they come from:
// "stream", "syncing", "rest", or "budget" for a pair without a usable
// stream whose REST read the budget holds back, which nothing reads. ok is
// always true: a source reads streams.
func (s *Source) Sources() (pairs [snapshot.NumStreams]map[string]int, ok bool) {
	for k, n := range s.counts() {
		pairs[k] = make(map[string]int, numSources)
		for src, name := range sourceNames {
			pairs[k][name] = n[src]
		}
	}
	return pairs, true
}

// holes counts the trade windows holding a hole: serving only the trades
// after it until the read of the missing ids fills it.
func (s *Source) holes() int {
	return s.count(func(lp *pair) bool { return lp.window.hole.open() })
}

// ShortBooks counts the books in sequence that hold fewer than the published
// levels on a side they cannot vouch beyond: they serve fewer levels there
// until their refresh comes.
func (s *Source) ShortBooks() int {
	return s.count(func(lp *pair) bool { return lp.bookCurrent() && lp.book.Short(snapshot.MaxDepth) })
}
