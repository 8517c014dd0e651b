package poller

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/internal/logthrottle"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// documents builds and publishes the whole-market documents: the pair list
// from the catalog (holding back the pairs new to it until they can be
// answered), and the tickers and contracts from the whole-market streams
// (see venue.Doc), the quotes of what is served, and the bulk REST reads
// that stand in for them. It holds their state under its own locks; the
// Poller keeps the lifetime, the call path and the per-pair rounds, and
// calls it on its schedules.
type documents struct {
	// calls is the poller whose one call path every read takes (see bulk).
	calls *Poller
	plan  *bulkPlan // how often the bulk reads may run
	cfg   *Config
	venue venue.Venue
	store *snapshot.Store
	src   docSource
	log   *slog.Logger
	logs  *logthrottle.Throttle

	cat catalog
	// arrivals are when the pairs held back from /pairs first appeared in
	// the catalog (see incoming).
	arrivalsMu sync.Mutex
	arrivals   map[string]time.Time
	tk         tickerReads
	ct         contractReads

	omitted atomic.Int64 // spot tickers left out of the last build
	// contractsOmitted is how many contracts the last build left out.
	contractsOmitted atomic.Int64
}

// catalog is the spot list and the last catalog read, from which the pairs
// are rebuilt when the spot list changes.
type catalog struct {
	mu      sync.Mutex
	spot    []string
	markets []venue.Market
	// unlisted are the spot ids warned of as not published, so that a
	// catalog read once a minute does not repeat the warning (see
	// warnUnlisted).
	unlisted map[string]bool
}

func newDocuments(p *Poller, src docSource) *documents {
	return &documents{
		calls: p, plan: &p.planned, cfg: &p.cfg, venue: p.venue, store: p.store, src: src,
		log: p.log, logs: p.logs, cat: catalog{spot: slices.Clone(p.cfg.Spot)},
	}
}

// streamed reports whether the whole-market stream doc delivers recently
// enough that its REST read need not stand in.
func (d *documents) streamed(doc venue.Doc, now time.Time) bool { return d.src.Flowing(doc, now) }

// first makes the documents' first reads, once the catalog's: the
// tickers, and over REST alone the contracts too (keepsTickers: the source
// keeps the tickers from a stream).
func (d *documents) first(ctx context.Context, keepsTickers bool) {
	if err := d.refreshTickers(ctx); err != nil {
		d.log.Warn("first tickers read failed; retrying on schedule", logkey.Err, err)
	}
	// Over REST alone the contracts can be built at once from the reads
	// above. With streams they wait for the books' quotes: a first
	// publication from the bulk quotes would go stale (and /contracts 502)
	// before the books it then depends on are in sequence.
	if !keepsTickers {
		_ = d.refreshContracts(ctx)
	}
}

// schedule runs the documents' work on every, Run's schedule of jobs that
// never overlap themselves.
func (d *documents) schedule(every func(time.Duration, func(context.Context)), keepsTickers bool) {
	every(time.Second, func(context.Context) { d.listIncoming() })
	// A source that keeps the tickers from a stream has them rebuilt as
	// often as books are published, so that a spot pair's book back in
	// sequence shows in /tickers at once; the bulk calls keep their own,
	// slower plan either way.
	tickersEvery := d.cfg.TickersEvery
	if keepsTickers {
		tickersEvery = min(tickersEvery, d.cfg.BookEvery)
	}
	every(tickersEvery, func(ctx context.Context) { _ = d.refreshTickers(ctx) })
	every(time.Second, func(ctx context.Context) { _ = d.refreshContracts(ctx) })
}
