package poller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// contractReads is what /contracts is built from besides the tickers'
// statistics: the marks the REST call last brought, the open interest read
// so far, and what was last published.
type contractReads struct {
	mu         sync.Mutex
	marks      []venue.Contract // the last premiumIndex read
	marksAt    time.Time
	marksTried time.Time
	// interest is each contract's open interest as last read, by symbol;
	// order is the symbols in the order they are read again, the oldest
	// (or never read) first.
	interest map[string]venue.OpenInterest
	readAt   map[string]time.Time
	// body and from are the body and pair-list version of the contracts
	// last published: a build that changes neither is not published.
	// Comparing the bodies (tens of µs) spares hashing every build for a
	// tag only a request needs.
	body []byte
	from uint64
	// last is what the contracts last published were built from, for
	// rebuilding them against a new pair list before it is published.
	last *snapshot.ContractsInput
	// wantQuotes is set while a contract has no fresh local quote, so
	// that the tickers' round reads the bulk quotes for it.
	wantQuotes bool
}

// interestEvery is how old a contract's open interest may grow in steady
// state: every contract is read once in that time, a few each second.
// Five minutes: derivatives aggregators poll every minute or more, and open
// interest moves slowly; at a minute, 446 contracts cost 446 weight a
// minute, a third of the default budget, for no change a client would see.
const interestEvery = 5 * time.Minute

// refreshContracts publishes /contracts from the marks (the mark price
// stream, or a premiumIndex read while it is quiet), the tickers'
// statistics, every pair's best bid and ask (its local book, or the bulk
// quotes), and the open interest read so far; then reads the open interest
// due, with weight nothing else wants. It publishes only when the contracts
// changed. A venue that reads no contract data publishes none.
func (d *documents) refreshContracts(ctx context.Context) error {
	cr, ok := d.venue.(venue.ContractReader)
	if !ok {
		return nil
	}
	pairs := d.store.Pairs()
	if pairs == nil {
		return errors.New("no pairs yet")
	}
	now := time.Now()
	marks, marksAt, err := d.contractMarks(ctx, cr, pairs, now)
	if err != nil && !venue.Paused(err) { // a pause logs itself
		d.logs.Log(d.log, slog.LevelWarn, "contracts", "contracts read failed", slog.String(logkey.Err, err.Error()))
	} else if err == nil {
		d.logs.Forget("contracts")
	}
	stats, statsAt, bulkQuotes, bulkAt := d.tk.last()
	if rows, at, have := d.src.StreamRows(venue.DocTickers); have && (stats == nil || at.After(statsAt)) {
		stats, statsAt = rows.Stats(), at
	}
	local, localAt, all := d.quotes(pairs.List(), now)
	quotes, quotesAt, all := contractQuotes(local, localAt, all, bulkQuotes, bulkAt, now, d.cfg.fresher())
	d.ct.mu.Lock()
	// Over REST alone only the bulk quotes give every contract its bid
	// and ask. With streams every book gives its own once in sequence;
	// until then, or while it resyncs past its last quote's freshness,
	// the bulk quotes keep its contract listed. Their weight (at most the
	// plan's tenth of the budget) is the cost of a /contracts that does
	// not drop a contract and list it again as its book syncs.
	d.ct.wantQuotes = !all
	interest := make([]venue.OpenInterest, 0, len(d.ct.interest))
	for _, oi := range d.ct.interest {
		interest = append(interest, oi)
	}
	d.ct.mu.Unlock()
	// Nothing is published before there are marks, statistics and quotes
	// to build from: a list of every contract left out would be a 200
	// that says nothing.
	if marks != nil && stats != nil && len(quotes) > 0 {
		d.publishContracts(pairs, snapshot.ContractsInput{
			Stats: stats, Books: quotes, Marks: marks, Interest: interest, Onboard: d.onboard(),
			ReadAt: earlier(marksAt, earlier(statsAt, quotesAt)),
		})
	}
	d.readInterest(ctx, cr, pairs, now)
	return err
}

