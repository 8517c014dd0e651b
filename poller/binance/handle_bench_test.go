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
func BenchmarkHandleFrame(b *testing.B) {
	depth := depthFrame(10)
	trade := []byte(`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1767225600456,"a":1000000000001,"s":"BTCUSDT",` +
		`"p":"60000.10","q":"0.005","f":126902924,"l":126902927,"T":1767225600450,"m":false}}`)
	for _, bc := range []struct {
		name  string
		frame []byte
		id    string // the key of the id rewritten for each frame
	}{
		{"depth", depth, `"u":`},
		{"trade", trade, `"a":`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, sink := benchConn(b)
			at := strings.Index(string(bc.frame), bc.id) + len(bc.id)
			id := int64(1_000_000_000_000) // 13 digits, as the venue's ids are
			b.SetBytes(int64(len(bc.frame)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				id++
				strconv.AppendInt(bc.frame[:at], id, 10)
				c.handle(bc.frame, sink)
				n++
			}
			if sink.events != n {
				b.Fatalf("%d events delivered of %d frames", sink.events, n)
			}
		})
	}
}

// benchConn returns a connection, never dialled, that carries BTCUSDT's
// streams, and a sink that counts its events.
func benchConn(testing.TB) (*wsConn, *countSink) {
	s := NewStreams(Binance, StreamOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT"})
	c := &wsConn{s: s, routes: make(map[string]streamRef), pending: make(map[int64]chan reply), caughtUp: make(chan struct{})}
	for _, k := range allKinds {
		c.routes[streamName(k, "BTCUSDT")] = streamRef{kind: k, symbol: "BTCUSDT"}
	}
	c.known = c.seen
	return c, &countSink{}
}

// countSink counts the per-pair events delivered and keeps none.
type countSink struct {
	venue.Sink
	events int
}

func (s *countSink) Depth(venue.DepthUpdate)   { s.events++ }
func (s *countSink) Trade(string, venue.Trade) { s.events++ }
