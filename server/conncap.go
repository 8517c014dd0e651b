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
			capped := &cappedConn{Conn: c, l: l, peer: tcpPeer(c.RemoteAddr())}
			// The first request's read timeout counts from the connection.
			capped.read.wantAt(monotonic() + l.timeouts.read)
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
// monotonic clock after each write.
//
// Its timeouts are fasthttp's: the first request's read timeout counts from
// the connection; a request's read timeout from its first bytes (taken as
// the read after them, which follows at once, and only when the request
// did not come whole in one read: most never need the deadline); the write
// timeout from the end of the answer's handling (the handler's end, or the
// write itself when fasthttp answers an unreadable request on its own); the
// idle timeout from the end of the last write. Each is applied coarsely
// (see deadline). A pipelined request that comes partly in the read after
// an answer, or a body sent after a 100 Continue, is read under the idle
// timeout until its next read: no longer than an idle connection is held.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
	peer netip.Addr // the TCP peer (see tcpPeer), for the rate limit

	read, write deadline

	// Where the connection is between requests: only the goroutine serving
	// it touches these, in its reads, its writes and the handler.
	reading   bool  // a request's first bytes came, and no answer was written since
	requestAt int64 // monotonic ns the request being read went on past its first read; 0: it has not
	answerAt  int64 // monotonic ns the answer being written was ready; 0: no handler ran for it
}

// answered records that the handler finished the connection's answer at
// at (monotonic ns; see monotonic): its write timeout counts from then.
func (c *cappedConn) answered(at int64) { c.answerAt = at }

// SetDeadline, SetReadDeadline and SetWriteDeadline record the deadline;
// the next Read or Write applies it (see deadline). It holds until the
// connection's own timeouts move on: fasthttp, with its own off, sets none.
func (c *cappedConn) SetDeadline(t time.Time) error {
	c.read.want(t)
	c.write.want(t)
	return nil
}

func (c *cappedConn) SetReadDeadline(t time.Time) error {
	c.read.want(t)
	return nil
}

func (c *cappedConn) SetWriteDeadline(t time.Time) error {
	c.write.want(t)
	return nil
}

func (c *cappedConn) Read(p []byte) (int, error) {
	if c.reading && c.requestAt == 0 {
		// The request goes on past the read of its first bytes, just
		// before this one: its read timeout counts from now.
		c.requestAt = monotonic()
		c.read.wantAt(c.requestAt + c.l.timeouts.read)
	}
	if err := c.read.apply(c.Conn.SetReadDeadline, c.l.timeouts.slack); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 && !c.reading {
		c.reading, c.requestAt, c.answerAt = true, 0, 0
	}
	return n, err
}

func (c *cappedConn) Write(p []byte) (int, error) {
	if c.answerAt == 0 {
		c.answerAt = monotonic() // no handler ran: fasthttp answers on its own
	}
	c.write.wantAt(c.answerAt + c.l.timeouts.write)
	if err := c.write.apply(c.Conn.SetWriteDeadline, c.l.timeouts.slack); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	c.reading = false
	c.read.wantAt(monotonic() + c.l.timeouts.idle)
	return n, err
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
