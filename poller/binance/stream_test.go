package binance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/venue"
)

// TestStreamsSubscribe: names are lower case and split by path, each
// connection carries at most 200 streams, SUBSCRIBE messages hold at most
// the preset's names, control messages on a connection are at least 200 ms
// apart, and every stream is reported Live once acknowledged.
func TestStreamsSubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Binance
		p.Streams.NamesPerSubscribe = 60
		syms := symbolsN(250)
		h := startStreams(t, p, 0, syms)
		defer h.stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()

		byPath := map[string][]string{}
		for _, c := range h.v.connections() {
			msgs := c.messages()
			var names []string
			for i, m := range msgs {
				if m.Method != "SUBSCRIBE" {
					t.Errorf("conn %d: %s", c.n, m.Method)
				}
				if len(m.Params) == 0 || len(m.Params) > 60 {
					t.Errorf("conn %d: SUBSCRIBE of %d names", c.n, len(m.Params))
				}
				if i > 0 && m.At.Sub(msgs[i-1].At) < 200*time.Millisecond {
					t.Errorf("conn %d: messages %d and %d %v apart", c.n, i-1, i, m.At.Sub(msgs[i-1].At))
				}
				names = append(names, m.Params...)
			}
			if len(names) > 200 {
				t.Errorf("conn %d carries %d streams", c.n, len(names))
			}
			if got := c.streams(); !slices.Equal(got, sorted(names)) {
				t.Errorf("conn %d: streams %v, subscribed %v", c.n, got, names)
			}
			byPath[c.path] = append(byPath[c.path], names...)
		}
		var wantDepth, wantMarket []string
		for _, s := range syms {
			wantDepth = append(wantDepth, strings.ToLower(s)+"@depth@100ms")
			wantMarket = append(wantMarket, strings.ToLower(s)+"@aggTrade")
		}
		wantMarket = append(wantMarket, "!ticker@arr", "!markPrice@arr@1s")
		if got := sorted(byPath["/public/stream"]); !slices.Equal(got, sorted(wantDepth)) {
			t.Errorf("depth path carries %d names: %v...", len(got), got[:min(3, len(got))])
		}
		if got := sorted(byPath["/market/stream"]); !slices.Equal(got, sorted(wantMarket)) {
			t.Errorf("market path carries %d names: %v...", len(got), got[:min(3, len(got))])
		}
		if n := len(h.v.connections()); n != 4 {
			t.Errorf("%d connections, want 4 (2 per path)", n)
		}
		if got := h.metric("marketfeed_stream_connections"); got != "4" {
			t.Errorf("connections gauge %s", got)
		}

		live := map[string]int{}
		for _, c := range h.sink.take() {
			kind, rest, _ := strings.Cut(strings.TrimPrefix(c, "live "), " ")
			if !strings.HasPrefix(c, "live ") {
				t.Errorf("unexpected %s", c)
				continue
			}
			for _, s := range strings.Split(rest, ",") {
				live[kind+" "+s]++
			}
		}
		for _, s := range syms {
			if live["book "+s] != 1 || live["trades "+s] != 1 {
				t.Fatalf("%s live %d depth, %d trades", s, live["book "+s], live["trades "+s])
			}
		}
	})
}

// TestPacer checks the spacing in fake time directly.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pacer{every: 200 * time.Millisecond}
		start := time.Now()
		var at []time.Duration
		for range 6 {
			if err := p.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
		}
		want := []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, 800 * time.Millisecond, time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("sent at %v, want %v", at, want)
		}
		// After a quiet spell the next message goes at once.
		time.Sleep(time.Second)
		before := time.Now()
		_ = p.wait(context.Background())
		if d := time.Since(before); d != 0 {
			t.Errorf("waited %v after a quiet spell", d)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.wait(ctx); err != context.Canceled {
			t.Errorf("canceled wait: %v", err)
		}
	})
}

// conn returns the newest connection on path that carries name.
func (h *harness) conn(path, name string) *venueConn {
	h.t.Helper()
	conns := h.v.connections()
	for i := len(conns) - 1; i >= 0; i-- {
		if conns[i].path == path && slices.Contains(conns[i].streams(), name) {
			return conns[i]
		}
	}
	h.t.Fatalf("no connection on %s carries %s", path, name)
	return nil
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("sink calls\n got %q\nwant %q", got, want)
	}
}

