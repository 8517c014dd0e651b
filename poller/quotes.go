package poller

import (
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// quotes returns the best bid and ask of each of pairs from what is
// served: its local book's quote (with streams), or the top of the book the
// store serves for it, whichever is newer. A whole-market document priced
// from them lists a pair for as long as its /orderbook answers 200 from a
// book: when the venue dropped every stream, the local quotes of books
// waiting for their streams aged past half max-stale, the bulk quotes that
// stand in were refused, and /contracts listed 6 of 46 contracts while
// every book answered. A quote older than max-stale less quoteSlack is left
// out: the document it ages is built again within that time, and would
// otherwise answer 502 in between. all reports whether every pair's quote
// is younger than fresh, so that the bulk quotes need not stand in; at is
// when each quote was current.
func (d *documents) quotes(pairs []snapshot.Pair, now time.Time) (quotes []venue.Quote, at []time.Time, all bool) {
	local, localAt, _ := d.src.Quotes(pairs, now)
	type quote struct {
		q  venue.Quote
		at time.Time
	}
	bySymbol := make(map[string]quote, len(local))
	for i, q := range local {
		bySymbol[q.Symbol] = quote{q, localAt[i]}
	}
	fresh, oldest := d.cfg.fresher(), d.cfg.MaxStale-quoteSlack(d.cfg.MaxStale)
	all = true
	for _, pr := range pairs {
		best, ok := bySymbol[pr.Symbol]
		if !ok || now.Sub(best.at) > fresh {
			if q, qAt, served := d.servedQuote(pr, now); served && (!ok || qAt.After(best.at)) {
				best, ok = quote{q, qAt}, true
			}
		}
		if !ok || now.Sub(best.at) > oldest {
			all = false
			continue
		}
		if now.Sub(best.at) > fresh {
			all = false
		}
		quotes, at = append(quotes, best.q), append(at, best.at)
	}
	return quotes, at, all
}

// quoteSlack is how long before max-stale a quote stops pricing the
// whole-market documents: they are built every second (tickers as often
// as books with streams), so two builds' time, or a quarter of max-stale
// where that is shorter.
func quoteSlack(maxStale time.Duration) time.Duration { return min(2*time.Second, maxStale/4) }

// servedQuote is the top of the book the store serves for pair at now, and
// when that book was read or last confirmed current; ok is false when it
// serves none, or one with a side empty (no best level to quote).
func (d *documents) servedQuote(pair snapshot.Pair, now time.Time) (q venue.Quote, at time.Time, ok bool) {
	b, _ := d.store.Book([]byte(pair.TickerID), now.UnixNano())
	if !b.FreshAt(now.UnixNano(), d.cfg.MaxStale) {
		return q, at, false
	}
	bids, asks := b.Sides()
	if len(bids) == 0 || len(asks) == 0 {
		return q, at, false
	}
	return venue.Quote{Symbol: pair.Symbol, Bid: bids[0].Price, Ask: asks[0].Price}, time.Unix(0, b.ReadAt()), true
}
