package poller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// RefreshCatalog reads the venue's markets and publishes the pair list.
func (p *Poller) RefreshCatalog(ctx context.Context) error {
	var cat venue.Catalog
	start := time.Now()
	err := p.bulk(ctx, venue.CallCatalog, func(ctx context.Context) (err error) {
		cat, err = p.venue.Catalog(ctx)
		return err
	})
	if err != nil {
		p.logs.Log(p.log, slog.LevelWarn, "catalog", "catalog read failed", slog.String("err", err.Error()))
		return fmt.Errorf("read catalog: %w", err)
	}
	p.logs.Forget("catalog")
	p.venueLimit.Store(int64(cat.WeightLimit))
	limit := int(float64(cat.WeightLimit) * p.cfg.Budget)
	if cat.WeightLimit > 0 && limit == 0 {
		limit = 1
	}
	if limit != p.ledger.Limit() {
		p.ledger.SetLimit(limit)
		p.plan(limit)
		p.reconcile(time.Now()) // the count that came with the catalog, now that there is a limit
		p.log.Info("venue weight budget", "limit_per_minute", cat.WeightLimit, "budget_per_minute", limit)
		p.planned.mu.Lock()
		unmet, statsEvery := p.planned.staleUnmet, p.planned.statsEvery
		p.planned.mu.Unlock()
		if unmet && !p.src.KeepsTickers() {
			p.log.Warn("max-stale cannot be honoured within the venue weight budget: tickers are read less often",
				"max_stale", p.cfg.MaxStale, "stats_every", statsEvery)
		}
	}
	p.catalogMu.Lock()
	p.markets = cat.Markets
	spot := p.spot
	p.catalogMu.Unlock()
	p.publishPairs(cat.Markets, spot, start)
	return nil
}

// publishPairs publishes the pair list and, with streams, has the streams
// follow it.
func (p *Poller) publishPairs(markets []venue.Market, spot []string, readAt time.Time) {
	pairs := snapshot.NewPairs(markets, snapshot.PairsConfig{
		Venue: p.venue.Name(), Spot: spot, Quotes: p.cfg.Quotes,
	}, readAt)
	p.store.PutPairs(pairs, time.Now())
	p.src.SetPairs(pairs)
}

// SetSpot replaces the platform's spot list and republishes the pairs from
// the last catalog read, without calling the venue.
func (p *Poller) SetSpot(ids []string) {
	p.catalogMu.Lock()
	p.spot = slices.Clone(ids)
	markets := p.markets
	p.catalogMu.Unlock()
	if prev := p.store.Pairs(); prev != nil {
		p.publishPairs(markets, ids, time.Unix(0, prev.ReadAt()))
	}
}
