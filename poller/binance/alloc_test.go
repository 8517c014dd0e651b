//go:build !race

package binance

import (
	"strconv"
	"strings"
	"testing"
)

// A trade frame's way through a connection allocates nothing: the trade's
// decimals are lent to the sink as substrings of the frame, as a depth
// event's levels are, and the sink copies what it keeps. Trades are a third
// of the market's events.
func TestTradeFrameAllocatesNothing(t *testing.T) {
	c, sink := benchConn(t)
	frame := []byte(`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1767225600456,"a":1000000000001,"s":"BTCUSDT",` +
		`"p":"60000.10","q":"0.005","f":126902924,"l":126902927,"T":1767225600450,"m":false}}`)
	at := strings.Index(string(frame), `"a":`) + len(`"a":`)
	id := int64(1_000_000_000_000)
	handle := func() {
		id++
		strconv.AppendInt(frame[:at], id, 10) // a new id each frame: none is a copy
		c.handle(frame, sink)
	}
	handle()
	if n := testing.AllocsPerRun(1000, handle); n != 0 {
		t.Errorf("%v allocations a trade frame, want 0", n)
	}
	if sink.events != 1002 {
		t.Fatalf("%d trades delivered of 1002 frames", sink.events)
	}
}
