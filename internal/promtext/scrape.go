package promtext

import (
	"bytes"
	"io"
)

// TB is what Scrape and Must need of a testing.TB: this package is linked
// into commands as well, which import no testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Scrape returns what write exposes (a metrics set's WritePrometheus, a
// process's WriteMetrics) as series → value, and fails t on a text that is
// not the format: the one way tests read the metrics a process exposes.
func Scrape(t TB, write func(io.Writer)) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	write(&b)
	return Must(t, b.String())
}

// Must returns text's series → value (see Parse), and fails t if text is
// not the format: for an exposition read over HTTP.
func Must(t TB, text string) map[string]float64 {
	t.Helper()
	out, err := Parse(text)
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, text)
	}
	return out
}
