package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"marketfeed/server"
	"marketfeed/snapshot"
)

// Config is the command line, after flags and MARKETFEED_* variables, once
// validated: run wires nothing until every value has been checked.
type Config struct {
	listen    string // -listen: the public API's address
	opsListen string // -ops-listen: the operator endpoints' address; empty: off
	venue     string // -venue: one of venueNames
	venueURL  string // -venue-url: a Binance-compatible venue's REST base; empty: the preset's

	// VenueStreams is -venue-streams: binance and aster read market
	// streams, and the embedded simulated venue feeds the same stream path.
	// On by default; off polls REST only.
	VenueStreams bool
	// VenueWSURL is -venue-ws-url: the base URL (ws or wss) of the venue's
	// market streams. Empty means the venue's public stream URL; for
	// binance the /public and /market paths are derived from it.
	VenueWSURL string
	// VenueWSMaxAge is -venue-ws-max-age: the oldest a market-stream
	// connection grows before it is replaced. Zero means the venue's own
	// limit (24 h on binance and aster) less 30 minutes. A venue seen
	// closing connections younger has them replaced before its age.
	VenueWSMaxAge time.Duration
	// VenueWSLines is -venue-ws-lines: how many connections carry each
	// market stream, 1, or 2 so that a dropped or replaced connection
	// loses no event (binance and aster).
	VenueWSLines int
	// Pages is -pages: the public address also serves the live market page
	// (/) and the API reference (/docs) to browsers. Off for an API-only
	// deployment: those paths are then 404 like any other.
	Pages bool
	// MaxConns is -max-conns, the most client connections open at once;
	// one over it is refused. Each open connection holds a 16 KiB write
	// buffer, so the default 10000 can hold up to 160 MiB.
	MaxConns int

	// ClusterURLs is -cluster: the NATS servers of a cluster of replicas,
	// comma separated nats:// or tls:// URLs; empty: one process alone.
	ClusterURLs []string
	// ClusterName is -cluster-name, the prefix of the cluster's buckets.
	ClusterName string
	// ClusterMember is -cluster-member, this member's name, unique in the
	// cluster; default the host name and the -listen port.
	ClusterMember string
	// ClusterReplicas is -cluster-replicas: how many NATS servers hold
	// each of the cluster's buckets.
	ClusterReplicas int
	clusterList     string

	spot            []string       // -spot and -spot-file together
	spotFlag        []string       // -spot alone, kept when the file is re-read
	spotFile        string         // -spot-file, re-read on SIGHUP
	spotSet         bool           // -spot or -spot-file was given: no built-in default
	quotes          []string       // -quotes; empty: every quote asset
	rateLimit       int            // -rate-limit, requests per minute per client IP; 0: off
	rateLimitExempt []netip.Prefix // -rate-limit-exempt (or its older name -ratelimit-exempt)
	trustedProxies  []netip.Prefix // -trusted-proxies
	clientIPHeader  string         // -client-ip-header, believed from trusted proxies only
	venueBudget     float64        // -venue-budget, in (0, 1]
	refreshShare    float64        // -venue-refresh-share, in (0, -venue-budget/2]
	maxStale        time.Duration  // -max-stale, positive
	coldTimeout     time.Duration  // -cold-timeout, positive
	simSeed         int64          // -sim-seed
	simExtra        int            // -sim-extra
	logFormat       string         // -log-format: text or json
	logLevel        slog.Level     // -log-level
	version         bool           // -version: print it and exit

	// The list flags as given, parsed by validate.
	spotList, quotesList, exemptList, trustedList string
	logLevelName                                  string
	// fromEnv maps a flag's name to the MARKETFEED_* variable that set it,
	// so that an error about its value says where to look.
	fromEnv map[string]string
	// spelled maps a flag's name to the other name it was given by (see
	// flagAliases), so that an error names what the operator wrote.
	spelled map[string]string
	// unknownEnv are the MARKETFEED_* variables that set no flag: a
	// misspelt name would otherwise change nothing and say nothing.
	unknownEnv []string
	flagNames  []string // every flag, for the variable a misspelt one meant
}

// flagAliases maps another name of a flag to the flag: a name that broke
// the pattern of the others, kept working so that no configuration that
// used it stops working. Each also has its variable (MARKETFEED_RATELIMIT_EXEMPT).
var flagAliases = map[string]string{
	"ratelimit-exempt": "rate-limit-exempt",
}

