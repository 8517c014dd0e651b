package binance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/coder/websocket"

	"marketfeed/snapshot"
)

// TestStreamsReconnect: a closed connection's streams are reported Lost,
// and Live again once a new connection has them acknowledged; a refused
// handshake is retried with back-off.
func TestStreamsReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, 0, []string{"BTCUSDT"})
		defer h.stop()
		h.sink.take()
		old := h.conn("/public/stream", "btcusdt@depth@100ms")

		h.v.mu.Lock()
		h.v.reject = true
		h.v.mu.Unlock()
		_ = old.ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		wantCalls(t, h.sink.take(), "lost book BTCUSDT")

		time.Sleep(time.Second) // the first back-off is at most 1 s: refused
		synctest.Wait()
		if got := h.metric(`marketfeed_stream_reconnects_total{reason="refused"}`); got != "1" {
			t.Errorf("refused = %s, want 1", got)
		}
		h.v.mu.Lock()
		h.v.reject = false
		h.v.mu.Unlock()
		time.Sleep(2 * time.Second) // the second is at most 2 s
		synctest.Wait()
		wantCalls(t, h.sink.take(), "live book BTCUSDT")
		if c := h.conn("/public/stream", "btcusdt@depth@100ms"); c == old {
			t.Error("still the old connection")
		}
		for name, want := range map[string]string{
			`marketfeed_stream_reconnects_total{reason="closed"}`: "1",
			`marketfeed_stream_connections`:                       "2",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
	})
}

// TestStreamsReconnectAtOnceAfterAHealthyConnection: a connection that
// lived longer than the longest back-off and is then closed by the venue is
// dialled again at once, not after a back-off of half a second or more:
// every heartbeat spent waiting is a chance for its suspended books to miss
// an update. A connection closed again right away backs off as before.
func TestStreamsReconnectAtOnceAfterAHealthyConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, 0, []string{"BTCUSDT"})
		defer h.stop()
		time.Sleep(backoffMax + time.Second)
		synctest.Wait()
		h.sink.take()
		old := h.conn("/public/stream", "btcusdt@depth@100ms")
		_ = old.ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait() // no time passes: the shortest back-off would be half of backoffMin
		wantCalls(t, h.sink.take(), "lost book BTCUSDT", "live book BTCUSDT")
		again := h.conn("/public/stream", "btcusdt@depth@100ms")
		if again == old {
			t.Fatal("still the old connection")
		}

		// Closed again at once: not healthy, so the back-off applies.
		_ = again.ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		wantCalls(t, h.sink.take(), "lost book BTCUSDT")
		time.Sleep(backoffMin / 4)
		synctest.Wait()
		wantCalls(t, h.sink.take())
		time.Sleep(backoffMin)
		synctest.Wait()
		wantCalls(t, h.sink.take(), "live book BTCUSDT")
	})
}

// TestStreamsBackOffAfreshAfterAServingConnection: a connection that served
// longer than healthyAge, though less than a minute, is dialled again after
// the back-off's first step (at most backoffMin), however far earlier
// refusals had taken the back-off: an outage that cuts the connections
// dialled again after an earlier cut finds them back within a step of the
// venue's return.
func TestStreamsBackOffAfreshAfterAServingConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, 0, []string{"BTCUSDT"})
		defer h.stop()
		h.sink.take()
		reject := func(on bool) {
			h.v.mu.Lock()
			h.v.reject = on
			h.v.mu.Unlock()
		}
		// Refusals take the back-off to its fourth step (4 to 8 s).
		reject(true)
		_ = h.conn("/public/stream", "btcusdt@depth@100ms").ws.Close(websocket.StatusGoingAway, "")
		time.Sleep(1 * time.Second) // the first refusal, after at most 1 s
		time.Sleep(2 * time.Second) // the second
		time.Sleep(4 * time.Second) // the third
		synctest.Wait()
		if got := h.metric(`marketfeed_stream_reconnects_total{reason="refused"}`); got != "3" {
			t.Fatalf("refused = %s, want 3", got)
		}
		reject(false)
		time.Sleep(8 * time.Second) // the fourth step, at most 8 s
		synctest.Wait()
		h.sink.take()
		served := h.conn("/public/stream", "btcusdt@depth@100ms")
		time.Sleep(healthyAge + time.Second)
		synctest.Wait()

		_ = served.ws.CloseNow() // cut, as an outage does: not a close on a schedule
		synctest.Wait()
		wantCalls(t, h.sink.take(), "lost book BTCUSDT")
		time.Sleep(backoffMin)
		synctest.Wait()
		wantCalls(t, h.sink.take(), "live book BTCUSDT")
	})
}

