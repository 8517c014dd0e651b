package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func testCaptures() []captured {
	big := bytes.Repeat([]byte(`["64660.30","1.434"],`), 400) // 8 KB: three pieces
	h := func(etag string) http.Header {
		return http.Header{
			"Content-Type":                {"application/json"},
			"Content-Length":              {"123"},
			"Date":                        {"Sat, 21 Nov 2026 06:08:11 GMT"},
			"Access-Control-Allow-Origin": {"*"},
			"Cache-Control":               {"public, max-age=5"},
			"Etag":                        {etag},
			"Vary":                        {"Accept-Encoding"},
		}
	}
	gz := h(`"abc-1-gz"`)
	gz.Set("Content-Encoding", "gzip")
	return []captured{
		{Key: "book", URI: "/api/public/orderbook?ticker_id=BTC_USDT", Body: append(append([]byte(`{"bids":[`), big...), `[]]}`...),
			Header: h(`"abc-1-full"`), Gzip: []byte{0x1f, 0x8b}, GzipHeader: gz},
		{Key: "trades", URI: "/api/public/trades?ticker_id=BTC_USDT&limit=10&type=buy", Body: []byte(`[{"price":"1 'quoted' \ back"}]`),
			Header: h(`"abc-2-b10"`)},
	}
}

func TestNginxConfig(t *testing.T) {
	caps := testCaptures()
	conf, err := nginxConfig(nginxSpec{Prefix: "/tmp/p", StaticRoot: "/tmp/p/static", StaticAddr: "127.0.0.1:1001", MemoryAddr: "127.0.0.1:1002", Routes: caps})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"worker_processes 1;",
		"pid /tmp/p/nginx.pid;",
		"listen 127.0.0.1:1001;",
		"listen 127.0.0.1:1002;",
		"'/api/public/trades?ticker_id=BTC_USDT&limit=10&type=buy' trades;",
		`book|gzip '"abc-1-gz"';`,
		`book| '"abc-1-full"';`,
		"add_header ETag $h_etag;",
		"add_header Cache-Control $h_cache_control;",
		"add_header Access-Control-Allow-Origin $h_access_control_allow_origin;",
		"add_header Vary $h_vary;",
		`return 200 "$mem_0$mem_1$mem_2";`,
		`return 200 "$mem_0";`,
		`trades '[{"price":"1 \'quoted\' \\ back"}]';`,
		"try_files /$snap.json =404;",
		"gzip_static on;",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q", want)
		}
	}
	// Headers nginx writes itself are not copied.
	for _, unwanted := range []string{"$h_date", "$h_content_length", "$h_content_type", "$h_content_encoding"} {
		if strings.Contains(conf, unwanted) {
			t.Errorf("config copies %s", unwanted)
		}
	}
	// No quoted parameter reaches nginx's 4 KiB limit.
	for _, m := range regexp.MustCompile(`'(?:[^'\\]|\\.)*'`).FindAllString(conf, -1) {
		if len(m) >= 4096 {
			t.Errorf("parameter of %d bytes", len(m))
		}
	}
	// The pieces of the big body join back to it.
	var joined strings.Builder
	for i := range 3 {
		re := regexp.MustCompile(`(?s)map \$snap \$mem_` + string(rune('0'+i)) + ` \{.*?\n        book '([^']*)';`)
		m := re.FindStringSubmatch(conf)
		if m == nil {
			t.Fatalf("no piece %d of book", i)
		}
		joined.WriteString(m[1])
	}
	if joined.String() != string(caps[0].Body) {
		t.Error("the pieces of the book do not join to its body")
	}
}

func TestNginxConfigRefusesDollar(t *testing.T) {
	caps := testCaptures()
	caps[1].Body = []byte(`{"price":"$5"}`)
	if _, err := nginxConfig(nginxSpec{Routes: caps}); err == nil {
		t.Error("a body with '$' was accepted: nginx would read it as a variable")
	}
}

func TestNginxQuote(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:       `'plain'`,
		`it's`:        `'it\'s'`,
		`back\slash`:  `'back\\slash'`,
		`"etag-1-gz"`: `'"etag-1-gz"'`,
		`a;b{c}d#e f`: `'a;b{c}d#e f'`,
		"":            `''`,
	} {
		got, err := nginxQuote(in)
		if err != nil || got != want {
			t.Errorf("nginxQuote(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"$x", "a\nb", "a\rb"} {
		if _, err := nginxQuote(bad); err == nil {
			t.Errorf("nginxQuote(%q): no error", bad)
		}
	}
}

func TestChunks(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want []string
	}{
		{"", 3, []string{""}},
		{"abc", 3, []string{"abc"}},
		{"abcd", 3, []string{"abc", "d"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
	} {
		got := chunks([]byte(c.in), c.n)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("chunks(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestNginxConfigSyntax has nginx itself check the generated configuration,
// where nginx is installed (make loadtest installs it).
func TestNginxConfigSyntax(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx not installed")
	}
	dir := t.TempDir()
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(prefix, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := nginxConfig(nginxSpec{Prefix: prefix, StaticRoot: dir, StaticAddr: "127.0.0.1:1", MemoryAddr: "127.0.0.1:2", Routes: testCaptures()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nginx", "-t", "-q", "-p", prefix, "-c", path, "-e", filepath.Join(prefix, "error.log")).CombinedOutput()
	if err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}
