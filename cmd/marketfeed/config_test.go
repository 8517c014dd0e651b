package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/poller/binance"
	"marketfeed/server"
)

// badConfigs are values the program must refuse before it starts, each
// with the text its one-line error must contain: the flag, and the
// variable when the value came from the environment.
var badConfigs = []struct {
	name string
	args []string
	env  map[string]string
	want []string
}{
	{"pages neither on nor off", nil, map[string]string{"MARKETFEED_PAGES": "no"}, []string{"-pages", "MARKETFEED_PAGES", "on or off"}},
	{"unknown venue", []string{"-venue", "kraken"}, nil, []string{"-venue", "kraken", "sim, binance, aster"}},
	{"venue url on sim", []string{"-venue-url", "http://127.0.0.1:1"}, nil, []string{"-venue-url", "-venue binance or aster"}},
	{"venue ws url on sim", []string{"-venue-ws-url", "ws://127.0.0.1:1"}, nil, []string{"-venue-ws-url", "-venue binance or aster"}},
	{"venue url scheme", []string{"-venue", "binance", "-venue-url", "ftp://example.com"}, nil, []string{"-venue-url", "http or https"}},
	{"venue url without host", []string{"-venue", "binance", "-venue-url", "http:///fapi"}, nil, []string{"-venue-url", "no host"}},
	{"venue url with query", []string{"-venue", "aster", "-venue-url", "https://example.com/?x=1"}, nil, []string{"-venue-url", "query"}},
	{"venue url with fragment", []string{"-venue", "aster", "-venue-url", "https://example.com/#x"}, nil, []string{"-venue-url", "fragment"}},
	{"venue url relative", []string{"-venue", "binance", "-venue-url", "example.com"}, nil, []string{"-venue-url", "http or https"}},
	{"ws url scheme", []string{"-venue", "binance", "-venue-ws-url", "https://example.com"}, nil, []string{"-venue-ws-url", "ws or wss"}},
	{"ws url without host", []string{"-venue", "binance", "-venue-ws-url", "wss://"}, nil, []string{"-venue-ws-url", "no host"}},
	{"ws url with query", []string{"-venue", "binance", "-venue-ws-url", "wss://example.com/ws?x"}, nil, []string{"-venue-ws-url", "query"}},
	{"venue streams", []string{"-venue-streams", "yes"}, nil, []string{"-venue-streams", "on or off"}},
	{"trusted proxies", []string{"-trusted-proxies", "10.0.0.0/33"}, nil, []string{"-trusted-proxies", "10.0.0.0/33"}},
	{"ratelimit exempt", []string{"-ratelimit-exempt", "10.0.0.0/8,nope"}, nil, []string{"-ratelimit-exempt", "nope"}},
	{"rate limit exempt", []string{"-rate-limit-exempt", "nope"}, nil, []string{"-rate-limit-exempt", "nope"}},
	{"rate limit exempt under both names", []string{"-rate-limit-exempt", "10.0.0.0/8", "-ratelimit-exempt", "10.0.0.0/8"}, nil,
		[]string{"-rate-limit-exempt", "-ratelimit-exempt", "give one"}},
	{"env rate limit exempt under both names", nil, map[string]string{"MARKETFEED_RATE_LIMIT_EXEMPT": "10.0.0.0/8", "MARKETFEED_RATELIMIT_EXEMPT": "10.0.0.0/8"},
		[]string{"MARKETFEED_RATE_LIMIT_EXEMPT", "MARKETFEED_RATELIMIT_EXEMPT", "give one"}},
	{"env rate limit exempt", nil, map[string]string{"MARKETFEED_RATE_LIMIT_EXEMPT": "nope"}, []string{"-rate-limit-exempt", "MARKETFEED_RATE_LIMIT_EXEMPT", "nope"}},
	{"env ratelimit exempt", nil, map[string]string{"MARKETFEED_RATELIMIT_EXEMPT": "nope"}, []string{"-ratelimit-exempt", "MARKETFEED_RATELIMIT_EXEMPT", "nope"}},
	{"listen without a port", []string{"-listen", "nonsense"}, nil, []string{"-listen", "nonsense", "host:port"}},
	{"listen port out of range", []string{"-listen", "127.0.0.1:70000"}, nil, []string{"-listen", "70000"}},
	{"ops listen without a port", []string{"-ops-listen", "localhost"}, nil, []string{"-ops-listen", "localhost", "host:port"}},
	{"spot", []string{"-spot", "btc_usdt"}, nil, []string{"-spot", "btc_usdt"}},
	{"spot file", []string{"-spot-file", "/nonexistent/spot.txt"}, nil, []string{"-spot-file", "/nonexistent/spot.txt"}},
	{"negative rate limit", []string{"-rate-limit", "-1"}, nil, []string{"-rate-limit", "-1"}},
	{"rate limit not a number", []string{"-rate-limit", "many"}, nil, []string{"-rate-limit", "whole number"}},
	{"budget zero", []string{"-venue-budget", "0"}, nil, []string{"-venue-budget", "(0, 1]"}},
	{"budget over one", []string{"-venue-budget", "1.5"}, nil, []string{"-venue-budget", "(0, 1]"}},
	{"budget not a number", []string{"-venue-budget", "half"}, nil, []string{"-venue-budget", "a number"}},
	{"refresh share zero", []string{"-venue-refresh-share", "0"}, nil, []string{"-venue-refresh-share", "(0, -venue-budget/2]"}},
	{"refresh share over half the budget", []string{"-venue-budget", "0.2", "-venue-refresh-share", "0.11"}, nil, []string{"-venue-refresh-share", "(0, -venue-budget/2]"}},
	{"max stale zero", []string{"-max-stale", "0s"}, nil, []string{"-max-stale", "positive"}},
	{"max stale not a duration", []string{"-max-stale", "10"}, nil, []string{"-max-stale", "duration"}},
	{"cold timeout negative", []string{"-cold-timeout", "-1s"}, nil, []string{"-cold-timeout", "positive"}},
	{"stream max age too short", []string{"-venue", "binance", "-venue-ws-max-age", "10ms"}, nil, []string{"-venue-ws-max-age", "at least 1s"}},
	{"stream lines three", []string{"-venue", "binance", "-venue-ws-lines", "3"}, nil, []string{"-venue-ws-lines", "want 1 or 2"}},
	{"cluster not nats", []string{"-cluster", "http://127.0.0.1:4222"}, nil, []string{"-cluster", "scheme nats or tls"}},
	{"cluster without a host", []string{"-cluster", "nats://:4222"}, nil, []string{"-cluster", "no host"}},
	{"cluster replicas zero", []string{"-cluster-replicas", "0"}, nil, []string{"-cluster-replicas", "1 to 5"}},
	{"cluster name with a dot", []string{"-cluster-name", "a.b"}, nil, []string{"-cluster-name", "letters, digits"}},
	{"max conns zero", []string{"-max-conns", "0"}, nil, []string{"-max-conns", "at least 1"}},
	{"max conns not a number", []string{"-max-conns", "1e4"}, nil, []string{"-max-conns", "whole number"}},
	{"sim extra negative", []string{"-sim-extra", "-3"}, nil, []string{"-sim-extra"}},
	{"log format", []string{"-log-format", "xml"}, nil, []string{"-log-format", "text or json"}},
	{"log level", []string{"-log-level", "loud"}, nil, []string{"-log-level", "debug, info, warn or error"}},
	{"empty client ip header", []string{"-client-ip-header", ""}, nil, []string{"-client-ip-header"}},
	{"extra argument", []string{"serve"}, nil, []string{"unexpected arguments"}},
	{"unknown flag", []string{"-max-connections", "5"}, nil, []string{"-max-connections"}},
	{"env venue", nil, map[string]string{"MARKETFEED_VENUE": "kraken"}, []string{"-venue", "MARKETFEED_VENUE"}},
	{"env duration syntax", nil, map[string]string{"MARKETFEED_MAX_STALE": "soon"}, []string{"-max-stale", "MARKETFEED_MAX_STALE", "duration"}},
	{"env max conns", nil, map[string]string{"MARKETFEED_MAX_CONNS": "0"}, []string{"-max-conns", "MARKETFEED_MAX_CONNS"}},
	{"env ws url", nil, map[string]string{"MARKETFEED_VENUE": "binance", "MARKETFEED_VENUE_WS_URL": "http://example.com"}, []string{"-venue-ws-url", "MARKETFEED_VENUE_WS_URL"}},
	{"env cidr", nil, map[string]string{"MARKETFEED_TRUSTED_PROXIES": "::1/200"}, []string{"-trusted-proxies", "MARKETFEED_TRUSTED_PROXIES"}},
}

