//go:build chaos

package main

import (
	"context"
	"testing"
	"time"
)

// TestChaosFull plays every failure a Binance-compatible venue shows, at the
// service's default max-stale, for about five minutes: rate limits with
// Retry-After, bursts of each 5xx, calls that time out, a body that drips one
// byte a second, truncated and garbage JSON, an HTML page with 200, an empty
// body, a reset connection, a venue flapping every few seconds, and a market
// that disappears for longer than a catalog period and returns.
//
//	go test -tags chaos -run TestChaosFull -count=1 -v -timeout 20m ./cmd/marketfeed
func TestChaosFull(t *testing.T) {
	c := startChaos(t, 10*time.Second)
	ctx, stop := context.WithTimeout(context.Background(), 15*time.Minute)
	defer stop()
	wait := c.traffic.run(ctx, 8, 5*time.Millisecond, 10_000_000, chaosTargets)

	c.traffic.setPhase("warm up")
	if c.untilFresh("BTC_USDT", time.Now(), 10*time.Second).IsZero() {
		t.Fatal("BTC_USDT never fresh on a healthy venue")
	}
	c.rateLimited(429, 5*time.Second)
	c.rateLimited(418, 5*time.Second)
	c.rateLimited(429, 12*time.Second) // longer than max-stale: hot pairs go 502, then recover
	// The Binance client's call timeout: a read the fault left hanging
	// holds its book round that long at most.
	const callTimeout = 5 * time.Second
	for _, o := range []struct {
		name, query string
		hold, stall time.Duration
	}{
		{"500 burst", "status=500", 3 * time.Second, 0},
		{"502 burst", "status=502&delay=100ms", 3 * time.Second, 0},
		{"503 burst", "status=503&delay=100ms", 10 * time.Second, 0},
		{"504 half the calls", "status=504&rate=0.5", 5 * time.Second, 0},
		{"408", "status=408", 3 * time.Second, 0},
		{"timeouts", "delay=8s", 15 * time.Second, callTimeout},
		{"drip 1 byte/s", "body=drip", 15 * time.Second, callTimeout},
		{"truncated JSON", "body=truncated", 5 * time.Second, 0},
		{"garbage JSON", "body=garbage", 3 * time.Second, 0},
		{"HTML with 200", "body=html", 3 * time.Second, 0},
		{"empty body", "body=empty", 3 * time.Second, 0},
		{"connection reset", "body=reset", 3 * time.Second, 0},
		{"flapping 3s", "status=503&delay=50ms&flap=3s", 30 * time.Second, 0},
	} {
		c.outage(o.name, o.query, o.hold, o.stall)
	}
	// Away for 75 s: at least one catalog read (on the minute) drops it.
	c.delist(75*time.Second, true)
	c.finish(stop, wait)
}
