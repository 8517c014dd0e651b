package server

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
)

// TestDeadlineCoalesced: a deadline asked for is applied by the next read
// or write, slack late at most and never early; one asked for within the
// slack of the one applied costs nothing; an earlier one, or none, is
// applied at once.
func TestDeadlineCoalesced(t *testing.T) {
	const slack = 500 * time.Millisecond
	var applied []time.Time
	set := func(t time.Time) error {
		applied = append(applied, t)
		return nil
	}
	var d deadline
	apply := func(want time.Time, wantApplied ...time.Time) {
		t.Helper()
		applied = nil
		d.want(want)
		if err := d.apply(set, int64(slack)); err != nil {
			t.Fatal(err)
		}
		if len(applied) != len(wantApplied) || (len(applied) == 1 && !applied[0].Equal(wantApplied[0])) {
			t.Errorf("deadline %v: applied %v, want %v", want, applied, wantApplied)
		}
	}
	at := t0.Add(5 * time.Second)
	apply(at, at.Add(slack))                                              // the first: slack late
	apply(at.Add(100 * time.Millisecond))                                 // within the slack: kept
	apply(at.Add(slack))                                                  // at its edge: kept
	apply(at.Add(slack+time.Nanosecond), at.Add(2*slack+time.Nanosecond)) // past it: moved
	apply(at.Add(-time.Second), at.Add(-time.Second+slack))               // earlier: moved back
	apply(time.Time{}, time.Time{})                                       // none: cleared exactly
	apply(time.Time{})                                                    // still none: nothing to do

	// Asked for and not yet applied: only the last one counts.
	applied = nil
	d.want(at)
	d.want(at.Add(time.Hour))
	if err := d.apply(set, int64(slack)); err != nil || len(applied) != 1 || !applied[0].Equal(at.Add(time.Hour+slack)) {
		t.Errorf("two deadlines asked for, then a read: applied %v (%v), want %v", applied, err, at.Add(time.Hour+slack))
	}
}

// scriptConn is a connection whose reads return the script's chunks in
// turn, and which records the deadlines set on it.
type scriptConn struct {
	net.Conn
	reads          [][]byte
	readDeadlines  []time.Time
	writeDeadlines []time.Time
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.reads) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.reads[0])
	c.reads = c.reads[1:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *scriptConn) SetReadDeadline(t time.Time) error {
	c.readDeadlines = append(c.readDeadlines, t)
	return nil
}
func (c *scriptConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadlines = append(c.writeDeadlines, t)
	return nil
}
func (c *scriptConn) Close() error { return nil }
func (c *scriptConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
}

// oneConnListener hands out one connection.
type oneConnListener struct {
	net.Listener
	c net.Conn
}

func (l *oneConnListener) Accept() (net.Conn, error) { return l.c, nil }

