package promexpr

import (
	"reflect"
	"strings"
	"testing"
)

func sel(names string, ms ...Matcher) Selector {
	return Selector{Names: strings.Split(names, "|"), Matchers: ms}
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want Refs
	}{
		{`up{job="marketfeed"} == 0`, Refs{Selectors: []Selector{sel("up", Matcher{"job", "=", "marketfeed"})}}},
		{`marketfeed_ready`, Refs{Selectors: []Selector{sel("marketfeed_ready")}}},
		{
			`histogram_quantile(0.99, sum by (job, instance, le) (rate(x_bucket{a=~"b|c", d!="e"}[10m]))) > 1`,
			Refs{
				Selectors: []Selector{sel("x_bucket", Matcher{"a", "=~", "b|c"}, Matcher{"d", "!=", "e"})},
				Grouping:  []string{"job", "instance", "le"},
				Functions: []string{"histogram_quantile", "sum", "rate"},
			},
		},
		{
			// The aggregations at the top keep their by labels; the clause may follow.
			`sum(rate(a[5m])) by (route) / ignoring (route) group_left sum by (job) (rate(a[5m]))`,
			Refs{
				Selectors: []Selector{sel("a"), sel("a")},
				Grouping:  []string{"route", "route", "job"},
				Kept:      []string{"route", "job"},
				Functions: []string{"sum", "rate", "sum", "rate"},
			},
		},
		{
			"sum by (job, cluster) (\n  l\n    * on (job, instance) group_left (cluster)\n  group by (job, instance, cluster) (c_count)\n) == 0",
			Refs{
				Selectors: []Selector{sel("l"), sel("c_count")},
				Grouping:  []string{"job", "cluster", "job", "instance", "cluster", "job", "instance", "cluster"},
				Kept:      []string{"job", "cluster"},
				Functions: []string{"sum", "group"},
			},
		},
		{
			// Keywords in any case; label names that are keywords; and, unless, bool.
			`SUM BY (on) (a) and on (by) b unless c > bool 1`,
			Refs{
				Selectors: []Selector{sel("a"), sel("b"), sel("c")},
				Grouping:  []string{"on", "by"},
				Kept:      []string{"on"},
				Functions: []string{"SUM"},
			},
		},
		{
			`{__name__=~"m_info|m_count", cluster=~".*"}`,
			Refs{Selectors: []Selector{sel("m_info|m_count", Matcher{"cluster", "=~", ".*"})}},
		},
		{`{__name__="m"}`, Refs{Selectors: []Selector{sel("m")}}},
		{
			// Escapes in each kind of string; a trailing comma.
			`a{b="x\"y", c='it\'s', d=` + "`\\d+`" + `,}`,
			Refs{Selectors: []Selector{sel("a", Matcher{"b", "=", `x"y`}, Matcher{"c", "=", "it's"}, Matcher{"d", "=", `\d+`})}},
		},
		{
			// Subqueries, offsets, @, numbers of every form, a comment.
			"max_over_time(rate(a[5m])[1h:1m] offset -1h) @ start() # why\n + 1e-3 * 0x1f - .5 + Inf - NaN + 1h30m",
			Refs{Selectors: []Selector{sel("a")}, Functions: []string{"max_over_time", "rate", "start"}},
		},
		{`time() - a:b:c`, Refs{Selectors: []Selector{sel("a:b:c")}, Functions: []string{"time"}}},
		{`count_values("v", a)`, Refs{Selectors: []Selector{sel("a")}, Functions: []string{"count_values"}}},
	} {
		got, err := Read(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.expr, got, tc.want)
		}
	}
}

func TestReadRefuses(t *testing.T) {
	for _, expr := range []string{
		`a{b="c"`,               // no closing brace
		`a{b}`,                  // no operator and value
		`a{b=c}`,                // an unquoted value
		`a{b=="c"}`,             // no such matcher
		`a{b="c}`,               // an unterminated string
		`a{b="\q"}`,             // a bad escape
		`{__name__=~"a.*"}`,     // names it cannot list
		`{__name__!="a"}`,       // nor these
		`a{__name__="b"}`,       // two names
		`{job="x"}`,             // no name at all
		`rate(a[$__interval])`,  // a dashboard's variable left in
		`sum by job (a)`,        // by without its list
		`sum by (job, "x") (a)`, // a string among labels
		`sum by (job`,           // an open list
		`a)`, `(a`, `a]`, `a}`, `rate(a[5m)`, `a[5m`,
	} {
		if refs, err := Read(expr); err == nil {
			t.Errorf("%s: read as %+v, want an error", expr, refs)
		}
	}
}

// FuzzRead: whatever the text, Read answers without panicking, and every
// selector it reads names a metric.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`up{job="marketfeed"} == 0`, `sum by (a) (rate(b{c=~"d|e"}[5m:1m] offset 1h)) / ignoring (a) group_left c`,
		`{__name__=~"a|b"}`, `a{b='c\'d', e=` + "`f`" + `}`, "a # c\n+ 1e-3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		refs, err := Read(expr)
		if err != nil {
			return
		}
		for _, s := range refs.Selectors {
			if len(s.Names) == 0 {
				t.Fatalf("%q: a selector without a name: %+v", expr, s)
			}
		}
	})
}
