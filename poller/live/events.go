package live

import (
	"log/slog"
	"time"

	"marketfeed/internal/logkey"
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

// traded follows the ticker stream's rows of the listed symbols: a
// changed volume means the market traded, so its depth and trade streams
// must be delivering too, which is what the silence watchdog checks.
func (s *Source) traded(rows venue.Rows, pairs map[string]*pair, now time.Time) {
	for _, r := range rows.Stats() {
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
	s.subscribed[k].Store(true)
	s.eachOf(symbols, func(lp *pair) {
		st := lp.kind(k).feed()
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
		lp.kind(k).feed().live = false
		lp.kind(k).lose(s, lp, causeLost)
	})
}

// Spoiled records that an event of the pairs' streams of k could not be
// used: should the book's chain break when the stream delivers again, it
// is resynced for bad data, not for a lost connection.
func (s *Source) Spoiled(k snapshot.Stream, symbols []string) {
	s.eachOf(symbols, func(lp *pair) { lp.kind(k).feed().spoiled = true })
}

var _ venue.SpoiledSink = (*Source)(nil)

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
	attrs := []any{slog.String(logkey.Pair, lp.tickerID), slog.String("cause", cause)}
	if err != nil {
		attrs = append(attrs, slog.String(logkey.Err, err.Error()))
	}
	s.cfg.Log(slog.LevelInfo, "resync-"+cause, "order book resyncs", attrs...)
}
