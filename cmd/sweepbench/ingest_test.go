package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// ingestLine returns the table line of figure, failing when there is none.
func ingestLine(t *testing.T, out, figure string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, figure) {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no line %q in\n%s", figure, out)
	return ""
}

// The ingest table divides the process's CPU by the depth events for the
// cost of one, the allocations by every event, and judges the CPU targets
// at 846 pairs and the lines' ratio and RSS at every count.
func TestIngestTable(t *testing.T) {
	one := ingestResult{Pairs: 846, Lines: 1, Measured: time.Minute, CPU: 4800 * time.Millisecond,
		DepthEvents: 500_000, TradeEvents: 300_000, Mallocs: 400_000, PeakRSS: 200 << 20}
	two := one
	two.Lines, two.CPU, two.PeakRSS = 2, 6*time.Second, 240<<20
	var out bytes.Buffer
	writeIngest(&config{stdout: &out}, one, two)
	for figure, want := range map[string][]string{
		"CPU, share of a core":        {"8.0 %", "10.0 %", "met"},
		"CPU per depth event, all in": {"9.6 µs", "12.0 µs", "met"},
		"two lines over one, CPU":     {"1.25", "met"},
		"heap allocations per event":  {"0.50", "0.50"},
		"peak RSS":                    {"200.0 MiB", "240.0 MiB", "met"},
	} {
		line := ingestLine(t, out.String(), figure)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", figure, line, w)
			}
		}
	}

	// Twice the CPU misses the one line's targets; a third line's worth
	// of CPU on two lines misses the ratio; 300 MiB the RSS.
	one.CPU, two.CPU, two.PeakRSS = 9600*time.Millisecond, 14*time.Second, 300<<20
	out.Reset()
	writeIngest(&config{stdout: &out}, one, two)
	for _, figure := range []string{"CPU, share of a core", "CPU per depth event, all in", "two lines over one, CPU", "peak RSS"} {
		if line := ingestLine(t, out.String(), figure); !strings.HasSuffix(line, missed) {
			t.Errorf("%s: %q, want it MISSED", figure, line)
		}
	}

	// At another count the CPU targets are not judged: they are set at 846.
	one.Pairs, two.Pairs = 446, 446
	out.Reset()
	writeIngest(&config{stdout: &out}, one, two)
	if line := ingestLine(t, out.String(), "CPU, share of a core"); strings.HasSuffix(line, missed) || strings.HasSuffix(line, met) {
		t.Errorf("at 446 pairs the CPU share was judged: %q", line)
	}
}

func TestIngestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-ingest", "-extra", "800"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ingest || cfg.duration != time.Minute {
		t.Errorf("-ingest: ingest %v, duration %v; want a minute's measurement", cfg.ingest, cfg.duration)
	}
	if _, err := parseFlags([]string{"-ingest", "-recovery"}, &bytes.Buffer{}); err == nil {
		t.Error("-ingest with -recovery was taken")
	}
	if _, err := parseFlags([]string{"-ingest", "-depth-window", "-1"}, &bytes.Buffer{}); err == nil {
		t.Error("-depth-window -1 was taken")
	}
}

// The table says which diffs it was measured on: venuesim's default or a
// depth window's.
func TestIngestTableNamesTheDiffs(t *testing.T) {
	r := ingestResult{Pairs: 846, Measured: time.Minute, CPU: time.Second, DepthEvents: 1, PeakRSS: 1}
	for window, want := range map[int]string{0: "venuesim's default diffs", 50: "diffs of venuesim -depth-window 50"} {
		var out bytes.Buffer
		writeIngest(&config{stdout: &out, depthWindow: window}, r, r)
		if !strings.Contains(out.String(), "== ingest, 846 pairs, "+want+",") {
			t.Errorf("depth window %d: %q lacks %q", window, strings.SplitN(out.String(), "\n", 3)[1], want)
		}
	}
}
