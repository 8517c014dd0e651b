package promtext

import (
	"strings"
	"testing"
)

func TestParseReadsSeries(t *testing.T) {
	got, err := Parse("# HELP a_total Things.\n# TYPE a_total counter\na_total 3\n" +
		`b{route="pairs",status="200"} 1.5e+00` + "\n" + `c{q="x\"y"} -2` + "\n" + `d{a="1", b="2"} 1` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a_total": 3, `b{route="pairs",status="200"}`: 1.5, `c{q="x\"y"}`: -2, `d{a="1", b="2"}`: 1}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestParseRefusesWhatIsNotTheFormat(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"a 1\na 2\n", "series a written twice"},
		{"a one\n", "bad value"},
		{"a 1x\n", "bad value"},
		{"a 1 2 3\n", "bad sample line"},
		{"# TYPE a gauges\n", "bad comment line"},
		{"# random\n", "bad comment line"},
		{`a{b="c} 1` + "\n", "bad sample line"},
		{" a 1\n", "bad sample line"},
	} {
		if _, err := Parse(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want an error with %q", tc.text, err, tc.want)
		}
	}
}
