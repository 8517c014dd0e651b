package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/internal/natstest"
	"marketfeed/internal/opsclient"
	"marketfeed/internal/promexpr"
	"marketfeed/internal/promtext"
)

// The modes the binary runs in, each of which exports series the others do
// not: alone on Binance's adapter with market streams (against venuesim),
// and as the leader and a follower of a cluster (on the embedded simulator).
const (
	modeSingle   = "single, Binance adapter"
	modeLeader   = "cluster leader"
	modeFollower = "cluster follower"
)

var allModes = []string{modeSingle, modeLeader, modeFollower}

// modeOnly declares the families of series that only some modes export, as
// the README's "Operating it" describes them; a series of no family here is
// exported in every mode. The test holds the declaration to what the
// modes export, both ways, so that it cannot drift from the code.
var modeOnly = []struct {
	prefixes []string
	modes    []string
}{
	// The stream connections' own series: the Binance adapter keeps them,
	// the embedded simulator has none.
	{[]string{"marketfeed_stream_connections", "marketfeed_stream_per_connection", "marketfeed_stream_events_total",
		"marketfeed_stream_duplicates_total", "marketfeed_stream_reconnects_total", "marketfeed_stream_subscribe_errors_total",
		"marketfeed_stream_bad_frames_total", "marketfeed_stream_venue_close_age_seconds", "marketfeed_stream_max_age_seconds"}, []string{modeSingle}},
	// The poller's: a process alone, or a member that leads (or reads alone
	// while NATS is away). A follower runs no poller.
	{[]string{"marketfeed_venue_", "marketfeed_snapshot_age_seconds", "marketfeed_hot_pairs", "marketfeed_cold_load",
		"marketfeed_tickers_omitted", "marketfeed_contracts_omitted", "marketfeed_pairs", "marketfeed_book",
		"marketfeed_trade_window_", "marketfeed_seeded_total", "marketfeed_stream_silences_total"}, []string{modeSingle, modeLeader}},
	// A cluster member's.
	{[]string{"marketfeed_cluster_", "marketfeed_standby_"}, []string{modeLeader, modeFollower}},
}

// declaredModes returns the modes that export the series name.
func declaredModes(name string) []string {
	for _, f := range modeOnly {
		for _, p := range f.prefixes {
			if strings.HasPrefix(name, p) {
				return f.modes
			}
		}
	}
	return allModes
}

// targetLabels are the labels Prometheus gives every series it scrapes;
// prometheusSeries the series it makes of each scrape itself.
var (
	targetLabels     = map[string]bool{"job": true, "instance": true}
	prometheusSeries = map[string]bool{"up": true}
)

// exported is what the modes' /metrics held: name → label → values, and
// name → the modes that export it.
type exported struct {
	labels map[string]map[string]map[string]bool
	modes  map[string][]string
	raw    map[string][]byte // mode → its /metrics body
}

var seriesLabel = regexp.MustCompile(`([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"`)

func (e *exported) add(mode string, scrape map[string]float64) {
	for series := range scrape {
		name, labels, _ := strings.Cut(series, "{")
		if e.labels[name] == nil {
			e.labels[name] = map[string]map[string]bool{}
		}
		if !slices.Contains(e.modes[name], mode) {
			e.modes[name] = append(e.modes[name], mode)
		}
		for _, m := range seriesLabel.FindAllStringSubmatch(labels, -1) {
			if e.labels[name][m[1]] == nil {
				e.labels[name][m[1]] = map[string]bool{}
			}
			e.labels[name][m[1]][m[2]] = true
		}
	}
}

// scrapeModes runs the binary in each mode and reads its /metrics once it
// is ready.
func scrapeModes(t *testing.T) *exported {
	t.Helper()
	dir := t.TempDir()
	venuesim := Build(t, dir, "marketfeed/cmd/venuesim")
	marketfeed := Build(t, dir, "marketfeed/cmd/marketfeed")
	e := &exported{labels: map[string]map[string]map[string]bool{}, modes: map[string][]string{}, raw: map[string][]byte{}}

	venue, _ := Start(t, venuesim, "-listen", "127.0.0.1:0")
	_, ops := Start(t, marketfeed, "-venue", "binance", "-venue-url", venue, "-venue-streams", "on",
		"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0")
	WaitReady(t, "http://"+ops)
	e.scrape(t, modeSingle, "http://"+ops)

	nats := natstest.Start(t)
	roles := map[string]string{}
	for _, name := range []string{"a", "b"} {
		_, ops := Start(t, marketfeed, "-cluster", nats.ClientURL(), "-cluster-member", name,
			"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0")
		roles[waitRole(t, "http://"+ops)] = "http://" + ops
	}
	if roles["leader"] == "" || roles["follower"] == "" {
		t.Fatalf("roles %v: want a leader and a follower", slices.Collect(maps.Keys(roles)))
	}
	e.scrape(t, modeLeader, roles["leader"])
	e.scrape(t, modeFollower, roles["follower"])
	return e
}

