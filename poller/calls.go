package poller

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/poller/budget"
	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// bulkPlan is how often the bulk calls run within the budget, derived from
// the venue's weight limit (see Poller.plan).
type bulkPlan struct {
	mu          sync.Mutex
	statsEvery  time.Duration
	quotesEvery time.Duration
	bulkReserve int // weight per minute the bulk calls are planned to spend
	// catalogReserve is the part of bulkReserve the catalog needs; the
	// rest is for tickers, which a live ticker stream makes unnecessary.
	catalogReserve int
	// contractsReserve is the part the premiumIndex read needs while the
	// mark price stream is quiet: once every half max-stale.
	contractsReserve int
	// staleUnmet is set when the bulk calls cannot run often enough within
	// their share of the budget to honour max-stale.
	staleUnmet bool
}

// plan derives how often the bulk calls run from the venue's weight limit:
// statistics may take 30 % of the budget and quotes 10 %, never more, so
// that per-pair reads always keep a share. When those shares cannot run the
// bulk calls twice per max-stale period, tickers go stale on schedule: the
// process says so (a log line and a metric) rather than starve every pair.
// What the bulk calls are planned to spend is held back from per-pair reads.
func (p *Poller) plan(limit int) {
	p.planned.mu.Lock()
	defer p.planned.mu.Unlock()
	ceiling := max(p.cfg.TickersEvery, p.cfg.fresher())
	p.planned.staleUnmet = false
	interval := func(weight int, share float64) time.Duration {
		if limit == 0 || weight == 0 {
			return p.cfg.TickersEvery
		}
		d := time.Duration(float64(weight) * float64(time.Minute) / (share * float64(limit)))
		if d > ceiling {
			p.planned.staleUnmet = true
		}
		return max(d, p.cfg.TickersEvery)
	}
	p.planned.statsEvery = interval(p.venue.Weight(venue.CallStats), 0.3)
	p.planned.quotesEvery = interval(p.venue.Weight(venue.CallQuotes), 0.1)
	perMinute := func(weight int, every time.Duration) int {
		return int(math.Ceil(float64(weight) * float64(time.Minute) / float64(every)))
	}
	p.planned.catalogReserve = perMinute(p.venue.Weight(venue.CallCatalog), p.cfg.CatalogEvery)
	p.planned.contractsReserve = 0
	if _, ok := p.venue.(venue.ContractReader); ok {
		p.planned.contractsReserve = perMinute(p.venue.Weight(venue.CallContracts), p.cfg.fresher())
	}
	p.planned.bulkReserve = perMinute(p.venue.Weight(venue.CallStats), p.planned.statsEvery) +
		perMinute(p.venue.Weight(venue.CallQuotes), p.planned.quotesEvery) + p.planned.catalogReserve +
		p.planned.contractsReserve
}

// reserve is the weight a minute held back for the bulk calls: only the
// catalog's while the ticker stream delivers the statistics, and the
// premiumIndex read's too while the mark price stream does not deliver.
func (p *Poller) reserve() int {
	p.planned.mu.Lock()
	all, catalog, contracts := p.planned.bulkReserve, p.planned.catalogReserve, p.planned.contractsReserve
	p.planned.mu.Unlock()
	now := time.Now()
	switch {
	case !p.docs.streamed(venue.DocTickers, now):
		return all
	case p.docs.streamed(venue.DocMarks, now):
		return catalog
	}
	return catalog + contracts
}

