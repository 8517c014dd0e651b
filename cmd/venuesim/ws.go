package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"marketfeed/poller/binance"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// route is the class of streams a path delivers: since its split Binance
// serves depth on /public and trades, tickers and mark prices on /market,
// and a stream subscribed on the other path is acknowledged and never
// delivers.
type route uint8

const (
	routePublic route = 1 << iota // depth and book tickers
	routeMarket                   // aggregate trades, tickers and mark prices
	routeAll    = routePublic | routeMarket
)

// streamRoute returns the path class a stream name is delivered on, or 0 for
// a name the venue does not serve (acknowledged, never delivered).
func streamRoute(name string) route {
	switch {
	case strings.HasSuffix(name, "@depth"), strings.HasSuffix(name, "@depth@100ms"),
		strings.HasSuffix(name, "@depth@500ms"), strings.HasSuffix(name, "@bookTicker"),
		name == "!bookTicker":
		return routePublic
	case strings.HasSuffix(name, "@aggTrade"), strings.HasSuffix(name, "@ticker"),
		strings.HasSuffix(name, "@miniTicker"), name == "!ticker@arr", name == "!miniTicker@arr",
		strings.HasSuffix(name, binance.MarkPriceSuffix), name == binance.MarkPriceStream:
		return routeMarket
	}
	return 0
}

// wsConfig sets the market-stream server's limits, Binance's by default.
type wsConfig struct {
	Split      bool          // Binance's /public and /market paths; false: one /stream for all, as Aster
	MaxMsgs    int           // incoming messages (requests, pings, pongs) per second before closing
	MaxStreams int           // streams on one connection before closing
	MaxAge     time.Duration // connection lifetime
	Ping       time.Duration // server ping period
	PongWait   time.Duration // how long a ping waits for its pong before the connection is closed
	Queue      int           // frames queued for one connection before it counts as slow
}

func defaultWSConfig() wsConfig {
	return wsConfig{Split: true, MaxMsgs: 10, MaxStreams: 200, MaxAge: 24 * time.Hour,
		Ping: 3 * time.Minute, PongWait: 10 * time.Minute, Queue: 4096}
}

// Reasons a connection closed, as /_control/ws counts them.
const (
	closeDropped  = "dropped"
	closeMaxAge   = "max age"
	closeMsgRate  = "too many messages"
	closeStreams  = "too many streams"
	closeSlow     = "slow consumer"
	closePong     = "no pong"
	closeWrite    = "write failed"
	closeClient   = "client closed"
	closeShutdown = "shutdown"
	closeRead     = "read failed"
)

// closeCode is the close frame sent for a reason; 0 means no close frame:
// the TCP connection is cut, as a network failure would.
func closeCode(reason string) websocket.StatusCode {
	switch reason {
	case closeMsgRate, closeStreams:
		return websocket.StatusPolicyViolation
	case closeSlow:
		return websocket.StatusTryAgainLater
	case closeMaxAge, closeShutdown:
		return websocket.StatusGoingAway
	case closeDropped, closePong:
		return 0
	}
	return websocket.StatusNormalClosure
}

// wsHub is the venue.Sink the simulated venue's streams deliver to. It
// serializes each event once and queues the same bytes to every connection
// subscribed to the event's stream.
type wsHub struct {
	cfg    wsConfig
	log    *slog.Logger
	now    func() time.Time
	hidden func(symbol string) bool // delisted: its streams stop delivering

	mu       sync.Mutex
	subs     map[string]map[*wsConn]struct{} // deliverable stream name → connections
	conns    map[int64]*wsConn
	nextID   int64
	silenced map[string]time.Time // stream name → silent until
	// mute is, per symbol, until when every stream of the symbol is
	// silent: its depth and trade streams and its rows in the all-market
	// arrays, while the connections carry every other symbol.
	mute map[string]time.Time
	// refuseUntil is when the stream endpoints accept connections again
	// after a drop with an outage (zero: they do).
	refuseUntil time.Time
	gaps        map[string]int       // symbol → depth events still to skip
	garbled     map[string]int       // symbol → depth events still to send with an unusable price
	slow        map[string]*depthAgg // @depth and @depth@500ms name → events merged so far
	opened      int64
	skipped     int64
	closes      map[string]int64
	// age is the connection age the venue closes at when set at run time
	// (see setMaxAge; zero: cfg.MaxAge), until ageUntil (zero: until told
	// otherwise). ageChanged is closed and replaced whenever it changes, so
	// that every connection's writer takes the new age at once.
	age        time.Duration
	ageUntil   time.Time
	ageChanged chan struct{}

	sent atomic.Int64 // frames written to connections

	wg     sync.WaitGroup // connections being served
	closed chan<- string  // if set, each closed connection's reason, for tests
}

