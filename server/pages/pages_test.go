package pages

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"go.yaml.in/yaml/v3"
)

// request runs one request through Page, as the server hands it over.
func request(p *Pages, method, path string, headers ...string) (*fasthttp.RequestCtx, bool) {
	ctx := new(fasthttp.RequestCtx)
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	return ctx, p.Page(ctx)
}

// header returns a response header by name, compared without case:
// fasthttp's Peek normalises "ETag" to "Etag" and would miss it.
func header(ctx *fasthttp.RequestCtx, name string) string {
	for k, v := range ctx.Response.Header.All() {
		if strings.EqualFold(string(k), name) {
			return string(v)
		}
	}
	return ""
}

// Every page and file answers with its embedded bytes and the headers that
// let a CDN keep it and a browser run nothing from elsewhere; no cookie.
func TestEveryPageIsServedWithItsHeaders(t *testing.T) {
	p := New()
	for _, r := range routes {
		want, err := site.ReadFile(r.file)
		if err != nil {
			t.Fatal(err)
		}
		ctx, ok := request(p, "GET", r.path)
		if !ok || ctx.Response.StatusCode() != 200 {
			t.Fatalf("GET %s: handled %v, status %d", r.path, ok, ctx.Response.StatusCode())
		}
		if !bytes.Equal(ctx.Response.Body(), want) {
			t.Errorf("GET %s: the body is not %s", r.path, r.file)
		}
		for name, value := range map[string]string{
			"Content-Type":           r.contentType,
			"Cache-Control":          "public, max-age=300",
			"Vary":                   "Accept-Encoding",
			"X-Content-Type-Options": "nosniff",
		} {
			if got := header(ctx, name); got != value {
				t.Errorf("GET %s: %s %q, want %q", r.path, name, got, value)
			}
		}
		if csp := header(ctx, "Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", r.path, csp)
		}
		// The tag is the bytes' hash, so every process of a release, every
		// member of a cluster, answers the same one.
		sum := sha256.Sum256(want)
		if etag, tag := header(ctx, "ETag"), `"`+base64.RawURLEncoding.EncodeToString(sum[:12])+`"`; etag != tag {
			t.Errorf("GET %s: ETag %q, want the hash of its bytes %q", r.path, etag, tag)
		}
		if c := header(ctx, "Set-Cookie"); c != "" {
			t.Errorf("GET %s sets a cookie: %q", r.path, c)
		}
	}
}

func TestOtherPathsAreNotPages(t *testing.T) {
	p := New()
	for _, path := range []string{"/index.html", "/docs/api.html", "/assets/", "/assets/nope.js", "/api/public/pairs", "/Docs", "/docs/api"} {
		ctx, ok := request(p, "GET", path)
		if ok || ctx.Response.StatusCode() != 200 || len(ctx.Response.Body()) != 0 {
			t.Errorf("GET %s: handled %v, status %d, %d bytes written", path, ok, ctx.Response.StatusCode(), len(ctx.Response.Body()))
		}
	}
	// One trailing slash names the same page.
	for _, path := range []string{"/docs/", "/docs/ops/"} {
		ctx, ok := request(p, "GET", path)
		want, _ := request(p, "GET", strings.TrimSuffix(path, "/"))
		if !ok || !bytes.Equal(ctx.Response.Body(), want.Response.Body()) {
			t.Errorf("GET %s is not %s", path, strings.TrimSuffix(path, "/"))
		}
	}
}

