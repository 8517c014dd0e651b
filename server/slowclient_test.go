package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Slow and idle clients: connections that never send a byte, that send a
// request one byte at a time (slowloris), and keep-alive connections left
// idle. The read, write and idle timeouts bound how long each holds a
// connection, and the connection cap bounds how many are held at once;
// within those bounds, a normal client is answered at once.

const goodRequest = "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"

// timedGet sends one request on a new connection and returns its status and
// how long the answer took, connection included.
func timedGet(addr string) (int, time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(10 * time.Second))
	if _, err := io.WriteString(c, goodRequest); err != nil {
		return 0, 0, err
	}
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		return 0, 0, err
	}
	return resp.StatusCode(), time.Since(start), nil
}

// attack holds the attacking connections of a test.
type attack struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (a *attack) add(c net.Conn) {
	a.mu.Lock()
	a.conns = append(a.conns, c)
	a.mu.Unlock()
}

func (a *attack) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

// closedByServer waits until the server has closed c, reading and dropping
// whatever it sends first (a 408), and returns when that happened; zero if
// it did not before deadline.
func closedByServer(c net.Conn, deadline time.Time) time.Time {
	_ = c.SetReadDeadline(deadline)
	_, err := io.Copy(io.Discard, c)
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return time.Now() // EOF or a reset: the server closed it
	}
	return time.Time{}
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// TestTwoThousandSlowConnectionsDoNotStarveAClient opens 2,000 hostile
// connections (1,000 that send nothing, 500 slowloris, 500 keep-alive
// connections left idle after one request), then times a normal client
// while all of them are open, and finally checks that the server closes
// every one of them within its timeouts.
func TestTwoThousandSlowConnectionsDoNotStarveAClient(t *testing.T) {
	const (
		idle, slowloris, keepAlive = 1000, 500, 500
		// Long enough that every hostile connection is still open while the
		// normal client is timed, even under the race detector.
		readTimeout = 5 * time.Second
		idleTimeout = 5 * time.Second
	)
	f := newFixture(t, func(c *Config) {
		c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = readTimeout, readTimeout, idleTimeout
		c.MaxConns = 4096
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, f.srv, ln)
	addr := ln.Addr().String()

	var a attack
	defer a.closeAll()
	start := time.Now()
	var opened [3]time.Time // when each kind's last connection was ready
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("attack connection: %v", err)
		}
		a.add(c)
		return c
	}
	idleConns := make([]net.Conn, idle)
	for i := range idleConns {
		idleConns[i] = dial()
	}
	opened[0] = time.Now()
	slowConns := make([]net.Conn, slowloris)
	for i := range slowConns {
		slowConns[i] = dial()
		if _, err := io.WriteString(slowConns[i], "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
	}
	opened[1] = time.Now()
	// The slowloris connections send one more byte every 100 ms, for as
	// long as the server keeps them.
	stopDrip := make(chan struct{})
	var dripping sync.WaitGroup
	dripping.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		alive := slices.Clone(slowConns)
		for deadline := time.Now().Add(4 * readTimeout); len(alive) > 0 && time.Now().Before(deadline); {
			select {
			case <-stopDrip:
				return
			case <-tick.C:
			}
			alive = slices.DeleteFunc(alive, func(c net.Conn) bool {
				_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
				_, err := c.Write([]byte{'a'})
				return err != nil
			})
		}
	})
	defer func() { close(stopDrip); dripping.Wait() }()
	keptConns := make([]net.Conn, keepAlive)
	for i := range keptConns {
		keptConns[i] = dial()
		_ = keptConns[i].SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(keptConns[i], goodRequest); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(bufio.NewReader(keptConns[i])); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("keep-alive connection %d: %v %d", i, err, resp.StatusCode())
		}
		_ = keptConns[i].SetDeadline(time.Time{})
	}
	opened[2] = time.Now()
	t.Logf("2,000 hostile connections open after %s", opened[2].Sub(start).Round(time.Millisecond))

	// A normal client, while every hostile connection is still inside its
	// timeout.
	var took []time.Duration
	for range 50 {
		status, d, err := timedGet(addr)
		if err != nil || status != 200 {
			t.Fatalf("normal client: %d %v", status, err)
		}
		took = append(took, d)
	}
	measured := time.Now()
	if measured.Sub(opened[0]) >= readTimeout {
		t.Fatalf("the measurement ended %s after the idle connections opened, past the %s read timeout: "+
			"some may already have been closed, so the run proves nothing", measured.Sub(opened[0]), readTimeout)
	}
	t.Logf("normal client with 2,000 hostile connections open: 50 requests, median %s, p90 %s, max %s",
		percentile(took, 50).Round(time.Microsecond), percentile(took, 90).Round(time.Microsecond), slices.Max(took).Round(time.Microsecond))
	if worst := slices.Max(took); worst > time.Second {
		t.Errorf("slowest answer to the normal client %s, want under 1s", worst)
	}

	// Every hostile connection is closed by the server within its timeout:
	// from its first byte (idle: from its connection) for the read timeout,
	// from its last answer for the idle timeout.
	deadline := time.Now().Add(2*readTimeout + 5*time.Second)
	var wg sync.WaitGroup
	var open atomic.Int64
	var last [3]atomic.Int64
	for kind, conns := range [][]net.Conn{idleConns, slowConns, keptConns} {
		for _, c := range conns {
			wg.Go(func() {
				at := closedByServer(c, deadline)
				if at.IsZero() {
					open.Add(1)
					return
				}
				for {
					prev := last[kind].Load()
					if at.UnixNano() <= prev || last[kind].CompareAndSwap(prev, at.UnixNano()) {
						break
					}
				}
			})
		}
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		t.Fatalf("%d hostile connections still open %s after the attack began", n, time.Since(start).Round(time.Second))
	}
	for kind, name := range []string{"idle (no byte sent)", "slowloris (a byte every 100 ms)", "keep-alive left idle"} {
		t.Logf("all %s connections closed by the server %s after the last one opened", name,
			time.Unix(0, last[kind].Load()).Sub(opened[kind]).Round(time.Millisecond))
	}
	if status, _, err := timedGet(addr); err != nil || status != 200 {
		t.Fatalf("after the attack: %d %v", status, err)
	}
}

