package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// streamTest is a simulator served over HTTP whose hub the test feeds by
// hand, on a clock the test sets.
type streamTest struct {
	vs     *venueServer
	url    string // http://host:port
	closed chan string

	mu  sync.Mutex
	now time.Time
}

func newStreamTest(t *testing.T, cfg wsConfig) *streamTest {
	t.Helper()
	st := &streamTest{closed: make(chan string, 16), now: time.UnixMilli(1_800_000_000_000)}
	st.vs = newStreamingServer(sim.New(sim.Config{Seed: 1}), 0, cfg, slog.New(slog.DiscardHandler))
	st.vs.hub.now = st.clock
	st.vs.hub.closed = st.closed
	ts := httptest.NewServer(st.vs)
	st.url = ts.URL
	t.Cleanup(func() {
		ts.Close()
		st.vs.hub.shutdown()
		st.vs.hub.wait()
	})
	return st
}

func (st *streamTest) clock() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.now
}

func (st *streamTest) advance(d time.Duration) {
	st.mu.Lock()
	st.now = st.now.Add(d)
	st.mu.Unlock()
}

// waitClosed returns the reason of the next connection the server closes.
func (st *streamTest) waitClosed(t *testing.T) string {
	t.Helper()
	select {
	case r := <-st.closed:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no connection closed within 5 s")
		return ""
	}
}

func (st *streamTest) dial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	return st.dialAs(t, path, "")
}

// dialAs dials path with the User-Agent ua ("": the library's).
func (st *streamTest) dialAs(t *testing.T, path, ua string) *websocket.Conn {
	t.Helper()
	var opts *websocket.DialOptions
	if ua != "" {
		opts = &websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {ua}}}
	}
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(st.url, "http")+path, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// read returns the next message, failing the test after 5 s: real I/O.
func read(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	msg, err := readErr(t, c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return msg
}

func readErr(t *testing.T, c *websocket.Conn) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, msg, err := c.Read(ctx)
	return msg, err
}

// closeStatus reads until the connection ends and returns its close status
// (-1: cut without a close frame).
func closeStatus(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	for range 100 {
		if _, err := readErr(t, c); err != nil {
			if strings.Contains(err.Error(), "context deadline exceeded") {
				t.Fatal("connection still open after 5 s")
			}
			return websocket.CloseStatus(err)
		}
	}
	t.Fatal("connection still delivering after 100 messages")
	return 0
}

func send(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write %s: %v", msg, err)
	}
}

// request sends msg and returns the next message, its reply.
func request(t *testing.T, c *websocket.Conn, msg string) string {
	t.Helper()
	send(t, c, msg)
	return string(read(t, c))
}

func subscribe(t *testing.T, c *websocket.Conn, names ...string) {
	t.Helper()
	params, _ := json.Marshal(names)
	if got := request(t, c, `{"method":"SUBSCRIBE","params":`+string(params)+`,"id":7}`); got != `{"result":null,"id":7}` {
		t.Fatalf("SUBSCRIBE %v: %s", names, got)
	}
}

// frame is a combined-stream frame.
type frame struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
}

func readFrame(t *testing.T, c *websocket.Conn) frame {
	t.Helper()
	msg := read(t, c)
	var f frame
	if err := json.Unmarshal(msg, &f); err != nil || f.Stream == "" {
		t.Fatalf("not a combined frame: %s (%v)", msg, err)
	}
	return f
}

// depthEvent is a depthUpdate payload.
type depthEvent struct {
	E    string      `json:"e"`
	At   int64       `json:"E"` // declared: encoding/json would match "E" to "e" otherwise
	Time int64       `json:"T"`
	Sym  string      `json:"s"`
	U    int64       `json:"U"`
	Last int64       `json:"u"`
	PU   int64       `json:"pu"`
	Bids [][2]string `json:"b"`
	Asks [][2]string `json:"a"`
}

// aggTrade is an aggTrade payload or REST row.
type aggTrade struct {
	E     string `json:"e"`
	At    int64  `json:"E"`
	Sym   string `json:"s"`
	ID    int64  `json:"a"`
	Price string `json:"p"`
	Qty   string `json:"q"`
	First int64  `json:"f"`
	Last  int64  `json:"l"`
	Time  int64  `json:"T"`
	Maker bool   `json:"m"`
}

