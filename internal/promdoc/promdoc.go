// Package promdoc gives every metric family marketfeed exposes its "# HELP"
// and "# TYPE" lines. The metrics library writes a TYPE line per family
// (metrics.ExposeMetadata) but no help text, and types the histograms built
// of its counters (internal/promhist) as three counters; Write puts a scrape
// into the form Prometheus, promtool and metadata-driven tools read: each
// family's series together, after its help and its type.
package promdoc

import (
	"bytes"
	"io"
	"strings"
)

// Family is what a scrape says of one metric family besides its series.
type Family struct {
	// Type overrides the type the metrics library writes ("histogram" for
	// a histogram of counters); empty: the library's.
	Type string
	// Help says what the family counts or measures, in one line.
	Help string
	// Name renames a family whose name, as the library writes it, breaks
	// Prometheus's naming rules (a counter without _total, a gauge ending
	// in _count); empty: the name as written.
	Name string
}

// Write writes scrape, a Prometheus text exposition, to w with each
// family's series grouped under its HELP and TYPE lines: the help from
// families, the type from families or else from the scrape's own TYPE
// line ("untyped" when it has none). A family families does not know gets
// no HELP line, which promtool reports (see apptest's operatorkit_metrics_test.go).
func Write(w io.Writer, scrape []byte, families map[string]Family) error {
	types := map[string]string{}
	series := map[string][]byte{}
	var order []string
	for line := range bytes.Lines(scrape) {
		text := strings.TrimRight(string(line), "\n")
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "#") {
			if f := strings.Fields(text); len(f) == 4 && f[1] == "TYPE" {
				types[f[2]] = f[3]
			}
			continue
		}
		end := strings.IndexAny(text, "{ ")
		if end < 0 {
			end = len(text)
		}
		name := text[:end]
		family := familyOf(name, families, types)
		if _, seen := series[family]; !seen {
			order = append(order, family)
		}
		series[family] = append(append(series[family], text...), '\n')
	}
	var out bytes.Buffer
	for _, family := range order {
		f := families[family]
		lines := series[family]
		typ := f.Type
		if typ == "" {
			typ = types[family]
		}
		if typ == "" {
			typ = "untyped"
		}
		if f.Name != "" {
			var renamed []byte
			for line := range bytes.Lines(lines) {
				renamed = append(append(renamed, f.Name...), line[len(family):]...)
			}
			lines, family = renamed, f.Name
		}
		if f.Help != "" {
			out.WriteString("# HELP " + family + " " + escapeHelp(f.Help) + "\n")
		}
		out.WriteString("# TYPE " + family + " " + typ + "\n")
		out.Write(lines)
	}
	_, err := w.Write(out.Bytes())
	return err
}

// familyOf returns the family a series name belongs to: itself, or for a
// histogram's or a summary's _bucket, _sum and _count series, the name
// they extend.
func familyOf(name string, families map[string]Family, types map[string]string) string {
	if _, ok := families[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		typ := families[base].Type
		if typ == "" {
			typ = types[base]
		}
		if typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
			return base
		}
	}
	return name
}

// escapeHelp escapes what the text format does not allow in a help line.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