// A connection that replaced another as planned carries on the slot's
// service: closed by the venue a second after the rotation, it is dialled
// again at once, like the healthy connection it took over from, instead of
// waiting out a back-off and losing the events meanwhile.
func TestStreamsReconnectAtOnceAfterARotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		maxAge := 2 * backoffMax
		h := startStreams(t, Binance, maxAge, []string{"BTCUSDT"})
		defer h.stop()
		old := h.conn("/public/stream", "btcusdt@depth@100ms")
		time.Sleep(firstTurn(maxAge, 0, 1) + time.Second) // the depth slot is line A's second
		synctest.Wait()
		h.sink.take()
		rotated := h.conn("/public/stream", "btcusdt@depth@100ms")
		if rotated == old {
			t.Fatal("depth connection not replaced")
		}
		_ = rotated.ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait() // no time passes
		wantCalls(t, h.sink.take(), "lost book BTCUSDT", "live book BTCUSDT")
		if again := h.conn("/public/stream", "btcusdt@depth@100ms"); again == rotated {
			t.Fatal("still the closed connection")
		}
	})
}

// TestStreamsRefused: an error reply reports the streams Lost, is counted,
// and the subscription is retried later.
func TestStreamsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := 0
		refuse := func(method string, params []string) bool {
			if method == "SUBSCRIBE" && slices.Contains(params, "btcusdt@aggTrade") {
				v++
				return v == 1
			}
			return false
		}
		hh := startStreamsWith(t, Binance, 0, []string{"BTCUSDT"}, refuse)
		defer hh.stop()
		wantCalls(t, sorted(hh.sink.take()), "live book BTCUSDT", "lost trades BTCUSDT")
		if got := hh.metric("marketfeed_stream_subscribe_errors_total"); got != "1" {
			t.Errorf("subscribe errors = %s, want 1", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantCalls(t, hh.sink.take(), "live trades BTCUSDT")
		if got := hh.conn("/market/stream", "btcusdt@aggTrade").streams(); !slices.Equal(got, []string{"!markPrice@arr@1s", "!ticker@arr", "btcusdt@aggTrade"}) {
			t.Errorf("market streams %v", got)
		}
	})
}

