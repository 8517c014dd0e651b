package server

import (
	"bufio"
	"io"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"marketfeed/internal/golden"
)

// Rate limit: 600 requests per client address in any minute, every route,
// above it 429 with Retry-After. The fixtures' clock starts at t0, 5 s into
// a 10 s bucket of the limiter's window: requests made at t0 leave its
// span 65 s later.

func limited(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		c.RateLimit = 600
		if mod != nil {
			mod(c)
		}
	}
}

// leaves is how long after t0 the requests made at t0 leave the span.
const leaves = 65 * time.Second

func TestRateLimitAllows600ThenAnswers429WithRetryAfter(t *testing.T) {
	f := newFixture(t, limited(nil))
	for i := range 600 {
		if resp := f.get(t, "/api/public/pairs"); resp.StatusCode() != 200 {
			t.Fatalf("request %d: %d, want 200", i+1, resp.StatusCode())
		}
	}
	resp := f.get(t, "/api/public/pairs")
	wantError(t, resp, errRateLimited)
	if got := header(resp, "Retry-After"); got != "65" {
		t.Fatalf("Retry-After %q, want 65 (until the bucket of the 600 leaves the span)", got)
	}
	golden.Check(t, "error_rate_limited", resp.Body())
}

// The contract's check: 900 requests spread evenly over a minute from one
// address are answered 600 times, not 900 (a minute's burst, then 10 a
// second), and no 60 s window holds more than 600 answers.
func TestRateLimitEvenlySpreadMinuteGetsTheLimit(t *testing.T) {
	f := newFixture(t, limited(func(c *Config) { c.MaxStale = time.Hour; c.PairsMaxStale = time.Hour }))
	const sent = 900
	var answered []time.Duration
	for i := range sent {
		at := time.Duration(i) * time.Minute / sent
		f.clock.Set(t0.Add(at))
		if resp := f.get(t, "/api/public/pairs"); resp.StatusCode() == 200 {
			answered = append(answered, at)
		}
	}
	t.Logf("%d of %d evenly over 60 s answered 200", len(answered), sent)
	if n := len(answered); n < 540 || n > 630 {
		t.Fatalf("%d of %d answered 200, want 540 to 630", n, sent)
	}
	if n, at := mostInAMinute(answered); n > 600 {
		t.Fatalf("%d answers in the minute up to %s, limit 600", n, at)
	}
}

// mostInAMinute returns the most of the sorted times in any closed 60 s
// window, and the end of the first window holding that many.
func mostInAMinute(times []time.Duration) (most int, end time.Duration) {
	from := 0
	for i, at := range times {
		for times[from] < at-time.Minute {
			from++
		}
		if n := i - from + 1; n > most {
			most, end = n, at
		}
	}
	return most, end
}

func TestRateLimitRecoversAsTimePasses(t *testing.T) {
	f := newFixture(t, limited(func(c *Config) { c.MaxStale = time.Hour; c.PairsMaxStale = time.Hour }))
	for range 600 {
		f.get(t, "/api/public/pairs")
	}
	wantStatus(t, f.get(t, "/api/public/pairs"), 429)
	f.clock.Advance(10 * time.Second) // the 600 are still within the minute: nothing earned
	wantStatus(t, f.get(t, "/api/public/pairs"), 429)
	f.clock.Set(t0.Add(leaves - time.Millisecond))
	wantStatus(t, f.get(t, "/api/public/pairs"), 429)
	f.clock.Set(t0.Add(leaves)) // their bucket left the span: the whole allowance again
	for i := range 600 {
		if resp := f.get(t, "/api/public/pairs"); resp.StatusCode() != 200 {
			t.Fatalf("request %d once the first 600 left: %d", i+1, resp.StatusCode())
		}
	}
	wantStatus(t, f.get(t, "/api/public/pairs"), 429)
}

func TestRetryAfterIsWholeSecondsAtLeastOne(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RateLimit = 2; c.MaxStale = time.Hour; c.PairsMaxStale = time.Hour })
	f.get(t, "/api/public/pairs")
	f.get(t, "/api/public/pairs")
	resp := f.get(t, "/api/public/pairs")
	wantStatus(t, resp, 429)
	if got := header(resp, "Retry-After"); got != "65" {
		t.Fatalf("Retry-After %q, want 65", got)
	}
	f.clock.Set(t0.Add(leaves - 500*time.Millisecond))
	if got := header(f.get(t, "/api/public/pairs"), "Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q with 0.5s left, want 1", got)
	}
	f.clock.Set(t0.Add(leaves - time.Millisecond))
	if got := header(f.get(t, "/api/public/pairs"), "Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q with 1ms left, want 1", got)
	}
	f.clock.Set(t0.Add(leaves))
	wantStatus(t, f.get(t, "/api/public/pairs"), 200)
}