var _ venue.Sink = (*wsHub)(nil)

func newWSHub(cfg wsConfig, log *slog.Logger, hidden func(string) bool) *wsHub {
	return &wsHub{
		cfg: cfg, log: log, now: time.Now, hidden: hidden,
		subs: make(map[string]map[*wsConn]struct{}), conns: make(map[int64]*wsConn),
		silenced: make(map[string]time.Time), mute: make(map[string]time.Time), gaps: make(map[string]int), garbled: make(map[string]int),
		slow: make(map[string]*depthAgg), closes: make(map[string]int64), ageChanged: make(chan struct{}),
	}
}

// wsConn is one client connection.
type wsConn struct {
	id     int64
	path   string
	route  route
	bare   bool   // /ws: payloads without the {"stream":..,"data":..} wrapper
	line   string // the client's line, from "(line X)" in its User-Agent; "" if none
	opened time.Time
	send   chan []byte
	rate   rateWindow

	names []string // subscribed, in order; guarded by the hub's mu

	once   sync.Once
	reason string // why it closes; written once, in once, before ctx ends
	ctx    context.Context
	cancel context.CancelFunc
}

// kill closes the connection for reason; the first reason wins. It never
// blocks: the connection's writer sends the close frame.
func (c *wsConn) kill(reason string) {
	c.once.Do(func() {
		c.reason = reason
		c.cancel()
	})
}

// enqueue queues a frame without blocking; a full queue closes the
// connection, as the venue drops a consumer that does not keep up.
func (c *wsConn) enqueue(b []byte) {
	select {
	case c.send <- b:
	default:
		c.kill(closeSlow)
	}
}

// rateWindow counts incoming messages in one-second windows.
type rateWindow struct {
	mu    sync.Mutex
	start time.Time
	n     int
}

// allow counts a message at now and reports whether the window still holds
// at most max messages.
func (w *rateWindow) allow(now time.Time, max int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() || now.Sub(w.start) >= time.Second || now.Before(w.start) {
		w.start, w.n = now, 0
	}
	w.n++
	return max <= 0 || w.n <= max
}

// resolve maps a request path to its route, whether payloads are bare, and
// the streams named in the URL. ok is false for a path the venue does not
// serve.
func (h *wsHub) resolve(path, query string) (r route, bare bool, names []string, ok bool) {
	// The legacy unrouted paths deliver public data only on a split venue.
	legacy := routePublic
	if !h.cfg.Split {
		legacy = routeAll
	}
	prefixes := []struct {
		prefix string
		route  route
	}{{"", legacy}}
	if h.cfg.Split {
		prefixes = append(prefixes, struct {
			prefix string
			route  route
		}{"/public", routePublic}, struct {
			prefix string
			route  route
		}{"/market", routeMarket})
	}
	for _, p := range prefixes {
		rest, found := strings.CutPrefix(path, p.prefix)
		if !found {
			continue
		}
		switch {
		case rest == "/stream":
			var names []string
			if q := query; q != "" {
				if v, err := parseStreamsQuery(q); err == nil && v != "" {
					names = strings.Split(v, "/")
				}
			}
			return p.route, false, names, true
		case rest == "/ws":
			return p.route, true, nil, true
		case strings.HasPrefix(rest, "/ws/"):
			return p.route, true, strings.Split(strings.TrimPrefix(rest, "/ws/"), "/"), true
		}
	}
	return 0, false, nil, false
}