// scrape reads the /metrics of the mode's process at ops.
func (e *exported) scrape(t *testing.T, mode, ops string) {
	t.Helper()
	_, body := Get(t, ops+"/metrics")
	e.raw[mode] = body
	e.add(mode, promtext.Must(t, string(body)))
}

// waitRole waits until a cluster member is ready as a leader or a follower,
// and returns which.
func waitRole(t *testing.T, ops string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := Get(t, ops+"/readyz")
		var r opsclient.Readiness // the /readyz body as the operator document declares it
		if err := json.Unmarshal(body, &r); err == nil && r.Ready && r.Cluster != nil &&
			(r.Cluster.Role == opsclient.RoleLeader || r.Cluster.Role == opsclient.RoleFollower) {
			return string(r.Cluster.Role)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready as a leader or a follower within 20s: %s", ops, body)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process, not synchronising test logic
	}
}

// TestKitNamesWhatTheBinaryExports runs the binary in every mode, reads
// what each exports, and fails if an alert, a recording rule, a dashboard
// variable or a panel names a metric, a label or a label value none of
// them exports, or groups by or shows a label its expression does not
// have: a renamed metric would otherwise silence an alert for ever. A
// recording rule's series is what its expression keeps. The declaration
// of which series only some modes export is checked against them too.
func TestKitNamesWhatTheBinaryExports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary in three modes")
	}
	exp := scrapeModes(t)
	for name, modes := range exp.modes {
		want := declaredModes(name)
		slices.Sort(modes)
		if !slices.Equal(modes, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s is exported by %v, declared for %v (modeOnly)", name, modes, want)
		}
	}
	c := kitChecker{exp: exp, recorded: map[string]map[string]map[string]bool{}}
	exprs := kitExpressions(t)
	for _, e := range exprs { // the recording rules first: the others read their series
		if e.record != "" {
			c.record(e)
		}
	}
	names := map[string]bool{}
	for _, e := range exprs {
		for _, err := range c.check(e) {
			t.Errorf("%s: %v", e.where, err)
		}
		if refs, err := promexpr.Read(e.expr); err == nil {
			for _, s := range refs.Selectors {
				for _, n := range s.Names {
					names[n] = true
				}
			}
		}
	}
	perMode := map[string]int{}
	for n := range names {
		for _, m := range exp.modes[n] {
			perMode[m]++
		}
	}
	t.Logf("%d expressions name %d series; of these, each mode exports: %v", len(exprs), len(names), perMode)
}

// kitChecker holds expressions to what the binary exports and what the
// recording rules record.
type kitChecker struct {
	exp      *exported
	recorded map[string]map[string]map[string]bool // name → label → values (nil: any)
}

// record notes a recording rule's series: the labels its top-level by
// clause keeps, with the values its sources export for them.
func (c *kitChecker) record(e kitExpression) {
	refs, err := promexpr.Read(e.expr)
	if err != nil || refs.Kept == nil {
		return // check reports it
	}
	labels := map[string]map[string]bool{}
	for _, l := range refs.Kept {
		for _, s := range refs.Selectors {
			for _, n := range s.Names {
				if vs := c.exp.labels[n][l]; vs != nil && !targetLabels[l] {
					if labels[l] == nil {
						labels[l] = map[string]bool{}
					}
					maps.Copy(labels[l], vs)
				}
			}
		}
		if labels[l] == nil {
			labels[l] = nil // present, any value
		}
	}
	c.recorded[e.record] = labels
}

// labelsOf returns the labels of a series name and whether it is known.
func (c *kitChecker) labelsOf(name string) (map[string]map[string]bool, bool) {
	if l, ok := c.recorded[name]; ok {
		return l, true
	}
	if prometheusSeries[name] {
		return map[string]map[string]bool{}, true
	}
	l, ok := c.exp.labels[name]
	return l, ok
}

