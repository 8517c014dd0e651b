//go:build sweep

package main

import (
	"bytes"
	"context"
	"flag"
	"testing"
	"time"
)

// streams passes the stream flags to marketfeed; off, the short sweep runs
// REST only, which any marketfeed can.
var streams = flag.Bool("sweep.streams", false, "run the short sweep with -venue-streams on")

// TestShortSweep runs the whole sweep once, small: 20 extra markets for 20
// seconds, reads every 10 seconds. It needs both commands built and about
// half a minute, so it runs only with -tags sweep:
//
//	go test -tags sweep -run TestShortSweep -v ./cmd/sweepbench [-sweep.streams]
func TestShortSweep(t *testing.T) {
	args := []string{"-extra", "20", "-duration", "20s", "-round", "10s", "-compare-off=false", "-hot-rate", "20"}
	mode := streamsOn
	if !*streams {
		args = append(args, "-streams-flags=false")
		mode = streamsOmitted
	}
	cfg, err := parseFlags(args, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	cfg.workDir, cfg.stdout = t.TempDir(), &progress
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins, err := build(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sweepOne(ctx, cfg, bins, 20, mode)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	writeTable(&table, title(r), rows(r, cfg.weightLimit))
	t.Log(progress.String() + table.String())

	// The sweep has to have measured something real: the venue's built-in
	// markets and the extra 20 listed, every pair read within the 20
	// seconds (two rounds of book and trades), and the feed's own figures.
	if r.Pairs <= 20 {
		t.Errorf("pairs = %d, want the built-in markets and 20 more", r.Pairs)
	}
	if r.ColdPending != 0 {
		t.Errorf("%d books never answered during the cold start", r.ColdPending)
	}
	if got, want := r.Agg.total(), 4*r.Pairs; got < want-2 || got > want {
		t.Errorf("aggregator read %d times, want about %d (every pair's book and trades, twice)", got, want)
	}
	if r.Hot.total() == 0 || r.BookAge.N == 0 || r.HotBookAge.N == 0 {
		t.Errorf("no samples: hot %d answers, %d book ages, %d hot book ages", r.Hot.total(), r.BookAge.N, r.HotBookAge.N)
	}
	if r.ColdWeight.Calls == 0 || r.ColdWeight.Total == 0 {
		t.Errorf("cold start weight %+v: the venue's call log shows no call", r.ColdWeight)
	}
	if r.CPUShare <= 0 || r.MaxRSS <= 0 {
		t.Errorf("CPU %v, RSS %d: marketfeed's process was not measured", r.CPUShare, r.MaxRSS)
	}
}