func parseStreamsQuery(raw string) (string, error) {
	for part := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(part, "=")
		if k == "streams" {
			return v, nil // stream names carry no characters that need unescaping
		}
	}
	return "", nil
}

// ServeHTTP accepts a market-stream connection and serves it until it closes.
func (h *wsHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, bare, initial, ok := h.resolve(r.URL.Path, r.URL.RawQuery)
	if !ok {
		writeError(w, http.StatusNotFound, -1000, "unknown path")
		return
	}
	h.mu.Lock()
	down := h.now().Before(h.refuseUntil)
	h.mu.Unlock()
	if down {
		writeError(w, http.StatusServiceUnavailable, -1001, "stream endpoint unavailable")
		return
	}
	h.wg.Add(1)
	defer h.wg.Done()
	c := &wsConn{path: r.URL.Path, route: rt, bare: bare, line: lineOf(r.UserAgent()), opened: h.now(),
		send: make(chan []byte, max(h.cfg.Queue, 1))}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// Subscribed before the handshake completes, so that a client that has
	// its answer misses no event of the streams in its URL.
	h.register(c)
	if len(initial) > 0 && !h.subscribe(c, initial) {
		c.kill(closeStreams)
	}
	// Binance counts pings and pongs against the message limit too.
	count := func() {
		if !c.rate.allow(h.now(), h.cfg.MaxMsgs) {
			c.kill(closeMsgRate)
		}
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		OnPingReceived: func(context.Context, []byte) bool { count(); return true },
		OnPongReceived: func(context.Context, []byte) { count() },
	})
	if err != nil {
		c.kill(closeRead)
		h.unregister(c)
		return // Accept has answered the request
	}
	ws.SetReadLimit(1 << 20)

	var wg sync.WaitGroup
	wg.Go(func() { h.write(ws, c) })
	wg.Go(func() { h.ping(ws, c) })
	h.read(ws, c, count)
	wg.Wait()
	h.unregister(c)
}

// read handles the client's requests until the connection closes.
func (h *wsHub) read(ws *websocket.Conn, c *wsConn, count func()) {
	for {
		_, msg, err := ws.Read(context.Background())
		if err != nil {
			if websocket.CloseStatus(err) != -1 {
				c.kill(closeClient)
			} else {
				c.kill(closeRead)
			}
			return
		}
		count()
		if reply := h.request(c, msg); reply != nil {
			c.enqueue(reply)
		}
	}
}

// write sends queued frames, closes the connection when it reaches the
// venue's maximum age and sends the close frame when the connection is
// killed.
func (h *wsHub) write(ws *websocket.Conn, c *wsConn) {
	// age fires at the connection's maximum age; ruleEnds when an age set
	// at run time lapses, and changed when another is set: either way the
	// age in force is read again.
	age, ruleEnds := time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	defer age.Stop()
	defer ruleEnds.Stop()
	var changed <-chan struct{}
	arm := func() {
		maxAge, until, ch := h.maxAge()
		changed = ch
		now := h.now()
		age.Reset(max(c.opened.Add(maxAge).Sub(now), 0))
		ruleEnds.Stop()
		if !until.IsZero() {
			ruleEnds.Reset(max(until.Sub(now), 0))
		}
	}
	arm()
	for {
		select {
		case <-c.ctx.Done():
			if code := closeCode(c.reason); code != 0 {
				_ = ws.Close(code, c.reason)
			} else {
				_ = ws.CloseNow()
			}
			return
		case <-age.C:
			c.kill(closeMaxAge)
		case <-changed:
			arm()
		case <-ruleEnds.C:
			arm()
		case b := <-c.send:
			// Not c.done: a write cut short by a kill would cut the
			// connection before the close frame that says why.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.kill(closeWrite)
				continue
			}
			h.sent.Add(1)
		}
	}
}

