package binance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/coder/websocket"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// The stream tests run a fake venue inside a testing/synctest bubble. The
// client reaches it over net.Pipe through an http.Transport whose dialer
// hands the other end to an http.Server: no socket, so every goroutine
// blocks on something the bubble controls and the fake clock moves only
// when all are idle. Pacing and back-off are then asserted in exact fake
// time.

// pipeListener is a net.Listener fed by the client's dialer.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "venue", Net: "pipe"} }

// ctlMsg is one control message the fake venue received.
type ctlMsg struct {
	At     time.Time
	Method string   `json:"method"`
	Params []string `json:"params"`
	ID     int64    `json:"id"`
}

// venueConn is one connection as the fake venue sees it.
type venueConn struct {
	n    int // order of acceptance, from 1
	path string
	ua   string // the User-Agent it was opened with
	ws   *websocket.Conn
	mu   sync.Mutex
	msgs []ctlMsg
	subs map[string]bool
}

func (vc *venueConn) messages() []ctlMsg {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return slices.Clone(vc.msgs)
}

func (vc *venueConn) streams() []string {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	var names []string
	for n := range vc.subs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// send writes a frame to the client.
func (vc *venueConn) send(t *testing.T, frame string) {
	t.Helper()
	if err := vc.ws.Write(context.Background(), websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("send to conn %d: %v", vc.n, err)
	}
}

// fakeStreamVenue speaks the venue's stream protocol: it accepts connections on
// any path, acknowledges SUBSCRIBE and UNSUBSCRIBE unless refuse says
// otherwise, and logs what happened in order.
type fakeStreamVenue struct {
	t   *testing.T
	l   *pipeListener
	srv *http.Server
	hc  *http.Client
	wg  sync.WaitGroup

	mu     sync.Mutex
	conns  []*venueConn
	log    []string // "acked 3", "closed 1": the order of events
	refuse func(method string, params []string) bool
	reject bool // answer every handshake with 503
}

func newFakeStreamVenue(t *testing.T) *fakeStreamVenue {
	v := &fakeStreamVenue{t: t, l: &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}}
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve)}
	v.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			client, server := net.Pipe()
			select {
			case v.l.conns <- server:
				return client, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-v.l.closed:
				return nil, net.ErrClosed
			}
		},
	}}
	v.wg.Go(func() { _ = v.srv.Serve(v.l) })
	return v
}

// stop ends the server; call after the client has stopped.
func (v *fakeStreamVenue) stop() {
	_ = v.srv.Close()
	v.mu.Lock()
	for _, c := range v.conns {
		_ = c.ws.CloseNow()
	}
	v.mu.Unlock()
	v.wg.Wait()
	v.hc.CloseIdleConnections()
}

func (v *fakeStreamVenue) note(format string, args ...any) {
	v.mu.Lock()
	v.log = append(v.log, fmt.Sprintf(format, args...))
	v.mu.Unlock()
}

func (v *fakeStreamVenue) events() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.log)
}

func (v *fakeStreamVenue) connections() []*venueConn {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.conns)
}

