package poller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// tickerReads is what the bulk statistics and quotes last brought, and when
// they were last tried.
type tickerReads struct {
	mu          sync.Mutex
	stats       []venue.Stat
	quotes      []venue.Quote
	statsAt     time.Time // when the stats in use were read
	quotesAt    time.Time
	statsTried  time.Time // when a stats read was last attempted
	quotesTried time.Time
	from        uint64 // version of the pairs the current tickers were built from
}

// last returns what the bulk reads last brought, and when.
func (tk *tickerReads) last() (stats []venue.Stat, statsAt time.Time, quotes []venue.Quote, quotesAt time.Time) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.stats, tk.statsAt, tk.quotes, tk.quotesAt
}

// streamTickers is what the streams know of the tickers at one moment.
type streamTickers struct {
	stats   []venue.Stat // the ticker stream's rows
	statsAt time.Time
	have    bool // the ticker stream has delivered
	flowing bool // ... recently enough that no bulk statistics are read
	quotes  []venue.Quote
	at      []time.Time // when each quote was current
	all     bool        // every spot pair has a recent local quote
}

// refreshTickers reads whichever of the bulk statistics and quotes are due
// and publishes new tickers when anything changed. With streams, the
// statistics come from the all-market ticker stream and the quotes from the
// spot pairs' local books; the bulk calls stand in only for what the streams
// do not cover (the stream is quiet, a spot pair's book is not synced yet).
func (d *documents) refreshTickers(ctx context.Context) error {
	pairs := d.store.Pairs()
	if pairs == nil {
		return errors.New("no pairs yet")
	}
	now := time.Now()
	var st streamTickers
	var rows venue.Rows
	rows, st.statsAt, st.have = d.src.StreamRows(venue.DocTickers)
	st.stats = rows.Stats()
	st.flowing = d.src.Flowing(venue.DocTickers, now)
	st.quotes, st.at, st.all = d.quotes(pairs.Spot(), now)

	d.ct.mu.Lock()
	contractsWant := d.ct.wantQuotes
	d.ct.mu.Unlock()
	read, err := d.readTickers(ctx, now, !st.all || contractsWant, !st.flowing)
	if err != nil && !venue.Paused(err) { // a pause logs itself
		d.logs.Log(d.log, slog.LevelWarn, "tickers", "tickers read failed", slog.String(logkey.Err, err.Error()))
	} else if err == nil {
		d.logs.Forget("tickers")
	}

	d.tk.mu.Lock()
	stats, statsAt, quotes, quotesAt := assembleTickers(&d.tk, st, now, d.cfg.fresher())
	rebuild := (read || st.have || len(st.quotes) > 0 || d.tk.from != pairs.Version()) && stats != nil && quotes != nil
	if rebuild {
		d.tk.from = pairs.Version()
	}
	d.tk.mu.Unlock()
	if rebuild {
		d.publishTickers(pairs, stats, quotes, earlier(statsAt, quotesAt))
	}
	return err
}

// readTickers reads the bulk quotes and statistics that are wanted and due
// by the plan, keeps what they brought, and reports whether any read.
func (d *documents) readTickers(ctx context.Context, now time.Time, wantQuotes, wantStats bool) (read bool, err error) {
	d.plan.mu.Lock()
	quotesEvery, statsEvery := d.plan.quotesEvery, d.plan.statsEvery
	d.plan.mu.Unlock()
	d.tk.mu.Lock()
	quotesDue := wantQuotes && now.Sub(d.tk.quotesTried) >= quotesEvery
	statsDue := wantStats && now.Sub(d.tk.statsTried) >= statsEvery
	if quotesDue {
		d.tk.quotesTried = now
	}
	if statsDue {
		d.tk.statsTried = now
	}
	d.tk.mu.Unlock()

	var errs []error
	if quotesDue {
		if quotes, err := readBulk(ctx, d.calls, venue.CallQuotes, d.venue.Quotes); err != nil {
			errs = append(errs, err)
		} else {
			d.tk.mu.Lock()
			d.tk.quotes, d.tk.quotesAt = quotes, now
			d.tk.mu.Unlock()
			read = true
		}
	}
	if statsDue {
		if stats, err := readBulk(ctx, d.calls, venue.CallStats, d.venue.Stats); err != nil {
			errs = append(errs, err)
		} else {
			d.tk.mu.Lock()
			d.tk.stats, d.tk.statsAt = stats, now
			d.tk.mu.Unlock()
			d.src.SeedRows(venue.TickerRows(stats))
			read = true
		}
	}
	return read, errors.Join(errs...)
}

// assembleTickers picks the statistics and quotes a build of the tickers
// uses, and when each was read: the newer of the ticker stream's rows and
// the bulk statistics; the spot pairs' local quotes over the bulk quotes.
// A quote of what is served (see documents.quotes) is used while it is
// younger than fresh, or, while the bulk quotes cannot stand in (none read
// within fresh: the venue refuses calls), while documents.quotes keeps it
// (until two builds' time before max-stale); a spot pair
// with neither is left out of /tickers, counted, rather than aging the
// whole list. It is pure: bulk is read only.
func assembleTickers(bulk *tickerReads, st streamTickers, now time.Time, fresh time.Duration) (stats []venue.Stat, statsAt time.Time, quotes []venue.Quote, quotesAt time.Time) {
	stats, statsAt = bulk.stats, bulk.statsAt
	if st.have && (stats == nil || st.statsAt.After(statsAt)) {
		stats, statsAt = st.stats, st.statsAt
	}
	quotes, quotesAt = bulk.quotes, bulk.quotesAt
	restFresh := quotes != nil && now.Sub(quotesAt) <= fresh
	var use []venue.Quote
	useAt := now
	for i, q := range st.quotes {
		if now.Sub(st.at[i]) <= fresh || !restFresh {
			use = append(use, q)
			useAt = earlier(useAt, st.at[i])
		}
	}
	switch {
	case st.all:
		// No spot pair at all is an empty list, not a missing one.
		quotes, quotesAt = append([]venue.Quote{}, use...), useAt
	case restFresh:
		quotes, quotesAt = overlay(quotes, use), earlier(quotesAt, useAt)
	case len(use) > 0:
		quotes, quotesAt = use, useAt
	}
	return stats, statsAt, quotes, quotesAt
}

// publishTickers builds and publishes the tickers, counting the spot pairs
// left out.
func (d *documents) publishTickers(pairs *snapshot.Pairs, stats []venue.Stat, quotes []venue.Quote, readAt time.Time) {
	t, omitted := snapshot.NewTickers(pairs, stats, quotes, readAt)
	d.store.PutDoc(t, time.Now())
	d.omitted.Store(int64(len(omitted)))
	if len(omitted) > 0 {
		d.logs.Log(d.log, slog.LevelWarn, "omitted", "spot tickers left out",
			slog.Int("count", len(omitted)), slog.String("first", omitted[0].TickerID+": "+omitted[0].Reason))
	}
}

// overlay returns base with the quotes of over replacing those of the same
// symbol: the local books' quotes are newer than a bulk read.
func overlay(base, over []venue.Quote) []venue.Quote {
	bySymbol := make(map[string]int, len(over))
	for i, q := range over {
		bySymbol[q.Symbol] = i
	}
	out := make([]venue.Quote, 0, len(base)+len(over))
	for _, q := range base {
		if _, replaced := bySymbol[q.Symbol]; !replaced {
			out = append(out, q)
		}
	}
	return append(out, over...)
}

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
