package binance

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// BenchmarkHandleFrame is a frame's way through a connection once it is
// read: decoded, routed to its stream, checked against it, told from
// another line's copy, counted and handed to the sink, which here keeps
// nothing. Depth events come ten times a second per market and trades as
// they happen, so this is the per-frame cost beside the decoding alone
// (BenchmarkDepthEventDecodeAndApply). The events' ids are written into
// the frames in place, each new, so none is taken for a copy.
//
// The -2lines cases are what two lines cost: each event is handled by a
// connection of line A, then its copy by one of line B, which must find it
// delivered and drop it; an op is the event and its copy.
func BenchmarkHandleFrame(b *testing.B) {
	depth := depthFrame(10)
	trade := []byte(`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1767225600456,"a":1000000000001,"s":"BTCUSDT",` +
		`"p":"60000.10","q":"0.005","f":126902924,"l":126902927,"T":1767225600450,"m":false}}`)
	for _, bc := range []struct {
		name  string
		frame []byte
		id    string // the key of the id rewritten for each frame
		lines int
	}{
		{"depth", depth, `"u":`, 1},
		{"trade", trade, `"a":`, 1},
		{"depth-2lines", depth, `"u":`, 2},
		{"trade-2lines", trade, `"a":`, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, sink := benchConn(b)
			conns := []*wsConn{c}
			if bc.lines == 2 {
				conns = append(conns, benchLine(c.s))
			}
			at := strings.Index(string(bc.frame), bc.id) + len(bc.id)
			id := int64(1_000_000_000_000) // 13 digits, as the venue's ids are
			b.SetBytes(int64(len(bc.frame)))
			b.ReportAllocs()
			n := 0
			dups := c.s.met.duplicates.Get()
			for b.Loop() {
				id++
				strconv.AppendInt(bc.frame[:at], id, 10)
				for _, c := range conns {
					c.handle(bc.frame, sink)
				}
				n++
			}
			if sink.events != n {
				b.Fatalf("%d events delivered of %d frames", sink.events, n)
			}
			if got, want := c.s.met.duplicates.Get()-dups, uint64(n*(bc.lines-1)); got != want {
				b.Fatalf("%d copies dropped, want %d", got, want)
			}
		})
	}
}

// benchConn returns a connection, never dialled, that carries BTCUSDT's
// streams, and a sink that counts its events.
func benchConn(testing.TB) (*wsConn, *countSink) {
	s := NewStreams(Binance, StreamOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT"})
	return benchLine(s), &countSink{}
}

// benchLine returns a connection of s, never dialled, that carries
// BTCUSDT's streams, routed as s placed them when it was told to watch
// BTCUSDT: called again, the same streams on another line.
func benchLine(s *Streams) *wsConn {
	c := &wsConn{s: s, pending: make(map[int64]chan reply), caughtUp: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.reroute(func(routes map[string]streamRef) {
		for _, k := range allKinds {
			name := streamName(k, "BTCUSDT")
			want, _ := s.lines[0].where[name].wanted()
			routes[name] = want[name]
		}
	})
	c.known = c.seen
	return c
}

// countSink counts the per-pair events delivered and keeps none.
type countSink struct {
	venue.Sink
	events int
}

func (s *countSink) Depth(venue.DepthUpdate)   { s.events++ }
func (s *countSink) Trade(string, venue.Trade) { s.events++ }
