package apptest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The operator's kit: the rule files under deploy/prometheus and the
// dashboard deploy/grafana/marketfeed.json. promtool checks and unit-tests
// the rules (make rules); the tests here check what promtool cannot: that
// the dashboard is one a stock Grafana loads as it is, that every alert has
// a unit test that fires it and one that keeps it silent, and (in
// operatorkit_metrics_test.go) that every expression names only metrics,
// labels and label values the binary exports.

var (
	kitRuleFiles = filepath.Join(repoRoot, "deploy", "prometheus", "*.rules.yml")
	kitRuleTests = filepath.Join(repoRoot, "deploy", "prometheus", "tests", "*.test.yml")
	kitDashboard = filepath.Join(repoRoot, "deploy", "grafana", "marketfeed.json")
)

// kitRule is one rule of a rule file.
type kitRule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadRules reads every rule of the rule files.
func loadRules(t *testing.T) []kitRule {
	t.Helper()
	var rules []kitRule
	for _, path := range glob(t, kitRuleFiles) {
		var f struct {
			Groups []struct {
				Name  string    `yaml:"name"`
				Rules []kitRule `yaml:"rules"`
			} `yaml:"groups"`
		}
		readYAML(t, path, &f)
		for _, g := range f.Groups {
			rules = append(rules, g.Rules...)
		}
	}
	return rules
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("%s: no file (%v)", pattern, err)
	}
	return paths
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true) // Prometheus reads rule files strictly too
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestEveryAlertFiresAndStaysSilentInItsUnitTests: an alert without a test
// that fires it may never fire (a renamed metric, a threshold the wrong way
// round), and one without a test that keeps it silent may always fire.
// Every recording rule is evaluated by a test too.
func TestEveryAlertFiresAndStaysSilentInItsUnitTests(t *testing.T) {
	fires, silent, evaluated := map[string]bool{}, map[string]bool{}, ""
	for _, path := range glob(t, kitRuleTests) {
		var f struct {
			RuleFiles          []string `yaml:"rule_files"`
			EvaluationInterval string   `yaml:"evaluation_interval"`
			Tests              []struct {
				Name          string           `yaml:"name"`
				Interval      string           `yaml:"interval"`
				InputSeries   []map[string]any `yaml:"input_series"`
				AlertRuleTest []struct {
					EvalTime  string           `yaml:"eval_time"`
					Alertname string           `yaml:"alertname"`
					ExpAlerts []map[string]any `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
				PromQLExprTest []struct {
					Expr       string           `yaml:"expr"`
					EvalTime   string           `yaml:"eval_time"`
					ExpSamples []map[string]any `yaml:"exp_samples"`
				} `yaml:"promql_expr_test"`
			} `yaml:"tests"`
		}
		readYAML(t, path, &f)
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
			for _, e := range tc.PromQLExprTest {
				evaluated += e.Expr + "\n"
			}
		}
	}
	names := map[string]bool{}
	for _, r := range loadRules(t) {
		switch {
		case r.Alert != "":
			names[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alert %s: no unit test makes it fire", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("alert %s: no unit test keeps it silent", r.Alert)
			}
			for _, key := range []string{"summary", "description", "runbook"} {
				if r.Annotations[key] == "" {
					t.Errorf("alert %s: no %s", r.Alert, key)
				}
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
		case !regexp.MustCompile(`(^|[^a-z_:])` + regexp.QuoteMeta(r.Record) + `($|[^a-z0-9_:])`).MatchString(evaluated):
			t.Errorf("recording rule %s: no unit test evaluates it", r.Record)
		}
	}
	for name := range fires {
		if !names[name] {
			t.Errorf("the unit tests fire %s, which no rule file holds", name)
		}
	}
}

// dashboard is what the tests read of deploy/grafana/marketfeed.json.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Inputs        []any  `json:"__inputs"`
	Templating    struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashVariable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Query      string          `json:"query"` // a string, which every Grafana since 7 reads
	Datasource *dashDatasource `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

type dashPanel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Datasource *dashDatasource           `json:"datasource"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []dashTarget              `json:"targets"`
	Panels     []dashPanel               `json:"panels"` // a collapsed row's
}

type dashTarget struct {
	RefID        string          `json:"refId"`
	Expr         string          `json:"expr"`
	LegendFormat string          `json:"legendFormat"`
	Datasource   *dashDatasource `json:"datasource"`
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// dashboardDatasource is the only datasource a panel, a target or a query
// variable may name: the dashboard's variable, so that it loads into any
// Grafana with a Prometheus datasource of any name.
var dashboardDatasource = dashDatasource{Type: "prometheus", UID: "${datasource}"}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(kitDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", kitDashboard, err)
	}
	return d
}

// panels returns every panel, a collapsed row's included, rows first in
// their place.
func (d dashboard) panels() []dashPanel {
	var out []dashPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// grafanaVar is a dashboard variable in an expression: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// grafanaIntervals are Grafana's own variables the dashboard may use, all
// durations.
var grafanaIntervals = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

// expandVariables replaces the dashboard's variables in expr with what
// PromQL can parse in their place: a duration for Grafana's intervals, a
// regular expression that matches anything for a variable of the
// dashboard's (which stands in a =~ matcher: "=" on a variable with "All"
// or several values selects nothing, and the label-value check then
// fails on ".*").
func expandVariables(expr string, defined map[string]bool) (string, error) {
	var bad []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVar.FindStringSubmatch(v)
		name := m[1] + m[2]
		switch {
		case grafanaIntervals[name]:
			return "5m"
		case defined[name]:
			return ".*"
		}
		bad = append(bad, v)
		return v
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("%v: no such variable", bad)
	}
	return out, nil
}

// labelValuesQuery is a query variable's label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_]\w*)\)$`)

// TestDashboardLoadsAsItIs: the dashboard is JSON a stock Grafana imports
// or provisions without editing: one datasource variable of type
// prometheus that every panel, target and query variable goes through,
// variables for the cluster and the instance that every expression
// filters on, the rows the operator looks for, and panels that each have
// an id, a place and targets with expressions.
func TestDashboardLoadsAsItIs(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want all three", d.UID, d.Title, d.SchemaVersion)
	}
	if len(d.Inputs) > 0 {
		t.Error("__inputs: an exported dashboard's inputs stop provisioning from a file; use the datasource variable")
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
		switch v.Type {
		case "datasource":
			if v.Name != "datasource" || v.Query != "prometheus" {
				t.Errorf("datasource variable %s of %q, want datasource of prometheus", v.Name, v.Query)
			}
		case "query":
			if v.Datasource == nil || *v.Datasource != dashboardDatasource {
				t.Errorf("variable %s: datasource %+v, want %+v", v.Name, v.Datasource, dashboardDatasource)
			}
			if !labelValuesQuery.MatchString(v.Query) {
				t.Errorf("variable %s: query %q, want label_values(selector, label)", v.Name, v.Query)
			}
			if !v.IncludeAll {
				t.Errorf("variable %s: no All", v.Name)
			}
		default:
			t.Errorf("variable %s of type %s", v.Name, v.Type)
		}
	}
	for _, name := range []string{"datasource", "cluster", "instance"} {
		if !defined[name] {
			t.Errorf("no variable %s", name)
		}
	}
	var rows []string
	ids := map[int]bool{}
	for _, p := range d.panels() {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d, not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if p.Datasource == nil || *p.Datasource != dashboardDatasource {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, dashboardDatasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		refIDs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || *tg.Datasource != dashboardDatasource {
				t.Errorf("panel %q target %s: datasource %+v, want %+v", p.Title, tg.RefID, tg.Datasource, dashboardDatasource)
			}
			if tg.RefID == "" || refIDs[tg.RefID] {
				t.Errorf("panel %q: refId %q empty or twice", p.Title, tg.RefID)
			}
			refIDs[tg.RefID] = true
			if tg.Expr == "" {
				t.Errorf("panel %q target %s: no expression", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) && !strings.Contains(tg.Expr, `cluster=~"$cluster"`) {
				t.Errorf("panel %q target %s: filters on neither $instance nor $cluster: %s", p.Title, tg.RefID, tg.Expr)
			}
			if _, err := expandVariables(tg.Expr, defined); err != nil {
				t.Errorf("panel %q target %s: %v", p.Title, tg.RefID, err)
			}
		}
	}
	if want := []string{"Clients", "Freshness", "Venue", "Cluster", "Process"}; !slices.Equal(rows, want) {
		t.Errorf("rows %v, want %v", rows, want)
	}
}

// kitExpression is one expression of the kit, where it stands, and the
// labels its text shows ({{ $labels.x }} in an alert's annotations,
// {{x}} in a panel's legend).
type kitExpression struct {
	where  string
	expr   string
	shows  []string
	record string // the series it records, for a recording rule
}

var (
	annotationLabel = regexp.MustCompile(`\$labels\.(\w+)`)
	legendLabel     = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
)

// kitExpressions returns every expression of the rules and the dashboard,
// the dashboard's with its variables expanded.
func kitExpressions(t *testing.T) []kitExpression {
	t.Helper()
	var out []kitExpression
	for _, r := range loadRules(t) {
		e := kitExpression{where: "recording rule " + r.Record, expr: r.Expr, record: r.Record}
		if r.Alert != "" {
			e.where = "alert " + r.Alert
			for _, a := range r.Annotations {
				for _, m := range annotationLabel.FindAllStringSubmatch(a, -1) {
					e.shows = append(e.shows, m[1])
				}
			}
		}
		out = append(out, e)
	}
	d := loadDashboard(t)
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	for _, v := range d.Templating.List {
		if m := labelValuesQuery.FindStringSubmatch(v.Query); m != nil {
			expr, err := expandVariables(m[1], defined)
			if err != nil {
				t.Fatalf("variable %s: %v", v.Name, err)
			}
			out = append(out, kitExpression{where: "variable " + v.Name, expr: expr, shows: []string{m[2]}})
		}
	}
	for _, p := range d.panels() {
		for _, tg := range p.Targets {
			expr, err := expandVariables(tg.Expr, defined)
			if err != nil {
				t.Fatalf("panel %q: %v", p.Title, err)
			}
			e := kitExpression{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: expr}
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				e.shows = append(e.shows, m[1])
			}
			out = append(out, e)
		}
	}
	return out
}

// promtoolPath returns the promtool that make installs (PROMTOOL), or one
// on the PATH; a test that needs it is skipped without one.
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p // make test passes it: a wrong path must fail, not skip
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: make test installs it and passes PROMTOOL")
	}
	return p
}

// TestKitExpressionsParse: promtool parses every expression of the kit,
// the dashboard's as recording rules of a file of their own (with Grafana's
// variables expanded), as Prometheus will when the dashboard asks.
func TestKitExpressionsParse(t *testing.T) {
	promtool := promtoolPath(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	var where []string
	for _, e := range kitExpressions(t) {
		if e.record == "" && !strings.HasPrefix(e.where, "alert ") {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard_expression_%d", len(rules)), Expr: e.expr})
			where = append(where, e.where)
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"check", "rules", file}, glob(t, kitRuleFiles)...)
	if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
		// promtool names a dashboard expression by its place in the file.
		for i, w := range where {
			out = []byte(strings.ReplaceAll(string(out), fmt.Sprintf("%q", rules[i].Record), w))
		}
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}