func TestRateLimitAppliesToEveryRouteAndToErrors(t *testing.T) {
	f := newFixture(t, limited(nil))
	uris := []string{
		"/api/public/nope", "/api/public/orderbook?ticker_id=bad", "/api/public/trades?ticker_id=NOPE_USDT",
		"/api/public/tickers", "/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/trades?ticker_id=BTC_USDT",
	}
	for i := range 600 {
		f.get(t, uris[i%len(uris)])
	}
	for _, uri := range append(uris, "/api/public/pairs", "/api/public/fees") {
		wantError(t, f.get(t, uri), errRateLimited)
	}
	wantError(t, f.do(t, request{method: "POST", uri: "/api/public/pairs"}), errRateLimited)
}

func TestRateLimitDoesNotCountPreflight(t *testing.T) {
	f := newFixture(t, limited(nil))
	for range 1000 {
		wantStatus(t, f.do(t, request{method: "OPTIONS", uri: "/api/public/pairs"}), 204)
	}
	wantStatus(t, f.get(t, "/api/public/pairs"), 200)
	for range 599 {
		f.get(t, "/api/public/pairs")
	}
	wantStatus(t, f.get(t, "/api/public/pairs"), 429)
	wantStatus(t, f.do(t, request{method: "OPTIONS", uri: "/api/public/pairs"}), 204)
}