func (v *fakeStreamVenue) serve(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	reject := v.reject
	v.mu.Unlock()
	if reject {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.RawQuery != "" {
		v.t.Errorf("stream names in the URL: %s", r.URL.RawQuery)
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		v.t.Errorf("accept: %v", err)
		return
	}
	v.mu.Lock()
	vc := &venueConn{n: len(v.conns) + 1, path: r.URL.Path, ua: r.Header.Get("User-Agent"), ws: ws, subs: map[string]bool{}}
	v.conns = append(v.conns, vc)
	v.mu.Unlock()
	for {
		_, b, err := ws.Read(context.Background())
		if err != nil {
			v.note("closed %d", vc.n)
			return
		}
		var m ctlMsg
		if err := json.Unmarshal(b, &m); err != nil {
			v.t.Errorf("conn %d: control message %s: %v", vc.n, b, err)
			continue
		}
		m.At = time.Now()
		vc.mu.Lock()
		vc.msgs = append(vc.msgs, m)
		vc.mu.Unlock()
		v.mu.Lock()
		refuse := v.refuse != nil && v.refuse(m.Method, m.Params)
		v.mu.Unlock()
		if refuse {
			_ = ws.Write(context.Background(), websocket.MessageText,
				fmt.Appendf(nil, `{"error":{"code":2,"msg":"Invalid request"},"id":%d}`, m.ID))
			continue
		}
		vc.mu.Lock()
		for _, n := range m.Params {
			vc.subs[n] = m.Method == "SUBSCRIBE"
			if m.Method != "SUBSCRIBE" {
				delete(vc.subs, n)
			}
		}
		vc.mu.Unlock()
		v.note("acked %d %s", vc.n, m.Method)
		_ = ws.Write(context.Background(), websocket.MessageText, fmt.Appendf(nil, `{"result":null,"id":%d}`, m.ID))
	}
}

// recordSink records what the streams deliver, in order.
type recordSink struct {
	mu      sync.Mutex
	calls   []string
	depth   []venue.DepthUpdate
	trades  []venue.Trade
	tickers [][]venue.Stat
}

func (r *recordSink) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recordSink) Depth(u venue.DepthUpdate) {
	r.mu.Lock()
	r.depth = append(r.depth, u)
	r.mu.Unlock()
	r.add("depth " + u.Symbol)
}

func (r *recordSink) Trade(symbol string, tr venue.Trade) {
	r.mu.Lock()
	r.trades = append(r.trades, tr)
	r.mu.Unlock()
	r.add("trade " + symbol)
}

func (r *recordSink) Tickers(rows []venue.Stat) {
	r.mu.Lock()
	r.tickers = append(r.tickers, rows)
	r.mu.Unlock()
	r.add(fmt.Sprintf("tickers %d", len(rows)))
}

func (r *recordSink) Live(kind snapshot.Stream, symbols []string) {
	r.add(fmt.Sprintf("live %s %s", kind, strings.Join(sorted(symbols), ",")))
}

func (r *recordSink) Lost(kind snapshot.Stream, symbols []string) {
	r.add(fmt.Sprintf("lost %s %s", kind, strings.Join(sorted(symbols), ",")))
}

// take returns the calls recorded since the last take.
func (r *recordSink) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// harness runs Streams against a fake venue inside a synctest bubble.
type harness struct {
	t      *testing.T
	v      *fakeStreamVenue
	s      *Streams
	sink   *recordSink
	set    *metrics.Set
	cancel context.CancelFunc
	done   chan error
}

func startStreams(t *testing.T, p Preset, maxAge time.Duration, symbols []string) *harness {
	return startStreamsWith(t, p, maxAge, symbols, nil)
}

// startStreamsWith starts Streams against a venue that refuses the control
// messages refuse picks.
func startStreamsWith(t *testing.T, p Preset, maxAge time.Duration, symbols []string, refuse func(string, []string) bool) *harness {
	return startHarness(t, p, symbols, refuse, StreamOptions{MaxAge: maxAge})
}

// startHarness starts Streams with the options o (its venue, logger and
// metrics set by the harness).
func startHarness(t *testing.T, p Preset, symbols []string, refuse func(string, []string) bool, o StreamOptions) *harness {
	v := newFakeStreamVenue(t)
	v.refuse = refuse
	h := &harness{t: t, v: v, sink: &recordSink{}, set: metrics.NewSet(), done: make(chan error, 1)}
	o.BaseURL = "ws://venue"
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Metrics = h.set
	o.Dial = func() DialOptions { return DialOptions{HTTPClient: v.hc} }
	h.s = NewStreams(p, o)
	if symbols != nil {
		h.s.Watch(symbols)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.s.Run(ctx, h.sink) }()
	synctest.Wait()
	return h
}

// stop cancels Run, checks that it returns, and stops the venue.
func (h *harness) stop() {
	h.cancel()
	if err := <-h.done; err != context.Canceled {
		h.t.Errorf("Run returned %v, want context.Canceled", err)
	}
	h.v.stop()
}

