package server

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// hotCase is one 200 request on the hot path.
type hotCase struct {
	name string
	uri  string
}

var hotCases = []hotCase{
	{"pairs", "/api/public/pairs"},
	{"tickers", "/api/public/tickers"},
	{"contracts", "/api/public/contracts"},
	{"contract_specs", "/api/public/contract_specs"},
	{"orderbook_full", "/api/public/orderbook?ticker_id=BTC_USDT"},
	{"orderbook_depth5", "/api/public/orderbook?ticker_id=BTC_USDT&depth=5"},
	{"orderbook_depth1", "/api/public/orderbook?ticker_id=BTC_USDT&depth=1"},
	{"orderbook_depth99", "/api/public/orderbook?ticker_id=BTC_USDT&depth=99&_=1767323045"},
	// A book whose bids vouch for 78 levels of a side the venue may hold
	// more of, asked for fewer: served from it, after the check.
	{"orderbook_short_depth20", "/api/public/orderbook?ticker_id=1000PEPE_USDT&depth=20"},
	{"trades_full", "/api/public/trades?ticker_id=BTC_USDT"},
	{"trades_sell_limit10", "/api/public/trades?ticker_id=BTC_USDT&type=sell&limit=10"},
	{"trades_buy_all", "/api/public/trades?ticker_id=BTC_USDT&type=buy&limit=100"},
	{"historical_trades_limit5", "/api/public/historical_trades/?ticker_id=BTC_USDT&limit=5"},
}

// hotClient is how the request arrives: directly, or through a trusted proxy.
type hotClient struct {
	name    string
	peer    string
	headers []string
}

var hotClients = []hotClient{
	{"direct_v4", "192.0.2.1:40000", nil},
	{"direct_v6", "[2001:db8:1:2::77]:40000", nil},
	{"proxy_xff", "10.0.0.1:40000", []string{"X-Forwarded-For", "198.51.100.7, 203.0.113.9, 10.0.0.2"}},
}

// hotFixture is the fixture with everything on that a request can pay for:
// a rate limit (too high to trip), trusted proxies, exempt prefixes that do
// not match, and a feed that records Want.
func hotFixture(tb testing.TB) *fixture {
	return newFixture(tb, func(c *Config) {
		c.RateLimit = 1 << 30
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		c.RateLimitExempt = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
	})
}

// hotCtx returns a RequestCtx set up once, and a function that serves the
// request on it again the way fasthttp does for each request on a
// keep-alive connection: the URI parsed anew, the response reset, the
// response's body buffer kept (as with fasthttp.Server's default
// ReduceMemoryUsage false).
func hotCtx(srv *Server, cl hotClient, uri string) (*fasthttp.RequestCtx, func()) {
	addr, err := net.ResolveTCPAddr("tcp", cl.peer)
	if err != nil {
		panic(err)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init2(peerConn{remote: addr}, nil, false)
	ctx.Request.SetRequestURI(uri)
	for i := 0; i+1 < len(cl.headers); i += 2 {
		ctx.Request.Header.Add(cl.headers[i], cl.headers[i+1])
	}
	return ctx, func() {
		ctx.Request.SetRequestURI(uri)
		ctx.Response.Reset()
		srv.Handler(ctx)
	}
}

// peerConn is a connection that only knows its addresses, which is all a
// RequestCtx asks of it outside a server.
type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }
func (c peerConn) LocalAddr() net.Addr  { return c.remote }

func BenchmarkHandler(b *testing.B) {
	f := hotFixture(b)
	for _, hc := range hotCases {
		b.Run(hc.name, func(b *testing.B) {
			ctx, serve := hotCtx(f.srv, hotClients[0], hc.uri)
			serve()
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(ctx.Response.Body())))
			for b.Loop() {
				serve()
			}
		})
	}
}

