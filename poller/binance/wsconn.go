package binance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"marketfeed/internal/backoff"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// wsConn is one websocket connection and the streams routed to it.
type wsConn struct {
	s    *Streams
	sl   *slot
	ws   *websocket.Conn
	pace pacer
	// opened is when the handshake completed: the venue counts the
	// connection's age from about then.
	opened time.Time
	done   chan struct{} // closed when the reader has ended
	err    error         // why the reader ended; read after done
	ended  time.Time     // when the reader ended; read after done
	// lend holds the reader's depth levels from frame to frame (see
	// decodeLent), and f the frame being handled, which handle gives the
	// rows' functions: a frame of the handler's own would escape through
	// them, an allocation a frame. Only the reader uses them.
	lend lender
	f    frame

	retired atomic.Bool // closed on purpose: report nothing
	broken  atomic.Bool // closed by its slot as broken: the venue did not close it
	// counted is set while the connection counts in
	// marketfeed_stream_connections: from its dial until its reader ends or
	// it is replaced.
	counted atomic.Bool
	// Once the connection is replaced, catchUpAt is when its replacement
	// was acknowledged (Unix ms; 0 before), and caughtUp is closed once it
	// has read an event stamped at or after that: what the venue had sent
	// it before is read (see slot.handOver).
	catchUpAt  atomic.Int64
	caughtUp   chan struct{}
	caughtOnce sync.Once
	// known is the decoder's early check for a copy (seen), held as a
	// func value so that handing it to the decoder allocates nothing, and
	// held what the check leaves locked for the frame's delivery (see
	// hold); routed is the route of the frame being handled, once looked
	// up (see routeOf). Only the reader uses them.
	known  knownFunc
	held   hold
	routed frameRoute

	// routes are the names subscribed (or being subscribed): replaced
	// whole under mu, which subscriptions change a few times a connection,
	// and read without it by the reader, once a frame.
	routes  atomic.Pointer[map[string]streamRef]
	mu      sync.Mutex
	pending map[int64]chan reply
}

// dial opens a connection to the slot's path and starts its reader, which
// runs until the connection closes: the library answers the venue's pings
// only while a read is in progress, so one read is always outstanding.
func (sl *slot) dial(ctx context.Context, sink venue.Sink) (*wsConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	o := sl.s.dialOpts()
	if o.HTTPClient == nil {
		o.HTTPClient = streamClient
	}
	ws, _, err := websocket.Dial(dctx, sl.url, &websocket.DialOptions{
		HTTPClient: o.HTTPClient,
		// The line is named for the venue's operators (and venuesim's
		// drops): two connections carrying the same streams are meant.
		HTTPHeader: http.Header{"User-Agent": {userAgent + " (line " + sl.line.name() + ")"}},
		// Compression stays off: over the recorded frames permessage-deflate
		// saves bytes on the wire but costs more CPU per frame than the
		// decoder does (see BenchmarkStreamCompression).
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	ws.SetReadLimit(maxFrame)
	c := &wsConn{
		s:        sl.s,
		sl:       sl,
		ws:       ws,
		pace:     pacer{every: time.Second / time.Duration(sl.s.preset.ControlPerSecond)},
		opened:   time.Now(),
		done:     make(chan struct{}),
		caughtUp: make(chan struct{}),
		pending:  make(map[int64]chan reply),
	}
	c.known = c.seen
	sl.s.met.conns.Add(1)
	c.counted.Store(true)
	// The slot waits for done before it returns, so this goroutine is owned
	// by Run like every other.
	go c.readLoop(sink)
	return c, nil
}

// streamReadBuffer is how many bytes a stream connection reads from its
// socket at once. The venue sends a heartbeat's events of every stream of a
// connection together, some hundred frames of a few hundred bytes to a
// kilobyte; the websocket library reads through a buffer of 4 KiB, a system
// call for every few frames, which cost about a twentieth of the feed's CPU
// at 846 pairs. Read 64 KiB at a time, a heartbeat's frames take a few.
const streamReadBuffer = 64 << 10

// streamClient opens the stream connections when no client is given: the
// default transport's, with each connection read through a buffer of
// streamReadBuffer bytes (beneath TLS, for wss://, so that a read takes
// several records).
var streamClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = readBuffered(t.DialContext)
	return &http.Client{Transport: t}
}()

// dialFunc is the dial of an http.Transport.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// readBuffered returns dial with each connection it opens read through a
// buffer of streamReadBuffer bytes.
func readBuffered(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &readBufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, streamReadBuffer)}, nil
	}
}