// capsPlan is the ledger's planner: what every class's cap comes from, but
// for the limit, which is the ledger's. Per-pair book and trade reads split
// what the bulk calls leave by the demand of the hot pairs REST reads (see
// budget.CapsOf), and refreshes and probes are held to their fixed shares.
// A pair its stream keeps puts no demand on REST however often it is asked
// for: an aggregator reading every pair must not take from the snapshots
// that sync the books the weight that REST rounds would never spend.
func (p *Poller) capsPlan() budget.Plan {
	plan := budget.Plan{Reserve: p.reserve()}
	// The pair list's reserve holds the minute's scheduled reads and one
	// more: with a read a minute, two may fall within one window. The bulk
	// reads that stand in for lost streams keep one read each.
	p.planned.mu.Lock()
	plan.Own[budget.PurposeCatalog] = p.planned.catalogReserve + p.venue.Weight(venue.CallCatalog)
	p.planned.mu.Unlock()
	plan.Own[budget.PurposeTickers] = p.venue.Weight(venue.CallStats) + p.venue.Weight(venue.CallQuotes)
	if _, ok := p.venue.(venue.ContractReader); ok {
		plan.Own[budget.PurposeContracts] = p.venue.Weight(venue.CallContracts)
	}
	for s, row := range streamRows {
		c := row.purpose.Class()
		plan.Split[c] = true
		plan.Demand[c] = float64(p.hot[s].polled.Load()*int64(p.venue.Weight(row.call))) * float64(time.Minute) / float64(row.every(&p.cfg))
	}
	// Refreshes may spend RefreshShare of the venue's limit, and at least
	// one refresh.
	if limit := p.venueLimit.Load(); limit > 0 {
		plan.Share[budget.ClassRefresh] = max(int(p.cfg.RefreshShare*float64(limit)), p.bookWeight(p.cfg.RefreshDepth))
		plan.Share[budget.ClassProbe] = max(int(probeShare*float64(limit)), p.bookWeight(live.ProbeDepth))
	}
	return plan
}

// probeShare is the fraction of the venue's weight limit a minute that the
// probes of quiet stream-fed books may spend (see live.ProbeDepth): 96 at
// Binance's 2,400, 48 reads of 5 levels a minute. A book whose stream has
// been quiet for a few seconds is served only once a probe proves it
// current, so the share bounds how many quiet books stay answerable; on a
// venue whose books all move every second, probes are only the silent
// subscriptions'.
const probeShare = 0.04

