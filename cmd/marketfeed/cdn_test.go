package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// cdnVenue is the simulated venue with one pair whose book the venue never
// delivers in a usable form, so that the pair is answered 502.
type cdnVenue struct{ venue.Venue }

const cdnFailingSymbol = "SOLUSDT"

func (v cdnVenue) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	if symbol == cdnFailingSymbol {
		return venue.Book{}, fmt.Errorf("book %s: %w", symbol, venue.ErrBadData)
	}
	return v.Venue.Book(ctx, symbol, depth)
}

// nginxConf is a caching reverse proxy in front of marketfeed, as
// docs/deploy.md describes it, confined to one directory: its own pid, logs,
// temporary files and cache.
const nginxConf = `
{{user}}
daemon off;
master_process on;
worker_processes 1;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 256; }
http {
    access_log {{dir}}/access.log;
    client_body_temp_path {{dir}}/client_body;
    proxy_temp_path {{dir}}/proxy_temp;
    fastcgi_temp_path {{dir}}/fastcgi_temp;
    uwsgi_temp_path {{dir}}/uwsgi_temp;
    scgi_temp_path {{dir}}/scgi_temp;

    proxy_cache_path {{dir}}/cache levels=1:2 keys_zone=marketfeed:1m max_size=16m inactive=1m use_temp_path=off;
    upstream marketfeed {
        server {{origin}};
        keepalive 8;
    }
    server {
        listen {{listen}};
        location /api/public/ {
            proxy_pass http://marketfeed;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_cache marketfeed;
            # The origin's Cache-Control decides: public, max-age=5 on 2xx,
            # no-store on everything else. This only covers an answer
            # without one, and matches the origin.
            proxy_cache_valid 200 5s;
            proxy_cache_revalidate on;
            proxy_cache_lock on;
            proxy_cache_use_stale updating;
            add_header X-Cache-Status $upstream_cache_status always;
        }
    }
}
`

// startNginx runs nginx with nginxConf in front of origin (host:port) and
// returns its base URL. It skips the test when nginx is not installed.
func startNginx(t *testing.T, origin string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/nginx"); statErr != nil {
			t.Skip("nginx is not installed: the CDN test needs it (apt-get install -y nginx; .ci/run installs it)")
		}
		bin = "/usr/sbin/nginx" // installed, but /usr/sbin is not on PATH
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close() // nginx binds it next; another process taking it in between fails the start below
	userLine := ""
	if os.Geteuid() == 0 {
		// Workers run as "nobody" unless told otherwise, and could not
		// write the cache in a directory only this user may enter.
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		userLine = "user " + u.Username + ";"
	}
	conf := strings.NewReplacer("{{user}}", userLine, "{{dir}}", dir, "{{origin}}", origin, "{{listen}}", listen).Replace(nginxConf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // graceful: workers finish, then the master exits
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("nginx did not stop within 10 s of SIGQUIT")
		}
	})
	errorLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("nginx exited at start: %v\n%s", err, errorLog())
		default:
		}
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			return "http://" + listen
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s after 10 s\n%s", listen, errorLog())
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

// edgeClient sends requests to nginx as a given client address would arrive
// through an edge in front of it: in X-Forwarded-For.
type edgeClient struct {
	t    *testing.T
	base string
	http *http.Client
}

type edgeAnswer struct {
	status int
	header http.Header
	body   string
}

func (c *edgeClient) do(method, path, clientIP string, headers ...string) edgeAnswer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if clientIP != "" {
		req.Header.Set("X-Forwarded-For", clientIP)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return edgeAnswer{resp.StatusCode, resp.Header, string(body)}
}

// originCount returns a counter of marketfeed's own /metrics: how many
// requests for route answered status reached the origin.
func originCount(t *testing.T, ops, route string, status int) int {
	t.Helper()
	_, body := apptest.Get(t, ops+"/metrics")
	series := `marketfeed_http_requests_total{route="` + route + `",status="` + strconv.Itoa(status) + `"} `
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no series %s", series)
	return 0
}