// readBufferedConn is a connection read through a buffer.
type readBufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readBufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// closeNow closes the connection without a handshake and waits for the
// reader; used when shutting down or abandoning a connection.
func (c *wsConn) closeNow() {
	c.retired.Store(true)
	_ = c.ws.CloseNow()
	<-c.done
}

// catchUp has c watch for an event stamped at or after at: it has then
// read what the venue sent it before at.
func (c *wsConn) catchUp(at time.Time) {
	c.catchUpAt.Store(max(at.UnixMilli(), 1))
}

// seen is c's known: whether the event was delivered already (see
// dedup.check), noting that c read an event stamped time. When it was not,
// c.held keeps the symbol's marks locked until the frame is delivered or
// its handling ends.
//
// The event's stream is routed here, once for the frame (see routeOf):
// when it is the symbol's stream of kind, the check goes to the marks its
// route holds, without looking the symbol up, and holds them for the
// routed symbol, which its delivery then names.
func (c *wsConn) seen(kind snapshot.Stream, name, symbol string, id, time int64) bool {
	c.reached(time)
	var m *marks
	if ref, ok := c.routeOf(name); ok && !ref.allMarket && ref.kind == kind && ref.symbol == symbol {
		symbol, m = ref.symbol, ref.marks
	}
	return c.s.dups.check(kind, symbol, m, id, time, &c.held)
}

// reached notes that c read an event stamped t (Unix ms).
func (c *wsConn) reached(t int64) {
	if at := c.catchUpAt.Load(); at != 0 && t >= at {
		c.caughtOnce.Do(func() { close(c.caughtUp) })
	}
}

// uncount takes c out of the connections in service, once: a connection
// being replaced is not counted beside its replacement, so that the count
// says how many slots are connected.
func (c *wsConn) uncount() {
	if c.counted.CompareAndSwap(true, false) {
		c.s.met.conns.Add(-1)
	}
}

// retire closes a replaced connection politely and waits for its reader.
func (c *wsConn) retire() {
	c.retired.Store(true)
	_ = c.ws.Close(websocket.StatusNormalClosure, "replaced")
	<-c.done
}

// reportLost reports every stream c carried as Lost, unless c was closed on
// purpose.
func (c *wsConn) reportLost(sink venue.Sink) {
	if c.retired.Load() {
		return
	}
	report(c.refs(), sink.Lost)
}

// refs returns what the streams routed to c stand for.
func (c *wsConn) refs() []streamRef {
	routes := c.routeTable()
	refs := make([]streamRef, 0, len(routes))
	for _, r := range routes {
		refs = append(refs, r)
	}
	return refs
}