// TestConnKeepsTheTimeouts: with fasthttp's timeouts off, the connection
// keeps them, told by fasthttp's ConnState where its request loop is: the
// first request's read timeout counts from the connection, however many
// reads it takes; a later request's from just after its first bytes (the
// first read or write after them, when it does not come whole), every read
// of it under that timeout, including those after a write within it (a
// 100 Continue, or pipelined answers flushed); the write timeout from the
// handler's end, or the write for one no handler made; the idle timeout
// from the end of the answer. Each applied slack late, never early; none
// moved for a read or write that finds its deadline in range. A deadline
// set from outside is the connection's from then on.
func TestConnKeepsTheTimeouts(t *testing.T) {
	const (
		read, write, idle = 5 * time.Second, 7 * time.Second, 60 * time.Second
		slack             = 500 * time.Millisecond
	)
	sc := &scriptConn{reads: [][]byte{
		[]byte("GET /api/public/pairs HTTP/1.1\r\n"), // the first request, in two reads
		[]byte("Host: x\r\n\r\n"),
		[]byte("GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"), // a second, whole
		[]byte("POST /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"),
		[]byte("{}"), // its body, after the 100 Continue
		[]byte("GET /api/public/pairs HTTP/1.1\r\n"), // a fourth, in three reads
		[]byte("Host: x\r\n"),
		[]byte("\r\n"),
	}}
	l := newCapListener(&oneConnListener{c: sc}, 10, metrics.NewSet().NewCounter("refused"),
		connTimeouts{read: int64(read), write: int64(write), idle: int64(idle), slack: int64(slack)})
	// now returns the connections' clock before and after f runs.
	now := func(f func()) (before, after time.Time) {
		before = clockBase.Add(time.Duration(monotonic()))
		f()
		return before, clockBase.Add(time.Duration(monotonic()))
	}
	// counts checks that a deadline counts d from a time in [from, to]:
	// at is that time plus d, or (applied) up to slack later.
	counts := func(what string, at, from, to time.Time, d time.Duration) {
		t.Helper()
		if at.Before(from.Add(d)) || at.After(to.Add(d+slack)) {
			t.Errorf("%s: deadline %v, want %v after a time in [%v, %v], up to %v later", what, at, d, from, to, slack)
		}
	}
	last := func(what string, applied []time.Time) time.Time {
		t.Helper()
		if len(applied) == 0 {
			t.Fatalf("%s: no deadline applied", what)
		}
		return applied[len(applied)-1]
	}
	wanted := func(d *deadline) time.Time { return clockBase.Add(time.Duration(d.wanted.Load())) }
	buf := make([]byte, 1024)
	var c *cappedConn
	readOne := func() {
		t.Helper()
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	writeOne := func(s string) {
		t.Helper()
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// handled runs a request's handler and writes its answer, and checks
	// that the answer's write timeout counts from the handler's end.
	handled := func(what string) {
		t.Helper()
		end := monotonic()
		c.answered(end)
		writeOne("HTTP/1.1 200 OK\r\n\r\n")
		if got := wanted(&c.write); !got.Equal(clockBase.Add(time.Duration(end) + write)) {
			t.Errorf("%s: write deadline %v, want the write timeout from the handler's end", what, got)
		}
		counts(what+", applied", last(what, sc.writeDeadlines), clockBase.Add(time.Duration(end)), clockBase.Add(time.Duration(end)), write)
	}
	// idles ends a request as fasthttp does, checks that the wait for the
	// next counts from then, and returns when it was.
	idles := func(what string) (from, to time.Time) {
		t.Helper()
		from, to = now(func() { connState(c, fasthttp.StateIdle) })
		counts(what, wanted(&c.read), from, to, idle)
		return from, to
	}

	// The first request: under way from the connection, fasthttp's
	// StateActive before its first read.
	from, to := now(func() {
		nc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c = nc.(*cappedConn)
	})
	connState(c, fasthttp.StateActive)
	readOne()
	counts("the first request", last("the first request", sc.readDeadlines), from, to, read)
	readOne()
	counts("the rest of the first request", wanted(&c.read), from, to, read)
	if len(sc.readDeadlines) != 1 {
		t.Errorf("the rest of the first request moved its read deadline: %v", sc.readDeadlines)
	}
	handled("the first answer")
	from, to = idles("after the first answer")

	// The second: its first read waits under the idle timeout; it comes
	// whole, and its read timeout is never taken.
	readOne()
	counts("waiting for the second request", last("waiting", sc.readDeadlines), from, to, idle)
	connState(c, fasthttp.StateActive)
	if c.requestAt != 0 {
		t.Error("a request that came whole took the time for its read timeout")
	}
	applied := len(sc.writeDeadlines)
	handled("the second answer")
	if len(sc.writeDeadlines) != applied {
		t.Errorf("the second answer moved the write deadline, within the slack of the first: %v", sc.writeDeadlines[applied:])
	}
	idles("after the second answer")

	// The third comes whole but for its body, which fasthttp reads after
	// writing a 100 Continue: under the read timeout from that write.
	readOne()
	connState(c, fasthttp.StateActive)
	from, to = now(func() { writeOne("HTTP/1.1 100 Continue\r\n\r\n") })
	counts("a 100 Continue, written by no handler", wanted(&c.write), from, to, write)
	readOne()
	counts("the body after a 100 Continue", last("the body", sc.readDeadlines), from, to, read)
	handled("the third answer")
	idles("after the third answer")

	// The fourth comes in three reads: its read timeout counts from the
	// second, which moves the deadline back; the third moves nothing.
	readOne()
	connState(c, fasthttp.StateActive)
	from, to = now(readOne)
	counts("the rest of the fourth request", last("the fourth", sc.readDeadlines), from, to, read)
	applied = len(sc.readDeadlines)
	readOne()
	if len(sc.readDeadlines) != applied {
		t.Errorf("more of the same request moved its read deadline: %v", sc.readDeadlines[applied:])
	}

	// An answer no handler made (fasthttp's own, for a request it could
	// not read): its write timeout counts from the write.
	from, to = now(func() { writeOne("HTTP/1.1 408 Request Timeout\r\n\r\n") })
	counts("an answer no handler made", wanted(&c.write), from, to, write)

	// A deadline set from outside (a hijacker's) holds: the connection
	// keeps none of its own from then on.
	set := clockBase.Add(time.Duration(monotonic()) + time.Hour)
	if err := c.SetDeadline(set); err != nil {
		t.Fatal(err)
	}
	c.answered(monotonic())
	writeOne("HTTP/1.1 200 OK\r\n\r\n")
	connState(c, fasthttp.StateIdle)
	connState(c, fasthttp.StateActive)
	_, _ = c.Read(buf) // the script is done: EOF
	writeOne("more")
	if r, w := last("read", sc.readDeadlines), last("write", sc.writeDeadlines); !r.Equal(set.Add(slack)) || !w.Equal(set.Add(slack)) {
		t.Errorf("a deadline set from outside: read %v, write %v applied, want %v", r, w, set.Add(slack))
	}
}