const envPrefix = "MARKETFEED_"

// envName is the variable that sets a flag: MARKETFEED_ and the flag's name
// in upper case with dashes as underscores.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// simVenue is the embedded simulated venue.
const simVenue = "sim"

// venueNames lists every -venue value, in the order of venueKinds. Help
// text, validation and its error message all read it, so a new venue needs
// no change here.
func venueNames() []string {
	var names []string
	for _, k := range venueKinds() {
		names = append(names, k.name)
	}
	return names
}

// remoteVenues is the -venue values other than the simulated venue, as
// "binance or aster" for messages.
func remoteVenues() string {
	names := venueNames()[1:]
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// parseConfig reads the flags in args, takes a MARKETFEED_* variable from
// environ (KEY=value lines, as os.Environ gives them) for each flag not
// given on the command line, and validates the result. The error is one
// line naming the flag (and the variable, when the value came from one);
// -h prints the usage to stderr and returns flag.ErrHelp.
func parseConfig(args []string, environ []string, stderr io.Writer) (*Config, error) {
	c, err := parseFlags(args, environ, stderr)
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseFlags reads args and the environment into a Config, checking only
// that each value has its flag's type; validate checks what they mean.
func parseFlags(args []string, environ []string, stderr io.Writer) (*Config, error) {
	c := &Config{fromEnv: map[string]string{}, spelled: map[string]string{}}
	vars := map[string]string{} // the MARKETFEED_* variables
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			vars[k] = v
		}
	}
	fs := flag.NewFlagSet("marketfeed", flag.ContinueOnError)
	// The flag package prints every error followed by the whole usage;
	// main prints the one line instead, and -h prints the usage below.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "public API `address`")
	fs.StringVar(&c.opsListen, "ops-listen", "127.0.0.1:9089", "`address` of /metrics /healthz /readyz /debug/pprof; empty: off")
	fs.StringVar(&c.venue, "venue", simVenue, "venue `name`: "+strings.Join(venueNames(), " | "))
	fs.StringVar(&c.venueURL, "venue-url", "", "base `URL` (http or https) of a Binance-compatible venue (default: that venue's public URL)")
	durationVar(fs, &c.VenueWSMaxAge, "venue-ws-max-age", 0, "replace each market-stream connection by this age `duration` (default: the venue's 24 h limit less 30 minutes); a venue or proxy seen closing connections younger has them replaced before its own age")
	intVar(fs, &c.VenueWSLines, "venue-ws-lines", 2, "`1|2` connections carrying each market stream: 2 keeps every event through the drop of any one connection, at twice the connections and about twice the frames read")
	fs.StringVar(&c.VenueWSURL, "venue-ws-url", "", "base `URL` (ws or wss) of the venue's market streams (default: the -venue-url host when that is set, else that venue's public stream URL; binance: the /public and /market paths are derived from it)")
	onOffVar(fs, &c.VenueStreams, "venue-streams", true, "read market streams, `on|off` (binance and aster; the simulated venue feeds the same path)")
	fs.StringVar(&c.spotList, "spot", "", "platform spot pairs, comma separated `ids` (sim has a built-in default list)")
	fs.StringVar(&c.spotFile, "spot-file", "", "`file` of platform spot pairs, one ticker_id a line, # comments; re-read on SIGHUP")
	fs.StringVar(&c.quotesList, "quotes", "", "quote `assets` allowed for perp items, comma separated (default: all)")
	intVar(fs, &c.rateLimit, "rate-limit", 600, "`requests` per minute per client IP; 0: off")
	fs.StringVar(&c.exemptList, "rate-limit-exempt", "", "`CIDRs` of permitted robots, not rate limited")
	fs.StringVar(&c.exemptList, "ratelimit-exempt", "", "the older name of -rate-limit-exempt (`CIDRs`), still accepted")
	fs.StringVar(&c.trustedList, "trusted-proxies", "", "`CIDRs` of peers whose client-IP header is believed")
	fs.StringVar(&c.clientIPHeader, "client-ip-header", server.DefaultClientIPHeader, "`header` carrying the client IP from a trusted proxy (X-Forwarded-For, CF-Connecting-IP, ...)")
	onOffVar(fs, &c.Pages, "pages", true, "serve the live market page (/) and the API reference (/docs) on the public address, `on|off`; off: an API-only deployment, where they are 404")
	intVar(fs, &c.MaxConns, "max-conns", server.DefaultMaxConns, "most client `connections` open at once; each holds a 16 KiB write buffer, so 10000 can hold up to 160 MiB")
	floatVar(fs, &c.venueBudget, "venue-budget", 0.5, "`fraction` of the venue's weight limit to spend, in (0, 1]")
	floatVar(fs, &c.refreshShare, "venue-refresh-share", 0.04, "`fraction` of the venue's weight limit a minute that deeper snapshots under local books in sequence may spend, in (0, -venue-budget/2]; a book that must wait serves fewer levels on one side meanwhile")
	durationVar(fs, &c.maxStale, "max-stale", 10*time.Second, "oldest snapshot still served while the venue fails, a `duration`")
	durationVar(fs, &c.coldTimeout, "cold-timeout", 2*time.Second, "how long a first request waits for its venue read, a `duration`")
	int64Var(fs, &c.simSeed, "sim-seed", 1, "`seed` of the simulated venue")
	intVar(fs, &c.simExtra, "sim-extra", 0, "`number` of extra synthetic markets on the simulated venue, for load tests")
	fs.StringVar(&c.clusterList, "cluster", "", "NATS server `URLs` (nats:// or tls://, comma separated) of a cluster of replicas: one leader reads the venue, every member serves its snapshots; empty: this process alone")
	fs.StringVar(&c.ClusterName, "cluster-name", "marketfeed", "`name` of the cluster: the prefix of its NATS buckets")
	intVar(fs, &c.ClusterReplicas, "cluster-replicas", 1, "how many NATS `servers` hold each of the cluster's buckets: 3 on a cluster of three")
	fs.StringVar(&c.ClusterMember, "cluster-member", "", "this member's `name`, unique in the cluster (default: the host name and the -listen port)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log `format`: text | json")
	fs.StringVar(&c.logLevelName, "log-level", "info", "log `level`: debug | info | warn | error")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "usage: marketfeed [flags]\n\nEvery flag can also be set as %s<NAME>: the flag's name in upper case, dashes as underscores.\n\n", envPrefix)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	// given maps each flag set, by its name (not an alias), to the name it
	// was set by: on the command line, or else through its variable.
	given := map[string]string{}
	var err error
	fs.Visit(func(f *flag.Flag) {
		name := canonical(f.Name)
		if other, ok := given[name]; ok && err == nil {
			err = fmt.Errorf("%s and %s set the same flag: give one", c.where(other), c.where(f.Name))
		}
		given[name] = f.Name
	})
	if err != nil {
		return nil, err
	}
	fromCommandLine := maps.Clone(given)
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		env, name := envName(f.Name), canonical(f.Name)
		known[env] = true
		c.flagNames = append(c.flagNames, f.Name)
		v := vars[env]
		if _, ok := fromCommandLine[name]; ok || v == "" || err != nil {
			return
		}
		c.fromEnv[f.Name] = env
		if other, ok := given[name]; ok {
			err = fmt.Errorf("%s and %s set the same flag: give one", c.where(other), c.where(f.Name))
			return
		}
		if err = f.Value.Set(v); err != nil {
			err = c.invalid(f.Name, v, "%v", err)
			return
		}
		given[name] = f.Name
	})
	if err != nil {
		return nil, err
	}
	for name, by := range given {
		if by != name {
			c.spelled[name] = by
		}
	}
	for k := range vars {
		if !known[k] {
			c.unknownEnv = append(c.unknownEnv, k)
		}
	}
	slices.Sort(c.unknownEnv)
	c.spotSet = given["spot"] != "" || given["spot-file"] != ""
	return c, nil
}