func TestRateLimitExemptPrefixIsNotLimited(t *testing.T) {
	f := newFixture(t, limited(func(c *Config) {
		c.RateLimitExempt = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:aa::/48")}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	}))
	for _, r := range []request{
		{uri: "/api/public/pairs", peer: "198.51.100.77:1"},
		{uri: "/api/public/pairs", peer: "[2001:db8:aa:1::5]:1"},
		{uri: "/api/public/pairs", peer: "[::ffff:198.51.100.8]:1"},
		// the exempt robot behind our proxy: the client address decides
		{uri: "/api/public/pairs", peer: "10.1.1.1:1", headers: []string{"X-Forwarded-For", "198.51.100.9"}},
	} {
		for i := range 1500 {
			if resp := f.do(t, r); resp.StatusCode() != 200 {
				t.Fatalf("%s request %d: %d", r.peer, i+1, resp.StatusCode())
			}
		}
	}
	// not exempt: a client whose claimed address is exempt but whose peer is untrusted
	r := request{uri: "/api/public/pairs", peer: "192.0.2.200:1", headers: []string{"X-Forwarded-For", "198.51.100.9"}}
	for range 600 {
		f.do(t, r)
	}
	wantStatus(t, f.do(t, r), 429)
}

func TestRateLimitOffWhenZero(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 2000 {
		if resp := f.get(t, "/api/public/pairs"); resp.StatusCode() != 200 {
			t.Fatalf("request %d: %d", i+1, resp.StatusCode())
		}
	}
}

// sameClient reports whether b is counted against the same key as a, with
// a limit of one request a minute: a passes, and b is refused only if it
// shares a's key.
func sameClient(t *testing.T, mod func(*Config), a, b request) bool {
	t.Helper()
	f := newFixture(t, func(c *Config) {
		c.RateLimit = 1
		if mod != nil {
			mod(c)
		}
	})
	a.uri, b.uri = "/api/public/pairs", "/api/public/pairs"
	wantStatus(t, f.do(t, a), 200)
	switch st := f.do(t, b).StatusCode(); st {
	case 429:
		return true
	case 200:
		return false
	default:
		t.Fatalf("status %d", st)
		return false
	}
}

func behind(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
		if mod != nil {
			mod(c)
		}
	}
}

func xff(peer string, values ...string) request {
	r := request{peer: peer}
	for _, v := range values {
		r.headers = append(r.headers, "X-Forwarded-For", v)
	}
	return r
}

func TestClientIPIsThePeerByDefault(t *testing.T) {
	if !sameClient(t, nil, request{peer: "192.0.2.1:1000"}, request{peer: "192.0.2.1:2000"}) {
		t.Error("two ports of one address are two clients")
	}
	if sameClient(t, nil, request{peer: "192.0.2.1:1000"}, request{peer: "192.0.2.2:1000"}) {
		t.Error("two addresses share a key")
	}
}

// Through the server's listener, a connection's peer is the client: two
// connections of one address share its allowance, another address has its
// own, and a trusted proxy's connection is counted by its header.
func TestClientIPOfServedConnections(t *testing.T) {
	f := newFixture(t, limited(behind(func(c *Config) { c.RateLimit = 2 })))
	ln, _ := serving(t, f.srv)
	get := func(peer string, headers ...string) int {
		t.Helper()
		c := dialFrom(t, ln, peer)
		defer c.Close()
		req := "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n"
		for i := 0; i+1 < len(headers); i += 2 {
			req += headers[i] + ": " + headers[i+1] + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(bufio.NewReader(c)); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode()
	}
	for i, want := range []int{200, 200, 429} {
		if got := get("192.0.2.1:" + strconv.Itoa(1000+i)); got != want {
			t.Fatalf("192.0.2.1, connection %d: %d, want %d", i+1, got, want)
		}
	}
	if got := get("192.0.2.2:1000"); got != 200 {
		t.Fatalf("another address: %d, want 200", got)
	}
	for i, want := range []int{200, 200, 429} {
		if got := get("10.0.0.1:"+strconv.Itoa(1000+i), "X-Forwarded-For", "203.0.113.9"); got != want {
			t.Fatalf("through a trusted proxy, request %d: %d, want %d", i+1, got, want)
		}
	}
}

func TestClientIPUntrustedPeersHeaderIsIgnored(t *testing.T) {
	if !sameClient(t, behind(nil), xff("192.0.2.1:1", "203.0.113.1"), xff("192.0.2.1:2", "203.0.113.2")) {
		t.Error("an untrusted peer chose its key through X-Forwarded-For")
	}
	if !sameClient(t, func(c *Config) { c.ClientIPHeader = "CF-Connecting-IP" },
		request{peer: "192.0.2.1:1", headers: []string{"CF-Connecting-IP", "203.0.113.1"}},
		request{peer: "192.0.2.1:1", headers: []string{"CF-Connecting-IP", "203.0.113.2"}}) {
		t.Error("an untrusted peer chose its key through CF-Connecting-IP")
	}
}

func TestClientIPTrustedProxyRightmostUntrustedHop(t *testing.T) {
	// The proxy 10.0.0.1 appended 203.0.113.9; 198.51.100.7 was written by the client.
	a := xff("10.0.0.1:1", "198.51.100.7, 203.0.113.9")
	if !sameClient(t, behind(nil), a, xff("10.0.0.2:1", "1.2.3.4,203.0.113.9")) {
		t.Error("the client's own part of X-Forwarded-For changed its key")
	}
	if !sameClient(t, behind(nil), a, request{peer: "203.0.113.9:5"}) {
		t.Error("the client through the proxy and directly are two keys")
	}
	// Trusted hops on the right are skipped: two proxies in a chain.
	if !sameClient(t, behind(nil), a, xff("10.0.0.1:1", "198.51.100.7, 203.0.113.9, 10.0.0.5")) {
		t.Error("a trusted hop was taken for the client")
	}
	// Several header lines are one list; the rightmost hop is in the last line.
	if !sameClient(t, behind(nil), a, xff("10.0.0.1:1", "6.6.6.6, 7.7.7.7", "203.0.113.9", "10.0.0.3")) {
		t.Error("the last X-Forwarded-For line was not read as the rightmost")
	}
	if sameClient(t, behind(nil), a, xff("10.0.0.1:1", "203.0.113.9, 203.0.113.10")) {
		t.Error("a hop left of the rightmost untrusted one was taken")
	}
	// Every hop trusted: the leftmost is the furthest known client.
	if !sameClient(t, behind(nil), xff("10.0.0.1:1", "10.9.9.9, 10.0.0.2"), request{peer: "10.9.9.9:1"}) {
		t.Error("an all-trusted chain was not keyed by its leftmost hop")
	}
	// No header: the proxy itself.
	if !sameClient(t, behind(nil), request{peer: "10.0.0.1:1"}, request{peer: "10.0.0.1:2"}) {
		t.Error("a proxy without a header is not its own client")
	}
	// Ports and brackets as some proxies write them.
	if !sameClient(t, behind(nil), a, xff("10.0.0.1:1", "203.0.113.9:4711")) {
		t.Error("IPv4 with a port not read")
	}
	if !sameClient(t, behind(nil), xff("10.0.0.1:1", "[2001:db8::1]:443"), request{peer: "[2001:db8::2]:1"}) {
		t.Error("bracketed IPv6 with a port not read")
	}
}

func TestClientIPUnparsableHeaderFallsBackToPeer(t *testing.T) {
	for _, v := range []string{"unknown", "203.0.113.9, garbage", "203.0.113.9, 10.0.0.2, _hidden", "fe80::1%eth0", "999.1.1.1", "[::1", "ff02::1", "0.0.0.0", "::"} {
		if !sameClient(t, behind(nil), xff("10.0.0.1:1", v), request{peer: "10.0.0.1:2"}) {
			t.Errorf("X-Forwarded-For %q: not keyed by the peer", v)
		}
	}
}

func TestClientIPSingleValueHeader(t *testing.T) {
	cf := behind(func(c *Config) { c.ClientIPHeader = "CF-Connecting-IP" })
	a := request{peer: "10.0.0.1:1", headers: []string{"CF-Connecting-IP", "203.0.113.9", "X-Forwarded-For", "1.1.1.1"}}
	if !sameClient(t, cf, a, request{peer: "203.0.113.9:1"}) {
		t.Error("CF-Connecting-IP not used")
	}
	if sameClient(t, cf, a, request{peer: "1.1.1.1:1"}) {
		t.Error("X-Forwarded-For used although CF-Connecting-IP is configured")
	}
	lower := behind(func(c *Config) { c.ClientIPHeader = "cf-connecting-ip" })
	if !sameClient(t, lower, request{peer: "10.0.0.1:1", headers: []string{"cf-CONNECTING-ip", "2001:db8::7"}}, request{peer: "[2001:db8::9]:1"}) {
		t.Error("header names are not matched case-insensitively")
	}
	if !sameClient(t, cf, request{peer: "10.0.0.1:1", headers: []string{"CF-Connecting-IP", "1.2.3.4, 5.6.7.8"}}, request{peer: "10.0.0.1:1"}) {
		t.Error("a list in a single-value header was not refused")
	}
}

func TestClientIPv6SharesKeyPer64(t *testing.T) {
	if !sameClient(t, nil, request{peer: "[2001:db8:1:2::1]:1"}, request{peer: "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1"}) {
		t.Error("two addresses of one /64 are two clients")
	}
	if sameClient(t, nil, request{peer: "[2001:db8:1:2::1]:1"}, request{peer: "[2001:db8:1:3::1]:1"}) {
		t.Error("two /64s share a key")
	}
	if !sameClient(t, nil, request{peer: "[::ffff:192.0.2.9]:1"}, request{peer: "192.0.2.9:1"}) {
		t.Error("an IPv4-mapped peer is not its IPv4 address")
	}
	if sameClient(t, nil, request{peer: "192.0.2.9:1"}, request{peer: "192.0.2.10:1"}) {
		t.Error("IPv4 is not keyed by the whole address")
	}
}

func TestKeysOfIPv4AndIPv6NeverCollide(t *testing.T) {
	v4 := key(netip.MustParseAddr("192.0.2.1"))
	for _, s := range []string{"::", "::c000:201", "::ffff:0:0", "c000:201::", "2001:db8::", "ffff:ffff:c000:201::"} {
		a := netip.MustParseAddr(s)
		if !a.IsMulticast() && key(a) == v4 {
			t.Errorf("%s shares the key of 192.0.2.1", s)
		}
	}
}

// Replicas behind a round-robin balancer share one limit: what one allowed
// a client, drained and charged at another, counts there as if it had
// allowed it, so the client gets 600 in any minute from them together.
func TestSharedRateLimitCountsAnotherReplicasRequests(t *testing.T) {
	a := newFixture(t, limited(nil))
	b := newFixture(t, limited(func(c *Config) { c.Now = a.clock.Now }))
	for _, f := range []*fixture{a, b} {
		if !f.srv.ShareRateLimit() {
			t.Fatal("a rate-limited server does not share its limit")
		}
	}
	for range 400 {
		wantStatus(t, a.get(t, "/api/public/pairs"), 200)
	}
	drained := map[uint64]uint32{}
	a.srv.DrainRateCounts(func(k uint64, n uint32) { drained[k] += n })
	if len(drained) != 1 {
		t.Fatalf("drained %v, want one client", drained)
	}
	var client uint64
	for k, n := range drained {
		if n != 400 {
			t.Fatalf("drained %d requests, want 400", n)
		}
		b.srv.ChargeRate(k, n)
		client = k
	}
	a.srv.DrainRateCounts(func(k uint64, n uint32) { t.Fatalf("a second drain handed %d requests again", n) })
	for i := range 200 {
		if resp := b.get(t, "/api/public/pairs"); resp.StatusCode() != 200 {
			t.Fatalf("request %d at the other replica: %d, want 200 (200 left of 600)", i+1, resp.StatusCode())
		}
	}
	wantStatus(t, b.get(t, "/api/public/pairs"), 429)

	// Charges may put a client in debt past the limit (the replicas
	// together allowed more than it), but only until the bucket charged
	// leaves the span: a huge charge 30 s on, in the bucket from 25 s to
	// 35 s after t0, holds the client off until 95 s after t0.
	a.clock.Set(t0.Add(30 * time.Second))
	b.srv.ChargeRate(client, 1<<20)
	a.clock.Set(t0.Add(95*time.Second - time.Millisecond))
	wantStatus(t, b.get(t, "/api/public/pairs"), 429)
	a.clock.Set(t0.Add(95 * time.Second))
	for i := range 600 {
		if resp := b.get(t, "/api/public/pairs"); resp.StatusCode() != 200 {
			t.Fatalf("request %d once a huge charge left the span: %d", i+1, resp.StatusCode())
		}
	}
	wantStatus(t, b.get(t, "/api/public/pairs"), 429)
}