// chained returns n consecutive depth events of symbol, update ids 10 apart.
func chained(symbol string, n int) []venue.DepthUpdate {
	out := make([]venue.DepthUpdate, n)
	for i := range out {
		out[i] = venue.DepthUpdate{Symbol: symbol, First: int64(10*i + 1), Last: int64(10*i + 10), Prev: int64(10 * i),
			Time: int64(1000 + 100*i), Bids: []venue.Level{{Price: "100." + strconv.Itoa(i), Size: "1"}}}
	}
	return out
}

func TestSimStreamsDeliverEveryKindOnItsPath(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	st.vs.hub.now = time.Now // the simulated streams run on the real clock
	venue := sim.New(sim.Config{Seed: 1})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = st.vs.hub.run(ctx, venue.Streams(), []string{"BTCUSDT", "ETHUSDT"}) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	pub := st.dial(t, "/public/stream")
	subscribe(t, pub, "btcusdt@depth@100ms", "btcusdt@depth", "btcusdt@aggTrade")
	mkt := st.dial(t, "/market/stream")
	subscribe(t, mkt, "btcusdt@aggTrade", "!ticker@arr", "btcusdt@depth@100ms")

	seen := map[string]int{}
	var last int64
	for seen["btcusdt@depth@100ms"] < 5 || seen["btcusdt@depth"] < 1 {
		f := readFrame(t, pub)
		seen[f.Stream]++
		var d depthEvent
		if err := json.Unmarshal(f.Data, &d); err != nil || d.E != "depthUpdate" || d.Sym != "BTCUSDT" || d.Last < d.U {
			t.Fatalf("%s: %s (%v)", f.Stream, f.Data, err)
		}
		if f.Stream == "btcusdt@aggTrade" {
			t.Fatal("aggTrade delivered on /public")
		}
		if f.Stream == "btcusdt@depth@100ms" {
			if last != 0 && d.PU != last {
				t.Fatalf("pu %d does not chain to the previous u %d", d.PU, last)
			}
			last = d.Last
		}
	}
	for seen["btcusdt@aggTrade"] < 2 || seen["!ticker@arr"] < 1 {
		f := readFrame(t, mkt)
		seen[f.Stream]++
		switch f.Stream {
		case "btcusdt@aggTrade":
			var tr aggTrade
			if err := json.Unmarshal(f.Data, &tr); err != nil || tr.E != "aggTrade" || tr.ID == 0 || tr.Price == "" || tr.First != tr.ID {
				t.Fatalf("aggTrade: %s (%v)", f.Data, err)
			}
		case "!ticker@arr":
			var rows []struct {
				E  string `json:"e"`
				At int64  `json:"E"`
				S  string `json:"s"`
				C  string `json:"c"`
			}
			if err := json.Unmarshal(f.Data, &rows); err != nil || len(rows) == 0 || rows[0].E != "24hrTicker" || rows[0].C == "" || rows[0].S == "" {
				t.Fatalf("ticker: %.200s (%v)", f.Data, err)
			}
		default:
			t.Fatalf("%s delivered on /market", f.Stream)
		}
	}
}

func TestSubscriptionRequestsAreAnswered(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	for _, tc := range []struct{ req, want string }{
		{`{"method":"SUBSCRIBE","params":["btcusdt@depth@100ms","nopeusdt@depth@100ms","BTCUSDT@depth"],"id":1}`, `{"result":null,"id":1}`},
		{`{"method":"LIST_SUBSCRIPTIONS","id":2}`, `{"result":["btcusdt@depth@100ms","nopeusdt@depth@100ms","BTCUSDT@depth"],"id":2}`},
		{`{"method":"UNSUBSCRIBE","params":["nopeusdt@depth@100ms"],"id":3}`, `{"result":null,"id":3}`},
		{`{"method":"LIST_SUBSCRIPTIONS","id":"four"}`, `{"result":["btcusdt@depth@100ms","BTCUSDT@depth"],"id":"four"}`},
		{`{"method":"SUBSCRIBE","params":"btcusdt@depth","id":5}`, `"code":1`},
		{`{"method":"SUBSCRIBE","params":[],"id":6}`, `"code":1`},
		{`{"method":"SET_PROPERTY","params":["combined",true],"id":7}`, `"code":2`},
		{`not json`, `"code":3`},
	} {
		got := request(t, c, tc.req)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s\n got %s\nwant %s", tc.req, got, tc.want)
		}
		if strings.Contains(tc.want, "code") && !strings.Contains(got, `"error":{"code"`) {
			t.Errorf("%s: %s is not an error reply", tc.req, got)
		}
	}
}