// environ is env as os.Environ gives it.
func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func TestValidateRefusesBadConfigurations(t *testing.T) {
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, environ(tc.env), io.Discard)
			if err == nil {
				t.Fatalf("%q with %v accepted", tc.args, tc.env)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

func TestValidateAcceptsGoodConfigurations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		check func(*Config) bool
	}{
		{"defaults", nil, nil, func(c *Config) bool {
			return c.venue == "sim" && c.VenueStreams && c.VenueWSURL == "" && c.MaxConns == server.DefaultMaxConns && c.VenueWSLines == 2 && c.Pages
		}},
		{"pages off", []string{"-pages", "off"}, nil, func(c *Config) bool { return !c.Pages }},
		{"pages off from env", nil, map[string]string{"MARKETFEED_PAGES": "off"}, func(c *Config) bool { return !c.Pages }},
		{"one stream line", []string{"-venue-ws-lines", "1"}, nil, func(c *Config) bool { return c.VenueWSLines == 1 }},
		{"cluster", []string{"-cluster", "nats://10.0.0.1:4222, tls://10.0.0.2:4222", "-listen", "0.0.0.0:8080"}, nil, func(c *Config) bool {
			host, _ := os.Hostname()
			return slices.Equal(c.ClusterURLs, []string{"nats://10.0.0.1:4222", "tls://10.0.0.2:4222"}) &&
				c.ClusterName == "marketfeed" && c.ClusterMember == host+":8080"
		}},
		{"no cluster", nil, nil, func(c *Config) bool { return len(c.ClusterURLs) == 0 }},
		{"streams off", []string{"-venue-streams", "off"}, nil, func(c *Config) bool { return !c.VenueStreams }},
		{"streams off from env", nil, map[string]string{"MARKETFEED_VENUE_STREAMS": "off"}, func(c *Config) bool { return !c.VenueStreams }},
		{"binance urls", []string{"-venue", "binance", "-venue-url", "http://127.0.0.1:8081/", "-venue-ws-url", "wss://fstream.example.com"},
			nil, func(c *Config) bool {
				return c.venueURL == "http://127.0.0.1:8081/" && c.VenueWSURL == "wss://fstream.example.com"
			}},
		{"base url with a path", []string{"-venue", "aster", "-venue-url", "https://proxy.example/aster", "-venue-ws-url", "ws://[::1]:9000/stream"},
			nil, func(c *Config) bool { return c.venueURL == "https://proxy.example/aster" }},
		{"max conns", []string{"-max-conns", "1"}, nil, func(c *Config) bool { return c.MaxConns == 1 }},
		{"max conns from env", nil, map[string]string{"MARKETFEED_MAX_CONNS": "250"}, func(c *Config) bool { return c.MaxConns == 250 }},
		{"budget of one", []string{"-venue-budget", "1"}, nil, func(c *Config) bool { return c.venueBudget == 1 }},
		{"refresh share by default", nil, nil, func(c *Config) bool { return c.refreshShare == 0.04 }},
		{"refresh share from the environment", nil, map[string]string{"MARKETFEED_VENUE_REFRESH_SHARE": "0.1"}, func(c *Config) bool { return c.refreshShare == 0.1 }},
		{"flag wins over env", []string{"-max-conns", "7"}, map[string]string{"MARKETFEED_MAX_CONNS": "0"}, func(c *Config) bool { return c.MaxConns == 7 }},
		{"every preset", []string{"-venue", binance.Presets[len(binance.Presets)-1].Name}, nil,
			func(c *Config) bool { return c.venue == binance.Presets[len(binance.Presets)-1].Name }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, environ(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Fatalf("config = %+v", cfg)
			}
		})
	}
}

