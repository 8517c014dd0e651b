// Package promtext reads the Prometheus text exposition format strictly, for
// tests that check what the service exposes: a malformed line, a duplicate
// series or a value that is not a number is an error, not a skipped line.
package promtext

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Label pairs may be separated by ", " as well as ",": the Go runtime's
// go_info_ext, as the metrics package writes it, uses the former.
var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:, *[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})?) (\S+)$`)
	typeLine   = regexp.MustCompile(`^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)$`)
)

// Parse returns every sample of text as series (name and labels, as
// written) → value. It reads the whole text and reports every bad line, so
// that one run shows all that is wrong; the samples it could read are
// returned either way.
func Parse(text string) (map[string]float64, error) {
	out := map[string]float64{}
	var errs []error
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue // the format allows empty lines
		}
		if strings.HasPrefix(line, "#") {
			if !typeLine.MatchString(line) && !strings.HasPrefix(line, "# HELP ") {
				errs = append(errs, fmt.Errorf("bad comment line %q", line))
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			errs = append(errs, fmt.Errorf("bad sample line %q", line))
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("bad value in %q: %w", line, err))
			continue
		}
		if _, dup := out[m[1]]; dup {
			errs = append(errs, fmt.Errorf("series %s written twice", m[1]))
		}
		out[m[1]] = v
	}
	return out, errors.Join(errs...)
}