func BenchmarkHandlerClientIP(b *testing.B) {
	f := hotFixture(b)
	for _, cl := range hotClients {
		b.Run(cl.name, func(b *testing.B) {
			_, serve := hotCtx(f.srv, cl, "/api/public/orderbook?ticker_id=BTC_USDT&depth=5")
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

func BenchmarkHandlerParallel(b *testing.B) {
	f := hotFixture(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		_, serve := hotCtx(f.srv, hotClients[0], "/api/public/orderbook?ticker_id=BTC_USDT&depth=5")
		for pb.Next() {
			serve()
		}
	})
}

// BenchmarkLimiter is one request's check, alone and counting for the
// other replicas of a cluster (drained every 1024 requests, as often as a
// busy replica's 250 ms period would hold that many keys). 1024 clients
// take turns as the clock moves a microsecond a request: each sends about
// 58,600 a minute, within the limit, and its buckets move on as in a
// steady stream.
func BenchmarkLimiter(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "shared"}[shared], func(b *testing.B) {
			l := newLimiter(math.MaxUint16, DefaultRateLimitKeys)
			if shared {
				l.count()
			}
			now := t0.UnixNano()
			b.ReportAllocs()
			var k uint64
			for b.Loop() {
				k++
				now += int64(time.Microsecond)
				if ok, _ := l.allow(k&1023, now); !ok {
					b.Fatal("refused")
				}
				if shared && k&1023 == 0 {
					b.StopTimer()
					l.drain(func(uint64, uint32) {})
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkLimiterFull is one request's check with the table full of
// addresses (DefaultRateLimitKeys), as under a flood of distinct clients:
// "held" cycles through addresses the table holds, "new" brings a new
// address on every request, which makes room by sweeping a shard (at most
// once per sweepGap) and evicting a key. The clock moves 10 µs a request.
func BenchmarkLimiterFull(b *testing.B) {
	for _, fresh := range []bool{false, true} {
		b.Run(map[bool]string{false: "held", true: "new"}[fresh], func(b *testing.B) {
			l := newLimiter(math.MaxUint16, DefaultRateLimitKeys)
			now := t0.UnixNano()
			var k uint64
			for ; k < DefaultRateLimitKeys; k++ {
				l.allow(k, now)
			}
			if l.len() < DefaultRateLimitKeys*9/10 {
				b.Fatalf("table holds %d keys, want it nearly full", l.len())
			}
			b.ReportAllocs()
			var i uint64
			for b.Loop() {
				i++
				now += int64(10 * time.Microsecond)
				key := i % DefaultRateLimitKeys
				if fresh {
					key = k + i
				}
				if ok, _ := l.allow(key, now); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

func BenchmarkErrors(b *testing.B) {
	f := hotFixture(b)
	for _, hc := range []hotCase{
		{"bad_ticker", "/api/public/orderbook?ticker_id=btc"},
		{"unknown_ticker", "/api/public/trades?ticker_id=NOPE_USDT"},
		{"not_found", "/api/public/fees"},
	} {
		b.Run(hc.name, func(b *testing.B) {
			_, serve := hotCtx(f.srv, hotClients[0], hc.uri)
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

// BenchmarkHandlerConditional measures the default bodies served from their
// gzip forms, and revalidations answered 304.
func BenchmarkHandlerConditional(b *testing.B) {
	f := hotFixture(b)
	for _, uri := range []string{"/api/public/pairs", "/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/trades?ticker_id=BTC_USDT"} {
		gz := hotClient{"gzip", "192.0.2.1:40000", []string{"Accept-Encoding", "gzip"}}
		ctx, serve := hotCtx(f.srv, gz, uri)
		serve()
		b.Run("gzip"+uri[len("/api/public"):], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(ctx.Response.Body())))
			for b.Loop() {
				serve()
			}
		})
		_, serve304 := hotCtx(f.srv, hotClient{"304", "192.0.2.1:40000",
			[]string{"Accept-Encoding", "gzip", "If-None-Match", header(&ctx.Response, "ETag")}}, uri)
		b.Run("304"+uri[len("/api/public"):], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serve304()
			}
		})
	}
}

// BenchmarkHandlerFirst measures what the first request for a new snapshot
// pays: it hashes the default body for the tag, and a gzip request also
// compresses it, once for the snapshot (every later request is
// BenchmarkHandler's or BenchmarkHandlerConditional's gzip case). Building
// and publishing the snapshot is not timed.
func BenchmarkHandlerFirst(b *testing.B) {
	f := hotFixture(b)
	for _, uri := range []string{"/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/trades?ticker_id=BTC_USDT"} {
		for _, accept := range []string{"identity", "gzip"} {
			_, serve := hotCtx(f.srv, hotClient{accept, "192.0.2.1:40000", []string{"Accept-Encoding", accept}}, uri)
			b.Run(accept+uri[len("/api/public"):], func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					f.store.PutBook(btcBook(b, f.clock.Now()))
					f.store.PutTrades(btcTrades(b, f.clock.Now()))
					b.StartTimer()
					serve()
				}
			})
		}
	}
}

// BenchmarkServeKeepAlive is the whole request path as a client sees it:
// one keep-alive connection to the real fasthttp.Server, over fasthttp's
// in-memory listener, each request written and its whole answer read back
// before the next. It counts what BenchmarkHandler leaves out (reading and
// parsing the request, writing the status line and headers, the
// connection's loop), plus the client's side of the pipe, which a real
// client pays on its own core.
func BenchmarkServeKeepAlive(b *testing.B) {
	f := hotFixture(b)
	ln := fasthttputil.NewInmemoryListener()
	serveOn(b, f.srv, ln)
	for _, hc := range hotCases[:7] {
		b.Run(hc.name, func(b *testing.B) {
			// A client address as on a network, so that the rate limit
			// applies as in BenchmarkHandler.
			c := dialFrom(b, ln, hotClients[0].peer)
			defer c.Close()
			req := []byte("GET " + hc.uri + " HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			// The first answer says how long every answer is: the same
			// snapshot, and a Date header of fixed width.
			if _, err := c.Write(req); err != nil {
				b.Fatal(err)
			}
			var first bytes.Buffer
			resp := new(fasthttp.Response)
			if err := resp.Read(bufio.NewReader(io.TeeReader(c, &first))); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
			}
			answer := make([]byte, first.Len())
			b.SetBytes(int64(len(answer)))
			b.ReportAllocs()
			before := processCPU(b)
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, answer); err != nil {
					b.Fatal(err)
				}
			}
			after := processCPU(b)
			// CPU time per request, which other work on a shared machine
			// changes less than the time per request: both ends of the
			// pipe, in user space and in the kernel.
			b.ReportMetric(float64(after.user-before.user)/float64(b.N), "user-ns/op")
			b.ReportMetric(float64(after.system-before.system)/float64(b.N), "sys-ns/op")
			if !bytes.Equal(answer[len(answer)-len(resp.Body()):], resp.Body()) {
				b.Fatal("the last answer's body differs from the first's")
			}
		})
	}
}

// cpuTimes is the process's CPU time so far, in user space and in the
// kernel.
type cpuTimes struct{ user, system time.Duration }

func processCPU(tb testing.TB) cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}
