package server

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// wireConn is a connection whose client sends in and then closes its side:
// the server reads in, then EOF, and everything it writes is kept.
type wireConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *wireConn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *wireConn) Write(p []byte) (int, error) { return c.out.Write(p) }
func (c *wireConn) Close() error                { return nil }
func (c *wireConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (c *wireConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
}
func (c *wireConn) SetDeadline(time.Time) error         { return nil }
func (c *wireConn) SetReadDeadline(time.Time) error     { return nil }
func (c *wireConn) SetWriteDeadline(time.Time) error    { return nil }
func (c *wireConn) ReadFrom(r io.Reader) (int64, error) { return c.out.ReadFrom(r) }

var statusLine = regexp.MustCompile(`(?m)^HTTP/1\.[01] ([0-9]{3}) `)

// FuzzRawRequest writes arbitrary bytes on a connection to the real fasthttp
// server and reads what comes back. However the bytes parse (one request,
// several pipelined, half of one, none), every answer is a status the API
// gives, never a 5xx (every listed pair can be loaded, so not even 502), and
// every answer carries the API's CORS header; nothing panics.
func FuzzRawRequest(f *testing.F) {
	for _, seed := range []string{
		"GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /api/public/orderbook?ticker_id=BTC_USDT&depth=5 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/public/trades?ticker_id=ETH_USDT HTTP/1.1\r\nHost: x\r\n\r\n",
		"OPTIONS /api/public/trades HTTP/1.1\r\nHost: x\r\nAccess-Control-Request-Headers: x-a\r\n\r\n",
		"POST /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"HEAD /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
		"GET /api/public/pairs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"GET /api/public/pairs?" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /zz/..%2f..%2fapi/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://evil/api/public/orderbook?ticker%5Fid=BTC%5FUSDT HTTP/1.0\r\n\r\n",
		"\x00\x01\x02 /api/public/pairs HTTP/1.1\r\n\r\n",
		"GET /api/public/pairs HTTP/1.1\nHost: x\n\n",
		"GET /api/public/pairs",
		"",
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f, func(c *Config) { c.RateLimit = 1 << 30 })
	fx.feed.load = fx.publish
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &wireConn{in: bytes.NewReader(in)}
		_ = fx.srv.srv.ServeConn(c) // returns the reason it stopped reading, never a verdict
		out := c.out.Bytes()
		statuses := statusLine.FindAllSubmatch(out, -1)
		for _, m := range statuses {
			switch string(m[1]) {
			case "200", "204", "400", "404", "405", "413", "431":
			default:
				t.Fatalf("status %s for %q:\n%s", m[1], in, out)
			}
		}
		if n := bytes.Count(out, []byte("\r\nAccess-Control-Allow-Origin: *\r\n")); n < len(statuses) {
			t.Fatalf("%d answers, %d with Access-Control-Allow-Origin, for %q:\n%s", len(statuses), n, in, out)
		}
	})
}
