package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// warnings is a slog handler that keeps every warning, as its message and
// its attributes, for a test to read.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	return nil
}

// take returns the warnings logged since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	w.lines = nil
	return lines
}

// matching returns the lines that contain every one of parts.
func matching(lines []string, parts ...string) []string {
	var out []string
	for _, l := range lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}

// Configuration that would do nothing says so: at start, and again on
// SIGHUP, each case logs its warning, once, and a clean configuration
// logs none. The warnings are logged before /readyz says ready (the spot
// ids once the venue's catalog is read, which readiness waits for).
func TestConfigurationThatDoesNothingIsWarnedOf(t *testing.T) {
	const (
		unlisted = "spot pair not published: the venue has no tradable market of that name"
		noSpot   = "no spot pairs: /tickers answers []"
		unknown  = "environment variable ignored: it sets no flag"
	)
	spotFile := filepath.Join(t.TempDir(), "spot.txt")
	if err := os.WriteFile(spotFile, []byte("BTC_USDT\nPEPE_USDT # the simulator has 1000PEPEUSDT only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    [][]string // each warning, as parts of its line
		realSim bool       // -venue binance over the simulator, REST only
	}{
		{name: "clean: the simulator's built-in list", env: map[string]string{"MARKETFEED_RATE_LIMIT": "0"}},
		{name: "clean: spot pairs the venue lists", args: []string{"-spot", "BTC_USDT,ETH_USDT"}},
		{name: "clean: a real venue with spot pairs", realSim: true, args: []string{"-spot", "BTC_USDT"}},
		{name: "a spot id the venue does not list", args: []string{"-spot", "BTC_USDT,PEPE_USDT,NOPE_USDT"},
			want: [][]string{{unlisted, "pair=PEPE_USDT"}, {unlisted, "pair=NOPE_USDT"}}},
		{name: "a spot file id the venue does not list", args: []string{"-spot-file", spotFile},
			want: [][]string{{unlisted, "pair=PEPE_USDT"}}},
		{name: "a real venue without spot pairs", realSim: true, want: [][]string{{noSpot, "venue=binance"}}},
		{name: "an empty spot list on the simulator", args: []string{"-spot", ""}, want: [][]string{{noSpot, "venue=sim"}}},
		{name: "a variable one letter off", env: map[string]string{"MARKETFEED_SPOTS": "BTC_USDT"},
			want: [][]string{{unknown, "variable=MARKETFEED_SPOTS", "meant=MARKETFEED_SPOT"}}},
		{name: "an unknown variable", env: map[string]string{"MARKETFEED_COLOUR": "blue"},
			want: [][]string{{unknown, "variable=MARKETFEED_COLOUR"}}},
		{name: "a misspelt variable", env: map[string]string{"MARKETFEED_RATELIMIT": "5"},
			want: [][]string{{unknown, "variable=MARKETFEED_RATELIMIT", "meant=MARKETFEED_RATE_LIMIT"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.realSim {
				// The configuration of a real venue, read from the simulator
				// so that the test needs no network.
				args = append([]string{"-venue", "binance", "-venue-streams", "off"}, args...)
			}
			var src venue.Venue // nil: the one -venue names
			if tc.realSim {
				src = sim.New(sim.Config{Seed: 1})
			}
			logs := new(warnings)
			_, _, a, _ := startAppLogged(t, src, environ(tc.env), logs, args...)
			check := func(when string, want [][]string) {
				t.Helper()
				// SIGHUP without -spot-file says so (see reloadSpot): not
				// one of the warnings under test.
				got := slices.DeleteFunc(logs.take(), func(l string) bool { return strings.HasPrefix(l, "SIGHUP ignored") })
				for _, parts := range want {
					if n := len(matching(got, parts...)); n != 1 {
						t.Errorf("%s: %d warnings with %q, want 1; warnings:\n%s", when, n, parts, strings.Join(got, "\n"))
					}
				}
				if len(got) != len(want) {
					t.Errorf("%s: %d warnings, want %d:\n%s", when, len(got), len(want), strings.Join(got, "\n"))
				}
			}
			check("at start", tc.want)
			// The catalog is read again on its schedule: what was said is
			// not repeated, whereas SIGHUP says it all again.
			if err := a.poller().RefreshCatalog(t.Context()); err != nil {
				t.Fatal(err)
			}
			check("after another catalog read", nil)
			a.reload() // what SIGHUP runs, synchronously
			check("on SIGHUP", tc.want)
		})
	}
}
