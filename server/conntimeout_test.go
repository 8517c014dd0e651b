package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The connections' timeouts end to end, through the real server on
// loopback: where each counts from, seen from the client, with timeouts
// short enough to wait out. The idle timeout is well above the others, so
// that a read left under it by mistake shows.
const (
	e2eRead, e2eWrite, e2eIdle = time.Second, time.Second, 3 * time.Second
	e2eSlack                   = e2eRead / deadlineSlackPart // how late a deadline may fire
	// e2eLate is how much later than that the server may act on a
	// deadline on a busy machine (and under the race detector).
	e2eLate = 400 * time.Millisecond
)

// e2eServer serves a fixture with the e2e timeouts on loopback; stop
// shuts it down.
func e2eServer(t *testing.T) (addr string, stop func()) {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = e2eRead, e2eWrite, e2eIdle })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop = serveOn(t, f.srv, ln)
	return ln.Addr().String(), stop
}

func e2eDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tookWithin checks that what started at from happened at at, d later
// or up to the slack later (and the server's lateness in acting on it).
func tookWithin(t *testing.T, what string, from, at time.Time, d time.Duration) {
	t.Helper()
	if took := at.Sub(from); took < d || took > d+e2eSlack+e2eLate {
		t.Errorf("%s after %v, want %v (up to %v later)", what, took, d, e2eSlack+e2eLate)
	}
}

// readToClose reads what the server sends on c, through r, until it closes
// the connection and returns it and when the close came; it fails the test
// if the server has not closed it within 10 s.
func readToClose(t *testing.T, c net.Conn, r io.Reader) ([]byte, time.Time) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got bytes.Buffer
	_, err := io.Copy(&got, r)
	at := time.Now()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close the connection; it sent %q", got.Bytes())
	}
	return got.Bytes(), at
}

// trickle sends the bytes of s one every 100 ms until the connection
// fails or the test ends: a slowloris.
func trickle(t *testing.T, c net.Conn, s string) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < len(s); i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(c, s[i:i+1]); err != nil {
				return
			}
		}
	}()
}

// slowHead is a request head that takes minutes at trickle's rate.
var slowHead = "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 4000)

// is408 checks that got is the API's 408 answer, whole.
func is408(t *testing.T, what string, got []byte) {
	t.Helper()
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(bytes.NewReader(got))); err != nil || resp.StatusCode() != 408 ||
		!bytes.Equal(resp.Body(), errRequestTimeout.body) {
		t.Errorf("%s: got %q (%v), want the 408 answer", what, got, err)
	}
}

// timedOut checks that the server answers 408 on c, read through r, and
// closes it at the read timeout from from.
func timedOut(t *testing.T, what string, c net.Conn, r io.Reader, from time.Time) {
	t.Helper()
	got, closed := readToClose(t, c, r)
	tookWithin(t, what+": closed", from, closed, e2eRead)
	is408(t, what, got)
}

// keptAlive opens a connection and has one request answered on it: a
// keep-alive connection, and the reader of its answers.
func keptAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := e2eDial(t, addr)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, goodRequest); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	if err := resp.Read(br); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("answer: %d (%v), want 200", resp.StatusCode(), err)
	}
	return c, br
}

func TestConnTimeoutsEndToEnd(t *testing.T) {
	addr, _ := e2eServer(t)

	// The first request's read timeout counts from the connection, not
	// from its first byte: one whose first byte comes late, then trickles,
	// is closed at the read timeout from the connection.
	t.Run("first request, first byte late", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		c := e2eDial(t, addr)
		<-time.After(e2eRead * 8 / 10)
		trickle(t, c, slowHead)
		timedOut(t, "a late first request", c, c, start)
	})

	// A later request's read timeout counts from its first bytes.
	t.Run("second request trickled", func(t *testing.T) {
		t.Parallel()
		c, br := keptAlive(t, addr)
		<-time.After(e2eRead / 2) // idle a while: not counted
		start := time.Now()
		if _, err := io.WriteString(c, "GET /api/"); err != nil {
			t.Fatal(err)
		}
		trickle(t, c, slowHead[len("GET /api/"):])
		timedOut(t, "a trickled second request", c, br, start)
	})

	// A keep-alive connection left idle is closed at the idle timeout from
	// its last answer, without a word.
	t.Run("idle keep-alive", func(t *testing.T) {
		t.Parallel()
		c, br := keptAlive(t, addr)
		answered := time.Now()
		got, closed := readToClose(t, c, br)
		tookWithin(t, "closed", answered, closed, e2eIdle)
		if len(got) != 0 {
			t.Errorf("an idle connection was sent %q before its close", got)
		}
	})

	// A client that sends requests and never reads the answers is closed at
	// the write timeout: its writes fail once the server has.
	t.Run("never reads", func(t *testing.T) {
		t.Parallel()
		c := e2eDial(t, addr)
		if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		requests := []byte(strings.Repeat(goodRequest, 100))
		start := time.Now()
		_ = c.SetWriteDeadline(start.Add(10 * time.Second))
		var err error
		for err == nil {
			_, err = c.Write(requests)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the server did not close a connection that never reads")
		}
		// The answer whose write blocked was ready just after the client
		// started, when the buffers between them filled.
		tookWithin(t, "closed", start, time.Now(), e2eWrite)
	})

	// The rest of a pipelined request, read after the answers before it
	// are flushed, is read under the read timeout, not the idle one:
	// Shutdown, which waits for a request under way, returns within it.
	t.Run("Shutdown with a pipelined request partly sent", func(t *testing.T) {
		t.Parallel()
		addr, stop := e2eServer(t)
		c := e2eDial(t, addr)
		if _, err := io.WriteString(c, goodRequest+"GET /api/public/pairs HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("first answer: %d (%v), want 200", resp.StatusCode(), err)
		}
		// The answer is flushed: the server reads the rest.
		flushed := time.Now()
		stop()
		tookWithin(t, "Shutdown returned", flushed, time.Now(), e2eRead)
		rest, _ := readToClose(t, c, br)
		is408(t, "the rest of a pipelined request", rest)
	})

	// A body announced with Expect: 100-continue and never sent is answered
	// 408 at the read timeout, after the 100 Continue: the first request on
	// a connection, or a later one.
	for _, later := range []bool{false, true} {
		name := "100-continue, no body, first request"
		if later {
			name = "100-continue, no body, later request"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now() // the first request's read timeout counts from the connection
			var c net.Conn
			var br *bufio.Reader
			if later {
				c, br = keptAlive(t, addr)
				start = time.Now()
			} else {
				c = e2eDial(t, addr)
				br = bufio.NewReader(c)
			}
			if _, err := io.WriteString(c, "POST /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			const cont = "HTTP/1.1 100 Continue\r\n\r\n"
			got := make([]byte, len(cont))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != cont {
				t.Fatalf("got %q (%v), want %q first", got, err, cont)
			}
			timedOut(t, "a body that never came", c, br, start)
		})
	}
}
