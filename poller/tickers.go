package poller

import (
	"context"
	"errors"
	"fmt"
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
func (p *Poller) refreshTickers(ctx context.Context) error {
	pairs := p.store.Pairs()
	if pairs == nil {
		return errors.New("no pairs yet")
	}
	now := time.Now()
	var st streamTickers
	st.stats, st.statsAt, st.have = p.src.StreamTickers()
	st.flowing = p.src.TickersFlowing(now)
	st.quotes, st.at, st.all = p.quotes(pairs.Spot(), now)

	p.ct.mu.Lock()
	contractsWant := p.ct.wantQuotes
	p.ct.mu.Unlock()
	read, err := p.readTickers(ctx, now, !st.all || contractsWant, !st.flowing)
	if err != nil && !venue.Paused(err) { // a pause logs itself
		p.logs.Log(p.log, slog.LevelWarn, "tickers", "tickers read failed", slog.String(logkey.Err, err.Error()))
	} else if err == nil {
		p.logs.Forget("tickers")
	}

	p.tk.mu.Lock()
	stats, statsAt, quotes, quotesAt := assembleTickers(&p.tk, st, now, p.fresher())
	rebuild := (read || st.have || len(st.quotes) > 0 || p.tk.from != pairs.Version()) && stats != nil && quotes != nil
	if rebuild {
		p.tk.from = pairs.Version()
	}
	p.tk.mu.Unlock()
	if rebuild {
		p.publishTickers(pairs, stats, quotes, earlier(statsAt, quotesAt))
	}
	return err
}

// readTickers reads the bulk quotes and statistics that are wanted and due
// by the plan, keeps what they brought, and reports whether any read.
func (p *Poller) readTickers(ctx context.Context, now time.Time, wantQuotes, wantStats bool) (read bool, err error) {
	p.planned.mu.Lock()
	quotesEvery, statsEvery := p.planned.quotesEvery, p.planned.statsEvery
	p.planned.mu.Unlock()
	p.tk.mu.Lock()
	quotesDue := wantQuotes && now.Sub(p.tk.quotesTried) >= quotesEvery
	statsDue := wantStats && now.Sub(p.tk.statsTried) >= statsEvery
	if quotesDue {
		p.tk.quotesTried = now
	}
	if statsDue {
		p.tk.statsTried = now
	}
	p.tk.mu.Unlock()

	var errs []error
	if quotesDue {
		if quotes, err := readBulk(ctx, p, venue.CallQuotes, p.venue.Quotes); err != nil {
			errs = append(errs, err)
		} else {
			p.tk.mu.Lock()
			p.tk.quotes, p.tk.quotesAt = quotes, now
			p.tk.mu.Unlock()
			read = true
		}
	}
	if statsDue {
		if stats, err := readBulk(ctx, p, venue.CallStats, p.venue.Stats); err != nil {
			errs = append(errs, err)
		} else {
			p.tk.mu.Lock()
			p.tk.stats, p.tk.statsAt = stats, now
			p.tk.mu.Unlock()
			p.src.SeedTickers(stats)
			read = true
		}
	}
	return read, errors.Join(errs...)
}

// assembleTickers picks the statistics and quotes a build of the tickers
// uses, and when each was read: the newer of the ticker stream's rows and
// the bulk statistics; the spot pairs' local quotes over the bulk quotes.
// A quote of what is served (see Poller.quotes) is used while it is
// younger than fresh, or, while the bulk quotes cannot stand in (none read
// within fresh: the venue refuses calls), while Poller.quotes keeps it
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
func (p *Poller) publishTickers(pairs *snapshot.Pairs, stats []venue.Stat, quotes []venue.Quote, readAt time.Time) {
	t, omitted := snapshot.NewTickers(pairs, stats, quotes, readAt)
	p.store.PutDoc(t, time.Now())
	p.omitted.Store(int64(len(omitted)))
	if len(omitted) > 0 {
		p.logs.Log(p.log, slog.LevelWarn, "omitted", "spot tickers left out",
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

// readBulk runs one bulk call that returns a list.
func readBulk[T any](ctx context.Context, p *Poller, c venue.Call, read func(context.Context) ([]T, error)) ([]T, error) {
	out, err := bulk(ctx, p, c, read)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c, err)
	}
	return out, nil
}

// fresher is the age within which data from the streams (and the bulk
// calls' last reads) is used without another REST read standing in: half of
// max-stale, so that a source gone quiet leaves time for a read before
// anything ages out.
func (p *Poller) fresher() time.Duration { return p.cfg.MaxStale / 2 }

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
