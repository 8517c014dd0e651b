package promdoc

import (
	"bytes"
	"testing"
)

// Write puts each family's series together under its help and type: a
// family the library split over two writers, a histogram of counters, a
// summary, a family renamed for Prometheus's rules and one it does not know.
func TestWriteGroupsFamiliesUnderHelpAndType(t *testing.T) {
	families := map[string]Family{
		"a_total":   {Help: `counts a \ thing`},
		"h_seconds": histogram.with("how long"),
		"s_seconds": {Help: "pauses"},
		"x_count":   {Name: "x_total", Help: "renamed"},
	}
	scrape := `# HELP a_total
# TYPE a_total counter
a_total{k="1"} 1
# HELP h_seconds_bucket
# TYPE h_seconds_bucket counter
h_seconds_bucket{le="1"} 2
h_seconds_bucket{le="+Inf"} 3
# TYPE h_seconds_count counter
h_seconds_count 3
# TYPE h_seconds_sum counter
h_seconds_sum 1.5
# TYPE s_seconds summary
s_seconds{quantile="0.5"} 0.1
s_seconds_sum 0.3
s_seconds_count 2
# TYPE x_count counter
x_count 7
unknown 4
a_total{k="2"} 5
`
	want := `# HELP a_total counts a \\ thing
# TYPE a_total counter
a_total{k="1"} 1
a_total{k="2"} 5
# HELP h_seconds how long
# TYPE h_seconds histogram
h_seconds_bucket{le="1"} 2
h_seconds_bucket{le="+Inf"} 3
h_seconds_count 3
h_seconds_sum 1.5
# HELP s_seconds pauses
# TYPE s_seconds summary
s_seconds{quantile="0.5"} 0.1
s_seconds_sum 0.3
s_seconds_count 2
# HELP x_total renamed
# TYPE x_total counter
x_total 7
# TYPE unknown untyped
unknown 4
`
	var out bytes.Buffer
	if err := Write(&out, []byte(scrape), families); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