// TestStreamsReplace: a connection is replaced on its slot's turn, within
// MaxAge: the new one is acknowledged before the old one is closed, nothing
// is reported Lost, connections are replaced at different times, and each
// again a rotation period later.
func TestStreamsReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, time.Hour, []string{"BTCUSDT", "ETHUSDT"})
		defer h.stop()
		h.sink.take()
		oldDepth := h.conn("/public/stream", "btcusdt@depth@100ms")
		oldMarket := h.conn("/market/stream", "btcusdt@aggTrade")

		// The market slot was made first (it carries the ticker stream) and
		// its turn comes first; the depth slot's a fraction later.
		market, depth := firstTurn(time.Hour, 0, 0), firstTurn(time.Hour, 0, 1)
		if market >= depth || depth > time.Hour {
			t.Fatalf("turns at %s and %s: want the market slot's first, both within MaxAge", market, depth)
		}
		time.Sleep(market - time.Second)
		synctest.Wait()
		if n := len(h.v.connections()); n != 2 {
			t.Fatalf("%d connections before the first replacement", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if c := h.conn("/market/stream", "btcusdt@aggTrade"); c == oldMarket {
			t.Fatal("market connection not replaced on its turn")
		}
		// The old connection is kept beside its replacement for a moment:
		// what the venue sent it before the replacement was acknowledged
		// is still delivered.
		if ev := h.v.events(); slices.Contains(ev, fmt.Sprintf("closed %d", oldMarket.n)) {
			t.Fatalf("events %q: the old connection closed as soon as its replacement was acknowledged", ev)
		}
		if got := h.metric(`marketfeed_stream_connections`); got != "2" {
			t.Errorf("%s connections in service during a replacement, want 2: one a slot", got)
		}
		oldMarket.send(t, `{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":5,"T":5,"s":"BTCUSDT","a":7,"p":"100","q":"1","m":false}}`)
		synctest.Wait()
		wantCalls(t, h.sink.take(), "trade BTCUSDT")
		time.Sleep(maxHandover)
		synctest.Wait()
		if ev := h.v.events(); !slices.Contains(ev, fmt.Sprintf("closed %d", oldMarket.n)) {
			t.Fatalf("events %q: the old connection still open after the handover", ev)
		}
		if c := h.conn("/public/stream", "btcusdt@depth@100ms"); c != oldDepth {
			t.Error("depth connection replaced at the same time")
		}
		time.Sleep(depth - market)
		synctest.Wait()
		newDepth := h.conn("/public/stream", "btcusdt@depth@100ms")
		if newDepth == oldDepth {
			t.Fatal("depth connection not replaced on its turn")
		}
		if got := newDepth.streams(); !slices.Equal(got, []string{"btcusdt@depth@100ms", "ethusdt@depth@100ms"}) {
			t.Errorf("new depth streams %v", got)
		}
		ev := h.v.events()
		ack := slices.Index(ev, fmt.Sprintf("acked %d SUBSCRIBE", newDepth.n))
		closed := slices.Index(ev, fmt.Sprintf("closed %d", oldDepth.n))
		if ack < 0 || closed < 0 || closed < ack {
			t.Errorf("events %q: the old connection must close after the new one is acknowledged", ev)
		}
		if calls := h.sink.take(); len(calls) != 0 {
			t.Errorf("sink calls during a replacement: %q", calls)
		}
		// Events flow on the new connection.
		newDepth.send(t, `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[],"a":[["2","1"]]}}`)
		synctest.Wait()
		wantCalls(t, h.sink.take(), "depth BTCUSDT")

		// A rotation period later, each is replaced again.
		period := time.Duration(periodOfLimit * float64(time.Hour))
		time.Sleep(period)
		synctest.Wait()
		if c := h.conn("/public/stream", "btcusdt@depth@100ms"); c == newDepth {
			t.Error("depth connection not replaced a period after its first replacement")
		}
		if calls := h.sink.take(); len(calls) != 0 {
			t.Errorf("sink calls during a replacement: %q", calls)
		}
		for name, want := range map[string]string{
			`marketfeed_stream_reconnects_total{reason="rotated"}`: "4",
			`marketfeed_stream_reconnects_total{reason="closed"}`:  "0",
			`marketfeed_stream_connections`:                        "2",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
	})
}

// A replaced connection goes as soon as it has read an event stamped after
// its replacement was acknowledged: whatever the venue sent it before is
// then read, and keeping it longer would only bring copies.
func TestStreamsReplacedConnectionGoesOnceItHasCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, time.Hour, []string{"BTCUSDT"})
		defer h.stop()
		old := h.conn("/market/stream", "btcusdt@aggTrade")
		time.Sleep(firstTurn(time.Hour, 0, 0))
		synctest.Wait()
		if c := h.conn("/market/stream", "btcusdt@aggTrade"); c == old {
			t.Fatal("market connection not replaced on its turn")
		}
		behind := `{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":%d,"T":%d,"s":"BTCUSDT","a":%d,"p":"100","q":"1","m":false}}`
		before := time.Now().Add(-time.Second).UnixMilli()
		old.send(t, fmt.Sprintf(behind, before, before, 1))
		synctest.Wait()
		if slices.Contains(h.v.events(), fmt.Sprintf("closed %d", old.n)) {
			t.Fatal("the old connection closed on an event sent before its replacement")
		}
		now := time.Now().UnixMilli()
		old.send(t, fmt.Sprintf(behind, now, now, 2))
		synctest.Wait() // no time passes
		if !slices.Contains(h.v.events(), fmt.Sprintf("closed %d", old.n)) {
			t.Fatal("the old connection still open once it read an event stamped after its replacement")
		}
		n := len(h.sink.Trades(""))
		if n != 2 {
			t.Errorf("%d trades delivered from the old connection, want both", n)
		}
	})
}

// A connection the venue closes while its replacement waits for the
// venue's acknowledgement has lost its streams for that while: they are
// reported Lost, then Live once the replacement carries them, so that the
// books hear that they may have missed events, as after any close.
func TestStreamsReplacedConnectionClosedBeforeItsReplacementIsAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start, market := time.Now(), firstTurn(time.Hour, 0, 0)
		slow := func(method string, _ []string) bool {
			if method == "SUBSCRIBE" && time.Since(start) >= market {
				time.Sleep(time.Second) // the replacement's acknowledgement comes late
			}
			return false
		}
		h := startHarness(t, Binance, []string{"BTCUSDT"}, func(v *fakeStreamVenue) {
			v.refuse = slow
			v.maxAge = market + 500*time.Millisecond // the old connections are closed meanwhile
		}, StreamOptions{MaxAge: time.Hour})
		defer h.stop()
		h.setVenueAge(0)
		h.sink.take()
		time.Sleep(market + 2*time.Second)
		synctest.Wait()
		var trades []string
		for _, c := range h.sink.take() {
			if strings.HasSuffix(c, " trades BTCUSDT") {
				trades = append(trades, c)
			}
		}
		if want := []string{"lost trades BTCUSDT", "live trades BTCUSDT"}; !slices.Equal(trades, want) {
			t.Errorf("trades reports %q, want %q", trades, want)
		}
	})
}