func (c *wsConn) names() []string {
	routes := c.routeTable()
	names := make([]string, 0, len(routes))
	for n := range routes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (c *wsConn) route(name string) (streamRef, bool) {
	r, ok := c.routeTable()[name]
	return r, ok
}

// frameRoute is the route of a stream name, looked up for the frame being
// handled.
type frameRoute struct {
	name    string
	ref     streamRef
	ok, set bool
}

// routeOf returns the route of the frame being handled, named name: looked
// up the first time, by the early check of its event (seen) or by handle,
// and then reused. A depth frame's name is looked up once, and compared
// with itself after that, at the same address. handle clears it for each
// frame: the next frame's name is in the same buffer.
func (c *wsConn) routeOf(name string) (streamRef, bool) {
	r := &c.routed
	if !r.set || r.name != name {
		ref, ok := c.route(name)
		*r = frameRoute{name: name, ref: ref, ok: ok, set: true}
	}
	return r.ref, r.ok
}

// routeTable returns the routes now: a map never written again.
func (c *wsConn) routeTable() map[string]streamRef {
	if p := c.routes.Load(); p != nil {
		return *p
	}
	return nil
}

// reroute replaces the routes with a copy that change has changed.
func (c *wsConn) reroute(change func(routes map[string]streamRef)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := maps.Clone(c.routeTable())
	if next == nil {
		next = make(map[string]streamRef)
	}
	change(next)
	c.routes.Store(&next)
}

// routeTo routes each of names to the ref of its place in refs.
func (c *wsConn) routeTo(names []string, refs []streamRef) {
	c.reroute(func(routes map[string]streamRef) {
		for i, n := range names {
			routes[n] = refs[i]
		}
	})
}

func (c *wsConn) unroute(names []string) {
	c.reroute(func(routes map[string]streamRef) {
		for _, n := range names {
			delete(routes, n)
		}
	})
}

// subscribe routes names to c, so that events arriving before the
// acknowledgement are delivered, and sends SUBSCRIBE. A refusal unroutes
// them again.
func (c *wsConn) subscribe(ctx context.Context, names []string, refs []streamRef) (reply, error) {
	c.routeTo(names, refs)
	r, err := c.request(ctx, "SUBSCRIBE", names)
	if err == nil && !r.ok {
		c.unroute(names)
	}
	return r, err
}

// Errors of a control message that got no answer.
var (
	errConnClosed = errors.New("connection closed")
	errNoReply    = errors.New("no reply in time")
)

// request sends one control message, paced, and waits for its reply.
func (c *wsConn) request(ctx context.Context, method string, names []string) (reply, error) {
	id := c.s.nextID.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.pace.wait(ctx); err != nil {
		return reply{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	if err := c.ws.Write(wctx, websocket.MessageText, encodeControl(method, names, id)); err != nil {
		return reply{}, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		return reply{}, fmt.Errorf("await %s reply: %w", method, errConnClosed)
	case <-wctx.Done():
		if err := ctx.Err(); err != nil {
			return reply{}, err
		}
		return reply{}, fmt.Errorf("await %s reply: %w", method, errNoReply)
	}
}

// readLoop reads until the connection closes, delivering events to sink
// and replies to the requests waiting for them.
//
// Frames are read into one buffer the connection reuses (what handle
// decodes of a frame is lent until the next: see decodeLent), and a read
// takes no context: the library hooks a
// cancellable context's end anew for every read, two allocations a frame,
// thousands a second over hundreds of pairs. Nothing is lost by it: the
// connection is closed when its slot or Run ends (closeNow, retire), which
// ends a read in progress as the context would.
func (c *wsConn) readLoop(sink venue.Sink) {
	defer close(c.done)
	defer func() { c.ended = time.Now() }()
	defer c.uncount()
	var buf bytes.Buffer
	for {
		_, r, err := c.ws.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.s.met.badFrames.Inc()
			}
			c.err = err
			return
		}
		c.handle(buf.Bytes(), sink)
	}
}

// handle routes one frame. Events of streams not routed to c (an
// unsubscription in flight, a stream never asked for) are counted as
// unknown and dropped. An event is checked, told from the other line's
// copy, counted and delivered by its stream's row (see kinds.go), so
// nothing here asks which stream it came on.
func (c *wsConn) handle(b []byte, sink venue.Sink) {
	// What the frame decodes to is lent: b's bytes and c.lend's levels,
	// valid until the next frame, so nothing here keeps any of it, and the
	// sink copies what it keeps of a depth event (venue.DepthUpdate).
	f := &c.f
	var err error
	c.routed = frameRoute{}
	*f, err = decodeLent(b, c.known, &c.lend)
	// The decoder's check may have left the event's symbol locked for its
	// delivery (see hold); whatever path the frame takes from here, the
	// lock is not kept past it.
	defer c.held.release()
	m := c.s.met
	if err == nil && f.kind == frameReply {
		c.answer(f.reply)
		return
	}
	if err == errDuplicate {
		m.duplicates.Inc()
		return
	}
	if err != nil && f.name == "" {
		m.badFrames.Inc()
		c.s.warn("bad frame", "unusable market stream frame", "bytes", len(b), "err", err)
		return
	}
	ref, ok := c.routeOf(f.name)
	switch {
	case !ok || f.kind == frameUnknown:
		m.unknownEvents.Inc()
	case ref.allMarket:
		c.wholeMarketFrame(ref.whole, f, err, len(b), sink)
	default:
		c.pairEvent(ref, f, err, sink)
	}
}

// answer hands a reply to the request waiting for it; a reply no request
// waits for is counted as unknown.
func (c *wsConn) answer(r reply) {
	c.mu.Lock()
	ch := c.pending[r.id]
	delete(c.pending, r.id)
	c.mu.Unlock()
	if ch == nil {
		c.s.met.unknownEvents.Inc()
		return
	}
	ch <- r
}

// pairEvent delivers an event of a symbol's stream ref, read with err,
// unless another line delivered it first. An event that cannot be used,
// or that names another symbol than its stream's, spoils the stream.
func (c *wsConn) pairEvent(ref streamRef, f *frame, err error, sink venue.Sink) {
	sym, id, at := kindOf(ref.kind).event(f)
	if err == nil && sym != ref.symbol {
		err = badData("event symbol does not match its stream")
	}
	if err != nil {
		// The venue and the sink hear of it without the symbol held.
		c.held.release()
		c.spoil(ref, f.name, err, sink)
		return
	}
	c.reached(at)
	// Events count once, when delivered; copies another line delivered
	// first count as duplicates.
	if c.s.dups.deliver(ref.kind, ref.symbol, ref.marks, id, at, f, sink, &c.held) {
		c.s.met.events[ref.kind].Inc()
	} else {
		c.s.met.duplicates.Inc()
	}
}

// spoil answers an event of ref's stream, named name, that could not be
// used (err says why): the stream is out of sequence now, so it is
// reported Spoiled and Lost and subscribed again, and the poller resyncs
// it once it is acknowledged again.
func (c *wsConn) spoil(ref streamRef, name string, err error, sink venue.Sink) {
	c.s.met.badFrames.Inc()
	c.s.warn("bad event "+ref.kind.String(), "unusable market stream event; resubscribing",
		"symbol", ref.symbol, "stream", ref.kind.String(), "err", err)
	if sp, ok := sink.(venue.SpoiledSink); ok {
		sp.Spoiled(ref.kind, []string{ref.symbol})
	}
	sink.Lost(ref.kind, []string{ref.symbol})
	c.sl.resubscribe(strings.Clone(name))
}

// wholeMarketFrame delivers a frame of the whole-market stream w (its row
// of wholeMarket), size bytes read with err, unless one as new was
// delivered: the other line's copy, or a late frame.
func (c *wsConn) wholeMarketFrame(w int, f *frame, err error, size int, sink venue.Sink) {
	// A frame whose data read as a symbol's depth event may hold that
	// symbol (see hold); a whole-market frame has nothing to deliver there.
	c.held.release()
	row, m := &wholeMarket[w], c.s.met
	if err != nil {
		m.badFrames.Inc()
		c.s.warn("bad event "+row.doc.String(), "unusable "+row.what+" frame", "bytes", size, "err", err)
		return
	}
	at := row.newest(f)
	c.reached(at)
	if !c.s.dups.newer(w, at) {
		m.duplicates.Inc()
		return
	}
	m.wholeEvents[w].Inc()
	row.deliver(sink, f)
}

// pacer spaces one connection's control messages at least every apart, so
// that the venue never counts more than the preset's ControlPerSecond.
// Only the slot's goroutine sends on a connection, so it needs no lock.
type pacer struct {
	every time.Duration
	next  time.Time
}

func (p *pacer) wait(ctx context.Context) error {
	now := time.Now()
	if d := p.next.Sub(now); d > 0 {
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
		now = p.next
	}
	p.next = now.Add(p.every)
	return nil
}

// reconnects is the back-off of a connection's retries: from backoffMin to
// backoffMax, jittered so that connections that failed together do not
// come back together.
func reconnects() backoff.Retries {
	return backoff.Retries{Exponential: backoff.Exponential{Base: backoffMin, Max: backoffMax}}
}