// ping pings the client every Ping and closes a connection whose pong does
// not come within PongWait.
func (h *wsHub) ping(ws *websocket.Conn, c *wsConn) {
	if h.cfg.Ping <= 0 {
		return
	}
	t := time.NewTicker(h.cfg.Ping)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			// A kill ends the wait for the pong, not the connection: the
			// writer still sends the close frame.
			ctx, cancel := context.WithTimeout(c.ctx, h.cfg.PongWait)
			err := ws.Ping(ctx)
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.kill(closePong)
			}
		}
	}
}

func (h *wsHub) register(c *wsConn) {
	h.mu.Lock()
	h.nextID++
	c.id = h.nextID
	h.conns[c.id] = c
	h.opened++
	h.mu.Unlock()
}

func (h *wsHub) unregister(c *wsConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range c.names {
		h.removeSub(name, c)
	}
	c.names = nil
	delete(h.conns, c.id)
	h.closes[c.reason]++
	if h.closed != nil {
		h.closed <- c.reason
	}
	h.log.Info("stream connection closed", "conn", c.id, "path", c.path, "reason", c.reason)
}

// subscribe adds names to c's subscriptions. It reports false, subscribing
// nothing, when c would hold more than MaxStreams streams.
func (h *wsHub) subscribe(c *wsConn, names []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	added := 0
	for i, name := range names {
		if !slices.Contains(c.names, name) && !slices.Contains(names[:i], name) {
			added++
		}
	}
	if h.cfg.MaxStreams > 0 && len(c.names)+added > h.cfg.MaxStreams {
		return false
	}
	for _, name := range names {
		if slices.Contains(c.names, name) {
			continue
		}
		c.names = append(c.names, name)
		if streamRoute(name)&c.route == 0 {
			continue // acknowledged on the wrong path: never delivers
		}
		set := h.subs[name]
		if set == nil {
			set = make(map[*wsConn]struct{})
			h.subs[name] = set
		}
		set[c] = struct{}{}
	}
	return true
}

func (h *wsHub) unsubscribe(c *wsConn, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		if i := slices.Index(c.names, name); i >= 0 {
			c.names = slices.Delete(c.names, i, i+1)
			h.removeSub(name, c)
		}
	}
}

// removeSub is called with mu held.
func (h *wsHub) removeSub(name string, c *wsConn) {
	if set := h.subs[name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.subs, name)
			delete(h.slow, name)
		}
	}
}

func (h *wsHub) listed(c *wsConn) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string{}, c.names...) // [] when empty, as the venue answers
}

// wsRequest is a client's control message.
type wsRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	ID     json.RawMessage `json:"id"`
}

// Binance's error codes for control messages.
const (
	errInvalidType    = 1 // a parameter of the wrong type
	errInvalidRequest = 2
	errInvalidJSON    = 3
)

// request handles one control message and returns the reply, or nil when
// the request closed the connection instead.
func (h *wsHub) request(c *wsConn, msg []byte) []byte {
	var req wsRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return errorReply(nil, errInvalidJSON, "Invalid JSON: "+err.Error())
	}
	id := req.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var params []string
	switch req.Method {
	case "SUBSCRIBE", "UNSUBSCRIBE":
		if err := json.Unmarshal(req.Params, &params); err != nil || len(params) == 0 {
			return errorReply(id, errInvalidType, "Invalid request: params must be a non-empty array of stream names")
		}
	case "LIST_SUBSCRIPTIONS":
	default:
		return errorReply(id, errInvalidRequest, fmt.Sprintf("Invalid request: unknown method %q", req.Method))
	}
	var result any
	switch req.Method {
	case "SUBSCRIBE":
		if !h.subscribe(c, params) {
			c.kill(closeStreams)
			return nil
		}
	case "UNSUBSCRIBE":
		h.unsubscribe(c, params)
	case "LIST_SUBSCRIPTIONS":
		result = h.listed(c)
	}
	b, _ := json.Marshal(struct {
		Result any             `json:"result"`
		ID     json.RawMessage `json:"id"`
	}{result, id})
	return b
}