// TestStreamsWatch: symbols added during Run are subscribed, on new
// connections when the others are full; removed ones are unsubscribed.
func TestStreamsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Binance
		p.Streams.PerConn = 2
		h := startStreams(t, p, 0, []string{"AUSDT", "BUSDT"})
		defer h.stop()
		h.sink.take()
		h.s.Watch([]string{"BUSDT", "CUSDT", "DUSDT"})
		time.Sleep(time.Second)
		synctest.Wait()
		wantCalls(t, sorted(h.sink.take()), "live book CUSDT", "live book DUSDT", "live trades CUSDT", "live trades DUSDT")
		var depth, market [][]string
		for _, c := range h.v.connections() {
			if c.path == "/public/stream" {
				depth = append(depth, c.streams())
			} else {
				market = append(market, c.streams())
			}
		}
		slices.SortFunc(depth, func(a, b []string) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		slices.SortFunc(market, func(a, b []string) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		wantDepth := [][]string{{"busdt@depth@100ms", "cusdt@depth@100ms"}, {"dusdt@depth@100ms"}}
		if fmt.Sprint(depth) != fmt.Sprint(wantDepth) {
			t.Errorf("depth connections carry %v, want %v", depth, wantDepth)
		}
		// The all-market streams fill the first connection; ausdt@aggTrade
		// shared the second and is gone.
		if fmt.Sprint(market) != fmt.Sprint([][]string{{"!markPrice@arr@1s", "!ticker@arr"}, {"busdt@aggTrade", "cusdt@aggTrade"}, {"dusdt@aggTrade"}}) {
			t.Errorf("market connections carry %v", market)
		}
		a := h.conn("/public/stream", "busdt@depth@100ms").messages()
		if last := a[len(a)-2]; last.Method != "UNSUBSCRIBE" || !slices.Equal(last.Params, []string{"ausdt@depth@100ms"}) {
			t.Errorf("message %+v, want UNSUBSCRIBE of ausdt", last)
		}
	})
}

// TestStreamsResubscribe: UNSUBSCRIBE then SUBSCRIBE of one name, then Live.
func TestStreamsResubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, 0, []string{"BTCUSDT", "ETHUSDT"})
		defer h.stop()
		h.sink.take()
		c := h.conn("/market/stream", "btcusdt@aggTrade")
		n := len(c.messages())
		h.s.Resubscribe(snapshot.StreamTrades, "BTCUSDT")
		h.s.Resubscribe(snapshot.StreamTrades, "XRPUSDT") // not watched: ignored
		time.Sleep(time.Second)
		synctest.Wait()
		var sent []string
		for _, m := range c.messages()[n:] {
			sent = append(sent, m.Method+" "+strings.Join(m.Params, ","))
		}
		if want := []string{"UNSUBSCRIBE btcusdt@aggTrade", "SUBSCRIBE btcusdt@aggTrade"}; !slices.Equal(sent, want) {
			t.Errorf("sent %q, want %q", sent, want)
		}
		wantCalls(t, h.sink.take(), "live trades BTCUSDT")
		if err := h.s.Run(context.Background(), h.sink); err == nil {
			t.Error("a second Run did not fail")
		}
	})
}

