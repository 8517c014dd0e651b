package server

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
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
// keeps them: the first request's read timeout from the connection, the
// write timeout from the handler's end (or the write, for an answer no
// handler made), the idle timeout from the end of the last write, and a
// request's read timeout from just after its first bytes when it does not
// come in one read. Each applied slack late, never early; none moved for a
// read or write that finds its deadline in range.
func TestConnKeepsTheTimeouts(t *testing.T) {
	const (
		read, write, idle = 5 * time.Second, 7 * time.Second, 60 * time.Second
		slack             = 500 * time.Millisecond
	)
	sc := &scriptConn{reads: [][]byte{
		[]byte("GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /api/public/pairs HTTP/1.1\r\n"),
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
	// within checks that the connection's deadline (the last applied)
	// fires d after a time in [from, to], or up to slack later.
	within := func(what string, got []time.Time, from, to time.Time, d time.Duration) {
		t.Helper()
		if len(got) == 0 {
			t.Fatalf("%s: no deadline applied", what)
		}
		if at := got[len(got)-1]; at.Before(from.Add(d)) || at.After(to.Add(d+slack)) {
			t.Errorf("%s: deadline %v, want %v after a time in [%v, %v], up to %v later", what, at, d, from, to, slack)
		}
	}
	buf := make([]byte, 1024)
	var nc net.Conn
	from, to := now(func() {
		var err error
		if nc, err = l.Accept(); err != nil {
			t.Fatal(err)
		}
	})
	c := nc.(*cappedConn)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	within("the first request", sc.readDeadlines, from, to, read)

	// The handler ends; its answer is written.
	end := monotonic()
	c.answered(end)
	_, after := now(func() {
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	})
	if len(sc.writeDeadlines) != 1 || !sc.writeDeadlines[0].Equal(clockBase.Add(time.Duration(end)+write+slack)) {
		t.Fatalf("write deadlines %v, want one, the write timeout slack late from the handler's end", sc.writeDeadlines)
	}
	// The next request's first read waits under the idle timeout, from
	// the end of the write.
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	within("waiting for the next request", sc.readDeadlines, clockBase.Add(time.Duration(end)), after, idle)
	// It goes on: its read timeout from now, which moves the deadline back.
	from, to = now(func() {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	within("the rest of the request", sc.readDeadlines, from, to, read)
	applied := len(sc.readDeadlines)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if len(sc.readDeadlines) != applied {
		t.Errorf("more of the same request moved its read deadline: %v", sc.readDeadlines[applied:])
	}

	// An answer no handler made (fasthttp's own, for a request it could
	// not read): its write timeout counts from the write.
	from, to = now(func() {
		if _, err := c.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	})
	within("an answer no handler made", sc.writeDeadlines, from, to, write)
}
