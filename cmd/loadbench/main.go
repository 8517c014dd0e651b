// Command loadbench measures marketfeed's HTTP front end against reference
// servers and checks the results against the product's performance targets.
//
// It builds marketfeed, starts it on the simulated venue, captures the bytes
// and headers marketfeed answers on the benchmarked routes, and serves the
// same answers from three references on the same machine:
//
//   - nginx serving the bytes as static files with the same headers,
//   - nginx answering the same bytes from memory (return 200),
//   - a plain Go server (net/http and encoding/json) that encodes the same
//     book and trades per request, as most published integrations do
//     (the "peer" subcommand of this program).
//
// Every server gets one core and one worker (taskset, GOMAXPROCS=1,
// worker_processes 1); the load generator gets the other core. wrk measures
// closed-loop throughput; vegeta measures open-loop latency at half the
// measured maximum rate. A run ends with a table of ratios against the
// targets and an SVG chart.
//
// Usage:
//
//	loadbench [flags]                        run the whole comparison
//	loadbench peer -listen ADDR -from URL    serve the plain Go peer
//
// Run from the module root (make loadtest does): it builds ./cmd/marketfeed
// and runs vegeta as a module tool (go tool vegeta).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadbench:", err)
		}
		os.Exit(1)
	}
}

// run dispatches to a subcommand; the comparison is the default.
func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "peer" {
		return runPeer(ctx, args[1:])
	}
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	return compare(ctx, cfg)
}
