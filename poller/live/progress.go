package live

import (
	"log/slog"
	"math"
	"slices"
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
	synced int       // books in sequence at the last sample
	behind int       // books waiting at the last sample
	gains  []gain    // books that came into sequence, by sample, over the last paceWindow
	rate   float64   // books coming into sequence a second over the last paceWindow
	logged time.Time
}

// gain is how many books came into sequence since the sample before at.
type gain struct {
	at time.Time
	n  int
}

// A sync's progress is logged firstLog after books began to wait, then
// every progressEvery: a second over the log throttle's minute, so that the
// throttle, whose clock is read a moment after Watch's, never holds a line
// back.
const (
	firstLog      = 10 * time.Second
	progressEvery = time.Minute + time.Second
)

// paceWindow is what the pace is measured over: the budget's own window,
// since the budget lets a minute's snapshots go at once and then none until
// the minute has passed, so that a shorter one would swing from a burst to
// nothing.
const paceWindow = time.Minute

// SyncProgress is how the books out of sequence are coming back.
type SyncProgress struct {
	Behind    int           // books waiting for a snapshot
	PerMinute float64       // books coming into sequence a minute, over the last minute
	ETA       time.Duration // until the last is in sequence at that pace; -1: no pace yet
}

// observeSync takes one sample of the book counts and logs the progress.
func (s *Source) observeSync(now time.Time) {
	n := s.counts()[snapshot.StreamBook]
	synced, behind := n[sourceStream], n[sourceSyncing]
	p := &s.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.since.IsZero() {
		p.gains = append(p.gains, gain{now, max(synced-p.synced, 0)})
		p.gains = slices.DeleteFunc(p.gains, func(g gain) bool { return now.Sub(g.at) >= paceWindow })
		sum := 0
		for _, g := range p.gains {
			sum += g.n
		}
		if span := min(now.Sub(p.since), paceWindow); span >= time.Second {
			p.rate = float64(sum) / span.Seconds()
		}
	}
	p.synced, p.behind = synced, behind
	switch {
	case behind > 0 && p.since.IsZero():
		p.since, p.rate, p.gains, p.logged = now, 0, p.gains[:0], now.Add(firstLog-progressEvery)
	case behind > 0 && now.Sub(p.logged) >= progressEvery:
		p.logged = now
		eta := slog.String("eta", "unknown")
		if d := p.etaLocked(); d >= 0 {
			eta = slog.Duration("eta", d.Round(time.Second))
		}
		s.cfg.Log(slog.LevelInfo, "sync-progress", "order books syncing",
			slog.Int("in_sequence", synced), slog.Int("waiting", behind), slog.Int("total", synced+behind+n[sourceREST]+n[sourceBudget]),
			slog.Float64("per_minute", math.Round(60*p.rate)), eta)
	case behind == 0 && !p.since.IsZero():
		// The end of the incident: logged every time, never held back as
		// a repeat of the cold start's line a minute before.
		s.cfg.Event(slog.LevelInfo, "every order book in sequence",
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
