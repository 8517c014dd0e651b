package poller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// RefreshCatalog reads the venue's markets and publishes the pair list.
func (p *Poller) RefreshCatalog(ctx context.Context) error {
	start := time.Now()
	cat, err := bulk(ctx, p, venue.CallCatalog, p.venue.Catalog)
	if err != nil {
		if !venue.Paused(err) { // a pause logs itself
			p.logs.Log(p.log, slog.LevelWarn, "catalog", "catalog read failed", slog.String("err", err.Error()))
		}
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
		p.ledger.SetOthers(int(float64(limit) * (1/p.cfg.Share - 1)))
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
	p.docs.catalogRead(cat.Markets, start)
	return nil
}

// catalogRead keeps a catalog read at readAt and publishes its pair list.
func (d *documents) catalogRead(markets []venue.Market, readAt time.Time) {
	d.cat.mu.Lock()
	d.cat.markets = markets
	spot := d.cat.spot
	d.cat.mu.Unlock()
	d.publishPairs(markets, spot, readAt)
}

// publishPairs publishes the pair list and, with streams, has the streams
// follow it.
func (d *documents) publishPairs(markets []venue.Market, spot []string, readAt time.Time) {
	cfg := d.pairsConfig(spot)
	pairs := snapshot.NewPairs(markets, cfg, readAt)
	now := time.Now()
	published := pairs
	if cfg.Incoming = d.incoming(pairs, now); len(cfg.Incoming) > 0 {
		// The source follows every pair; the store lists the rest.
		published = snapshot.NewPairs(markets, cfg, readAt)
	}
	d.warnUnlisted(pairs, spot)
	// The contracts of pairs no longer listed go first: no /contracts
	// answered after this /pairs lists a pair it does not.
	d.recontract(published)
	d.store.PutDoc(published, now)
	d.src.SetPairs(pairs)
}

// pairsConfig is the publication rules' configuration with the spot list.
func (d *documents) pairsConfig(spot []string) snapshot.PairsConfig {
	return snapshot.PairsConfig{Venue: d.venue.Name(), Spot: spot, Quotes: d.cfg.Quotes}
}

// warnUnlisted logs each id of the spot list that pairs does not publish as
// spot, once while it stays so: an id the venue has no tradable market of
// is left out by the publication rules, and would otherwise be dropped
// without a word.
func (d *documents) warnUnlisted(pairs *snapshot.Pairs, spot []string) {
	if !d.cfg.WarnUnlistedSpot {
		return
	}
	published := make(map[string]bool)
	for _, pair := range pairs.Spot() {
		published[pair.TickerID] = true
	}
	d.cat.mu.Lock()
	defer d.cat.mu.Unlock()
	unlisted := make(map[string]bool)
	for _, id := range spot {
		if published[id] {
			continue
		}
		if !d.cat.unlisted[id] {
			d.log.Warn("spot pair not published: the venue has no tradable market of that name", logkey.Pair, id)
		}
		unlisted[id] = true
	}
	d.cat.unlisted = unlisted
}

// WarnSpot logs again each spot id the venue has no tradable market of, as
// on SIGHUP, when an operator looks at the log for what the configuration
// does; nothing before the first catalog read, which logs them itself.
func (p *Poller) WarnSpot() { p.docs.warnSpot() }

func (d *documents) warnSpot() {
	d.cat.mu.Lock()
	markets, spot := d.cat.markets, d.cat.spot
	d.cat.unlisted = nil
	d.cat.mu.Unlock()
	if markets != nil {
		d.warnUnlisted(snapshot.NewPairs(markets, d.pairsConfig(spot), time.Now()), spot)
	}
}

// maxIncoming is how long a pair new to the catalog may wait for its book
// and trades before /pairs lists it anyway: a market that does not trade
// has no trades to wait for.
const maxIncoming = 30 * time.Second

// incoming returns the pairs of a new list to hold back from /pairs (see
// snapshot.PairsConfig.Incoming): those the list last published did not show,
// while they do not hold both a book and trades, for at most maxIncoming.
// A new listing then appears in /pairs only once it can be answered, on
// this process and, with Config.Replicated, on every replica that follows
// it. Only with market streams,
// which keep every listed pair current whether asked for or not; and not
// for the first list, which a process cannot serve anything before.
func (d *documents) incoming(pairs *snapshot.Pairs, now time.Time) map[string]bool {
	d.arrivalsMu.Lock()
	defer d.arrivalsMu.Unlock()
	prev := d.store.Pairs()
	if prev == nil || d.cfg.Streams == nil {
		return nil
	}
	arrivals := make(map[string]time.Time)
	held := make(map[string]bool)
	for _, pair := range pairs.List() {
		if _, listed := prev.Lookup(pair.TickerID); listed {
			continue
		}
		since, seen := d.arrivals[pair.TickerID]
		if !seen {
			since = now
		}
		if d.listable(pair.TickerID, since, now) {
			continue
		}
		arrivals[pair.TickerID] = since
		held[pair.TickerID] = true
	}
	d.arrivals = arrivals
	return held
}

// listable reports whether a pair new to the catalog since may be listed:
// it has waited maxIncoming, or the store holds a value of every stream
// kind of it, and so does every replica (see Config.Replicated, which waits
// for every kind too).
func (d *documents) listable(id string, since, now time.Time) bool {
	if now.Sub(since) >= maxIncoming {
		return true
	}
	for k := range snapshot.NumStreams {
		if !d.store.Holds(k, []byte(id), now.UnixNano()) {
			return false
		}
	}
	return d.cfg.Replicated == nil || d.cfg.Replicated(id)
}

// listIncoming publishes the pair list again once a pair held back from it
// holds a value of every stream kind, or has waited maxIncoming.
func (d *documents) listIncoming() {
	cur := d.store.Pairs()
	if cur == nil || len(cur.Incoming()) == 0 {
		return
	}
	now := time.Now()
	d.arrivalsMu.Lock()
	due := false
	for _, pair := range cur.Incoming() {
		if since, ok := d.arrivals[pair.TickerID]; !ok || d.listable(pair.TickerID, since, now) {
			due = true
		}
	}
	d.arrivalsMu.Unlock()
	if !due {
		return
	}
	d.cat.mu.Lock()
	markets, spot := d.cat.markets, d.cat.spot
	d.cat.mu.Unlock()
	d.publishPairs(markets, spot, time.Unix(0, cur.ReadAt()))
}

// SetSpot replaces the platform's spot list and republishes the pairs from
// the last catalog read, without calling the venue; it warns of the list's
// ids the venue has no tradable market of (see warnUnlisted).
func (p *Poller) SetSpot(ids []string) { p.docs.setSpot(ids) }

func (d *documents) setSpot(ids []string) {
	d.cat.mu.Lock()
	d.cat.spot = slices.Clone(ids)
	d.cat.unlisted = nil // a new list: warn of its unlisted ids afresh
	markets := d.cat.markets
	d.cat.mu.Unlock()
	if prev := d.store.Pairs(); prev != nil {
		d.publishPairs(markets, ids, time.Unix(0, prev.ReadAt()))
	}
}
