// Command venuesim serves the simulated venue of package sim over the five
// calls of a Binance USDⓈ-M compatible REST API, so that marketfeed's real
// adapter path (-venue binance -venue-url ...) can run offline. It counts
// request weight per minute as the venue does, answers X-MBX-USED-WEIGHT-1M,
// refuses with 429 past its limit, and injects faults on request: an error
// status with or without Retry-After, a delay, a garbage or truncated body,
// a body that drips one byte a second, or a connection reset; for the next
// N calls only, or flapping on and off on a period. A market can be delisted
// and listed again.
//
// Faults are set with flags at start or at run time through the control
// endpoint:
//
//	POST   /_control/fault?status=503&rate=1&for=10s   (every parameter optional)
//	POST   /_control/fault?status=429&retry_after=3s&count=1
//	POST   /_control/fault?status=503&flap=3s           (3 s failing, 3 s healthy, ...)
//	DELETE /_control/fault                              (heal)
//	POST   /_control/market?symbol=ADAUSDT&listed=false (delist; listed=true lists it again)
//	GET    /_control/stats                              (calls served by path)
//	GET    /_control/calls?since_us=N                   (each call since N µs after the epoch)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"marketfeed/poller/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "venuesim:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("venuesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8500", "`address` to serve on")
	seed := fs.Int64("seed", 1, "seed of the simulated world")
	extra := fs.Int("extra", 0, "extra synthetic markets")
	limit := fs.Int("weight-limit", 2400, "request weight per minute before 429; 0: none")
	var f fault
	fs.IntVar(&f.Status, "fault-status", 0, "answer this HTTP `status` instead of data")
	fs.DurationVar(&f.RetryAfter, "fault-retry-after", 0, "Retry-After sent with -fault-status (whole seconds; 0: none)")
	fs.DurationVar(&f.Delay, "fault-delay", 0, "delay every answer by this long")
	fs.StringVar(&f.Body, "fault-body", "", "body fault: garbage | truncated | html | empty | drip | reset")
	fs.Float64Var(&f.Rate, "fault-rate", 1, "fraction of calls the fault hits")
	fs.IntVar(&f.Count, "fault-count", 0, "heal the fault after it has hit this many calls; 0: never")
	fs.DurationVar(&f.Flap, "fault-flap", 0, "switch the fault on and off every `period`, on first; 0: always on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "venuesim")
	v := newVenueServer(sim.New(sim.Config{Seed: *seed, Extra: *extra}), *limit)
	if f.active() {
		v.setFault(f, time.Time{})
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: v, ReadHeaderTimeout: 5 * time.Second}
	log.Info("serving", "url", "http://"+ln.Addr().String(), "weight_limit", *limit)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}
