package live

import (
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Quotes returns the best bid and ask of the spot pairs from their local
// books, each with when it was current: the perpetual's mid the tickers
// publish. A book in sequence gives its current top, current when the venue
// last vouched for it (see bookState.heardAt); a book resyncing, or run
// dry on a side while its refresh is read, gives the top it last
// published while that is younger than max-stale, so neither takes a
// ticker or a contract away: a side run dry has no best level the book
// can vouch for (a level beyond the snapshot's edge may not be the
// venue's best), and an empty one is no quote at all. all reports whether every spot pair
// has a quote recent enough (see Config.Fresh) that the bulk quotes need not
// stand in.
func (s *Source) Quotes(spot []snapshot.Pair, now time.Time) (quotes []venue.Quote, at []time.Time, all bool) {
	stale := 0
	for _, p := range spot {
		lp := s.pair(p.Symbol)
		if lp == nil {
			stale++
			continue
		}
		lp.mu.Lock()
		q, qAt := lp.lastQuote, lp.lastQuoteAt
		if lp.bookCurrent() && lp.book.Vouched() > 0 {
			bids, asks := lp.book.Top(1)
			q, qAt = quoteOf(p.Symbol, bids, asks), lp.heardAt
		}
		lp.mu.Unlock()
		age := now.Sub(qAt)
		if q.Symbol == "" || age > s.cfg.Fresh {
			stale++
		}
		if q.Symbol != "" && age <= s.cfg.MaxStale {
			quotes = append(quotes, q)
			at = append(at, qAt)
		}
	}
	return quotes, at, stale == 0
}

// quoteOf is the best bid and ask of a book's top levels.
func quoteOf(symbol string, bids, asks []venue.Level) venue.Quote {
	q := venue.Quote{Symbol: symbol}
	if len(bids) > 0 {
		q.Bid = bids[0].Price
	}
	if len(asks) > 0 {
		q.Ask = asks[0].Price
	}
	return q
}

// KeepsTickers reports true: the all-market ticker stream keeps the
// statistics, and the local books the spot pairs' quotes.
func (s *Source) KeepsTickers() bool { return true }
