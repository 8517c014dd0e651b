package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"marketfeed/snapshot"
)

var malformedSeed = flag.Uint64("malformed.seed", 0, "seed of TestTenThousandMalformedRequests; 0: from the clock")

// malformedStatuses are the only answers a request that is wrong in some way
// may get: the request's fault, said as such, never the server's (5xx), and
// never silence.
var malformedStatuses = []int{400, 404, 405, 413, 431}

// A malformed request is built in two steps: one defect that makes it wrong
// whatever else it carries, then noise that a well-formed request may carry
// too (unknown parameters, odd but harmless headers, a small body) so that
// the defect is found behind it.
type defect int

const (
	defectMethod      defect = iota // a method other than GET and OPTIONS: 405 (400 if unparsable)
	defectPath                      // a path that is no route: 404
	defectQuery                     // a query the route refuses: 400 (404 for a well-formed unknown pair)
	defectHugeURI                   // a request line over the header buffer: 431
	defectHeaderFlood               // headers over the header buffer: 431
	defectBody                      // a body over the body limit: 413
	defectUnparsable                // not HTTP/1.x as fasthttp reads it: 400
	numDefects
)

var defectNames = [numDefects]string{"method", "path", "query", "huge URI", "header flood", "body", "unparsable"}

// malformed builds random malformed requests.
type malformed struct{ r *rand.Rand }

func (m *malformed) pick(options ...string) string { return options[m.r.IntN(len(options))] }

// bytesFrom returns n random bytes drawn from alphabet, or from every byte
// value when alphabet is empty.
func (m *malformed) bytesFrom(n int, alphabet string) []byte {
	out := make([]byte, n)
	for i := range out {
		if alphabet == "" {
			out[i] = byte(m.r.UintN(256))
		} else {
			out[i] = alphabet[m.r.IntN(len(alphabet))]
		}
	}
	return out
}