// canonical is the flag an alias stands for, or name itself.
func canonical(name string) string {
	if to, ok := flagAliases[name]; ok {
		return to
	}
	return name
}

// where names the flag name as the operator gave it: its -name, and the
// variable when it came from one.
func (c *Config) where(name string) string {
	if env := c.fromEnv[name]; env != "" {
		return "-" + name + " (from " + env + ")"
	}
	return "-" + name
}

// nearEnv returns the variable of a flag that name may have meant: the same
// letters once underscores are ignored, as MARKETFEED_RATELIMIT for
// MARKETFEED_RATE_LIMIT, or one letter off (two in a long name), as
// MARKETFEED_SPOTS for MARKETFEED_SPOT; the nearest, or "" when none is that
// near.
func nearEnv(name string, flags []string) string {
	squash := func(s string) string { return strings.ReplaceAll(strings.TrimPrefix(s, envPrefix), "_", "") }
	want := squash(name)
	best, bestDist := "", 0
	for _, f := range flags {
		env := envName(f)
		got := squash(env)
		allowed := 1
		if len(got) >= 10 {
			allowed = 2
		}
		if d := editDistance(want, got); d <= allowed && (best == "" || d < bestDist) {
			best, bestDist = env, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes: the
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// validate checks what every value means, and the combinations, before
// anything starts; it also derives the parsed forms of the list flags and
// reads -spot-file. The error is the first problem found, naming its flag.
func (c *Config) validate() error {
	if err := checkListen(c.listen); err != nil {
		return c.invalid("listen", c.listen, "%v", err)
	}
	if c.opsListen != "" {
		if err := checkListen(c.opsListen); err != nil {
			return c.invalid("ops-listen", c.opsListen, "%v", err)
		}
	}
	if !slices.Contains(venueNames(), c.venue) {
		return c.invalid("venue", c.venue, "want one of %s", strings.Join(venueNames(), ", "))
	}
	if c.venueURL != "" {
		if c.venue == simVenue {
			return c.invalid("venue-url", nil, "the simulated venue has no URL; set -venue %s", remoteVenues())
		}
		if err := checkURL(c.venueURL, "http", "https"); err != nil {
			return c.invalid("venue-url", nil, "%v", err)
		}
	}
	if c.VenueWSURL != "" {
		if c.venue == simVenue {
			return c.invalid("venue-ws-url", nil, "the simulated venue has no stream URL; set -venue %s", remoteVenues())
		}
		if err := checkURL(c.VenueWSURL, "ws", "wss"); err != nil {
			return c.invalid("venue-ws-url", nil, "%v", err)
		}
	}
	var err error
	if c.spotFlag, err = parseIDs(splitList(c.spotList)); err != nil {
		return c.invalid("spot", nil, "%v", err)
	}
	c.spot = c.spotFlag
	if c.spotFile != "" {
		ids, err := readSpotFile(c.spotFile)
		if err != nil {
			return c.invalid("spot-file", nil, "%v", err)
		}
		c.spot = append(slices.Clip(c.spot), ids...)
	}
	c.quotes = splitList(c.quotesList)
	if c.rateLimit < 0 {
		return c.invalid("rate-limit", c.rateLimit, "want 0 (off) or more")
	}
	if c.rateLimitExempt, err = parsePrefixes(c.exemptList); err != nil {
		return c.invalid("rate-limit-exempt", nil, "%v", err)
	}
	if c.trustedProxies, err = parsePrefixes(c.trustedList); err != nil {
		return c.invalid("trusted-proxies", nil, "%v", err)
	}
	if c.clientIPHeader == "" {
		return c.invalid("client-ip-header", nil, "must not be empty")
	}
	if c.MaxConns < 1 {
		return c.invalid("max-conns", c.MaxConns, "want at least 1")
	}
	if c.venueBudget <= 0 || c.venueBudget > 1 {
		return c.invalid("venue-budget", c.venueBudget, "want a fraction in (0, 1]")
	}
	if c.refreshShare <= 0 || c.refreshShare > c.venueBudget/2 {
		return c.invalid("venue-refresh-share", c.refreshShare, "want a fraction in (0, -venue-budget/2]")
	}
	if c.maxStale <= 0 {
		return c.invalid("max-stale", c.maxStale, "want a positive duration")
	}
	if c.coldTimeout <= 0 {
		return c.invalid("cold-timeout", c.coldTimeout, "want a positive duration")
	}
	if c.VenueWSMaxAge < 0 || (c.VenueWSMaxAge > 0 && c.VenueWSMaxAge < time.Second) {
		return c.invalid("venue-ws-max-age", c.VenueWSMaxAge, "want 0 (the venue's limit) or at least 1s")
	}
	if c.VenueWSLines != 1 && c.VenueWSLines != 2 {
		return c.invalid("venue-ws-lines", c.VenueWSLines, "want 1 or 2")
	}
	if c.simExtra < 0 {
		return c.invalid("sim-extra", c.simExtra, "want 0 or more")
	}
	for _, u := range splitList(c.clusterList) {
		if err := checkURL(u, "nats", "tls"); err != nil {
			return c.invalid("cluster", nil, "%v", err)
		}
		c.ClusterURLs = append(c.ClusterURLs, u)
	}
	if c.ClusterReplicas < 1 || c.ClusterReplicas > 5 {
		return c.invalid("cluster-replicas", c.ClusterReplicas, "want 1 to 5, as NATS allows")
	}
	if !validBucketName(c.ClusterName) {
		return c.invalid("cluster-name", c.ClusterName, "want letters, digits, - and _ only")
	}
	if c.ClusterMember == "" {
		host, _ := os.Hostname()
		_, port, _ := strings.Cut(c.listen, ":")
		c.ClusterMember = host + ":" + port
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c.invalid("log-format", c.logFormat, "want text or json")
	}
	if err := c.logLevel.UnmarshalText([]byte(c.logLevelName)); err != nil {
		return c.invalid("log-level", c.logLevelName, "want debug, info, warn or error")
	}
	return nil
}

// invalid is the error for a bad value of the flag name: it names the flag,
// the value unless it is nil (the message then quotes it), and, when the
// value came from the environment, the variable.
func (c *Config) invalid(name string, value any, format string, args ...any) error {
	if other := c.spelled[name]; other != "" {
		name = other
	}
	where := "-" + name
	switch v := value.(type) {
	case nil:
	case string:
		where += fmt.Sprintf(" %q", v)
	default:
		where += fmt.Sprintf(" %v", v)
	}
	if env := c.fromEnv[name]; env != "" {
		where += " (from " + env + ")"
	}
	return fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
}

// checkListen requires a listen address as net.Listen takes it: a host
// (empty for every interface) and a port, a number or a service name.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, such as 127.0.0.1:8080 or :8080")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// checkURL requires raw to be an absolute URL with one of schemes and a
// host, and without a query or fragment: paths are appended to it, which
// would put them after either.
func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("%q: want a URL with scheme %s", raw, strings.Join(schemes, " or "))
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("%q: want a base URL without a query or fragment", raw)
	}
	return nil
}

// typed is a flag.Value of type T whose error says what the flag wants: the
// flag package's own numeric and duration flags say only "parse error".
type typed[T comparable] struct {
	p     *T
	parse func(string) (T, error)
	want  string
}

// String is the value as -h shows it for a default; "" for the zero value,
// which -h then leaves out, as the flag package does for its own flags:
// a flag whose zero means "the venue's own" says so in its usage instead.
func (v *typed[T]) String() string {
	var zero T
	if v == nil || v.p == nil || *v.p == zero {
		return ""
	}
	return fmt.Sprint(*v.p)
}

func (v *typed[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return errors.New("want " + v.want)
	}
	*v.p = x
	return nil
}

func intVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var(&typed[int]{p, func(s string) (int, error) {
		n, err := strconv.ParseInt(s, 0, strconv.IntSize)
		return int(n), err
	}, "a whole number"}, name, usage)
}

func int64Var(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var(&typed[int64]{p, func(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }, "a whole number"}, name, usage)
}

func floatVar(fs *flag.FlagSet, p *float64, name string, def float64, usage string) {
	*p = def
	fs.Var(&typed[float64]{p, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "a number"}, name, usage)
}

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&typed[time.Duration]{p, time.ParseDuration, "a duration such as 10s or 1m30s"}, name, usage)
}

// onOff is a boolean flag spelled on or off, as the command line documents
// it; it takes a value, unlike a flag.Bool.
type onOff struct{ p *bool }

func onOffVar(fs *flag.FlagSet, p *bool, name string, def bool, usage string) {
	*p = def
	fs.Var(onOff{p}, name, usage)
}

func (o onOff) String() string {
	if o.p != nil && *o.p {
		return "on"
	}
	return "off"
}

func (o onOff) Set(s string) error {
	switch s {
	case "on":
		*o.p = true
	case "off":
		*o.p = false
	default:
		return errors.New("want on or off")
	}
	return nil
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
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validBucketName reports whether name can prefix a NATS key-value bucket's
// name: letters, digits, dashes and underscores.
func validBucketName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
