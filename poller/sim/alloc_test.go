//go:build !race

package sim

import (
	"context"
	"testing"
	"time"
)

// The poller reads hundreds of books a second from this venue: a read must
// cost a fixed handful of allocations, not one per level or per value.
func TestAllocs(t *testing.T) {
	c := newClock(t0)
	v := New(Config{Now: c.now})
	ctx := context.Background()
	for name, read := range map[string]func(){
		"book":   func() { _, _ = v.Book(ctx, "BTCUSDT", 100) },
		"trades": func() { _, _ = v.Trades(ctx, "BTCUSDT", 100) },
		"stats":  func() { _, _ = v.Stats(ctx) },
		"quotes": func() { _, _ = v.Quotes(ctx) },
		"depth update": func() {
			_, _ = v.DepthUpdate("BTCUSDT", Heartbeat(c.now()))
		},
	} {
		got := testing.AllocsPerRun(50, func() {
			c.add(350 * time.Millisecond)
			read()
		})
		if got > 3 {
			t.Errorf("%s: %.0f allocations per read, want at most 3", name, got)
		}
	}
}
