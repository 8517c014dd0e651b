package binance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/coder/websocket"

	"marketfeed/internal/promtext"
	"marketfeed/poller/venue/venuetest"
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
	n      int // order of acceptance, from 1
	path   string
	ua     string    // the User-Agent it was opened with
	opened time.Time // when it was accepted
	ws     *websocket.Conn
	mu     sync.Mutex
	msgs   []ctlMsg
	subs   map[string]bool
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
// otherwise, closes those it accepts while maxAge is set at that age, and
// logs what happened in order.
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
	reject bool          // answer every handshake with 503
	maxAge time.Duration // close a connection at this age, as 1001 "max age"; 0: never
	// opening, when set, is called with a connection's path before its
	// handshake is answered: it may hold the handshake, as a slow venue
	// does.
	opening func(path string)
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
	reject, opening := v.reject, v.opening
	v.mu.Unlock()
	if reject {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if opening != nil {
		opening(r.URL.Path)
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
	vc := &venueConn{n: len(v.conns) + 1, path: r.URL.Path, ua: r.Header.Get("User-Agent"), opened: time.Now(), ws: ws, subs: map[string]bool{}}
	v.conns = append(v.conns, vc)
	maxAge := v.maxAge
	v.mu.Unlock()
	if maxAge > 0 {
		aged := time.AfterFunc(maxAge, func() {
			v.note("aged %d", vc.n)
			_ = ws.Close(websocket.StatusGoingAway, "max age")
		})
		defer aged.Stop()
	}
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
		hook := v.refuse
		v.mu.Unlock()
		// Not under mu: a hook may take its time, as a slow venue does.
		if hook != nil && hook(m.Method, m.Params) {
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

// recordSink records what the streams deliver, in order: a copy of each
// depth event, since a connection decodes every frame into the same memory.
type recordSink struct{ venuetest.Recorder }

func newRecordSink() *recordSink { return &recordSink{venuetest.Recorder{Clone: true}} }

// take returns the calls recorded since the last take, a line each.
func (r *recordSink) take() []string {
	var out []string
	for _, c := range r.Take() {
		var l string
		switch c.Method {
		case venuetest.Depth:
			l = "depth " + c.Depth.Symbol
		case venuetest.Trade:
			l = "trade " + c.Symbol
		case venuetest.Contracts:
			l = fmt.Sprintf("contracts %d", len(c.Contracts))
		case venuetest.Tickers:
			l = fmt.Sprintf("tickers %d", len(c.Stats))
		case venuetest.Live:
			l = fmt.Sprintf("live %s %s", c.Kind, strings.Join(sorted(c.Symbols), ","))
		case venuetest.Lost:
			l = fmt.Sprintf("lost %s %s", c.Kind, strings.Join(sorted(c.Symbols), ","))
		}
		out = append(out, l)
	}
	return out
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
	return startHarness(t, p, symbols, func(v *fakeStreamVenue) { v.refuse = refuse }, StreamOptions{MaxAge: maxAge})
}

// startHarness starts Streams with the options o (its venue and metrics set
// by the harness, and its logger unless o has one) against a venue that
// setup, when not nil, prepares.
func startHarness(t *testing.T, p Preset, symbols []string, setup func(*fakeStreamVenue), o StreamOptions) *harness {
	v := newFakeStreamVenue(t)
	if setup != nil {
		setup(v)
	}
	h := &harness{t: t, v: v, sink: newRecordSink(), set: metrics.NewSet(), done: make(chan error, 1)}
	o.BaseURL = "ws://venue"
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
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

// metric returns one metric's value from the Prometheus text, as the text
// writes it; "": none.
func (h *harness) metric(name string) string {
	v, ok := promtext.Scrape(h.t, h.set.WritePrometheus)[name]
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func symbolsN(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("S%03dUSDT", i)
	}
	return s
}
