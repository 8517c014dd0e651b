// Command venuesim serves the simulated venue of package sim over the calls
// of a Binance USDⓈ-M compatible REST API (exchangeInfo, ticker/24hr,
// ticker/bookTicker, depth, trades, aggTrades, premiumIndex and
// openInterest), so that marketfeed's real adapter path (-venue binance
// -venue-url ...) can run offline. It counts request weight per minute as
// the venue does, answers X-MBX-USED-WEIGHT-1M, refuses with 429 past its
// limit, and injects faults on request: an error status with or without
// Retry-After, a delay, a garbage or truncated body, a body that drips one
// byte a second, or a connection reset; for the next N calls only, or
// flapping on and off on a period. A market can be delisted and listed
// again.
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
//
// It also serves the venue's market streams over WebSocket in Binance's
// protocol: depth on /public/stream, aggregate trades, the all-market
// ticker and the mark price streams (!markPrice@arr@1s and
// <s>@markPrice@1s, once a second) on /market/stream (or every stream on
// /stream with -ws-split=false, as Aster), bare payloads on /ws/<name>,
// SUBSCRIBE, UNSUBSCRIBE and LIST_SUBSCRIPTIONS, and the venue's connection
// limits. Stream switches:
//
//	GET    /_control/ws                                 (connections, subscriptions, frames sent, closes by reason)
//	POST   /_control/drop[?conn=ID|line=B][&for=5s]     (cut every connection, one, or a client's line;
//	                                                     for: then refuse new connections that long)
//	POST   /_control/gap?symbol=BTCUSDT[&events=1]      (skip depth events: the next pu does not chain)
//	POST   /_control/silence?stream=btcusdt@aggTrade&for=30s
//	POST   /_control/max-age?age=20s[&for=60s]           (close every connection at that age, open ones
//	                                                     too, as -ws-max-age; for: then the flag's again)
//	DELETE /_control/max-age                            (the flag's age again)
//	GET    /_control/book?symbol=BTCUSDT&update_id=N&depth=100   (the true book at an update id)
//	GET    /_control/book?symbol=BTCUSDT&time_ms=T&depth=100     (the same at a venue time: a served book's timestamp)
//	POST   /_control/fast?symbol=BTCUSDT&levels=50&for=20s[&side=bids|asks]
//	                                                    (a fast market: the top takes that many levels
//	                                                     a second of a side, bids by default, as a
//	                                                     liquidation cascade does)
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
	"sync"
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
	depthWindow := fs.Int("depth-window", sim.DefaultDepthWindow, "`ticks` from the best price within which level sizes change: sets how many levels a diff event carries and how deep they lie (50: the shape of the venue's recorded diffs)")
	var f fault
	fs.IntVar(&f.Status, "fault-status", 0, "answer this HTTP `status` instead of data")
	fs.DurationVar(&f.RetryAfter, "fault-retry-after", 0, "Retry-After sent with -fault-status (whole seconds; 0: none)")
	fs.DurationVar(&f.Delay, "fault-delay", 0, "delay every answer by this long")
	fs.StringVar(&f.Body, "fault-body", "", "body fault: garbage | truncated | html | empty | drip | reset")
	fs.Float64Var(&f.Rate, "fault-rate", 1, "fraction of calls the fault hits")
	fs.IntVar(&f.Count, "fault-count", 0, "heal the fault after it has hit this many calls; 0: never")
	fs.DurationVar(&f.Flap, "fault-flap", 0, "switch the fault on and off every `period`, on first; 0: always on")
	ws := defaultWSConfig()
	streams := fs.Bool("streams", true, "serve the market streams; false: their paths answer 404, a venue with a REST API only")
	fs.BoolVar(&ws.Split, "ws-split", ws.Split, "serve depth on /public and trades and tickers on /market, as Binance; false: every stream on /stream, as Aster")
	fs.IntVar(&ws.MaxMsgs, "ws-max-msgs", ws.MaxMsgs, "incoming messages per second on one connection before it is closed; 0: no limit")
	fs.IntVar(&ws.MaxStreams, "ws-max-streams", ws.MaxStreams, "streams on one connection before it is closed; 0: no limit")
	fs.DurationVar(&ws.MaxAge, "ws-max-age", ws.MaxAge, "close a stream connection at this age")
	fs.DurationVar(&ws.Ping, "ws-ping", ws.Ping, "ping stream clients every `period`; 0: never")
	fs.DurationVar(&ws.PongWait, "ws-pong-wait", ws.PongWait, "close a connection whose pong is this late")
	fs.IntVar(&ws.Queue, "ws-queue", ws.Queue, "frames queued for one connection before it is closed as a slow consumer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ws.MaxAge <= 0 || ws.PongWait <= 0 || ws.Queue < 1 {
		return fmt.Errorf("parse flags: -ws-max-age and -ws-pong-wait must be positive, -ws-queue at least 1")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "venuesim")
	if *depthWindow < 1 {
		return fmt.Errorf("parse flags: -depth-window must be at least 1")
	}
	venue := sim.New(sim.Config{Seed: *seed, Extra: *extra, DepthWindow: *depthWindow})
	v := newStreamingServer(venue, *limit, ws, log)
	v.restOnly = !*streams
	if f.active() {
		v.setFault(f, time.Time{})
	}
	cat, err := venue.Catalog(ctx)
	if err != nil {
		return fmt.Errorf("list markets: %w", err)
	}
	symbols := make([]string, len(cat.Markets))
	for i, m := range cat.Markets {
		symbols[i] = m.Symbol
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: v, ReadHeaderTimeout: 5 * time.Second}
	log.Info("serving", "url", "http://"+ln.Addr().String(), "weight_limit", *limit,
		"markets", len(symbols), "ws_split", ws.Split)

	streamCtx, stopStreams := context.WithCancel(ctx)
	var wg sync.WaitGroup
	streamErr := make(chan error, 1)
	wg.Go(func() { streamErr <- v.hub.run(streamCtx, venue.Streams(), symbols) })
	wg.Go(func() { v.hub.runMarkPrices(streamCtx, venue.ContractsAt, markPriceEvery) })
	defer func() {
		stopStreams()
		v.hub.shutdown()
		v.hub.wait()
		wg.Wait()
	}()
	errc := make(chan error, 1)
	wg.Go(func() { errc <- srv.Serve(ln) })
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	case err := <-streamErr:
		_ = srv.Close()
		return err
	}
	// Hijacked stream connections are not the HTTP server's to close.
	v.hub.shutdown()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// A connection a client opened and never sent a request on counts as
	// busy for its first 5 s (net/http): a client that gave up mid-dial
	// as the venue stopped is no reason to fail the stop.
	return srv.Close()
}
