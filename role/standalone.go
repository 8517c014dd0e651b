package role

import (
	"context"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/poller"
	"marketfeed/poller/venue"
)

// Standalone is a process alone: one poller reads the venue for the
// process's life, with the whole budget.
type Standalone struct {
	*ingest
	spot spotList
}

// NewStandalone returns a process alone's role. streams returns the
// venue's market streams for its poller, their metrics in set; nil (or a
// nil result): REST only.
func NewStandalone(cfg Config, streams func(set *metrics.Set) venue.Streams) *Standalone {
	s := &Standalone{}
	s.spot.set(cfg.Poller.Spot)
	s.ingest = newIngest(cfg.Poller, s.spot.get(), 1, func(pc *poller.Config) {
		if streams != nil {
			pc.Streams = streams(pc.Metrics)
		}
	})
	return s
}

// Run runs the poller until ctx is done and everything it started has
// returned.
func (s *Standalone) Run(ctx context.Context) { s.run(ctx) }

// ShareRateLimit does nothing: a process alone keeps its own rate limit.
func (s *Standalone) ShareRateLimit(RateLimiter) {}

// Spot returns the spot list in use.
func (s *Standalone) Spot() []string { return s.spot.get() }

// SetSpot replaces the spot list.
func (s *Standalone) SetSpot(ids []string) {
	s.spot.set(ids)
	s.setSpot(ids)
}

// WarnSpot has the poller warn again of the spot list's ids the venue has
// no tradable market of.
func (s *Standalone) WarnSpot() { s.warnSpot() }

// Poller returns the poller.
func (s *Standalone) Poller() *poller.Poller { return s.p }