func TestVenueNamesComeFromThePresets(t *testing.T) {
	names := venueNames()
	if names[0] != "sim" || len(names) != len(binance.Presets)+1 {
		t.Fatalf("venueNames() = %q", names)
	}
	for _, p := range binance.Presets {
		if !slices.Contains(names, p.Name) {
			t.Errorf("preset %q is not a -venue value", p.Name)
		}
		if _, err := parseConfig([]string{"-venue", p.Name}, nil, io.Discard); err != nil {
			t.Errorf("-venue %s: %v", p.Name, err)
		}
	}
}

func TestHelpListsEveryVenue(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, nil, &out)
	if err == nil || !strings.Contains(out.String(), "-max-conns") {
		t.Fatalf("-h: %v\n%s", err, out.String())
	}
	if want := strings.Join(venueNames(), " | "); !strings.Contains(out.String(), want) {
		t.Errorf("help does not list the venues as %q:\n%s", want, out.String())
	}
}

// -h shows each flag's default once: a flag whose zero means "the venue's
// own" says so in its usage, and the flag package must not add
// "(default 0s)" beside it.
func TestHelpShowsOneDefaultEach(t *testing.T) {
	var out strings.Builder
	if _, err := parseConfig([]string{"-h"}, nil, &out); err == nil {
		t.Fatal("-h did not stop")
	}
	entries := strings.Split(out.String(), "\n  -")[1:]
	if len(entries) < 20 {
		t.Fatalf("-h printed %d flags:\n%s", len(entries), out.String())
	}
	for _, entry := range entries {
		if n := strings.Count(entry, "(default"); n > 1 {
			t.Errorf("-h shows %d defaults for -%s", n, entry)
		}
	}
}