// encode writes value for a query string, each byte in one of the forms a
// client may use: literal where that is unambiguous, %XX in upper or lower
// case, '+' for a space. The server's decoding must give value back.
func (m *malformed) encode(value []byte) string {
	var b strings.Builder
	for _, c := range value {
		safe := c > ' ' && c < 0x7f && !strings.ContainsRune("&=#%+?", rune(c))
		switch {
		case c == ' ' && m.r.IntN(2) == 0:
			b.WriteByte('+')
		case safe && m.r.IntN(4) != 0:
			b.WriteByte(c)
		case m.r.IntN(2) == 0:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	return b.String()
}

// badTickerID returns a decoded ticker_id that does not have the form
// BASE_TARGET: binary, lower case, too short or too long, stray characters.
func (m *malformed) badTickerID() []byte {
	for {
		var id []byte
		switch m.r.IntN(7) {
		case 0:
			id = m.bytesFrom(1+m.r.IntN(40), "")
		case 1:
			id = []byte(m.pick("btc_usdt", "Btc_USDT", "BTC-USDT", "BTCUSDT", "BTC_", "_USDT", "B_USDT", "BTC__USDT", "BTC_USDT_X", " BTC_USDT", "BTC_USDT "))
		case 2:
			id = []byte(strings.Repeat("A", 16+m.r.IntN(60)) + "_USDT")
		case 3:
			id = append([]byte("BTC_USDT"), m.bytesFrom(1+m.r.IntN(4), "\x00\t\r\n \xff\xfe%&=+#?/\\.;,\"'<>")...)
		case 4:
			id = []byte("BTC\u00a0_USDT") // a non-ASCII space
		case 5:
			id = m.bytesFrom(100+m.r.IntN(3000), "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
		default:
			id = m.bytesFrom(1+m.r.IntN(20), "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_abcxyz-. ")
		}
		if !snapshot.ValidTickerID(id) {
			return id
		}
	}
}

// badCount returns a decoded depth or limit that is refused: not an integer
// by the contract's syntax, or negative.
func (m *malformed) badCount() []byte {
	for {
		var v []byte
		if m.r.IntN(3) == 0 {
			v = m.bytesFrom(1+m.r.IntN(12), "0123456789-+.eExX abc\x00\xff")
		} else {
			v = []byte(m.pick("+5", "5.0", "1e2", " 5", "5 ", "0x10", "", "-1", "-99999999999999999999999", "abc", "١٢", "5\x00", "--5", "-", "1_000", "Infinity", "NaN"))
		}
		if _, neg, ok := parseCount(v, 100); !ok || neg {
			return v
		}
	}
}

// noiseParams returns parameters every route ignores.
func (m *malformed) noiseParams() []string {
	var ps []string
	for range m.r.IntN(4) {
		switch m.r.IntN(5) {
		case 0:
			ps = append(ps, "_="+strconv.FormatInt(m.r.Int64N(1<<40), 10))
		case 1:
			ps = append(ps, "page="+m.encode(m.bytesFrom(m.r.IntN(8), "")))
		case 2:
			ps = append(ps, m.encode(m.bytesFrom(1+m.r.IntN(6), "abcxyz%_"))+"="+m.encode(m.bytesFrom(m.r.IntN(30), "")))
		case 3:
			ps = append(ps, m.pick("&", "&&", "=", "x", "%", "%zz", "%0", "%%%"))
		default:
			ps = append(ps, "cb="+strings.Repeat("z", m.r.IntN(200)))
		}
	}
	return ps
}

func (m *malformed) query(params []string) string {
	params = append(params, m.noiseParams()...)
	m.r.Shuffle(len(params), func(i, j int) { params[i], params[j] = params[j], params[i] })
	return strings.Join(params, "&")
}

// badQuery returns the path and query of a data route the query is wrong for.
func (m *malformed) badQuery() string {
	route := m.pick("orderbook", "trades", "historical_trades")
	key := m.pick("ticker_id", "ticker%5Fid", "ticker%5fid", "%74icker_id")
	good := key + "=" + m.pick("BTC_USDT", "ETH_USDT", "BTC%5FUSDT")
	var params []string
	switch m.r.IntN(6) {
	case 0: // no ticker_id at all
		params = []string{m.pick("ticker=BTC_USDT", "TICKER_ID=BTC_USDT", "ticker_id_=BTC_USDT", "tickerid=BTC_USDT", "depth=5")}
	case 1: // given more than once
		params = []string{good}
		for range 1 + m.r.IntN(4) {
			params = append(params, key+"="+m.encode(m.bytesFrom(m.r.IntN(10), "")))
		}
	case 2:
		params = []string{key + "=" + m.encode(m.badTickerID())}
	case 3: // well formed, not listed
		params = []string{key + "=" + m.pick("ZZZ_USDT", "BTC_EUR", "PEPE_USDT", "AAAAAAAAAAAAAAA_BBBBBBBBBBBBBBB")}
	case 4: // a bad count for the route
		name := "depth"
		if route != "orderbook" {
			name = "limit"
		}
		params = []string{good, name + "=" + m.encode(m.badCount())}
		if m.r.IntN(3) == 0 {
			params = append(params, name+"=5") // and repeated
		}
	default:
		if route == "orderbook" {
			params = []string{good, "depth=5", "depth=" + m.pick("5", "6", "x")}
		} else {
			params = []string{good, "type=" + m.encode([]byte(m.pick("BUY", "Sell", "", "both", "buy ", "buy\x00", "b", "sell,buy", "buy%")))}
		}
	}
	return "/api/public/" + route + "?" + m.query(params)
}

// badPath returns a path that no route answers, however it is decoded and
// normalised (fasthttp collapses "//" and dot segments after decoding, so
// an encoded slash must never join a prefix to a route's name).
func (m *malformed) badPath() string {
	name := m.pick("", "fees", "pair", "Pairs", "PAIRS", "ticker", "orderBook", "trade", "historical-trades", "pairs.json",
		"pairs/x", "trades/1", "tickers//x", "x", "%00", "%ff", "%C0%AF", "%E2%80%AE", "%20", "%2Fpairs%2F%2Fx", ";pairs")
	junk := m.pick("", "%00", "%zz", "%", "%2", "%25", "%ff%fe", "~", "!", ";v=1", ",", "%09", "%0d%0a", "%3F")
	prefix := m.pick("/api/public/", "/api/public/", "/api/public/", "/api/", "/", "/API/public/", "/api/Public/", "/apipublic/", "/api/public%2f")
	path := prefix + name + junk
	if m.r.IntN(3) == 0 {
		path += "?" + m.query(nil)
	}
	return path
}

// noiseHeaders returns header lines a request may carry without changing
// its answer.
func (m *malformed) noiseHeaders() []string {
	var hs []string
	for range m.r.IntN(6) {
		switch m.r.IntN(7) {
		case 0:
			hs = append(hs, "X-Forwarded-For: "+m.pick("1.2.3.4", "unknown", "::1, 2001:db8::1", "999.1.1.1", "[", strings.Repeat("1.1.1.1,", 50)))
		case 1:
			hs = append(hs, "User-Agent: "+string(m.bytesFrom(m.r.IntN(200), "abcdefghijklmnopqrstuvwxyz/ .;()0123456789\x80\xff")))
		case 2:
			hs = append(hs, "Accept: "+m.pick("*/*", "application/json", "text/html", "", "\x7f"))
		case 3:
			hs = append(hs, "X-"+string(m.bytesFrom(1+m.r.IntN(20), "abcdefghijklmnopqrstuvwxyz-"))+": "+string(m.bytesFrom(m.r.IntN(300), "abcXYZ 012!#$%&'*+-.^_`|~\x80\xfe")))
		case 4:
			hs = append(hs, "Cookie: "+strings.Repeat("a=b; ", m.r.IntN(100)))
		case 5:
			hs = append(hs, "Origin: https://"+string(m.bytesFrom(1+m.r.IntN(20), "abcdefghijklmnopqrstuvwxyz.")))
		default:
			hs = append(hs, "Access-Control-Request-Headers: "+string(m.bytesFrom(m.r.IntN(100), "abcxyz-, ")))
		}
	}
	return hs
}

// request returns one malformed request, the defect it carries, and the
// method (HEAD answers carry no body).
func (m *malformed) request() (raw []byte, d defect, method string) {
	d = defect(m.r.IntN(int(numDefects)))
	method = "GET"
	uri := m.pick("/api/public/pairs", "/api/public/tickers", "/api/public/orderbook?ticker_id=BTC_USDT&depth=5",
		"/api/public/trades?ticker_id=ETH_USDT&type=sell")
	headers := []string{"Host: " + m.pick("marketfeed", "localhost:8080", "x")}
	var body []byte
	switch d {
	case defectMethod:
		method = m.pick("POST", "PUT", "DELETE", "PATCH", "HEAD", "TRACE", "CONNECT", "PROPFIND", "MKCOL", "LOCK",
			"get", "Get", "GETT", "GE", "OPTION", "options", "M-SEARCH", "PRI", "BREW",
			string(m.bytesFrom(1+m.r.IntN(20), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcxyz!#$%&'*+-.^_`|~")),
			string(m.bytesFrom(1+m.r.IntN(8), "\x01\x02\x7f\x80\xff\xfeABC")))
		if m.r.IntN(2) == 0 {
			uri = m.badPath()
		}
	case defectPath:
		uri = m.badPath()
	case defectQuery:
		uri = m.badQuery()
	case defectHugeURI:
		// Raw binary in the query: every byte but those that end the URI.
		q := m.bytesFrom(maxHeaderSize+m.r.IntN(maxHeaderSize), "")
		q = bytes.Map(func(r rune) rune {
			if r == ' ' || r == '\r' || r == '\n' || r == '#' {
				return 'x'
			}
			return r
		}, q)
		uri = m.pick("/api/public/pairs?", "/api/public/orderbook?ticker_id=BTC_USDT&", "/api/public/trades?") + string(q)
	case defectHeaderFlood:
		n := maxHeaderSize/8 + m.r.IntN(2000)
		for i := range n {
			headers = append(headers, m.pick("X-A", "X-Flood-"+strconv.Itoa(i), "Cookie", "Accept")+": "+strings.Repeat("v", m.r.IntN(20)))
		}
	case defectBody:
		method = m.pick("GET", "POST", "PUT")
		switch n := maxBodySize + 1 + m.r.IntN(16<<10); m.r.IntN(3) {
		case 0: // declared and sent
			headers = append(headers, "Content-Length: "+strconv.Itoa(n))
			body = m.bytesFrom(n, "")
		case 1: // declared, far too large to send
			headers = append(headers, "Content-Length: "+m.pick("1048576", "2147483648", "99999999999"))
		default: // chunked, over the limit in total
			headers = append(headers, "Transfer-Encoding: chunked")
			var b bytes.Buffer
			for b.Len() <= maxBodySize+64 {
				chunk := m.bytesFrom(1+m.r.IntN(700), "")
				fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
			}
			b.WriteString("0\r\n\r\n")
			body = b.Bytes()
		}
	case defectUnparsable:
		switch m.r.IntN(9) {
		case 0:
			junk := m.bytesFrom(1+m.r.IntN(200), "")
			// Empty lines before a request line are skipped (RFC 9112
			// section 2.2): junk of CR and LF only is no request at all, and
			// rightly gets no answer. Junk must hold something else.
			if len(bytes.Trim(junk, "\r\n")) == 0 {
				junk = append([]byte{'x'}, junk...)
			}
			return append(junk, "\r\n\r\n"...), d, ""
		case 1:
			uri = "/api/public/pairs" + m.pick("\x00", "\x7f", "\x01")
		case 2:
			headers = append(headers, "Content-Length: "+m.pick("abc", "-1", "1e3", "0x10", " ", "18446744073709551616"))
		case 3:
			headers = append(headers, "Content-Length: 3", "Content-Length: 4")
			body = []byte("abcd")
		case 4:
			headers = append(headers, m.pick(": y", ":", "X: \x00", "X: a\x00b"))
		case 5:
			headers = append(headers, "Host: second")
		case 6:
			headers = append(headers, "Transfer-Encoding: chunked")
			body = []byte(m.pick("zz\r\n", "5\r\nab\r\n0\r\n\r\n", "-1\r\n\r\n", "fffffffffffffffffff\r\n"))
		case 7:
			return []byte(m.pick("GET /api/public/pairs\r\n\r\n", "GET  /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n",
				"GET \\api\\public\\pairs HTTP/1.1\r\nHost: x\r\n\r\n", "GET ? HTTP/1.1\r\nHost: x\r\n\r\n",
				"GET /api/public/pairs HTTP/1.1 extra\r\nHost: x\r\n\r\n")), d, "GET"
		default:
			return []byte(" GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"), d, ""
		}
	}
	headers = append(headers, m.noiseHeaders()...)
	if body == nil && d != defectUnparsable && m.r.IntN(4) == 0 {
		body = m.bytesFrom(m.r.IntN(maxBodySize), "")
		headers = append(headers, "Content-Length: "+strconv.Itoa(len(body)))
	}
	var b bytes.Buffer
	b.WriteString(method + " " + uri + " " + m.pick("HTTP/1.1", "HTTP/1.1", "HTTP/1.0") + "\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes(), d, method
}

// TestTenThousandMalformedRequests sends 10,000 random malformed requests
// over loopback TCP to the real server: odd methods, huge and binary query
// strings, repeated parameters, percent-encoding of every kind, header
// floods, request bodies, bytes that are not HTTP. Each gets 400, 404, 405,
// 413 or 431 with the API's JSON error and its headers, within a deadline;
// nothing gets a 5xx, and the process serves a good request afterwards.
func TestTenThousandMalformedRequests(t *testing.T) {
	const total, clients = 10_000, 8
	seed := *malformedSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -malformed.seed=%d)", seed, seed)
	f := newFixture(t, func(c *Config) { c.ReadTimeout = 2 * time.Second; c.WriteTimeout = 2 * time.Second })
	f.feed.load = f.publish
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveOn(t, f.srv, ln)
	defer stop()
	addr := ln.Addr().String()

	type result struct {
		status int
		d      defect
		took   time.Duration
	}
	var (
		mu       sync.Mutex
		results  []result
		problems []string
		sent     int64
	)
	type job struct {
		raw    []byte
		d      defect
		method string
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var c net.Conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for j := range jobs {
				raw, d, method := j.raw, j.d, j.method
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", addr); err != nil {
						t.Error(err)
						return
					}
				}
				start := time.Now()
				status, problem := sendRaw(c, raw, method)
				took := time.Since(start)
				// The server closes after a request it could not read; a
				// fresh connection for every request after a failure keeps
				// one request's leftovers out of the next.
				c.Close()
				c = nil
				mu.Lock()
				results = append(results, result{status, d, took})
				sent += int64(len(raw))
				if problem != "" && len(problems) < 20 {
					problems = append(problems, fmt.Sprintf("%s %s: %s\n    request %.300q", defectNames[d], method, problem, raw))
				}
				mu.Unlock()
			}
		})
	}
	m := &malformed{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for range total {
		raw, d, method := m.request()
		jobs <- job{raw, d, method}
	}
	close(jobs)
	wg.Wait()

	byStatus := map[int]int{}
	byDefect := [numDefects]map[int]int{}
	var slowest time.Duration
	for _, r := range results {
		byStatus[r.status]++
		if byDefect[r.d] == nil {
			byDefect[r.d] = map[int]int{}
		}
		byDefect[r.d][r.status]++
		slowest = max(slowest, r.took)
	}
	for d := range numDefects {
		t.Logf("  %-12s %v", defectNames[d], byDefect[d])
	}
	t.Logf("%d malformed requests, %d bytes: statuses %v; slowest answer %s", len(results), sent, byStatus, slowest.Round(time.Millisecond))
	if len(results) != total {
		t.Errorf("%d answers for %d requests", len(results), total)
	}
	if len(problems) > 0 {
		t.Errorf("%d or more requests answered wrongly, the first:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	// Still serving.
	status, problem := sendRawOnNewConn(t, addr, []byte("GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"), "GET")
	if status != 200 {
		t.Fatalf("a good request after the malformed ones: %d %s", status, problem)
	}
}

// sendRaw writes raw on c and reads the answer, within a deadline: a
// server that does not answer is a failure, not a wait. It returns the
// status and, when the answer breaks a rule, what is wrong with it.
func sendRaw(c net.Conn, raw []byte, method string) (int, string) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The server may answer and close before it has read everything (a body
	// or headers over its limits); the answer is still there to read.
	_, werr := c.Write(raw)
	var resp fasthttp.Response
	resp.SkipBody = method == fasthttp.MethodHead
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		return 0, fmt.Sprintf("no answer: %v (write: %v)", err, werr)
	}
	status := resp.StatusCode()
	var wrong []string
	if !slices.Contains(malformedStatuses, status) {
		wrong = append(wrong, fmt.Sprintf("status %d", status))
	}
	if got := string(resp.Header.ContentType()); got != "application/json" {
		wrong = append(wrong, "Content-Type "+got)
	}
	if got := string(resp.Header.Peek("Access-Control-Allow-Origin")); got != "*" {
		wrong = append(wrong, "Access-Control-Allow-Origin "+got)
	}
	if got := string(resp.Header.Peek("Cache-Control")); got != "no-store" {
		wrong = append(wrong, "Cache-Control "+got)
	}
	if method != fasthttp.MethodHead {
		var e struct {
			Code, Error, Message string
		}
		if err := json.Unmarshal(resp.Body(), &e); err != nil || e.Code == "" && e.Error == "" || e.Message == "" {
			wrong = append(wrong, fmt.Sprintf("body %.200q", resp.Body()))
		}
	}
	if len(wrong) > 0 {
		return status, strings.Join(wrong, ", ")
	}
	return status, ""
}

func sendRawOnNewConn(t *testing.T, addr string, raw []byte, method string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return sendRaw(c, raw, method)
}

// TestBareLineFeedHeadersWaitForTheReadTimeout: fasthttp does not take a
// bare LF blank line for the end of the headers, so such a request is not
// seen as complete. It is answered 408 when the read timeout expires: the
// connection is bounded by the timeout, never held open.
func TestBareLineFeedHeadersWaitForTheReadTimeout(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	f := newFixture(t, func(c *Config) { c.ReadTimeout = readTimeout })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, f.srv, ln)
	for _, raw := range []string{
		"GET /api/public/pairs HTTP/1.1\nHost: x\n\n",
		"GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\n",
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = c.SetDeadline(start.Add(10 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		err = resp.Read(bufio.NewReader(c))
		took := time.Since(start)
		c.Close()
		if err != nil {
			t.Fatalf("%q: no answer: %v", raw, err)
		}
		if resp.StatusCode() != 408 || took > readTimeout+2*time.Second {
			t.Fatalf("%q: %d after %s, want 408 once the %s read timeout expires", raw, resp.StatusCode(), took, readTimeout)
		}
		t.Logf("%q: %d after %s", raw, resp.StatusCode(), took.Round(time.Millisecond))
	}
}
