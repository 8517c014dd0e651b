package live

import (
	"errors"
	"log/slog"
	"time"

	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Resync causes, for metrics and logs.
const (
	causeGap      = "gap"      // an event did not continue the book
	causeLost     = "lost"     // the connection closed or the venue refused
	causeShort    = "short"    // the book came close to holding fewer levels than are published
	causeDepleted = "depleted" // a side ran out of levels; its refresh was read beyond the refresh share
	causeStale    = "stale"    // the snapshot was older than the buffered events
	causeBadData  = "bad_data" // an event or snapshot held an unusable value
	causeSilent   = "silent"   // an acknowledged subscription delivered nothing
)

var resyncCauses = []string{causeGap, causeLost, causeShort, causeDepleted, causeStale, causeBadData, causeSilent}

// Depth applies one diff event to the pair's local book.
func (s *Source) Depth(u venue.DepthUpdate) {
	lp := s.pair(u.Symbol)
	if lp == nil {
		return // not listed, or delisted meanwhile
	}
	now := time.Now()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.books.at = now
	lp.books.silent = silence{}
	wasSynced, suspended, before := lp.book.Synced(), lp.book.Suspended(), lp.book.LastUpdateID()
	err := lp.book.Apply(u)
	if err == nil && lp.book.Synced() && lp.book.LastUpdateID() > before {
		// The venue vouched for the book up to this event, and the
		// stream delivers.
		lp.heardAt, lp.behindAt = now, time.Time{}
	}
	if err != nil {
		cause := causeGap
		switch {
		case errors.Is(err, orderbook.ErrBadLevel):
			cause = causeBadData
		case suspended:
			cause = causeLost // updates were missed while the stream was down
		}
		s.resynced(lp, cause, err)
	} else if !wasSynced && lp.book.Buffered() == 1 {
		s.poke()
	}
}

// Trade adds one aggregate trade to the pair's window.
func (s *Source) Trade(symbol string, tr venue.Trade) {
	lp := s.pair(symbol)
	if lp == nil {
		return
	}
	now := time.Now()
	lp.mu.Lock()
	lp.trades.at, lp.tradedAt = now, now
	lp.trades.silent = silence{}
	if lp.tradesLost && lp.trades.live && tr.ID > lp.window.newest() {
		if lp.resumeTrades(tr.ID) {
			s.metrics.tradeGaps.Inc()
		}
	}
	// A trade into an empty window cannot leave a hole behind it: the
	// window answers from then on (see pair.tradesCurrent).
	if lp.trades.live && lp.window.empty() {
		lp.streamed = true
	}
	if lp.window.add(tr) {
		lp.windowChanged = true
	}
	lp.mu.Unlock()
}

// Tickers merges rows of the all-market ticker stream. Rows for symbols
// outside the catalog (other margin kinds, dated contracts) are dropped. A
// changed volume means the market traded: its depth and trade streams must
// be delivering too, which is what the silence watchdog checks.
func (s *Source) Tickers(rows []venue.Stat) {
	now := time.Now()
	pairs := *s.pairs.Load()
	s.tickersMu.Lock()
	s.tickersAt = now
	for _, r := range rows {
		if lp := pairs[r.Symbol]; lp != nil {
			s.tickers[r.Symbol] = r
		}
	}
	s.tickersMu.Unlock()
	for _, r := range rows {
		lp := pairs[r.Symbol]
		if lp == nil {
			continue
		}
		lp.mu.Lock()
		if lp.volume != "" && r.BaseVolume != lp.volume {
			lp.activeAt = now
		}
		lp.volume = r.BaseVolume
		lp.mu.Unlock()
	}
}

// Live marks the pairs' streams of k as subscribed.
func (s *Source) Live(k snapshot.Stream, symbols []string) {
	now := time.Now()
	s.eachOf(symbols, func(lp *pair) {
		st := kinds[k].stream(lp)
		st.live, st.at = true, now
	})
}

// Lost marks the pairs' streams of k as no longer delivering. A book is
// suspended, not dropped: when the stream is back, its first event either
// continues the book's chain, and nothing was lost, or the book is synced
// again. A trade window may have missed trades: it answers again once the
// first trade after the stream is back, or a read, says whether it did.
func (s *Source) Lost(k snapshot.Stream, symbols []string) {
	s.eachOf(symbols, func(lp *pair) {
		kinds[k].stream(lp).live = false
		kinds[k].lose(s, lp, causeLost)
	})
}

// eachOf calls f for the listed pairs of symbols with their lock held.
func (s *Source) eachOf(symbols []string, f func(lp *pair)) {
	for _, sym := range symbols {
		if lp := s.pair(sym); lp != nil {
			lp.mu.Lock()
			f(lp)
			lp.mu.Unlock()
		}
	}
}

// resynced records that a pair's book left sequence. Called with lp.mu held.
func (s *Source) resynced(lp *pair, cause string, err error) {
	s.metrics.resyncs[cause].Inc()
	attrs := []any{slog.String(logKeyPair, lp.tickerID), slog.String("cause", cause)}
	if err != nil {
		attrs = append(attrs, slog.String(logKeyErr, err.Error()))
	}
	s.cfg.Log(slog.LevelInfo, "resync-"+cause, "order book resyncs", attrs...)
}

// Log attribute keys, one per meaning, as the poller's.
const (
	logKeyErr  = "err"
	logKeyPair = "pair"
)