// contractMarks returns the marks to build from: the stream's rows, over
// the last premiumIndex read for the symbols the stream has not brought
// within max-stale. The premiumIndex is read again, at most every half
// max-stale, while the stream is quiet or leaves out a listed symbol (one
// symbol's stream can go silent while the rest flow).
func (d *documents) contractMarks(ctx context.Context, cr venue.ContractReader, pairs *snapshot.Pairs, now time.Time) ([]venue.Contract, time.Time, error) {
	streamed, at, have := d.src.StreamRows(venue.DocMarks)
	rows := streamed.Contracts()
	sent := make(map[string]bool, len(rows))
	for _, r := range rows {
		sent[r.Symbol] = true
	}
	// The listed symbols the stream has not brought: a read stands in for
	// those, and for those alone (the read lists every market the venue
	// has, listed here or not).
	wanted := make(map[string]bool)
	for _, pr := range pairs.List() {
		if !sent[pr.Symbol] {
			wanted[pr.Symbol] = true
		}
	}
	missing := !have || !d.src.Flowing(venue.DocMarks, now) || len(wanted) > 0
	d.ct.mu.Lock()
	rest, restAt := d.ct.marks, d.ct.marksAt
	due := missing && now.Sub(d.ct.marksTried) >= d.cfg.fresher()
	if due {
		d.ct.marksTried = now
	}
	d.ct.mu.Unlock()
	var err error
	if due {
		// A row the adapter found unusable is not among them: its
		// contract is left out of the publication and counted there.
		var read []venue.Contract
		if read, err = bulk(ctx, d.calls, venue.CallContracts, func(ctx context.Context) ([]venue.Contract, error) {
			rows, _, err := cr.Contracts(ctx)
			return rows, err
		}); err == nil {
			d.ct.mu.Lock()
			d.ct.marks, d.ct.marksAt = read, now
			d.ct.mu.Unlock()
			rest, restAt = read, now
		} else {
			err = fmt.Errorf("read %s: %w", venue.CallContracts, err)
		}
	}
	if rest == nil || now.Sub(restAt) > d.cfg.MaxStale {
		if !have {
			return nil, time.Time{}, err
		}
		return rows, at, err
	}
	if !have {
		return rest, restAt, err
	}
	// The stream's rows over the read's: a symbol the stream left out is
	// the read's, and the publication is then as old as the older of the
	// two; a read the stream has since covered entirely does not age it.
	marks, used := rows, false
	for _, r := range rest {
		if wanted[r.Symbol] {
			marks, used = append(marks, r), true
		}
	}
	if used {
		at = earlier(at, restAt)
	}
	return marks, at, err
}

// publishContracts builds the contracts and publishes them when they
// differ from the last published, or the pair list did; it counts the
// contracts left out.
//
// A build from a pair list older than the one the last contracts were
// built from is not published: refreshContracts takes the pair list as it
// starts, and a catalog read that drops a pair meanwhile publishes the
// contracts of the new list first (recontract); publishing the older build
// after it listed the dropped pair's contract again, beside a /pairs that
// no longer had it.
func (d *documents) publishContracts(pairs *snapshot.Pairs, in snapshot.ContractsInput) {
	c, omitted := snapshot.NewContracts(pairs, in)
	d.ct.mu.Lock()
	d.ct.last = &in
	if pairs.Version() < d.ct.from {
		d.ct.mu.Unlock()
		return
	}
	same := bytes.Equal(c.Body(), d.ct.body) && d.ct.from == pairs.Version()
	if !same {
		d.ct.body, d.ct.from = c.Body(), pairs.Version()
	}
	d.ct.mu.Unlock()
	d.contractsOmitted.Store(int64(len(omitted)))
	if same {
		return
	}
	d.store.PutDoc(c, time.Now())
	if len(omitted) > 0 {
		d.logs.Log(d.log, slog.LevelWarn, "contracts omitted", "contracts left out",
			slog.Int("count", len(omitted)), slog.String("first", omitted[0].TickerID+": "+omitted[0].Reason))
	}
}