func TestWrongPathUnknownAndUppercaseNamesAreSilent(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	subscribe(t, c, "btcusdt@aggTrade", "!ticker@arr", "BTCUSDT@depth@100ms", "btcusdt@depth@250ms", "btcusdt@depth@100ms")
	h := st.vs.hub
	h.Trade("BTCUSDT", venue.Trade{ID: 1, Price: "1", Size: "1", Time: 1})
	h.Tickers([]venue.Stat{{Symbol: "BTCUSDT", LastPrice: "1"}})
	h.Depth(chained("BTCUSDT", 1)[0])
	// Frames keep their order on a connection: had any silent stream
	// delivered, it would come before the depth event.
	if f := readFrame(t, c); f.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("first frame on %s, want btcusdt@depth@100ms only", f.Stream)
	}
}

func TestLegacyAndSingleURLLayouts(t *testing.T) {
	split := newStreamTest(t, defaultWSConfig())
	legacy := split.dial(t, "/stream")
	subscribe(t, legacy, "btcusdt@aggTrade", "btcusdt@depth@100ms")
	split.vs.hub.Trade("BTCUSDT", venue.Trade{ID: 1})
	split.vs.hub.Depth(chained("BTCUSDT", 1)[0])
	if f := readFrame(t, legacy); f.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("legacy /stream on a split venue delivered %s, want public data only", f.Stream)
	}

	cfg := defaultWSConfig()
	cfg.Split = false
	aster := newStreamTest(t, cfg)
	resp, err := http.Get(aster.url + "/public/stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/public/stream on a single-URL venue: %d, want 404", resp.StatusCode)
	}
	all := aster.dial(t, "/stream")
	subscribe(t, all, "btcusdt@aggTrade", "btcusdt@depth@100ms")
	aster.vs.hub.Trade("BTCUSDT", venue.Trade{ID: 1})
	aster.vs.hub.Depth(chained("BTCUSDT", 1)[0])
	if a, b := readFrame(t, all), readFrame(t, all); a.Stream != "btcusdt@aggTrade" || b.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("single-URL /stream delivered %s, %s; want both streams", a.Stream, b.Stream)
	}
}

func TestURLStreamsAndBarePayloads(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	bare := st.dial(t, "/public/ws/btcusdt@depth@100ms")
	combined := st.dial(t, "/public/stream?streams=ethusdt@depth@100ms/btcusdt@depth@100ms")
	st.vs.hub.Depth(chained("ETHUSDT", 1)[0])
	st.vs.hub.Depth(chained("BTCUSDT", 1)[0])
	var d depthEvent
	if msg := read(t, bare); json.Unmarshal(msg, &d) != nil || d.E != "depthUpdate" || d.Sym != "BTCUSDT" {
		t.Fatalf("/ws/<name>: %s, want a bare BTCUSDT depthUpdate", msg)
	}
	if a, b := readFrame(t, combined), readFrame(t, combined); a.Stream != "ethusdt@depth@100ms" || b.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("streams in the URL delivered %s, %s", a.Stream, b.Stream)
	}
}

func TestMessageRateLimitClosesTheConnection(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	// Ten a second is allowed, second after second.
	for range 2 {
		for i := range 10 {
			send(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":`+strconv.Itoa(i)+`}`)
		}
		for range 10 {
			read(t, c)
		}
		st.advance(time.Second)
	}
	for i := range 11 {
		send(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":`+strconv.Itoa(i)+`}`)
	}
	if got := closeStatus(t, c); got != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v, want policy violation", got)
	}
	if r := st.waitClosed(t); r != closeMsgRate {
		t.Fatalf("closed for %q", r)
	}
}

func TestStreamLimitClosesTheConnection(t *testing.T) {
	cfg := defaultWSConfig()
	cfg.MaxStreams = 3
	st := newStreamTest(t, cfg)
	c := st.dial(t, "/public/stream")
	subscribe(t, c, "a@depth", "b@depth", "c@depth")
	subscribe(t, c, "a@depth") // already held: still 3
	send(t, c, `{"method":"SUBSCRIBE","params":["d@depth"],"id":9}`)
	if got := closeStatus(t, c); got != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v, want policy violation", got)
	}
	if r := st.waitClosed(t); r != closeStreams {
		t.Fatalf("closed for %q", r)
	}
	url := st.dial(t, "/public/stream?streams=a@depth/b@depth/c@depth/d@depth")
	if got := closeStatus(t, url); got != websocket.StatusPolicyViolation {
		t.Fatalf("four streams in the URL: close status %v, want policy violation", got)
	}
}

