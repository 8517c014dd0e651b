package server

import (
	"io"
	"net"
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

	// slack is how late a connection's deadlines may fire, in ns: see
	// deadline.
	slack int64
}

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

func newCapListener(ln net.Listener, max int, refused *metrics.Counter, slack time.Duration) *capListener {
	return &capListener{Listener: ln, max: int64(max), refused: refused,
		refusing: make(chan struct{}, 64), held: make(map[net.Conn]struct{}), slack: int64(slack)}
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
			return &cappedConn{Conn: c, l: l}, nil
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

// cappedConn gives its place back when closed, once. It also coalesces
// the deadlines fasthttp sets on every request: see deadline.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once

	read, write deadline
}

// SetDeadline, SetReadDeadline and SetWriteDeadline record the deadline;
// the next Read or Write applies it (see deadline).
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
	if err := c.read.apply(c.Conn.SetReadDeadline, c.l.slack); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *cappedConn) Write(p []byte) (int, error) {
	if err := c.write.apply(c.Conn.SetWriteDeadline, c.l.slack); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// deadline is one direction's deadline of a connection, applied lazily and
// coarsely. fasthttp sets three deadlines a request on a keep-alive
// connection (idle, read, write), each a timer moved in the runtime's
// poller: a large part of a small answer's user CPU, for deadlines that
// almost never fire. So a deadline asked for is only recorded; the next
// Read or Write applies it, and only when the connection's deadline is not
// already at most slack after it: when it is set, it is set slack late, so
// that the requests of the next slack on a busy connection find it in
// range. A read deadline asked for after a request's first bytes arrived
// (fasthttp's ReadTimeout) is thus never applied when the whole request
// came in one read, the common case, and is applied, to its own time, when
// the request comes in pieces.
//
// A deadline then fires between the time asked for and slack later, never
// earlier; a zero time (no deadline) is applied exactly. want may be
// called from any goroutine; apply only from the one that reads (or
// writes). A deadline set to interrupt a Read already blocked would not
// interrupt it: nothing does that to these connections (fasthttp and
// Shutdown close a connection to end it).
type deadline struct {
	wanted atomic.Int64 // Unix ns; 0: none
	set    int64        // what the connection has, Unix ns; 0: none
}

func (d *deadline) want(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	d.wanted.Store(ns)
}

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
		t = time.Unix(0, target)
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