func errorReply(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type e struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	b, _ := json.Marshal(struct {
		Error e               `json:"error"`
		ID    json.RawMessage `json:"id"`
	}{e{code, msg}, id})
	return b
}

// publish sends one event of stream name to its subscribers, serializing the
// payload only when someone listens and wrapping it at most once. Called
// with mu held.
func (h *wsHub) publish(name string, payload func() []byte) {
	set := h.subs[name]
	if len(set) == 0 {
		return
	}
	if until, ok := h.silenced[name]; ok {
		if h.now().Before(until) {
			return
		}
		delete(h.silenced, name)
	}
	data := payload()
	var combined []byte
	for c := range set {
		if c.bare {
			c.enqueue(data)
			continue
		}
		if combined == nil {
			combined = wrap(name, data)
		}
		c.enqueue(combined)
	}
}

// wrap builds a combined-stream frame.
func wrap(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+20)
	b = append(b, `{"stream":`...)
	b = appendString(b, name)
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// The slower depth streams, which merge the 100 ms events of their period.
var slowDepth = []struct {
	suffix string
	period int64 // ms
}{{"@depth", 250}, {"@depth@500ms", 500}}

// Depth fans a diff event out to the symbol's depth streams.
func (h *wsHub) Depth(u venue.DepthUpdate) {
	if h.hidden(u.Symbol) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.muted(u.Symbol) {
		return
	}
	if h.gaps[u.Symbol] > 0 {
		h.gaps[u.Symbol]--
		if h.gaps[u.Symbol] == 0 {
			delete(h.gaps, u.Symbol)
		}
		h.skipped++
		return
	}
	if h.garbled[u.Symbol] > 0 {
		h.garbled[u.Symbol]--
		if h.garbled[u.Symbol] == 0 {
			delete(h.garbled, u.Symbol)
		}
		// The same update ids, a price in exponent notation: a client must
		// refuse the event rather than apply or publish it.
		u.Bids = append([]venue.Level{{Price: "1e5", Size: "1"}}, u.Bids...)
	}
	lower := strings.ToLower(u.Symbol)
	E := h.now().UnixMilli()
	h.publish(lower+"@depth@100ms", func() []byte { return appendDepth(nil, u, E) })
	for _, s := range slowDepth {
		name := lower + s.suffix
		if len(h.subs[name]) == 0 {
			continue
		}
		a := h.slow[name]
		if a == nil {
			a = &depthAgg{}
			h.slow[name] = a
		}
		if merged, ok := a.add(u, s.period); ok {
			h.publish(name, func() []byte { return appendDepth(nil, merged, E) })
		}
	}
}

// Trade fans an aggregate trade out to the symbol's aggTrade stream.
func (h *wsHub) Trade(symbol string, tr venue.Trade) {
	if h.hidden(symbol) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.muted(symbol) {
		return
	}
	E := h.now().UnixMilli()
	h.publish(strings.ToLower(symbol)+"@aggTrade", func() []byte { return appendAggTrade(nil, symbol, tr, E) })
}

// Rows fans the ticker stream's rows out (see Tickers). The simulator's
// mark prices are not taken from its heartbeats: the hub publishes them on
// its own once-a-second clock, as the venue does (see runMarkPrices).
func (h *wsHub) Rows(rows venue.Rows) {
	if stats := rows.Stats(); stats != nil {
		h.Tickers(stats)
	}
}