func TestMaxAgeClosesTheConnection(t *testing.T) {
	cfg := defaultWSConfig()
	cfg.MaxAge = 20 * time.Millisecond // real: the timer runs beside network I/O
	st := newStreamTest(t, cfg)
	c := st.dial(t, "/market/stream")
	if got := closeStatus(t, c); got != websocket.StatusGoingAway {
		t.Fatalf("close status %v, want going away", got)
	}
	if r := st.waitClosed(t); r != closeMaxAge {
		t.Fatalf("closed for %q", r)
	}
}

func TestPingsKeepAReadingClientAndCloseASilentOne(t *testing.T) {
	cfg := defaultWSConfig()
	cfg.Ping = 5 * time.Millisecond       // real: pings are network I/O
	cfg.PongWait = 500 * time.Millisecond // roomy: a busy machine must not make a reading client late
	cfg.MaxMsgs = 0                       // fast pings' pongs would trip the message limit
	st := newStreamTest(t, cfg)

	pings := make(chan struct{}, 64)
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(st.url, "http")+"/public/stream", &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool {
			select {
			case pings <- struct{}{}:
			default:
			}
			return true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// A reading client answers pings.
	msgs := make(chan []byte)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(msgs)
		for {
			_, m, err := c.Read(context.Background())
			if err != nil {
				return
			}
			msgs <- m
		}
	})
	defer wg.Wait()
	defer c.CloseNow()
	for range 3 {
		select {
		case <-pings:
		case <-time.After(5 * time.Second):
			t.Fatal("no server ping within 5 s")
		}
	}
	send(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	select {
	case m := <-msgs:
		if string(m) != `{"result":[],"id":1}` {
			t.Fatalf("reply after pings: %s", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply after pings")
	}

	// A client that never reads never answers: closed once a pong is late.
	silent := st.dial(t, "/public/stream")
	_ = silent
	if r := st.waitClosed(t); r != closePong {
		t.Fatalf("silent client closed for %q, want %q", r, closePong)
	}
}

func TestDropCutsOneOrEveryConnection(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	one := st.dial(t, "/public/stream")
	two := st.dial(t, "/market/stream")
	request(t, one, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	request(t, two, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	postControl(t, st.url+"/_control/drop?conn=1")
	if got := closeStatus(t, one); got != -1 {
		t.Fatalf("dropped connection closed with %v, want a cut without a close frame", got)
	}
	st.waitClosed(t)
	if got := request(t, two, `{"method":"LIST_SUBSCRIPTIONS","id":2}`); got != `{"result":[],"id":2}` {
		t.Fatalf("the other connection: %s", got)
	}
	postControl(t, st.url+"/_control/drop")
	if got := closeStatus(t, two); got != -1 {
		t.Fatalf("dropped connection closed with %v", got)
	}
	st.waitClosed(t)
	resp, err := http.Post(st.url+"/_control/drop?conn=99", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("drop of an unknown connection: %d, want 404", resp.StatusCode)
	}
	var stats wsStats
	getJSON(t, st.url+"/_control/ws", &stats)
	if stats.Connections != 0 || stats.Opened != 2 || stats.Closes[closeDropped] != 2 || stats.Sent < 3 {
		t.Fatalf("stats %+v, want 2 opened, 2 dropped, none open, 3+ sent", stats)
	}
}

// A drop with an outage refuses new connections for that long, as a
// venue's stream endpoint down for maintenance does, then accepts them
// again.
func TestDropWithAnOutageRefusesConnectionsMeanwhile(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	request(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	postControl(t, st.url+"/_control/drop?for=5s")
	if got := closeStatus(t, c); got != -1 {
		t.Fatalf("dropped connection closed with %v, want a cut without a close frame", got)
	}
	st.waitClosed(t)
	url := "ws" + strings.TrimPrefix(st.url, "http") + "/public/stream"
	_, resp, err := websocket.Dial(t.Context(), url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial during the outage: %v, want a 503", err)
	}
	st.advance(5 * time.Second)
	c = st.dial(t, "/public/stream")
	if got := request(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":2}`); got != `{"result":[],"id":2}` {
		t.Fatalf("after the outage: %s", got)
	}
}

// A client that runs two lines of connections names each in its
// User-Agent; /_control/drop?line= cuts one line's connections only.
func TestDropCutsOneLine(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	a := st.dialAs(t, "/public/stream", "marketfeed (line A)")
	b := st.dialAs(t, "/public/stream", "marketfeed (line B)")
	other := st.dial(t, "/market/stream")
	for _, c := range []*websocket.Conn{a, b, other} {
		request(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	}
	var stats wsStats
	getJSON(t, st.url+"/_control/ws", &stats)
	var lines []string
	for _, c := range stats.Conns {
		lines = append(lines, c.Line)
	}
	if !slices.Equal(lines, []string{"A", "B", ""}) {
		t.Fatalf("lines in /_control/ws %q, want A, B and none", lines)
	}
	postControl(t, st.url+"/_control/drop?line=B")
	if got := closeStatus(t, b); got != -1 {
		t.Fatalf("line B's connection closed with %v, want a cut", got)
	}
	st.waitClosed(t)
	for _, c := range []*websocket.Conn{a, other} {
		if got := request(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":2}`); got != `{"result":[],"id":2}` {
			t.Fatalf("a connection outside line B: %s", got)
		}
	}
}

func TestGapBreaksTheChain(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	subscribe(t, c, "btcusdt@depth@100ms")
	ev := chained("BTCUSDT", 3)
	st.vs.hub.Depth(ev[0])
	postControl(t, st.url+"/_control/gap?symbol=BTCUSDT")
	st.vs.hub.Depth(ev[1])
	st.vs.hub.Depth(ev[2])
	var a, b depthEvent
	_ = json.Unmarshal(readFrame(t, c).Data, &a)
	_ = json.Unmarshal(readFrame(t, c).Data, &b)
	if a.Last != ev[0].Last || b.Last != ev[2].Last || b.PU == a.Last {
		t.Fatalf("after a gap got u=%d then u=%d pu=%d, want the second not chained to the first", a.Last, b.Last, b.PU)
	}
	var stats wsStats
	getJSON(t, st.url+"/_control/ws", &stats)
	if stats.SkippedDepth != 1 {
		t.Errorf("skipped %d depth events, want 1", stats.SkippedDepth)
	}
}

func TestGarbleSendsAnUnusablePrice(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/public/stream")
	subscribe(t, c, "btcusdt@depth@100ms")
	ev := chained("BTCUSDT", 2)
	postControl(t, st.url+"/_control/garble?symbol=BTCUSDT")
	st.vs.hub.Depth(ev[0])
	st.vs.hub.Depth(ev[1])
	bad, good := readFrame(t, c), readFrame(t, c)
	if !strings.Contains(string(bad.Data), `"1e5"`) || strings.Contains(string(good.Data), `"1e5"`) {
		t.Fatalf("garbled %s then %s; want the first event only with an exponent price", bad.Data, good.Data)
	}
	var a depthEvent
	_ = json.Unmarshal(bad.Data, &a)
	if a.Last != ev[0].Last {
		t.Fatalf("garbled event u=%d, want the event's own ids (%d)", a.Last, ev[0].Last)
	}
}

// A silenced symbol delivers nothing on any of its streams, its rows in the
// all-market array included, while the same connections carry every other
// symbol and the subscriptions stay listed; then it delivers again.
func TestSilencedSymbolDeliversNothingOnItsConnections(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	depth := st.dial(t, "/public/stream")
	market := st.dial(t, "/market/stream")
	subscribe(t, depth, "btcusdt@depth@100ms", "ethusdt@depth@100ms")
	subscribe(t, market, "btcusdt@aggTrade", "ethusdt@aggTrade", "!ticker@arr")
	h := st.vs.hub
	postControl(t, st.url+"/_control/silence?symbol=BTCUSDT&for=1m")
	h.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", First: 1, Last: 1})
	h.Depth(venue.DepthUpdate{Symbol: "ETHUSDT", First: 1, Last: 1})
	if f := readFrame(t, depth); f.Stream != "ethusdt@depth@100ms" {
		t.Fatalf("silenced symbol's depth delivered: %s", f.Stream)
	}
	h.Trade("BTCUSDT", venue.Trade{ID: 1})
	h.Tickers([]venue.Stat{{Symbol: "BTCUSDT", LastPrice: "1"}, {Symbol: "ETHUSDT", LastPrice: "2"}})
	h.Trade("ETHUSDT", venue.Trade{ID: 2})
	if f := readFrame(t, market); f.Stream != "!ticker@arr" || strings.Contains(string(f.Data), "BTCUSDT") {
		t.Fatalf("silenced symbol's trade or ticker row delivered: %s %s", f.Stream, f.Data)
	}
	if f := readFrame(t, market); f.Stream != "ethusdt@aggTrade" {
		t.Fatalf("other symbol's trade: %s", f.Stream)
	}
	if got := request(t, depth, `{"method":"LIST_SUBSCRIPTIONS","id":1}`); !strings.Contains(got, "btcusdt@depth@100ms") {
		t.Fatalf("silenced symbol's stream no longer listed: %s", got)
	}
	st.advance(time.Minute)
	h.Depth(venue.DepthUpdate{Symbol: "BTCUSDT", First: 2, Last: 2})
	if f := readFrame(t, depth); f.Stream != "btcusdt@depth@100ms" {
		t.Fatalf("after the silence: %s", f.Stream)
	}
}

// A venue with a REST API only answers 404 on every stream path and goes on
// answering REST.
func TestRESTOnlyVenueRefusesStreams(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	st.vs.restOnly = true
	for _, path := range []string{"/public/stream", "/market/stream", "/stream", "/ws/btcusdt@aggTrade"} {
		resp, err := http.Get(st.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(st.url + "/fapi/v1/depth?symbol=BTCUSDT&limit=5")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("depth on a REST-only venue: %d, want 200", resp.StatusCode)
	}
}

func TestSilenceAndDelistStopDelivery(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	c := st.dial(t, "/market/stream")
	subscribe(t, c, "btcusdt@aggTrade", "ethusdt@aggTrade", "!ticker@arr")
	h := st.vs.hub
	postControl(t, st.url+"/_control/silence?stream=btcusdt@aggTrade&for=1m")
	h.Trade("BTCUSDT", venue.Trade{ID: 1})
	h.Trade("ETHUSDT", venue.Trade{ID: 2})
	if f := readFrame(t, c); f.Stream != "ethusdt@aggTrade" {
		t.Fatalf("silenced stream delivered: %s", f.Stream)
	}
	if got := request(t, c, `{"method":"LIST_SUBSCRIPTIONS","id":1}`); !strings.Contains(got, "btcusdt@aggTrade") {
		t.Fatalf("silenced stream no longer listed: %s", got)
	}
	st.advance(time.Minute)
	h.Trade("BTCUSDT", venue.Trade{ID: 3})
	if f := readFrame(t, c); f.Stream != "btcusdt@aggTrade" {
		t.Fatalf("after the silence: %s", f.Stream)
	}

	postControl(t, st.url+"/_control/market?symbol=ETHUSDT&listed=false")
	h.Trade("ETHUSDT", venue.Trade{ID: 4})
	h.Tickers([]venue.Stat{{Symbol: "ETHUSDT", LastPrice: "1"}})
	h.Tickers([]venue.Stat{{Symbol: "ETHUSDT", LastPrice: "2"}, {Symbol: "BTCUSDT", LastPrice: "3"}})
	f := readFrame(t, c)
	if f.Stream != "!ticker@arr" || strings.Contains(string(f.Data), "ETHUSDT") || !strings.Contains(string(f.Data), "BTCUSDT") {
		t.Fatalf("after delisting ETHUSDT: %s %s", f.Stream, f.Data)
	}
}

func TestAggTradesDecodeAndAreCharged(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	used := 0
	for _, tc := range []struct {
		path   string
		weight int
	}{
		{"/fapi/v1/aggTrades?symbol=BTCUSDT&limit=200", 20},
		{"/fapi/v3/aggTrades?symbol=BTCUSDT&limit=200", 20},
		{"/fapi/v1/depth?symbol=BTCUSDT&limit=5", 2},
		{"/fapi/v1/depth?symbol=BTCUSDT&limit=50", 2},
		{"/fapi/v1/depth?symbol=BTCUSDT&limit=100", 5},
		{"/fapi/v1/depth?symbol=BTCUSDT&limit=500", 10},
		{"/fapi/v1/depth?symbol=BTCUSDT&limit=1000", 20},
		{"/fapi/v1/depth?symbol=BTCUSDT", 10},
	} {
		resp, err := http.Get(st.url + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		used += tc.weight
		if h := resp.Header.Get("X-MBX-USED-WEIGHT-1M"); h != strconv.Itoa(used) || resp.StatusCode != 200 {
			t.Fatalf("%s: %d, used weight %s, want %d", tc.path, resp.StatusCode, h, used)
		}
		if !strings.Contains(tc.path, "aggTrades") {
			continue
		}
		var rows []aggTrade
		if err := json.Unmarshal(body, &rows); err != nil || len(rows) == 0 {
			t.Fatalf("%s: %d rows, %v", tc.path, len(rows), err)
		}
		sides := map[bool]int{}
		for i, r := range rows {
			sides[r.Maker]++
			if r.Price == "" || r.Qty == "" || r.First != r.ID || r.Last != r.ID {
				t.Fatalf("row %d: %+v", i, r)
			}
			if i > 0 && (r.ID <= rows[i-1].ID || r.Time < rows[i-1].Time) {
				t.Fatalf("rows %d, %d not oldest first: %+v %+v", i-1, i, rows[i-1], r)
			}
		}
		if sides[true] == 0 || sides[false] == 0 {
			t.Errorf("%s: one taker side only: %v", tc.path, sides)
		}
	}
}

func TestControlBookAgreesWithDepthSnapshot(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	type depth struct {
		LastUpdateID int64       `json:"lastUpdateId"`
		T            int64       `json:"T"`
		Bids         [][2]string `json:"bids"`
		Asks         [][2]string `json:"asks"`
	}
	var snap, truth, atTime depth
	getJSON(t, st.url+"/fapi/v1/depth?symbol=BTCUSDT&limit=100", &snap)
	if snap.LastUpdateID <= 0 || len(snap.Bids) != 100 {
		t.Fatalf("snapshot: lastUpdateId %d, %d bids", snap.LastUpdateID, len(snap.Bids))
	}
	getJSON(t, st.url+"/_control/book?symbol=BTCUSDT&depth=100&update_id="+strconv.FormatInt(snap.LastUpdateID, 10), &truth)
	if truth.LastUpdateID != snap.LastUpdateID || !slices.Equal(truth.Bids, snap.Bids) || !slices.Equal(truth.Asks, snap.Asks) {
		t.Fatalf("book at %d differs from the snapshot (at %d)", snap.LastUpdateID, truth.LastUpdateID)
	}
	// A served book carries the venue's time, not its update id: the book
	// at the snapshot's time is the snapshot.
	getJSON(t, st.url+"/_control/book?symbol=BTCUSDT&depth=100&time_ms="+strconv.FormatInt(snap.T, 10), &atTime)
	if atTime.LastUpdateID != snap.LastUpdateID || !slices.Equal(atTime.Bids, snap.Bids) || !slices.Equal(atTime.Asks, snap.Asks) {
		t.Fatalf("book at time %d (id %d) differs from the snapshot (id %d)", snap.T, atTime.LastUpdateID, snap.LastUpdateID)
	}
	for _, q := range []string{"symbol=BTCUSDT", "symbol=BTCUSDT&update_id=x", "update_id=5", "symbol=BTCUSDT&update_id=5&depth=0",
		"symbol=BTCUSDT&time_ms=x", "symbol=BTCUSDT&time_ms=0", "symbol=BTCUSDT&update_id=5&time_ms=5"} {
		resp, err := http.Get(st.url + "/_control/book?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("/_control/book?%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

func TestStreamControlsRejectBadParameters(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	for _, path := range []string{"/_control/drop?conn=x", "/_control/drop?for=0s", "/_control/drop?for=soon", "/_control/gap", "/_control/gap?symbol=BTCUSDT&events=0",
		"/_control/silence?stream=btcusdt@aggTrade", "/_control/silence?for=1s", "/_control/silence?stream=a&for=soon",
		"/_control/silence?symbol=BTCUSDT", "/_control/silence?stream=a&symbol=BTCUSDT&for=1s",
		"/_control/max-age", "/_control/max-age?age=0s", "/_control/max-age?age=soon", "/_control/max-age?age=1s&for=-1s"} {
		resp, err := http.Post(st.url+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(st.url + "/_control/drop")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /_control/drop: %d, want 405", resp.StatusCode)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestMergeLevelsKeepsTheLaterSize(t *testing.T) {
	l := func(p, s string) venue.Level { return venue.Level{Price: p, Size: s} }
	for _, tc := range []struct {
		name    string
		a, b    []venue.Level
		want    []venue.Level
		aBefore []venue.Level
	}{
		{"disjoint", []venue.Level{l("2", "1")}, []venue.Level{l("1", "3")}, []venue.Level{l("2", "1"), l("1", "3")}, nil},
		{"changed again", []venue.Level{l("2", "1"), l("1", "2")}, []venue.Level{l("1", "0")}, []venue.Level{l("2", "1"), l("1", "0")}, nil},
		{"removed then back", []venue.Level{l("2", "0")}, []venue.Level{l("2", "5")}, []venue.Level{l("2", "5")}, nil},
		{"empty", nil, nil, []venue.Level{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.a)
			if got := mergeLevels(tc.a, tc.b); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.a, before) {
				t.Fatalf("a modified: %v", tc.a)
			}
		})
	}
}

func TestSlowDepthMergesItsPeriod(t *testing.T) {
	ev := chained("BTCUSDT", 6) // times 1000, 1100, ..., 1500
	var a depthAgg
	var got []venue.DepthUpdate
	for _, u := range ev {
		if m, ok := a.add(u, 250); ok {
			got = append(got, m)
		}
	}
	// 1000..1200 are in the period ending at 1250: emitted with 1300. 1400
	// starts the period ending at 1500: emitted with 1500.
	if len(got) != 2 || got[0].First != ev[0].First || got[0].Prev != ev[0].Prev || got[0].Last != ev[3].Last ||
		got[0].Time != ev[3].Time || len(got[0].Bids) != 4 {
		t.Fatalf("merged %+v", got)
	}
	if got[1].First != ev[4].First || got[1].Prev != got[0].Last || got[1].Last != ev[5].Last {
		t.Fatalf("second period %+v, want it chained to the first", got[1])
	}
}

func TestRateWindowAllowsMaxPerSecond(t *testing.T) {
	t0 := time.Unix(100, 0)
	for _, tc := range []struct {
		name string
		at   []time.Duration
		max  int
		want bool // the last message allowed
	}{
		{"at the limit", []time.Duration{0, 1, 2}, 3, true},
		{"over in one second", []time.Duration{0, 1, 2, 999 * time.Millisecond}, 3, false},
		{"new window", []time.Duration{0, 1, 2, time.Second}, 3, true},
		{"no limit", []time.Duration{0, 0, 0, 0}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w rateWindow
			var ok bool
			for _, d := range tc.at {
				ok = w.allow(t0.Add(d), tc.max)
			}
			if ok != tc.want {
				t.Fatalf("last allowed = %v, want %v", ok, tc.want)
			}
		})
	}
}

func TestStreamRoutes(t *testing.T) {
	for name, want := range map[string]route{
		"btcusdt@depth@100ms": routePublic, "btcusdt@depth": routePublic, "btcusdt@depth@500ms": routePublic,
		"btcusdt@aggTrade": routeMarket, "!ticker@arr": routeMarket,
		"btcusdt@depth@250ms": 0, "btcusdt@trade": 0, "": 0,
	} {
		if got := streamRoute(name); got != want {
			t.Errorf("streamRoute(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestFullQueueClosesASlowConsumer(t *testing.T) {
	c := &wsConn{send: make(chan []byte, 1)}
	c.ctx, c.cancel = context.WithCancel(t.Context())
	c.enqueue([]byte("1"))
	if c.ctx.Err() != nil {
		t.Fatal("closed with room in its queue")
	}
	c.enqueue([]byte("2"))
	if c.ctx.Err() == nil || c.reason != closeSlow {
		t.Fatalf("full queue: reason %q, want %q", c.reason, closeSlow)
	}
	c.kill(closeDropped)
	if c.reason != closeSlow {
		t.Fatalf("a second kill changed the reason to %q", c.reason)
	}
}