// TestConnectionCapRefusesTheExcessAndRecovers fills a server capped at 200
// connections with 2,000 idle ones. The server holds no more than the cap:
// the excess is refused at once rather than queued. Once the read timeout
// has closed the idle connections a normal client is served again.
func TestConnectionCapRefusesTheExcessAndRecovers(t *testing.T) {
	const (
		capConns    = 200
		attackConns = 2000
		readTimeout = time.Second
	)
	f := newFixture(t, func(c *Config) {
		c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = readTimeout, readTimeout, readTimeout
		c.MaxConns = capConns
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, f.srv, ln)
	addr := ln.Addr().String()

	var a attack
	defer a.closeAll()
	start := time.Now()
	conns := make([]net.Conn, attackConns)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		a.add(c)
		conns[i] = c
	}
	// A refused connection is answered and closed at once; a held one stays
	// silent until the read timeout. Each wait starts when it is made: on a
	// loaded machine dialing 2,000 connections can take longer than the
	// wait, and a deadline already past reads nothing, not even a refusal
	// that has arrived.
	var refused, held atomic.Int64
	var refusal atomic.Pointer[fasthttp.Response]
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(readTimeout / 2))
			br := bufio.NewReader(c)
			if _, err := br.Peek(1); errors.Is(err, os.ErrDeadlineExceeded) {
				held.Add(1)
				return
			}
			refused.Add(1)
			var resp fasthttp.Response
			if resp.Read(br) == nil {
				refusal.CompareAndSwap(nil, &resp)
			}
		})
	}
	wg.Wait()
	t.Logf("cap %d, %d idle connections: %d held, %d refused at once", capConns, attackConns, held.Load(), refused.Load())
	if held.Load() > capConns {
		t.Errorf("%d connections held, cap %d", held.Load(), capConns)
	}
	if r := refusal.Load(); r != nil {
		t.Logf("a refused connection is answered %d, Content-Type %q, Access-Control-Allow-Origin %q, body %q",
			r.StatusCode(), r.Header.ContentType(), r.Header.Peek("Access-Control-Allow-Origin"), r.Body())
	}

	// A normal client keeps trying; it is served once the read timeout has
	// closed the idle connections.
	var served time.Time
	for deadline := time.Now().Add(readTimeout + 10*time.Second); time.Now().Before(deadline); {
		if status, _, err := timedGet(addr); err == nil && status == 200 {
			served = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond) // retrying a refused client, as a real one would
	}
	if served.IsZero() {
		t.Fatalf("normal client not served %s after the cap was filled", readTimeout+10*time.Second)
	}
	t.Logf("normal client served %s after the cap was filled (read timeout %s)",
		served.Sub(start).Round(time.Millisecond), readTimeout)
	if served.Sub(start) > readTimeout+3*time.Second {
		t.Errorf("served %s after the cap was filled, want within the read timeout %s and slack", served.Sub(start), readTimeout)
	}
}

// TestConnectionOverTheCapIsRefusedInTheAPIsFormat: a connection over the
// cap gets an answer like every other error of the API (JSON, CORS,
// no-store), with Retry-After, so that a browser client can read it and a
// cache does not keep it.
func TestConnectionOverTheCapIsRefusedInTheAPIsFormat(t *testing.T) {
	const capConns = 5
	f := newFixture(t, func(c *Config) { c.MaxConns = capConns; c.ReadTimeout = 10 * time.Second })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, f.srv, ln)
	var a attack
	defer a.closeAll()
	for range capConns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a.add(c)
		// A full request and its answer: the connection is being served.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, goodRequest); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(bufio.NewReader(c)); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("connection within the cap: %v %d", err, resp.StatusCode())
		}
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, goodRequest)
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("no answer over the cap: %v", err)
	}
	var e struct{ Code, Message string }
	jsonErr := json.Unmarshal(resp.Body(), &e)
	if resp.StatusCode() != 503 || string(resp.Header.ContentType()) != "application/json" ||
		string(resp.Header.Peek("Access-Control-Allow-Origin")) != "*" || string(resp.Header.Peek("Cache-Control")) != "no-store" ||
		len(resp.Header.Peek("Retry-After")) == 0 || jsonErr != nil || e.Code == "" || e.Message == "" {
		t.Fatalf("over the cap: %d\n%s\n%s\nwant 503 with a JSON error body, Access-Control-Allow-Origin *, Cache-Control no-store and Retry-After",
			resp.StatusCode(), resp.Header.String(), resp.Body())
	}
}
