package sim

import (
	"context"
	"testing"
	"time"
)

func BenchmarkBook100(b *testing.B)  { benchBook(b, "BTCUSDT", 100) }
func BenchmarkBook1000(b *testing.B) { benchBook(b, "BTCUSDT", 1000) }

func benchBook(b *testing.B, sym string, depth int) {
	c := newClock(t0)
	v := New(Config{Now: c.now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.add(350 * time.Millisecond)
		if _, err := v.Book(ctx, sym, depth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrades100(b *testing.B)  { benchTrades(b, "BTCUSDT", 100) }
func BenchmarkTrades1000(b *testing.B) { benchTrades(b, "BTCUSDT", 1000) }

func benchTrades(b *testing.B, sym string, limit int) {
	c := newClock(t0)
	v := New(Config{Now: c.now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Trades(ctx, sym, limit); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStats(b *testing.B) {
	c := newClock(t0)
	v := New(Config{Now: c.now, Extra: 500})
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Stats(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuotes(b *testing.B) {
	c := newClock(t0)
	v := New(Config{Now: c.now, Extra: 500})
	b.ReportAllocs()
	for b.Loop() {
		c.add(time.Second)
		if _, err := v.Quotes(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