// TestCDNInFront runs nginx as a caching reverse proxy in front of
// marketfeed and shows, by counting the requests that reach marketfeed:
// 2xx answers are cached for 5 s, 429 and 502 are not cached, CORS headers
// survive the cache, and the client address reaches the rate limiter
// through -trusted-proxies and X-Forwarded-For.
func TestCDNInFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx and waits for a cache entry to expire")
	}
	api, ops, _, _ := startApp(t, cdnVenue{sim.New(sim.Config{Seed: 1})},
		"-trusted-proxies", "127.0.0.1/32", "-rate-limit", "3")
	edge := startNginx(t, strings.TrimPrefix(api, "http://"))
	c := &edgeClient{t: t, base: edge, http: &http.Client{Transport: &http.Transport{}}}

	t.Run("2xx cached for 5 s", func(t *testing.T) {
		before := originCount(t, ops, "pairs", 200)
		first := c.do("GET", "/api/public/pairs", "198.51.100.10")
		missAt := time.Now()
		if first.status != 200 || first.header.Get("X-Cache-Status") != "MISS" {
			t.Fatalf("first request: %d %s, want 200 MISS", first.status, first.header.Get("X-Cache-Status"))
		}
		hit := c.do("GET", "/api/public/pairs", "198.51.100.11")
		if hit.status != 200 || hit.header.Get("X-Cache-Status") != "HIT" || hit.body != first.body {
			t.Fatalf("second request: %d %s, want 200 HIT with the same body", hit.status, hit.header.Get("X-Cache-Status"))
		}
		for h, want := range map[string]string{
			"Access-Control-Allow-Origin": "*",
			"Cache-Control":               "public, max-age=5",
			"Content-Type":                "application/json",
			"Vary":                        "Accept-Encoding",
		} {
			if got := hit.header.Get(h); got != want {
				t.Errorf("cached answer: %s = %q, want %q", h, got, want)
			}
		}
		if hit.header.Get("ETag") == "" || hit.header.Get("ETag") != first.header.Get("ETag") {
			t.Errorf("cached answer: ETag %q, first %q", hit.header.Get("ETag"), first.header.Get("ETag"))
		}
		// Ask again until the cache goes back to the origin. nginx keeps
		// expiry times in whole seconds, so max-age=5 lasts 5 to 6 s.
		hits, lastHit := 1, time.Duration(0)
		var refreshed edgeAnswer
		for {
			a := c.do("GET", "/api/public/pairs", "198.51.100.12")
			if a.header.Get("X-Cache-Status") != "HIT" {
				refreshed = a
				break
			}
			hits, lastHit = hits+1, time.Since(missAt)
			if lastHit > 8*time.Second {
				t.Fatalf("still a cache HIT %s after the miss, want a refresh after 5 s", lastHit)
			}
			time.Sleep(250 * time.Millisecond) // polling nginx's cache, which expires on its own clock
		}
		refreshedAt := time.Since(missAt)
		t.Logf("%d HITs, the last %s after the MISS; refreshed after %s: %d %s",
			hits, lastHit.Round(time.Millisecond), refreshedAt.Round(time.Millisecond), refreshed.status, refreshed.header.Get("X-Cache-Status"))
		if lastHit < 4500*time.Millisecond {
			t.Errorf("the last HIT came %s after the MISS, want about 5 s of caching", lastHit)
		}
		if s := refreshed.header.Get("X-Cache-Status"); refreshed.status != 200 || (s != "EXPIRED" && s != "REVALIDATED") {
			t.Errorf("after expiry: %d %s, want 200 EXPIRED or REVALIDATED", refreshed.status, s)
		}
		// Two requests reached the origin: the miss and the refresh, which
		// nginx sends with If-None-Match and marketfeed may answer 304.
		origin := originCount(t, ops, "pairs", 200) + originCount(t, ops, "pairs", 304) - before
		if origin != 2 {
			t.Errorf("%d requests reached the origin for %d answers, want 2", origin, hits+2)
		}
	})

	t.Run("429 not cached and counted per client address", func(t *testing.T) {
		const path = "/api/public/tickers?_=limited"
		before := originCount(t, ops, "tickers", 429)
		// Three distinct URLs, so each misses the cache and spends one of
		// the client's three requests a minute.
		for i := range 3 {
			if a := c.do("GET", "/api/public/tickers?_="+strconv.Itoa(i), "198.51.100.20"); a.status != 200 {
				t.Fatalf("request %d of the allowance: %d %s", i+1, a.status, a.body)
			}
		}
		for i := range 2 {
			a := c.do("GET", path, "198.51.100.20")
			if a.status != 429 || a.header.Get("X-Cache-Status") != "MISS" {
				t.Fatalf("over the limit, request %d: %d %s, want 429 MISS", i+1, a.status, a.header.Get("X-Cache-Status"))
			}
			for h, want := range map[string]string{"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store"} {
				if got := a.header.Get(h); got != want {
					t.Errorf("429: %s = %q, want %q", h, got, want)
				}
			}
			if a.header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
		if n := originCount(t, ops, "tickers", 429) - before; n != 2 {
			t.Errorf("%d of two 429s reached the origin, want both", n)
		}
		// Another client address asking for the very URL just refused: not
		// a cached 429, and its own allowance.
		if a := c.do("GET", path, "198.51.100.21"); a.status != 200 || a.header.Get("X-Cache-Status") != "MISS" {
			t.Errorf("another client: %d %s, want 200 MISS", a.status, a.header.Get("X-Cache-Status"))
		}
	})

	t.Run("X-Forwarded-For from an untrusted peer proves nothing", func(t *testing.T) {
		// A client connecting from 127.0.0.2, which is not a trusted proxy:
		// nginx appends that address, and marketfeed counts the requests
		// against it whatever X-Forwarded-For the client made up.
		spoofer := &edgeClient{t: t, base: edge, http: &http.Client{Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
		}}}
		var statuses []int
		for i := range 4 {
			a := spoofer.do("GET", "/api/public/tickers?_=spoof"+strconv.Itoa(i), "203.0.113."+strconv.Itoa(i+1))
			statuses = append(statuses, a.status)
		}
		if fmt.Sprint(statuses) != "[200 200 200 429]" {
			t.Errorf("four requests, each with a new made-up address: %v, want [200 200 200 429]", statuses)
		}
	})

	t.Run("502 not cached", func(t *testing.T) {
		const path = "/api/public/orderbook?ticker_id=SOL_USDT"
		before := originCount(t, ops, "orderbook", 502)
		for i := range 2 {
			a := c.do("GET", path, "198.51.100.30")
			if a.status != 502 || a.header.Get("X-Cache-Status") != "MISS" || !strings.Contains(a.body, "UPSTREAM_UNAVAILABLE") {
				t.Fatalf("request %d: %d %s %s, want 502 MISS UPSTREAM_UNAVAILABLE", i+1, a.status, a.header.Get("X-Cache-Status"), a.body)
			}
			if a.header.Get("Access-Control-Allow-Origin") != "*" || a.header.Get("Cache-Control") != "no-store" {
				t.Errorf("502 headers: %v", a.header)
			}
		}
		if n := originCount(t, ops, "orderbook", 502) - before; n != 2 {
			t.Errorf("%d of two 502s reached the origin, want both", n)
		}
	})

	t.Run("CORS preflight passes through", func(t *testing.T) {
		a := c.do("OPTIONS", "/api/public/trades?ticker_id=BTC_USDT", "198.51.100.40",
			"Origin", "https://example.org", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-requested-with")
		if a.status != 204 {
			t.Fatalf("preflight: %d %s", a.status, a.body)
		}
		for h, want := range map[string]string{
			"Access-Control-Allow-Origin":  "*",
			"Access-Control-Allow-Methods": "GET",
			"Access-Control-Allow-Headers": "x-requested-with",
			"Access-Control-Max-Age":       "86400",
		} {
			if got := a.header.Get(h); got != want {
				t.Errorf("preflight: %s = %q, want %q", h, got, want)
			}
		}
	})
}
