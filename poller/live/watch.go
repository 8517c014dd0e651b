package live

import (
	"log/slog"
	"time"

	"marketfeed/internal/logkey"
	"marketfeed/snapshot"
)

// The silence watchdog's periods. A market that traded (its volume moved on
// the ticker stream) must have sent depth and trade events within
// silenceAfter; a stream still silent resubscribeGrace after it was
// subscribed again is given up for REST until it delivers.
const (
	silenceAfter     = 5 * time.Second
	resubscribeGrace = 5 * time.Second
)

// Watch resubscribes streams that are acknowledged but silent while their
// market trades (the ticker stream's volume moved, or for a book, trades
// arrived), and moves a pair to REST when resubscribing did not help. A
// quiet market is not a silent stream: without activity nothing happens,
// but a probe of a quiet book that finds the venue's book past it is
// activity enough (see fetchProbe).
// It also samples how the books out of sequence are coming back.
func (s *Source) Watch() {
	now := time.Now()
	var fellBack [snapshot.NumStreams]int
	s.each(func(lp *pair) {
		for k, row := range kinds {
			st := row.of(lp)
			if s.check(lp, snapshot.Stream(k), st.feed(), st.active(lp), now) {
				st.lose(s, lp, causeSilent)
			}
			if st.feed().silent.fellBack {
				fellBack[k]++
			}
		}
		// A probe found the venue's book past this one, and no event
		// has come since: the subscription is silent.
		if !lp.behindAt.IsZero() && now.Sub(lp.behindAt) >= s.probeAfter() {
			lp.behindAt = time.Time{}
			if lp.book.Synced() && lp.books.delivering() {
				s.silenced(lp, now)
			}
		}
	})
	s.observeSync(now)
	s.observeSilences(fellBack)
}

// observeSilences logs the end of a silence incident: the first round of
// the watchdog that finds no stream of a kind served by REST any more after
// one that did. Each start is logged (throttled) as a stream falls back.
// Only Watch calls it, so s.fellBack needs no lock.
func (s *Source) observeSilences(now [snapshot.NumStreams]int) {
	for k, n := range now {
		if was := s.fellBack[k]; was > 0 && n == 0 {
			s.cfg.Event(slog.LevelInfo, "every silenced stream delivers again",
				slog.String("stream", snapshot.Stream(k).String()), slog.Int("were_silent", was))
		}
	}
	s.fellBack = now
}

// check is the watchdog for one stream of one pair; it reports whether the
// stream was given up for REST just now. Called with lp.mu held.
func (s *Source) check(lp *pair, k snapshot.Stream, st *stream, active, now time.Time) bool {
	sl := &st.silent
	if !st.live || sl.fellBack || active.Sub(st.at) < silenceAfter {
		return false
	}
	switch {
	case sl.resubscribedAt.IsZero():
		sl.resubscribedAt = now
		s.metrics.silent[k][0].Inc()
		s.cfg.Streams.Resubscribe(k, lp.symbol)
	case now.Sub(sl.resubscribedAt) >= resubscribeGrace:
		s.fallBack(lp, k, st)
		return true
	}
	return false
}

// giveUp subscribes the pair's stream of k again and serves the pair by
// REST until the stream delivers: what a probe's proof of a silent
// subscription calls for at once, with no grace. Called with lp.mu held.
func (s *Source) giveUp(lp *pair, k snapshot.Stream, st *stream, now time.Time) {
	if !st.live || st.silent.fellBack {
		return
	}
	st.silent.resubscribedAt = now
	s.metrics.silent[k][0].Inc()
	s.cfg.Streams.Resubscribe(k, lp.symbol)
	s.fallBack(lp, k, st)
}

// fallBack serves the pair's stream st, of kind k, by REST until it
// delivers again (see Source.Depth and Source.Trade). Called with lp.mu
// held.
func (s *Source) fallBack(lp *pair, k snapshot.Stream, st *stream) {
	st.silent.fellBack = true
	s.metrics.silent[k][1].Inc()
	s.cfg.Log(slog.LevelWarn, "silent-"+k.String(), "stream silent; pair served by REST until it delivers",
		slog.String(logkey.Pair, lp.tickerID), slog.String("stream", k.String()))
}