// TestStreamsShrinkAfterPolicyClose: a venue that closes a connection for
// breaking its rules (1008), as one whose real limit on streams per
// connection is lower than documented does, gets the streams back on
// connections carrying half as many, instead of the same close forever.
func TestStreamsShrinkAfterPolicyClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		symbols := []string{"AAAUSDT", "BBBUSDT", "CCCUSDT", "DDDUSDT"}
		h := startStreams(t, Binance, 0, symbols)
		defer h.stop()
		h.sink.take()
		old := h.conn("/public/stream", "aaausdt@depth@100ms")
		if got := len(old.streams()); got != 4 {
			t.Fatalf("%d depth streams on one connection, want 4", got)
		}
		_ = old.ws.Close(websocket.StatusPolicyViolation, "too many streams")
		synctest.Wait()
		time.Sleep(2 * time.Second) // past the first reconnection back-off
		synctest.Wait()
		if got := h.metric("marketfeed_stream_per_connection"); got != "2" {
			t.Fatalf("streams per connection %s, want 2", got)
		}
		carried := map[string]int{}
		for _, c := range h.v.connections() {
			if c == old || c.path != "/public/stream" {
				continue
			}
			if n := len(c.streams()); n > 2 {
				t.Errorf("connection %d carries %d depth streams, want at most 2", c.n, n)
			}
			for _, name := range c.streams() {
				carried[name]++
			}
		}
		for _, sym := range symbols {
			if name := strings.ToLower(sym) + "@depth@100ms"; carried[name] != 1 {
				t.Errorf("%s carried by %d connections, want 1", name, carried[name])
			}
		}
		live := map[string]bool{}
		for _, call := range h.sink.take() {
			if rest, ok := strings.CutPrefix(call, "live book "); ok {
				for _, sym := range strings.Split(rest, ",") {
					live[sym] = true
				}
			}
		}
		if len(live) != 4 {
			t.Errorf("depth streams live again: %v, want all 4", live)
		}
	})
}

// A stream problem is logged once a minute per key, and the next line says
// how many it held back.
func TestStreamsWarnCountsRepeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		s := NewStreams(Binance, StreamOptions{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		for range 3 {
			s.warn("dial wss://a", "market stream connection failed")
			time.Sleep(10 * time.Second)
		}
		s.warn("dial wss://b", "market stream connection failed") // another key: not held back
		time.Sleep(time.Minute)
		s.warn("dial wss://a", "market stream connection failed")

		var repeated []int
		for line := range bytes.Lines(buf.Bytes()) {
			var rec struct{ Repeated int }
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatal(err)
			}
			repeated = append(repeated, rec.Repeated)
		}
		if want := []int{0, 0, 2}; !slices.Equal(repeated, want) {
			t.Fatalf("lines with repeated %v, want %v", repeated, want)
		}
	})
}

// A symbol unwatched and watched again while its connection is being
// replaced is carried by the replacement for its new watch, and reported
// Live, as a new stream is: the connection replaced still carried it, but
// for the watch that ended, which the sink no longer follows.
func TestStreamsReplacementReportsASymbolWatchedAgainLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The venue holds the market path's handshakes once hold is set,
		// until release is closed.
		var mu sync.Mutex
		var hold bool
		held, release := make(chan struct{}), make(chan struct{})
		slow := func(v *fakeStreamVenue) {
			v.opening = func(path string) {
				mu.Lock()
				h := hold && path == Binance.Streams.MarketPath
				mu.Unlock()
				if h {
					held <- struct{}{}
					<-release
				}
			}
		}
		h := startHarness(t, Binance, []string{"BTCUSDT"}, slow, StreamOptions{MaxAge: time.Hour})
		defer h.stop()
		h.sink.take()
		old := h.conn("/market/stream", "btcusdt@aggTrade")
		time.Sleep(firstTurn(time.Hour, 0, 0) - time.Second)
		synctest.Wait()
		mu.Lock()
		hold = true
		mu.Unlock()
		<-held // the market connection's turn: its replacement is being opened
		h.s.Watch(nil)
		again := strings.Clone("BTCUSDT")
		h.s.Watch([]string{again})
		close(release)
		time.Sleep(time.Second)
		synctest.Wait()

		nc := h.conn("/market/stream", "btcusdt@aggTrade")
		if nc == old {
			t.Fatal("market connection not replaced on its turn")
		}
		var trades []string
		for _, c := range h.sink.take() {
			if strings.HasSuffix(c, " trades BTCUSDT") {
				trades = append(trades, c)
			}
		}
		if !slices.Equal(trades, []string{"live trades BTCUSDT"}) {
			t.Errorf("trade stream reports %q, want it reported Live once", trades)
		}
		nc.send(t, `{"stream":"btcusdt@aggTrade","data":`+goodTradeData+`}`)
		synctest.Wait()
		tr := h.sink.Take()
		if len(tr) != 1 || tr[0].Symbol != again || unsafe.StringData(tr[0].Symbol) != unsafe.StringData(again) {
			t.Errorf("sink calls %+v, want one trade of the string watched now", tr)
		}
	})
}