// metric returns one metric's value from the Prometheus text.
func (h *harness) metric(name string) string {
	var b bytes.Buffer
	h.set.WritePrometheus(&b)
	for line := range strings.Lines(b.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return ""
}

func symbolsN(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("S%03dUSDT", i)
	}
	return s
}

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
		wantMarket = append(wantMarket, "!ticker@arr")
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

func TestStaggeredAge(t *testing.T) {
	const maxAge = 23*time.Hour + 30*time.Minute
	seen := map[time.Duration]bool{}
	for i := range int64(64) {
		a := staggeredAge(maxAge, i)
		if a > maxAge || a < maxAge/2 || seen[a] {
			t.Fatalf("connection %d first replaced at %v (seen before: %v)", i, a, seen[a])
		}
		seen[a] = true
	}
	if a := staggeredAge(maxAge, 0); a != maxAge {
		t.Errorf("first connection at %v, want %v", a, maxAge)
	}
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
		h.sink.mu.Lock()
		if u := h.sink.depth[0]; u.First != 600859599090 || u.Last != 600859600917 || u.Prev != 600859598061 || u.Time != 1626992741024 || len(u.Bids) != 3 {
			t.Errorf("depth %+v", u)
		}
		if tr := h.sink.trades[0]; tr != (venue.Trade{ID: 87353230, Time: 1626992744108, Price: "7.6120", Size: "297"}) {
			t.Errorf("trade %+v", tr)
		}
		h.sink.mu.Unlock()

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
		time.Sleep(staggeredAge(maxAge, 1) + time.Second)
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
		if got := hh.conn("/market/stream", "btcusdt@aggTrade").streams(); !slices.Equal(got, []string{"!ticker@arr", "btcusdt@aggTrade"}) {
			t.Errorf("market streams %v", got)
		}
	})
}

// TestStreamsReplace: at MaxAge a connection is replaced: the new one is
// acknowledged before the old one is closed, nothing is reported Lost, and
// connections are replaced at different times.
func TestStreamsReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startStreams(t, Binance, time.Hour, []string{"BTCUSDT", "ETHUSDT"})
		defer h.stop()
		h.sink.take()
		oldDepth := h.conn("/public/stream", "btcusdt@depth@100ms")
		oldMarket := h.conn("/market/stream", "btcusdt@aggTrade")

		// The market connection was made first and is replaced at MaxAge;
		// the depth connection earlier, at MaxAge less a fraction.
		time.Sleep(staggeredAge(time.Hour, 1) - time.Second)
		synctest.Wait()
		if n := len(h.v.connections()); n != 2 {
			t.Fatalf("%d connections before the first replacement", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		newDepth := h.conn("/public/stream", "btcusdt@depth@100ms")
		if newDepth == oldDepth {
			t.Fatal("depth connection not replaced")
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
		if c := h.conn("/market/stream", "btcusdt@aggTrade"); c != oldMarket {
			t.Error("market connection replaced at the same time")
		}
		// Events flow on the new connection.
		newDepth.send(t, `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[],"a":[["2","1"]]}}`)
		synctest.Wait()
		wantCalls(t, h.sink.take(), "depth BTCUSDT")

		time.Sleep(time.Hour - staggeredAge(time.Hour, 1))
		synctest.Wait()
		if c := h.conn("/market/stream", "btcusdt@aggTrade"); c == oldMarket {
			t.Error("market connection not replaced at MaxAge")
		}
		if calls := h.sink.take(); len(calls) != 0 {
			t.Errorf("sink calls during a replacement: %q", calls)
		}
		for name, want := range map[string]string{
			`marketfeed_stream_reconnects_total{reason="rotated"}`: "2",
			`marketfeed_stream_reconnects_total{reason="closed"}`:  "0",
			`marketfeed_stream_connections`:                        "2",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
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
		// ausdt@aggTrade shared a connection with the ticker and is gone.
		if fmt.Sprint(market) != fmt.Sprint([][]string{{"!ticker@arr", "cusdt@aggTrade"}, {"busdt@aggTrade", "dusdt@aggTrade"}}) {
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