// TestBinaryRefusesBadConfiguration starts the real binary with each bad
// value: it must exit with status 2 before serving, with one line on
// stderr that names the flag (and the variable).
func TestBinaryRefusesBadConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := apptest.Build(t, t.TempDir(), "marketfeed/cmd/marketfeed")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			// A configuration wrongly accepted would serve on these
			// addresses until the deadline kills it.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			args := append([]string{"-listen", "127.0.0.1:0", "-ops-listen", ""}, tc.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = slices.Clone(env)
			for k, v := range tc.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("%s %q: %v, want exit status 2\n%s", filepath.Base(bin), tc.args, err, stderr.String())
			}
			line := strings.TrimSuffix(stderr.String(), "\n")
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, "marketfeed: ") {
				t.Fatalf("stderr is not one marketfeed: line:\n%s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("stderr %q does not mention %q", line, w)
				}
			}
		})
	}
}

// TestMaxConnsCapsTheAPI: -max-conns reaches the server, which refuses a
// connection over it with 503 while the one within it is open.
func TestMaxConnsCapsTheAPI(t *testing.T) {
	api, _, _, _ := startApp(t, nil, "-max-conns", "1")
	addr := strings.TrimPrefix(api, "http://")
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if resp := apptest.RequestPairs(t, first); resp.StatusCode != http.StatusOK {
		t.Fatalf("connection within -max-conns: %d", resp.StatusCode)
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if resp := apptest.RequestPairs(t, second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("connection over -max-conns 1: %d, want 503", resp.StatusCode)
	}
}

// A misspelt variable is pointed to the flag's variable it nearly names:
// underscores left out, or a letter too many, too few or wrong; a name near
// no flag gets no hint.
func TestNearEnvNamesTheMeantVariable(t *testing.T) {
	cfg, err := parseConfig(nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"MARKETFEED_RATELIMIT":       "MARKETFEED_RATE_LIMIT",
		"MARKETFEED_SPOTS":           "MARKETFEED_SPOT",
		"MARKETFEED_VENU":            "MARKETFEED_VENUE",
		"MARKETFEED_SPOT_FILES":      "MARKETFEED_SPOT_FILE",
		"MARKETFEED_TRUSTED_PROXIE":  "MARKETFEED_TRUSTED_PROXIES",
		"MARKETFEED_TRUSTD_PROXYES":  "MARKETFEED_TRUSTED_PROXIES",
		"MARKETFEED_LOG_FORMATS":     "MARKETFEED_LOG_FORMAT",
		"MARKETFEED_COLOUR":          "",
		"MARKETFEED_HOME":            "",
		"MARKETFEED_CLUSTER_MEMBERZ": "MARKETFEED_CLUSTER_MEMBER",
	} {
		if got := nearEnv(name, cfg.flagNames); got != want {
			t.Errorf("nearEnv(%s) = %q, want %q", name, got, want)
		}
	}
}
