package server

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
)

// capListener holds the number of open connections at max. A connection over
// the cap is answered at once with a 503 in the API's own error format and
// closed, rather than queued: a flood of idle or slow connections must not
// make a normal client wait, and a refused client must be able to read why.
// fasthttp's own limit would answer in plain text, so it is set above this
// one and never reached.
type capListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused *metrics.Counter
	// refusing bounds the goroutines that write refusals: past it, an
	// over-the-cap connection is closed without an answer, so a connection
	// flood cannot turn refusals into its own pile of goroutines.
	refusing chan struct{}

	// The listener owns its refusal goroutines: stop closes the connections
	// they hold and waits for every one of them to return.
	refusals sync.WaitGroup
	mu       sync.Mutex
	stopped  bool
	held     map[net.Conn]struct{} // connections being refused

	// timeouts are the connections' timeouts and how late they may fire
	// (see cappedConn).
	timeouts connTimeouts
}

// connTimeouts are a connection's read, write and idle timeouts, and the
// slack by which each may fire late (see deadline), in ns.
type connTimeouts struct{ read, write, idle, slack int64 }

// refusalTimeout bounds the time spent answering a refused connection.
const refusalTimeout = time.Second

// refusal is the whole answer to a connection over the cap.
var refusal = func() []byte {
	body := `{"code":"OVERLOADED","message":"the server has too many open connections; retry after the number of seconds in Retry-After"}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"Access-Control-Allow-Origin: *\r\n" +
		"Cache-Control: no-store\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func newCapListener(ln net.Listener, max int, refused *metrics.Counter, timeouts connTimeouts) *capListener {
	return &capListener{Listener: ln, max: int64(max), refused: refused,
		refusing: make(chan struct{}, 64), held: make(map[net.Conn]struct{}), timeouts: timeouts}
}

// Accept returns the next connection within the cap, answering and closing
// those over it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			// The first request is under way from the connection: its
			// read timeout counts from now, whenever its first bytes come.
			now := monotonic()
			capped := &cappedConn{Conn: c, l: l, peer: tcpPeer(c.RemoteAddr()), reading: true, requestAt: now}
			capped.read.wantAt(now + l.timeouts.read)
			return capped, nil
		}
		l.open.Add(-1)
		l.refused.Inc()
		select {
		case l.refusing <- struct{}{}:
			if !l.hold(c) {
				<-l.refusing
				_ = c.Close()
				continue
			}
			l.refusals.Go(func() { l.refuse(c) })
		default:
			_ = c.Close()
		}
	}
}

// hold records a connection about to be refused, unless the listener is
// stopped: then no refusal goroutine may start, since stop may have
// finished waiting for them.
func (l *capListener) hold(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.held[c] = struct{}{}
	return true
}

// stop ends every refusal in progress, by closing its connection rather
// than waiting out refusalTimeout, and returns once their goroutines have.
// It is for after the listener is closed: no connection is refused later.
func (l *capListener) stop() {
	l.mu.Lock()
	l.stopped = true
	for c := range l.held {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.refusals.Wait()
}

// refuse writes the 503, then reads what the client sent until it closes or
// the deadline passes: closing with unread data would reset the connection
// and could destroy the answer before the client reads it.
func (l *capListener) refuse(c net.Conn) {
	defer func() { <-l.refusing }()
	defer func() {
		l.mu.Lock()
		delete(l.held, c)
		l.mu.Unlock()
		_ = c.Close()
	}()
	_ = c.SetDeadline(time.Now().Add(refusalTimeout))
	if _, err := c.Write(refusal); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, maxHeaderSize+maxBodySize))
}

// cappedConn gives its place back when closed, once. It also keeps the
// connection's read, write and idle timeouts itself, in place of fasthttp's
// (which the server turns off): fasthttp read the clock for each of its
// three deadlines of every request, about 110 ns of a full book's 2 µs of
// user CPU, where the connection can take its times from the answer's
// handling, which has read the clock already, and one reading of the
// monotonic clock when the answer is done.
//
// Its timeouts are fasthttp's, and where each counts from follows
// fasthttp's own request loop, which tells the connection where it is
// (see connState): the first request's read timeout counts from the
// connection; a later request's from its first bytes (taken as the first
// read or write after them, which follows at once, and only when the
// request did not come whole in the read of its first bytes: most never
// need the deadline). Every read of a request, including those after a
// write within it (the rest of a pipelined request, once the answers
// before it are flushed; a body sent after a 100 Continue), waits under
// its read timeout. The write timeout counts from the end of the answer's
// handling (the handler's end, or the write itself for what fasthttp
// writes on its own: an answer to a request it could not read, a 100
// Continue, pipelined answers it flushes); the idle timeout from the end
// of the last answer. Each is applied coarsely (see deadline).
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
	peer netip.Addr // the TCP peer (see tcpPeer), for the rate limit

	read, write deadline
	// handedOver: a deadline was set from outside (SetDeadline and the
	// like), and the connection keeps no timeouts of its own from then
	// on, which would overwrite it at the next read or write. fasthttp
	// does this only when a handler hijacks the connection, which none
	// does: the hijacker then owns its deadlines, as with fasthttp's.
	handedOver atomic.Bool

	// Where the connection is in fasthttp's loop: only the goroutine
	// serving it touches these, in its reads, its writes, the handler and
	// connState.
	reading   bool  // a request is under way (fasthttp's StateActive), from the connection until its answer
	requestAt int64 // monotonic ns its read timeout counts from; 0: not yet taken
	answerAt  int64 // monotonic ns its answer was ready; 0: no handler has finished it
}

// answered records that the handler finished the connection's answer at
// at (monotonic ns; see monotonic): its write timeout counts from then.
func (c *cappedConn) answered(at int64) { c.answerAt = at }

// connState is fasthttp's ConnState hook: it tells a connection where it
// is in fasthttp's request loop, which is what its timeouts count from
// (see cappedConn). fasthttp calls it for StateActive and StateIdle from
// the goroutine serving the connection.
func connState(nc net.Conn, st fasthttp.ConnState) {
	c, ok := nc.(*cappedConn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateActive:
		// A request's first bytes came (the first request's counts from
		// the connection, as Accept set it).
		if !c.reading {
			c.reading, c.requestAt, c.answerAt = true, 0, 0
		}
	case fasthttp.StateIdle:
		// The answer is written (or left in the buffer before the next
		// request, already there): the wait for another counts from now.
		c.reading, c.requestAt, c.answerAt = false, 0, 0
		if !c.handedOver.Load() {
			c.read.wantAt(monotonic() + c.l.timeouts.idle)
		}
	}
}

// SetDeadline, SetReadDeadline and SetWriteDeadline record the deadline,
// which the next Read or Write applies (see deadline), and hand the
// connection's deadlines over for good (see handedOver).
func (c *cappedConn) SetDeadline(t time.Time) error {
	c.handedOver.Store(true)
	c.read.want(t)
	c.write.want(t)
	return nil
}

func (c *cappedConn) SetReadDeadline(t time.Time) error {
	c.handedOver.Store(true)
	c.read.want(t)
	return nil
}

func (c *cappedConn) SetWriteDeadline(t time.Time) error {
	c.handedOver.Store(true)
	c.write.want(t)
	return nil
}

// goesOn starts the read timeout of the request under way at now, when it
// goes on past the read of its first bytes.
func (c *cappedConn) goesOn(now int64) {
	c.requestAt = now
	if !c.handedOver.Load() {
		c.read.wantAt(now + c.l.timeouts.read)
	}
}

func (c *cappedConn) Read(p []byte) (int, error) {
	if c.reading && c.requestAt == 0 {
		c.goesOn(monotonic())
	}
	if err := c.read.apply(c.Conn.SetReadDeadline, c.l.timeouts.slack); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *cappedConn) Write(p []byte) (int, error) {
	if !c.handedOver.Load() {
		at := c.answerAt
		if at == 0 {
			// No handler finished this answer: fasthttp writes on its
			// own, within a request (a 100 Continue, the answers before
			// it flushed while it waits for the rest) or after one it
			// could not read. Kept local: the request's own answer
			// counts from its handler's end.
			at = monotonic()
			if c.reading && c.requestAt == 0 {
				c.goesOn(at)
			}
		}
		c.write.wantAt(at + c.l.timeouts.write)
	}
	if err := c.write.apply(c.Conn.SetWriteDeadline, c.l.timeouts.slack); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// clockBase is the origin of the connections' clock: see monotonic.
var clockBase = time.Now()

// monotonic returns the time on the connections' clock, in ns since
// clockBase: the monotonic clock alone, which costs about half of what
// time.Now does (the wall clock as well). A deadline on it is applied as
// clockBase plus it, which keeps clockBase's monotonic reading.
func monotonic() int64 { return int64(time.Since(clockBase)) }

// deadline is one direction's deadline of a connection, applied lazily and
// coarsely. The connection asks for a deadline for every request (idle,
// read, write), each a timer moved in the runtime's poller: a large part of
// a small answer's user CPU, for deadlines that almost never fire. So a
// deadline asked for is only recorded; the next Read or Write applies it,
// and only when the connection's deadline is not already at most slack
// after it: when it is set, it is set slack late, so that the requests of
// the next slack on a busy connection find it in range. A request's read
// deadline is thus never applied when the whole request came in one read,
// the common case.
//
// A deadline then fires between the time asked for and slack later, never
// earlier; a zero time (no deadline) is applied exactly. want may be
// called from any goroutine; apply only from the one that reads (or
// writes). A deadline set to interrupt a Read already blocked would not
// interrupt it: nothing does that to these connections (fasthttp and
// Shutdown close a connection to end it).
type deadline struct {
	wanted atomic.Int64 // monotonic ns (see monotonic); 0: none
	set    int64        // what the connection has, monotonic ns; 0: none
}

func (d *deadline) want(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = int64(t.Sub(clockBase))
	}
	d.wanted.Store(ns)
}

// wantAt asks for a deadline at ns on the connections' clock.
func (d *deadline) wantAt(ns int64) { d.wanted.Store(ns) }

func (d *deadline) apply(set func(time.Time) error, slack int64) error {
	w := d.wanted.Load()
	switch {
	case w == d.set:
		return nil
	case w != 0 && d.set >= w && d.set-w <= slack:
		return nil // fires within slack of w, not before it
	}
	t, target := time.Time{}, int64(0)
	if w != 0 {
		target = w + slack
		t = clockBase.Add(time.Duration(target))
	}
	if err := set(t); err != nil {
		return err
	}
	d.set = target
	return nil
}

func (c *cappedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
