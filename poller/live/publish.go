package live

import (
	"log/slog"
	"slices"
	"time"

	"marketfeed/snapshot"
)

// refreshBelow is how many levels a side may still vouch for when its book
// asks for a new snapshot to lay under it.
const refreshBelow = snapshot.MaxDepth + snapshot.MaxDepth/2

// PublishBooks publishes every stream-fed book that changed since its last
// publication, and confirms those that did not. A book whose side runs short
// of published levels asks for a refresh.
func (s *Source) PublishBooks() {
	now := time.Now()
	for _, lp := range *s.pairs.Load() {
		lp.mu.Lock()
		if !lp.bookCurrent() || lp.book.Held() {
			lp.mu.Unlock()
			continue
		}
		// Ask for a deeper view while the book can still publish every
		// level: half the published depth ahead of running short. What it
		// holds meanwhile is an exact prefix of the venue's book.
		switch {
		case lp.book.Short(refreshBelow):
			if !lp.book.Record() {
				s.metrics.resyncs[causeShort].Inc()
			}
		case lp.book.Recording() && !lp.books.rest.inFlight:
			// The price turned back while the refresh waited its turn
			// in the refresh share: it is no longer needed.
			lp.book.StopRecording()
		}
		if lp.book.Vouched() == 0 {
			// Depleted: the last publication stands until the refresh.
			lp.mu.Unlock()
			continue
		}
		if !lp.book.Changed() && lp.books.confirm(now, s.putBook) {
			lp.lastQuoteAt = now
			lp.mu.Unlock()
			continue
		}
		build := s.takeBook(lp, now)
		lp.mu.Unlock()
		build()
	}
}

func (s *Source) putBook(b *snapshot.Book)     { s.cfg.Store.PutBook(b) }
func (s *Source) putTrades(t *snapshot.Trades) { s.cfg.Store.PutTrades(t) }

// takeBook takes the book's state for publishing and returns the build of
// its publication, to run once lp.mu is released. Called with lp.mu held.
func (s *Source) takeBook(lp *pair, now time.Time) (build func()) {
	bids, asks := lp.book.Top(snapshot.MaxDepth)
	venueTime, updateID := lp.book.Time(), lp.book.LastUpdateID()
	lp.book.ResetChanged()
	seq := lp.books.take()
	return func() {
		// The levels were checked as they arrived and the book keeps its
		// sides in order: they are not checked again.
		b := snapshot.NewCheckedBook(lp.tickerID, venueTime, updateID, bids, asks, now)
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if lp.books.finish(seq, b, s.putBook) {
			lp.lastQuote = quoteOf(lp.symbol, bids[:min(1, len(bids))], asks[:min(1, len(asks))])
			lp.lastQuoteAt = now
			s.metrics.publishLag.Observe(now.Sub(time.UnixMilli(venueTime)))
		}
	}
}

// PublishTrades publishes every complete trade window that changed, and
// confirms those that did not.
func (s *Source) PublishTrades() {
	now := time.Now()
	for _, lp := range *s.pairs.Load() {
		lp.mu.Lock()
		if !lp.tradesCurrent() || (!lp.windowChanged && lp.trades.confirm(now, s.putTrades)) {
			lp.mu.Unlock()
			continue
		}
		build := s.takeTrades(lp, now)
		lp.mu.Unlock()
		build()
	}
}

// takeTrades takes the trade window for publishing and returns the build of
// its publication, to run once lp.mu is released. Called with lp.mu held.
func (s *Source) takeTrades(lp *pair, now time.Time) (build func()) {
	list := slices.Clone(lp.window.served())
	prev := lp.trades.pub
	lp.windowChanged = false
	seq := lp.trades.take()
	return func() {
		t, err := snapshot.NewTradesAfter(prev, lp.tickerID, list, now)
		if err != nil {
			s.cfg.Log(slog.LevelWarn, "trades-"+lp.tickerID, "trade window unusable",
				slog.String(logKeyPair, lp.tickerID), slog.String(logKeyErr, err.Error()))
		}
		lp.mu.Lock()
		lp.trades.finish(seq, t, s.putTrades)
		lp.mu.Unlock()
	}
}