// readInterest reads the open interest of the contracts due: those never
// read first, then the oldest, as many as keep every contract within
// interestEvery at one round a second. It reads nothing until the books are
// settled (every stream delivering, no book waiting for its sync), and the
// budget lets it spend only weight nothing else
// wants (budget.PurposeOpenInterest): during a recovery open interest ages,
// and /contracts says how old it is.
func (d *documents) readInterest(ctx context.Context, cr venue.ContractReader, pairs *snapshot.Pairs, now time.Time) {
	if !d.src.Settled(now) {
		return
	}
	list := pairs.List()
	n := (len(list)*int(time.Second) + int(interestEvery) - 1) / int(interestEvery)
	d.ct.mu.Lock()
	if d.ct.readAt == nil {
		d.ct.readAt, d.ct.interest = map[string]time.Time{}, map[string]venue.OpenInterest{}
		d.seedInterest(pairs)
	}
	due := make([]string, 0, n)
	seen := make(map[string]bool, len(list))
	for _, pr := range list {
		if seen[pr.Symbol] {
			continue
		}
		seen[pr.Symbol] = true
		if at, ok := d.ct.readAt[pr.Symbol]; !ok || now.Sub(at) >= interestEvery-time.Second {
			due = append(due, pr.Symbol)
		}
	}
	// The oldest first; never read (the zero time) is oldest of all.
	slices.SortStableFunc(due, func(a, b string) int { return d.ct.readAt[a].Compare(d.ct.readAt[b]) })
	due = due[:min(len(due), n)]
	// A symbol no longer listed is forgotten.
	for s := range d.ct.readAt {
		if !seen[s] {
			delete(d.ct.readAt, s)
			delete(d.ct.interest, s)
		}
	}
	d.ct.mu.Unlock()
	for _, s := range due {
		oi, err := bulk(ctx, d.calls, venue.CallOpenInterest, func(ctx context.Context) (venue.OpenInterest, error) {
			return cr.OpenInterest(ctx, s)
		})
		if errors.Is(err, venue.ErrNoBudget) || errors.Is(err, venue.ErrPaused) {
			return // no idle weight, or calls paused: not tried, first again next round
		}
		d.ct.mu.Lock()
		d.ct.readAt[s] = now // tried: a read the venue failed waits its turn again
		if err == nil {
			d.ct.interest[s] = oi
		}
		d.ct.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// onboard is when the venue listed each market, by symbol, where it says.
func (d *documents) onboard() map[string]int64 {
	d.cat.mu.Lock()
	defer d.cat.mu.Unlock()
	m := make(map[string]int64, len(d.cat.markets))
	for _, mk := range d.cat.markets {
		if mk.Onboard > 0 {
			m[mk.Symbol] = mk.Onboard
		}
	}
	return m
}

// seedInterest starts the open interest from what the store publishes: a
// member that takes over a cluster's ingest holds the last leader's
// contracts, and /contracts keeps every open interest while it reads them
// again, the oldest first as the last leader would have. Called with
// d.ct.mu held, once.
func (d *documents) seedInterest(pairs *snapshot.Pairs) {
	for id, oi := range d.store.Contracts().Interest() {
		pr, ok := pairs.Lookup(id)
		if !ok {
			continue
		}
		oi.Symbol = pr.Symbol
		d.ct.interest[pr.Symbol] = oi
		d.ct.readAt[pr.Symbol] = time.UnixMilli(oi.Time)
	}
}

// recontract publishes the contracts of pairs, a pair list about to be
// published, from what the last contracts were built from: a pair that
// leaves /pairs leaves /contracts in the same step, before the new list is
// served (and, in a cluster, before it is replicated).
func (d *documents) recontract(pairs *snapshot.Pairs) {
	d.ct.mu.Lock()
	last := d.ct.last
	d.ct.mu.Unlock()
	if last != nil {
		d.publishContracts(pairs, *last)
	}
}

// contractQuotes picks every contract's best bid and ask from what is
// served (see documents.quotes): a quote younger than fresh; else the bulk
// quotes while those are younger than fresh; else an older quote of what
// is served, so that a contract is listed while its book answers. A
// contract with none is left out. all reports whether every pair had a
// quote younger than fresh; at is when the oldest quote used was current.
func contractQuotes(local []venue.Quote, localAt []time.Time, all bool, bulk []venue.Quote, bulkAt, now time.Time, fresh time.Duration) (quotes []venue.Quote, at time.Time, stillAll bool) {
	var recent, older []venue.Quote
	recentAt, olderAt := now, now
	for i, q := range local {
		if now.Sub(localAt[i]) > fresh {
			all = false
			older, olderAt = append(older, q), earlier(olderAt, localAt[i])
			continue
		}
		recent, recentAt = append(recent, q), earlier(recentAt, localAt[i])
	}
	switch {
	case all:
		return recent, recentAt, true
	case bulk != nil && now.Sub(bulkAt) <= fresh:
		return overlay(bulk, recent), earlier(recentAt, bulkAt), false
	}
	return append(recent, older...), earlier(recentAt, olderAt), false
}