func TestGzipIsTheSameBytesUnderItsOwnTag(t *testing.T) {
	p := New()
	for _, r := range routes {
		plain, _ := request(p, "GET", r.path)
		ctx, _ := request(p, "GET", r.path, "Accept-Encoding", "gzip, deflate, br")
		if header(ctx, "Content-Encoding") != "gzip" {
			t.Fatalf("GET %s with gzip: Content-Encoding %q", r.path, header(ctx, "Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(ctx.Response.Body()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain.Response.Body()) {
			t.Errorf("GET %s: the gzip body does not decompress to the page", r.path)
		}
		if want := strings.TrimSuffix(header(plain, "ETag"), `"`) + `-gz"`; header(ctx, "ETag") != want {
			t.Errorf("GET %s with gzip: ETag %q, want %q", r.path, header(ctx, "ETag"), want)
		}
	}
}

func TestConditionalRequestsGet304(t *testing.T) {
	p := New()
	first, _ := request(p, "GET", "/")
	etag := header(first, "ETag")
	gz, _ := request(p, "GET", "/", "Accept-Encoding", "gzip")
	for _, tc := range []struct {
		name, inm, ae string
		want          int
	}{
		{"same tag", etag, "", 304},
		{"weak form", "W/" + etag, "", 304},
		{"in a list", `"x", ` + etag, "", 304},
		{"any", "*", "", 304},
		{"gzip tag", header(gz, "ETag"), "gzip", 304},
		{"identity tag for gzip", etag, "gzip", 200},
		{"gzip tag for identity", header(gz, "ETag"), "", 200},
		{"other tag", `"abc"`, "", 200},
	} {
		ctx, _ := request(p, "GET", "/", "If-None-Match", tc.inm, "Accept-Encoding", tc.ae)
		if got := ctx.Response.StatusCode(); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
		if tc.want == 304 && (len(ctx.Response.Body()) != 0 || header(ctx, "ETag") == "" || header(ctx, "Cache-Control") == "") {
			t.Errorf("%s: 304 with %d bytes, ETag %q, Cache-Control %q", tc.name, len(ctx.Response.Body()), header(ctx, "ETag"), header(ctx, "Cache-Control"))
		}
	}
}

func TestOnlyGetAndHeadAreAnswered(t *testing.T) {
	p := New()
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		ctx, ok := request(p, m, "/docs")
		if !ok || ctx.Response.StatusCode() != 405 || header(ctx, "Allow") != "GET, HEAD" || header(ctx, "Cache-Control") != "no-store" {
			t.Errorf("%s /docs: handled %v, status %d, Allow %q", m, ok, ctx.Response.StatusCode(), header(ctx, "Allow"))
		}
	}
	if ctx, ok := request(p, "HEAD", "/"); !ok || ctx.Response.StatusCode() != 200 || header(ctx, "ETag") == "" {
		t.Errorf("HEAD /: handled %v, status %d", ok, ctx.Response.StatusCode())
	}
}

// loads finds the attributes by which a page makes the browser load
// something: a script, a style sheet, an icon, an image, a frame.
var loads = regexp.MustCompile(`<(script|link|img|iframe|source|object|embed)\b[^>]*?\b(src|href)="([^"]*)"`)

// The pages work air-gapped: nothing they load, and no url() in a style,
// is on another origin; the Redoc bundle names none.
func TestNothingIsLoadedFromAnotherOrigin(t *testing.T) {
	for _, r := range routes {
		body, _ := site.ReadFile(r.file)
		for _, m := range loads.FindAllSubmatch(body, -1) {
			if u := string(m[3]); strings.Contains(u, "//") || strings.HasPrefix(u, "data:") && m[1][0] == 's' {
				t.Errorf("%s loads %s", r.file, u)
			}
		}
		if m := regexp.MustCompile(`url\(\s*['"]?(https?:)?//[^)]*\)`).Find(body); m != nil && !strings.HasSuffix(r.file, ".js") {
			t.Errorf("%s loads %s", r.file, m)
		}
	}
	bundle, _ := site.ReadFile("site/assets/redoc.standalone.js")
	if i := bytes.Index(bundle, []byte("cdn.redoc")); i >= 0 {
		t.Errorf("the Redoc bundle still names its CDN: %s", bundle[max(i-80, 0):i+40])
	}
}

// The market page runs only its own files; each reference runs its bundle
// and the one inline script that renders it, named by its hash.
func TestPoliciesAllowOnlyThePagesOwnScripts(t *testing.T) {
	p := New()
	market, _ := site.ReadFile("site/index.html")
	if inlineScript.Match(market) || bytes.Contains(market, []byte(" style=")) || bytes.Contains(market, []byte("<style")) {
		t.Error("index.html has an inline script or style, which its policy refuses")
	}
	for _, path := range []string{"/docs", "/docs/ops"} {
		ctx, _ := request(p, "GET", path)
		scripts := inlineScript.FindAllSubmatch(ctx.Response.Body(), -1)
		if len(scripts) != 1 {
			t.Fatalf("%s has %d inline scripts, want the one that renders it", path, len(scripts))
		}
		sum := sha256.Sum256(scripts[0][1])
		want := "script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"
		if csp := header(ctx, "Content-Security-Policy"); !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
		}
	}
}

// The references are built from the documents in docs/ (make pages-docs;
// make pages-docs-check compares the bytes): each names every path and
// every schema of its document.
func TestReferencesNameEveryPathOfTheirDocument(t *testing.T) {
	for doc, page := range map[string]string{"../../docs/openapi.yaml": "site/docs/api.html", "../../docs/openapi-ops.yaml": "site/docs/ops.html"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Paths      map[string]any `yaml:"paths"`
			Components struct {
				Schemas map[string]any `yaml:"schemas"`
			} `yaml:"components"`
		}
		if err := yaml.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		html, _ := site.ReadFile(page)
		if len(d.Paths) == 0 {
			t.Fatalf("%s has no paths", doc)
		}
		for path := range d.Paths {
			if !bytes.Contains(html, []byte(`"`+path+`"`)) {
				t.Errorf("%s does not name the path %s of %s: run make pages-docs", page, path, doc)
			}
		}
		for name := range d.Components.Schemas {
			if !bytes.Contains(html, []byte(`"`+name+`"`)) {
				t.Errorf("%s does not name the schema %s of %s: run make pages-docs", page, name, doc)
			}
		}
	}
}

// docs/pages.md states each file's size, plain and gzipped, as served.
func TestSizesAreTheDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/pages.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(/[^`]*)` \\| (\\d+) \\| (\\d+) \\|$")
	stated := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		stated[m[1]] = m[2] + " " + m[3]
	}
	for _, s := range New().sizes() {
		if got, want := stated[s.path], strconv.Itoa(s.bytes)+" "+strconv.Itoa(s.gzip); got != want {
			t.Errorf("docs/pages.md states %s as %q bytes and gzipped; it is served as %q", s.path, got, want)
		}
	}
	if len(stated) != len(routes) {
		t.Errorf("docs/pages.md states %d sizes for %d files", len(stated), len(routes))
	}
}