// call runs one venue call of kind c whose weight is already spent: it
// refuses while calls are paused, reconciles the budget with the venue's own
// count, and feeds the outcome to the back-off.
func (p *Poller) call(ctx context.Context, c venue.Call, fn func(context.Context) error) error {
	if err := p.gate.Check(time.Now()); err != nil {
		p.pause.remind(p, time.Now())
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	start := time.Now()
	err := fn(ctx)
	cancel()
	now := time.Now()
	p.metrics.calls[c][venue.OutcomeOf(err)].Inc()
	p.metrics.callTime[c].Observe(now.Sub(start))
	p.reconcile(now)
	if pause := p.gate.Record(start, now, err); pause > 0 {
		p.pause.started(p, c, now, pause, err)
	}
	if err == nil {
		p.pause.ended(p, now)
	}
	return err
}

// pauseLog is the log of a pause of every venue call: a line when it
// starts that says why and for how long, the same line at most once a
// minute while calls are refused (with the count held back), and one when
// the venue answers again. A 451 says the venue refuses this region, which
// waiting does not cure, at error level. The reads the pause stops log
// nothing of their own (venue.Paused).
type pauseLog struct {
	mu     sync.Mutex
	since  time.Time // when the first pause of the incident began; zero: none
	until  time.Time // when the pause in force ends
	region bool      // the venue refuses this region (451)
}

// started logs a pause of d that call c's failure err started at now.
func (l *pauseLog) started(p *Poller, c venue.Call, now time.Time, d time.Duration, err error) {
	region := venue.OutcomeOf(err) == venue.OutcomeRestricted
	l.mu.Lock()
	changed := l.since.IsZero() || l.region != region
	if l.since.IsZero() {
		l.since = now
	}
	l.until, l.region = now.Add(d), region
	l.mu.Unlock()
	if changed {
		p.logs.Forget("pause") // a new incident, or a new reason: never held back as a repeat
	}
	l.write(p, now, slog.String("call", c.String()), slog.String(logkey.Err, err.Error()))
}

// remind logs the pause again, at most once a minute, as calls are
// refused while it lasts.
func (l *pauseLog) remind(p *Poller, now time.Time) {
	l.mu.Lock()
	paused := !l.since.IsZero()
	l.mu.Unlock()
	if paused {
		l.write(p, now)
	}
}

// write logs the pause in force through the throttle.
func (l *pauseLog) write(p *Poller, now time.Time, args ...any) {
	l.mu.Lock()
	left, region := max(l.until.Sub(now), 0).Round(time.Second), l.region
	l.mu.Unlock()
	if region {
		p.logs.Log(p.log, slog.LevelError, "pause", "the venue refuses this region (HTTP 451): every venue call paused, then tried again; run from a region the venue serves",
			append([]any{slog.Duration("for", left)}, args...)...)
		return
	}
	p.logs.Log(p.log, slog.LevelWarn, "pause", "venue calls paused", append([]any{slog.Duration("for", left)}, args...)...)
}

// blocked reports whether a call made now would be refused (the gate's
// Blocked), and reminds the log of the pause that refuses it.
func (p *Poller) blocked() bool {
	now := time.Now()
	if !p.gate.Blocked(now) {
		return false
	}
	p.pause.remind(p, now)
	return true
}

// ended logs, once, that the venue answered again after a pause.
func (l *pauseLog) ended(p *Poller, now time.Time) {
	l.mu.Lock()
	since := l.since
	l.since, l.region = time.Time{}, false
	l.mu.Unlock()
	if since.IsZero() {
		return
	}
	p.logs.Forget("pause")
	p.log.Info("venue answers again: calls resumed", slog.Duration("paused_for", now.Sub(since).Round(time.Second)))
}

// reconcile feeds the venue's own count of our weight to the budget.
func (p *Poller) reconcile(now time.Time) {
	if r, ok := p.venue.(venue.UsedWeightReporter); ok {
		if used, ok := r.UsedWeight(); ok {
			p.ledger.Observe(now, used)
		}
	}
}

// callFor runs one venue call of kind c through call and returns its value.
func callFor[T any](ctx context.Context, p *Poller, c venue.Call, fn func(context.Context) (T, error)) (v T, err error) {
	err = p.call(ctx, c, func(ctx context.Context) error {
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// bulk spends the weight of a bulk call and runs it.
func bulk[T any](ctx context.Context, p *Poller, c venue.Call, fn func(context.Context) (T, error)) (v T, err error) {
	if p.blocked() {
		return v, fmt.Errorf("%s: %w", c, venue.ErrPaused)
	}
	ask := budget.Ask{Purpose: budget.PurposeTickers, Weight: p.venue.Weight(c), Priority: budget.Waiting}
	switch c {
	case venue.CallCatalog:
		ask.Purpose = budget.PurposeCatalog
	case venue.CallContracts:
		ask.Purpose = budget.PurposeContracts
	case venue.CallOpenInterest:
		ask.Purpose, ask.Priority = budget.PurposeOpenInterest, budget.Background
	}
	if !p.ledger.Take(time.Now(), ask) {
		return v, fmt.Errorf("%s: %w", c, venue.ErrNoBudget)
	}
	p.metrics.weight[ask.Purpose].Add(ask.Weight)
	return callFor(ctx, p, c, fn)
}

// readBulk runs one bulk call that returns a list.
func readBulk[T any](ctx context.Context, p *Poller, c venue.Call, read func(context.Context) ([]T, error)) ([]T, error) {
	out, err := bulk(ctx, p, c, read)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c, err)
	}
	return out, nil
}

// bookWeight is the weight of a book read of the given depth.
func (p *Poller) bookWeight(depth int) int {
	if w, ok := p.venue.(venue.DepthWeigher); ok {
		return w.BookWeight(depth)
	}
	return p.venue.Weight(venue.CallBook)
}

// deferred counts reads of a stream that the budget or the read slots
// pushed to a later round.
func (p *Poller) deferred(s snapshot.Stream, n int) {
	p.stretched.Add(int64(n))
	p.metrics.deferred[s].Add(n)
}