// Tickers fans the changed rows out to !ticker@arr, leaving out delisted
// markets.
func (h *wsHub) Tickers(rows []venue.Stat) {
	kept := make([]venue.Stat, 0, len(rows))
	for _, r := range rows {
		if !h.hidden(r.Symbol) {
			kept = append(kept, r)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	kept = slices.DeleteFunc(kept, func(r venue.Stat) bool { return h.muted(r.Symbol) })
	if len(kept) == 0 {
		return
	}
	E := h.now().UnixMilli()
	h.publish("!ticker@arr", func() []byte { return appendTickers(nil, kept, E) })
}

// Live and Lost concern a client of the streams; the in-process streams the
// hub reads never lose their events.
func (h *wsHub) Live(snapshot.Stream, []string) {}
func (h *wsHub) Lost(snapshot.Stream, []string) {}

// depthAgg merges the 100 ms diff events of a slower depth stream's period.
type depthAgg struct {
	pending *venue.DepthUpdate
	due     int64 // ms: emit once an event at or after due arrives
}

// add merges u and reports the merged event when its period is over.
func (a *depthAgg) add(u venue.DepthUpdate, period int64) (venue.DepthUpdate, bool) {
	if a.pending == nil {
		first := u
		a.pending = &first
		a.due = (u.Time/period + 1) * period
	} else {
		*a.pending = mergeDepth(*a.pending, u)
	}
	if u.Time < a.due {
		return venue.DepthUpdate{}, false
	}
	out := *a.pending
	a.pending = nil
	return out, true
}

// mergeDepth merges two consecutive diff events into one: the first's U and
// pu, the second's u and time, and for each price the later size.
func mergeDepth(a, b venue.DepthUpdate) venue.DepthUpdate {
	return venue.DepthUpdate{
		Symbol: a.Symbol, First: a.First, Prev: a.Prev, Last: b.Last, Time: b.Time,
		Bids: mergeLevels(a.Bids, b.Bids), Asks: mergeLevels(a.Asks, b.Asks),
	}
}

// mergeLevels returns a's levels with b's sizes for the prices b changes
// again, followed by the prices only b changes. Neither input is modified.
func mergeLevels(a, b []venue.Level) []venue.Level {
	out := make([]venue.Level, len(a), len(a)+len(b))
	copy(out, a)
	at := make(map[string]int, len(a))
	for i, l := range a {
		at[l.Price] = i
	}
	for _, l := range b {
		if i, ok := at[l.Price]; ok {
			out[i].Size = l.Size
			continue
		}
		at[l.Price] = len(out)
		out = append(out, l)
	}
	return out
}

// appendDepth appends a depthUpdate payload as Binance sends it.
func appendDepth(b []byte, u venue.DepthUpdate, E int64) []byte {
	b = append(b, `{"e":"depthUpdate","E":`...)
	b = strconv.AppendInt(b, E, 10)
	b = append(b, `,"T":`...)
	b = strconv.AppendInt(b, u.Time, 10)
	b = append(b, `,"s":`...)
	b = appendString(b, u.Symbol)
	b = append(b, `,"U":`...)
	b = strconv.AppendInt(b, u.First, 10)
	b = append(b, `,"u":`...)
	b = strconv.AppendInt(b, u.Last, 10)
	b = append(b, `,"pu":`...)
	b = strconv.AppendInt(b, u.Prev, 10)
	b = append(b, `,"b":`...)
	b = appendLevels(b, u.Bids)
	b = append(b, `,"a":`...)
	b = appendLevels(b, u.Asks)
	return append(b, '}')
}

func appendLevels(b []byte, ls []venue.Level) []byte {
	b = append(b, '[')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendString(b, l.Price)
		b = append(b, ',')
		b = appendString(b, l.Size)
		b = append(b, ']')
	}
	return append(b, ']')
}

// appendAggTrade appends an aggTrade payload. The simulated venue's trades
// are not aggregated, so the first and last trade ids are the trade's own.
func appendAggTrade(b []byte, symbol string, tr venue.Trade, E int64) []byte {
	b = append(b, `{"e":"aggTrade","E":`...)
	b = strconv.AppendInt(b, E, 10)
	b = append(b, `,"s":`...)
	b = appendString(b, symbol)
	b = appendAggRow(append(b, ','), tr)
	return append(b, '}')
}

// appendAggRow appends the fields an aggTrade event and an aggTrades REST
// row share, without braces. m is true when the buyer was the maker: the
// taker sold.
func appendAggRow(b []byte, tr venue.Trade) []byte {
	b = append(b, `"a":`...)
	b = strconv.AppendInt(b, tr.ID, 10)
	b = append(b, `,"p":`...)
	b = appendString(b, tr.Price)
	b = append(b, `,"q":`...)
	b = appendString(b, tr.Size)
	b = append(b, `,"f":`...)
	b = strconv.AppendInt(b, tr.ID, 10)
	b = append(b, `,"l":`...)
	b = strconv.AppendInt(b, tr.ID, 10)
	b = append(b, `,"T":`...)
	b = strconv.AppendInt(b, tr.Time, 10)
	b = append(b, `,"m":`...)
	return strconv.AppendBool(b, tr.Sell)
}

// appendTickers appends a !ticker@arr payload. A row without a base volume
// leaves "v" out, as a venue that omits it would.
func appendTickers(b []byte, rows []venue.Stat, E int64) []byte {
	b = append(b, '[')
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"e":"24hrTicker","E":`...)
		b = strconv.AppendInt(b, E, 10)
		b = append(b, `,"s":`...)
		b = appendString(b, r.Symbol)
		b = append(b, `,"c":`...)
		b = appendString(b, r.LastPrice)
		b = append(b, `,"h":`...)
		b = appendString(b, r.High)
		b = append(b, `,"l":`...)
		b = appendString(b, r.Low)
		if r.BaseVolume != "" {
			b = append(b, `,"v":`...)
			b = appendString(b, r.BaseVolume)
		}
		b = append(b, `,"q":`...)
		b = appendString(b, r.QuoteVolume)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendString appends s as a JSON string. The venue's symbols and decimals
// are plain ASCII and copied as they are; anything else goes through
// encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Test switches.

// lineOf returns the line a client names in its User-Agent, as marketfeed
// does ("marketfeed (line B)"): the set of connections it runs beside
// another that carries the same streams. "" when it names none.
func lineOf(userAgent string) string {
	_, after, ok := strings.Cut(userAgent, "(line ")
	if !ok {
		return ""
	}
	line, _, ok := strings.Cut(after, ")")
	if !ok {
		return ""
	}
	return line
}

// drop cuts connection id, or every connection of line when line is not
// "", or every connection when both are zero, and returns how many it cut.
// With an outage, the stream endpoints refuse connections (503) for that
// long: what a client missed meanwhile, it missed.
func (h *wsHub) drop(id int64, line string, outage time.Duration) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if outage > 0 {
		h.refuseUntil = h.now().Add(outage)
	}
	n := 0
	for cid, c := range h.conns {
		if (id == 0 || id == cid) && (line == "" || line == c.line) {
			c.kill(closeDropped)
			n++
		}
	}
	return n
}

// setMaxAge makes the venue close every stream connection, those open and
// those opened later, when it reaches age, as -ws-max-age does: one already
// older is closed at once. After lasting (zero: until told otherwise) the
// configured age is in force again; an age of zero restores it now. This is
// a venue, or a proxy in front of it, whose connections live shorter than
// its clients expect.
func (h *wsHub) setMaxAge(age, lasting time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.age, h.ageUntil = age, time.Time{}
	if age > 0 && lasting > 0 {
		h.ageUntil = h.now().Add(lasting)
	}
	close(h.ageChanged)
	h.ageChanged = make(chan struct{})
}

// maxAge returns the connection age in force, when it lapses (zero: it
// does not), and a channel closed when another is set.
func (h *wsHub) maxAge() (age time.Duration, until time.Time, changed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.age > 0 && (h.ageUntil.IsZero() || h.now().Before(h.ageUntil)) {
		return h.age, h.ageUntil, h.ageChanged
	}
	return h.cfg.MaxAge, time.Time{}, h.ageChanged
}

// shutdown closes every connection as the server stops.
func (h *wsHub) shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.kill(closeShutdown)
	}
}

// wait returns once every connection's goroutines have ended; call it after
// shutdown.
func (h *wsHub) wait() { h.wg.Wait() }

// gap skips the symbol's next n depth events, so that the event after them
// does not chain (its pu is not the last u a client saw).
func (h *wsHub) gap(symbol string, n int) {
	h.mu.Lock()
	h.gaps[symbol] += n
	h.mu.Unlock()
}

// garble sends the symbol's next n depth events with an unusable price.
func (h *wsHub) garble(symbol string, n int) {
	h.mu.Lock()
	h.garbled[symbol] += n
	h.mu.Unlock()
}

// silence keeps stream name subscribed and acknowledged but delivers
// nothing on it for d.
func (h *wsHub) silence(name string, d time.Duration) {
	h.mu.Lock()
	h.silenced[name] = h.now().Add(d)
	h.mu.Unlock()
}

// muteSymbol keeps every stream of symbol subscribed and acknowledged but
// delivers nothing of the symbol for d: its depth and trade streams, and its
// rows in the all-market ticker array, while the same connections go on
// carrying every other symbol and the venue's book goes on moving. Binance
// has documented such incidents; nothing in the stream tells them from a
// quiet market.
func (h *wsHub) muteSymbol(symbol string, d time.Duration) {
	h.mu.Lock()
	h.mute[symbol] = h.now().Add(d)
	h.mu.Unlock()
}

// muted reports whether symbol's streams are silent now. Called with mu
// held.
func (h *wsHub) muted(symbol string) bool {
	until, ok := h.mute[symbol]
	if !ok {
		return false
	}
	if h.now().Before(until) {
		return true
	}
	delete(h.mute, symbol)
	return false
}

// wsConnStats is one connection in /_control/ws.
type wsConnStats struct {
	ID      int64  `json:"id"`
	Path    string `json:"path"`
	Line    string `json:"line,omitempty"`
	AgeMs   int64  `json:"age_ms"`
	Streams int    `json:"streams"`
	Queued  int    `json:"queued"`
}

// wsStats is what /_control/ws reports.
type wsStats struct {
	Connections   int              `json:"connections"`
	Opened        int64            `json:"opened"`
	Subscriptions int              `json:"subscriptions"`
	Sent          int64            `json:"messages_sent"`
	MaxAgeMs      int64            `json:"max_age_ms"` // the age at which connections are closed now
	SkippedDepth  int64            `json:"skipped_depth_events"`
	Closes        map[string]int64 `json:"closes"`
	Conns         []wsConnStats    `json:"conns"`
}

func (h *wsHub) stats() wsStats {
	age, _, _ := h.maxAge()
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	st := wsStats{Connections: len(h.conns), Opened: h.opened, Sent: h.sent.Load(),
		SkippedDepth: h.skipped, MaxAgeMs: age.Milliseconds(), Closes: make(map[string]int64, len(h.closes)), Conns: []wsConnStats{}}
	for k, v := range h.closes {
		st.Closes[k] = v
	}
	for _, c := range h.conns {
		st.Subscriptions += len(c.names)
		st.Conns = append(st.Conns, wsConnStats{c.id, c.path, c.line, now.Sub(c.opened).Milliseconds(), len(c.names), len(c.send)})
	}
	slices.SortFunc(st.Conns, func(a, b wsConnStats) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

// run feeds the hub from the venue's in-process streams, watching every
// listed symbol, until ctx is done.
func (h *wsHub) run(ctx context.Context, st venue.Streams, symbols []string) error {
	st.Watch(symbols)
	err := st.Run(ctx, h)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run venue streams: %w", err)
	}
	return nil
}