func (c *kitChecker) check(e kitExpression) []error {
	refs, err := promexpr.Read(e.expr)
	if err != nil {
		return []error{err}
	}
	var errs []error
	if e.record != "" && refs.Kept == nil {
		errs = append(errs, fmt.Errorf("aggregate at the top with by (...): the labels it keeps are what the dashboard may read"))
	}
	has := maps.Clone(targetLabels) // the labels of the expression's series
	for _, s := range refs.Selectors {
		labels := map[string]map[string]bool{}
		for _, name := range s.Names {
			l, ok := c.labelsOf(name)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: no mode of the binary exports it, and no recording rule records it", name))
				continue
			}
			for k, vs := range l {
				labels[k] = vs
				has[k] = true
			}
		}
		for _, m := range s.Matchers {
			vs, ok := labels[m.Label]
			if !ok && !targetLabels[m.Label] {
				errs = append(errs, fmt.Errorf("%v{%s}: no such label", s.Names, m.Label))
				continue
			}
			for _, v := range matcherValues(m) {
				if vs != nil && !vs[v] {
					errs = append(errs, fmt.Errorf("%v{%s%s%q}: %s is not one of its values %v", s.Names, m.Label, m.Op, m.Value,
						v, slices.Sorted(maps.Keys(vs))))
				}
			}
		}
	}
	for _, l := range refs.Grouping {
		if !has[l] {
			errs = append(errs, fmt.Errorf("groups by %s, which none of its series has", l))
		}
	}
	result := has
	if refs.Kept != nil {
		result = map[string]bool{}
		for _, l := range refs.Kept {
			result[l] = true
		}
	}
	for _, l := range e.shows {
		if !result[l] {
			errs = append(errs, fmt.Errorf("shows the label %s, which its result does not have", l))
		}
	}
	return errs
}

// literalValues is a matcher's value that names label values: one, or
// alternatives of =~.
var literalValues = regexp.MustCompile(`^[\w.+-]+(\|[\w.+-]+)*$`)

// matcherValues returns the label values a matcher names, or none when its
// value is a pattern.
func matcherValues(m promexpr.Matcher) []string {
	switch m.Op {
	case "=", "!=":
		return []string{m.Value}
	}
	if literalValues.MatchString(m.Value) {
		return strings.Split(m.Value, "|")
	}
	return nil
}

// TestMetricsHaveHelpAndType runs the binary on the embedded simulator,
// alone on Binance's adapter with market streams (venuesim), and as a
// cluster's leader and follower, and holds each /metrics to what
// Prometheus's tools read: every family's series together under a "# HELP"
// with text and a "# TYPE", and promtool check metrics exiting 0 with
// nothing to say (it once exited 3 over 108 families without help).
func TestMetricsHaveHelpAndType(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary in four modes")
	}
	exp := scrapeModes(t)
	bin := Build(t, t.TempDir(), "marketfeed/cmd/marketfeed")
	_, ops := Start(t, bin, "-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0")
	WaitReady(t, "http://"+ops)
	exp.scrape(t, "simulator", "http://"+ops)
	for mode, body := range exp.raw {
		for _, problem := range metadataProblems(string(body)) {
			t.Errorf("%s: %s", mode, problem)
		}
	}
	promtool := promtoolPath(t)
	for mode, body := range exp.raw {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s: promtool check metrics: %v\n%s", mode, err, out)
		}
	}
}

// metadataProblems reads a Prometheus text exposition and reports each
// series not under its family's "# HELP" (with text) and "# TYPE", and each
// family written in two places.
func metadataProblems(text string) []string {
	var problems []string
	var family, typ string
	helped := map[string]bool{}
	done := map[string]bool{}
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
			switch f[1] {
			case "HELP":
				helped[f[2]] = len(f) > 3
			case "TYPE":
				if done[f[2]] {
					problems = append(problems, f[2]+" is written in two places")
				}
				done[f[2]] = true
				family, typ = f[2], f[len(f)-1]
			}
			continue
		}
		name, _, _ := strings.Cut(strings.Fields(line)[0], "{")
		ok := name == family
		if typ == "histogram" || typ == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				ok = ok || name == family+suffix
			}
		}
		switch {
		case !ok:
			problems = append(problems, name+" has no TYPE line of its own")
		case !helped[family]:
			problems = append(problems, family+" has no help text")
		}
		helped[family] = true // one report a family
	}
	return problems
}
