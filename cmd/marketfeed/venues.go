package main

import (
	"log/slog"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/poller/binance"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// venueKind is one venue the service can read: its -venue name, how to open
// its REST API and its market streams. A new venue is one package and one
// row of venueKinds.
type venueKind struct {
	name string
	open func(cfg *Config) venue.Venue
	// streams returns the market streams of the venue open returned (or of
	// a wrapper around it, in tests); nil: REST only.
	streams func(cfg *Config, v venue.Venue, log *slog.Logger, set *metrics.Set) venue.Streams
}

// venueKinds lists every venue: the embedded simulator first (the default),
// then each Binance-compatible preset.
func venueKinds() []venueKind {
	kinds := []venueKind{{
		name: simVenue,
		open: func(cfg *Config) venue.Venue { return sim.New(sim.Config{Seed: cfg.simSeed, Extra: cfg.simExtra}) },
		streams: func(_ *Config, v venue.Venue, _ *slog.Logger, _ *metrics.Set) venue.Streams {
			// The simulator, or a wrapper of it that passes its streams on.
			if s, ok := v.(interface{ Streams() *sim.Streams }); ok {
				return s.Streams()
			}
			return nil
		},
	}}
	for _, p := range binance.Presets {
		kinds = append(kinds, venueKind{
			name: p.Name,
			open: func(cfg *Config) venue.Venue { return binance.New(p, binance.Options{BaseURL: cfg.venueURL}) },
			streams: func(cfg *Config, _ venue.Venue, log *slog.Logger, set *metrics.Set) venue.Streams {
				return binance.NewStreams(p, binance.StreamOptions{BaseURL: streamURL(cfg), Logger: log, Metrics: set, MaxAge: cfg.VenueWSMaxAge, Lines: cfg.VenueWSLines})
			},
		})
	}
	return kinds
}

// venueKindOf returns the venue named name.
func venueKindOf(name string) (venueKind, bool) {
	for _, k := range venueKinds() {
		if k.name == name {
			return k, true
		}
	}
	return venueKind{}, false
}
