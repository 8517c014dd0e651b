package live

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"marketfeed/snapshot"
)

// syncProgress follows the books out of sequence while they wait for their
// snapshots (a cold start, or the resync of books that missed events): how
// fast they come back, when the last will, and a log line every
// progressEvery until none waits. It is sampled once a second by Watch.
type syncProgress struct {
	mu     sync.Mutex
	since  time.Time // when books began to wait; zero: none waits
	at     time.Time // the last sample
	synced int       // books in sequence at the last sample
	rate   float64   // books coming into sequence a second, smoothed
	behind int       // books waiting at the last sample
	logged time.Time
}

// A sync's progress is logged firstLog after books began to wait, once its
// pace is known, then every progressEvery (the log throttle's interval).
const (
	firstLog      = 10 * time.Second
	progressEvery = time.Minute
)

// rateWeight is how much each one-second sample moves the smoothed rate:
// enough to follow the budget within seconds, little enough that one
// burst of snapshots coming back together does not promise the rest as fast.
const rateWeight = 0.2

// SyncProgress is how the books out of sequence are coming back.
type SyncProgress struct {
	Behind    int           // books waiting for a snapshot
	PerMinute float64       // books coming into sequence a minute, smoothed
	ETA       time.Duration // until the last is in sequence at that pace; -1: no pace yet
}

// observe takes one sample of the book counts and logs the progress.
func (s *Source) observeSync(now time.Time) {
	n := s.counts()[snapshot.StreamBook]
	synced, behind := n[sourceStream], n[sourceSyncing]
	p := &s.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() {
		if secs := now.Sub(p.at).Seconds(); secs > 0 {
			got := float64(max(synced-p.synced, 0)) / secs
			p.rate += rateWeight * (got - p.rate)
		}
	}
	p.at, p.synced, p.behind = now, synced, behind
	switch {
	case behind > 0 && p.since.IsZero():
		p.since, p.rate, p.logged = now, 0, now.Add(firstLog-progressEvery)
	case behind > 0 && now.Sub(p.logged) >= progressEvery:
		p.logged = now
		eta := p.etaLocked()
		s.cfg.Log(slog.LevelInfo, "sync-progress", "order books syncing",
			slog.Int("in_sequence", synced), slog.Int("waiting", behind), slog.Int("total", synced+behind+n[sourceREST]),
			slog.Float64("per_minute", math.Round(60*p.rate)), slog.Duration("eta", eta.Round(time.Second)))
	case behind == 0 && !p.since.IsZero():
		s.cfg.Log(slog.LevelInfo, "sync-done", "every order book in sequence",
			slog.Int("in_sequence", synced), slog.Duration("took", now.Sub(p.since).Round(time.Millisecond)))
		p.since = time.Time{}
	}
}

// etaLocked is the time left at the smoothed pace; -1 without a pace.
func (p *syncProgress) etaLocked() time.Duration {
	if p.behind == 0 {
		return 0
	}
	if p.rate <= 0 {
		return -1
	}
	return time.Duration(float64(p.behind) / p.rate * float64(time.Second))
}

// SyncProgress reports how the books out of sequence are coming back, as of
// the last second.
func (s *Source) SyncProgress() SyncProgress {
	p := &s.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	return SyncProgress{Behind: p.behind, PerMinute: 60 * p.rate, ETA: p.etaLocked()}
}