// TestStreamsEvents: events reach the sink decoded; unknown streams and
// malformed frames are counted and dropped; a bad depth event is never
// delivered, its stream is reported Lost and subscribed again.
func TestStreamsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, 0, []string{"SUSHIUSDT", "BTCUSDT"})
		defer h.stop()
		wantCalls(t, sorted(h.sink.take()), "live book BTCUSDT,SUSHIUSDT", "live trades BTCUSDT,SUSHIUSDT")
		depth := h.conn("/public/stream", "sushiusdt@depth@100ms")
		market := h.conn("/market/stream", "!ticker@arr")

		depth.send(t, string(readFixture(t, "recorded/binance-ws-depthUpdate100ms-combined-cryptofeed-SUSHIUSDT.json")))
		market.send(t, string(readFixture(t, "recorded/binance-ws-aggTrade-combined-cryptofeed-SUSHIUSDT.json")))
		market.send(t, string(readFixture(t, "recorded/binance-ws-tickerArr-combined-cryptomsgparser.json")))
		market.send(t, string(readFixture(t, "recorded/binance-ws-bookTicker-combined-cryptofeed-SUSHIUSDT.json")))
		depth.send(t, `{"stream":"sushiusdt@depth@100ms","data":{"e":"depthUpdate"`)
		synctest.Wait()
		wantCalls(t, sorted(h.sink.take()), "depth SUSHIUSDT", "tickers 1", "trade SUSHIUSDT")
		if u := h.sink.DepthEvents("")[0]; u.First != 600859599090 || u.Last != 600859600917 || u.Prev != 600859598061 || u.Time != 1626992741024 || len(u.Bids) != 3 {
			t.Errorf("depth %+v", u)
		}
		if tr := h.sink.Trades("")[0]; tr != (venue.Trade{ID: 87353230, LastID: 126902927, Time: 1626992744108, Price: "7.6120", Size: "297"}) {
			t.Errorf("trade %+v", tr)
		}

		before := len(depth.messages())
		depth.send(t, `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1e3","1"]],"a":[]}}`)
		// An event whose symbol is not its stream's is as unusable.
		depth.send(t, `{"stream":"sushiusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[],"a":[]}}`)
		time.Sleep(time.Second)
		synctest.Wait()
		calls := h.sink.take()
		var live []string
		for _, c := range calls[min(2, len(calls)):] {
			syms, ok := strings.CutPrefix(c, "live book ")
			if !ok {
				t.Errorf("sink call %q", c)
			}
			live = append(live, strings.Split(syms, ",")...)
		}
		if len(calls) < 2 || !slices.Equal(calls[:2], []string{"lost book BTCUSDT", "lost book SUSHIUSDT"}) ||
			!slices.Equal(sorted(live), []string{"BTCUSDT", "SUSHIUSDT"}) {
			t.Errorf("sink calls %q: want both lost, then live again", calls)
		}
		// Each stream is unsubscribed and then subscribed again, once; the
		// two may share a message or not, depending on when each arrived.
		for _, name := range []string{"btcusdt@depth@100ms", "sushiusdt@depth@100ms"} {
			var seq []string
			for _, m := range depth.messages()[before:] {
				if slices.Contains(m.Params, name) {
					seq = append(seq, m.Method)
				}
			}
			if !slices.Equal(seq, []string{"UNSUBSCRIBE", "SUBSCRIBE"}) {
				t.Errorf("%s: sent %v, want UNSUBSCRIBE then SUBSCRIBE", name, seq)
			}
		}
		for name, want := range map[string]string{
			`marketfeed_stream_events_total{kind="depth"}`:   "1",
			`marketfeed_stream_events_total{kind="trades"}`:  "1",
			`marketfeed_stream_events_total{kind="tickers"}`: "1",
			`marketfeed_stream_events_total{kind="unknown"}`: "1",
			`marketfeed_stream_bad_frames_total`:             "3",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
	})
}
