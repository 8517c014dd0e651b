package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"marketfeed/snapshot"
)

// config is the command line, after flags and MARKETFEED_* variables.
type config struct {
	listen          string
	opsListen       string
	venue           string
	venueURL        string
	spot            []string // -spot and -spot-file together
	spotFlag        []string // -spot alone, kept when the file is re-read
	spotFile        string
	spotSet         bool // -spot or -spot-file was given: no built-in default
	quotes          []string
	rateLimit       int
	rateLimitExempt []netip.Prefix
	trustedProxies  []netip.Prefix
	clientIPHeader  string
	venueBudget     float64
	maxStale        time.Duration
	coldTimeout     time.Duration
	simSeed         int64
	simExtra        int
	logFormat       string
	logLevel        string
	version         bool
}

const envPrefix = "MARKETFEED_"

// envName is the variable that sets a flag: MARKETFEED_ and the flag's name
// in upper case with dashes as underscores.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig reads the flags in args; a flag not given on the command line
// takes its MARKETFEED_* variable from getenv when that is set.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c := &config{}
	var spot, quotes, exempt, trusted string
	fs := flag.NewFlagSet("marketfeed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "public API `address`")
	fs.StringVar(&c.opsListen, "ops-listen", "127.0.0.1:9090", "`address` of /metrics /healthz /readyz /debug/pprof; empty: off")
	fs.StringVar(&c.venue, "venue", "sim", "venue `name`: sim | binance | aster")
	fs.StringVar(&c.venueURL, "venue-url", "", "base `URL` of a Binance-compatible venue (default: that venue's public URL)")
	fs.StringVar(&spot, "spot", "", "platform spot pairs, comma separated `ids` (sim has a built-in default list)")
	fs.StringVar(&c.spotFile, "spot-file", "", "`file` of platform spot pairs, one ticker_id a line, # comments; re-read on SIGHUP")
	fs.StringVar(&quotes, "quotes", "", "quote `assets` allowed for perp items, comma separated (default: all)")
	fs.IntVar(&c.rateLimit, "rate-limit", 600, "requests per minute per client IP; 0: off")
	fs.StringVar(&exempt, "ratelimit-exempt", "", "`CIDRs` of permitted robots, not rate limited")
	fs.StringVar(&trusted, "trusted-proxies", "", "`CIDRs` of peers whose client-IP header is believed")
	fs.StringVar(&c.clientIPHeader, "client-ip-header", "X-Forwarded-For", "`header` carrying the client IP from a trusted proxy (X-Forwarded-For, CF-Connecting-IP, ...)")
	fs.Float64Var(&c.venueBudget, "venue-budget", 0.5, "`fraction` of the venue's weight limit to spend")
	fs.DurationVar(&c.maxStale, "max-stale", 10*time.Second, "oldest snapshot still served while the venue fails")
	fs.DurationVar(&c.coldTimeout, "cold-timeout", 2*time.Second, "how long a first request waits for its venue read")
	fs.Int64Var(&c.simSeed, "sim-seed", 1, "seed of the simulated venue")
	fs.IntVar(&c.simExtra, "sim-extra", 0, "extra synthetic markets on the simulated venue, for load tests")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text | json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug | info | warn | error")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
			given[f.Name] = true
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.spotSet = given["spot"] || given["spot-file"]

	switch c.venue {
	case "sim", "binance", "aster":
	default:
		errs = append(errs, fmt.Errorf("-venue %q: want sim, binance or aster", c.venue))
	}
	if c.venueURL != "" && c.venue == "sim" {
		errs = append(errs, errors.New("-venue-url needs -venue binance or aster"))
	}
	var err error
	if c.spotFlag, err = parseIDs(splitList(spot)); err != nil {
		errs = append(errs, fmt.Errorf("-spot: %w", err))
	}
	c.spot = c.spotFlag
	if c.spotFile != "" {
		ids, err := readSpotFile(c.spotFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("-spot-file: %w", err))
		}
		c.spot = append(slices.Clip(c.spot), ids...)
	}
	c.quotes = splitList(quotes)
	if c.rateLimitExempt, err = parsePrefixes(exempt); err != nil {
		errs = append(errs, fmt.Errorf("-ratelimit-exempt: %w", err))
	}
	if c.trustedProxies, err = parsePrefixes(trusted); err != nil {
		errs = append(errs, fmt.Errorf("-trusted-proxies: %w", err))
	}
	if c.rateLimit < 0 {
		errs = append(errs, errors.New("-rate-limit must not be negative"))
	}
	if c.venueBudget <= 0 || c.venueBudget > 1 {
		errs = append(errs, fmt.Errorf("-venue-budget %v: want a fraction in (0, 1]", c.venueBudget))
	}
	if c.maxStale <= 0 || c.coldTimeout <= 0 {
		errs = append(errs, errors.New("-max-stale and -cold-timeout must be positive"))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format %q: want text or json", c.logFormat))
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		errs = append(errs, err)
	}
	if c.clientIPHeader == "" {
		errs = append(errs, errors.New("-client-ip-header must not be empty"))
	}
	return c, errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseIDs(ids []string) ([]string, error) {
	for _, id := range ids {
		if !snapshot.ValidTickerID(id) {
			return nil, fmt.Errorf("%q is not a ticker_id (BASE_TARGET, 2-15 of A-Z 0-9 each side)", id)
		}
	}
	return ids, nil
}

// readSpotFile reads one ticker_id a line; blank lines and text after '#'
// are ignored. Any malformed line rejects the whole file.
func readSpotFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if !snapshot.ValidTickerID(text) {
			return nil, fmt.Errorf("%s:%d: %q is not a ticker_id", path, line, text)
		}
		ids = append(ids, text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ids, nil
}

// parsePrefixes reads comma-separated CIDRs; a bare address is its own /32
// or /128.
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range splitList(s) {
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
