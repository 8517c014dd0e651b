// Package pages owns what a browser gets from the public host outside
// /api/public/: the live market page at / and the API reference at /docs
// (the operator reference at /docs/ops), with the files they load.
//
// Every file is embedded in the binary as built (the references by Redocly
// CLI from docs/openapi.yaml and docs/openapi-ops.yaml, see the Makefile's
// pages-docs target), so every member of a cluster serves the same bytes
// with the same entity tags. Each file's entity tag is computed once at
// start and its gzip form once, by the first request that takes it. The
// pages read nothing but the public routes, from the browser; nothing here
// runs on an API request.
package pages

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/valyala/fasthttp"
)

//go:embed site
var site embed.FS

// maxAge is how long a browser or a CDN may keep a page or one of its files
// without asking again. The files are not named by their content, so a
// release reaches every reader within maxAge; after it, a cache revalidates
// with the entity tag and gets a 304 while the file is unchanged.
const maxAge = 5 * time.Minute

// The policies a browser enforces on a page: nothing is loaded from another
// origin, no script runs that is not one of the page's own files (or, on
// the references, the one inline script whose hash is listed), and no other
// site may frame the page. The references' styles are inline: Redocly
// renders them into the page and Redoc's styled-components adds more as it
// renders, which no hash can name; its search index runs in a worker
// started from a blob: URL.
const (
	marketPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	docsPolicy = "default-src 'none'; script-src 'self'%s; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src blob:; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	// assetPolicy goes with files that are not documents: they run nothing
	// of their own if opened directly.
	assetPolicy = "default-src 'none'; frame-ancestors 'none'"
)

// route is one path the pages answer, and the embedded file it serves.
type route struct {
	path, file, contentType string
	docs                    bool // a Redoc page: its inline script is hashed into its policy
	policy                  string
}

var routes = []route{
	{path: "/", file: "site/index.html", contentType: "text/html; charset=utf-8", policy: marketPolicy},
	{path: "/docs", file: "site/docs/api.html", contentType: "text/html; charset=utf-8", docs: true},
	{path: "/docs/ops", file: "site/docs/ops.html", contentType: "text/html; charset=utf-8", docs: true},
	{path: "/assets/market.js", file: "site/assets/market.js", contentType: "text/javascript; charset=utf-8", policy: assetPolicy},
	{path: "/assets/market.css", file: "site/assets/market.css", contentType: "text/css; charset=utf-8", policy: assetPolicy},
	{path: "/assets/icon.svg", file: "site/assets/icon.svg", contentType: "image/svg+xml", policy: assetPolicy},
	{path: "/assets/redoc.standalone.js", file: "site/assets/redoc.standalone.js", contentType: "text/javascript; charset=utf-8", policy: assetPolicy},
}

// file is one served file: its bytes and headers, built once.
type file struct {
	body        []byte
	contentType []byte
	policy      []byte
	etag        []byte // "<hash>", strong: one representation
	etagGzip    []byte // "<hash>-gz"

	gzipOnce sync.Once
	gzipBody []byte
}

// gzipped returns the file's gzip form, compressing it on the first call.
func (f *file) gzipped() []byte {
	f.gzipOnce.Do(func() {
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = w.Write(f.body)
		_ = w.Close()
		f.gzipBody = buf.Bytes()
	})
	return f.gzipBody
}

// Pages serves the pages. Its Page method is safe for concurrent use.
type Pages struct {
	files map[string]*file
}

// New returns the pages, read from the files embedded in the binary. It
// panics if one is missing: that is a broken build, not a configuration.
func New() *Pages {
	p := &Pages{files: map[string]*file{}}
	for _, r := range routes {
		body, err := site.ReadFile(r.file)
		if err != nil {
			panic("pages: " + err.Error())
		}
		sum := sha256.Sum256(body)
		tag := base64.RawURLEncoding.EncodeToString(sum[:12])
		policy := r.policy
		if r.docs {
			policy = docsPolicyFor(body)
		}
		p.files[r.path] = &file{
			body:        body,
			contentType: []byte(r.contentType),
			policy:      []byte(policy),
			etag:        []byte(`"` + tag + `"`),
			etagGzip:    []byte(`"` + tag + `-gz"`),
		}
	}
	// One trailing slash names the same page, as it names the same API route.
	p.files["/docs/"] = p.files["/docs"]
	p.files["/docs/ops/"] = p.files["/docs/ops"]
	return p
}

// inlineScript matches a script element without a src attribute and
// captures its text, which a policy names by its hash.
var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// docsPolicyFor returns the policy of a Redoc page: Redocly's build puts the
// reference's state and the call that renders it in one inline script,
// allowed by its hash and by nothing else.
func docsPolicyFor(body []byte) string {
	var hashes []byte
	for _, m := range inlineScript.FindAllSubmatch(body, -1) {
		sum := sha256.Sum256(m[1])
		hashes = append(hashes, " 'sha256-"...)
		hashes = append(hashes, base64.StdEncoding.EncodeToString(sum[:])...)
		hashes = append(hashes, '\'')
	}
	return fmt.Sprintf(docsPolicy, hashes)
}

// Header names and values, as the server writes its own.
var (
	headerCSP          = []byte("Content-Security-Policy")
	headerNoSniff      = []byte("X-Content-Type-Options")
	headerReferrer     = []byte("Referrer-Policy")
	headerCacheControl = []byte("Cache-Control")
	headerETag         = []byte("ETag")
	headerVary         = []byte("Vary")
	headerContentEnc   = []byte("Content-Encoding")
	headerAllow        = []byte("Allow")

	valueNoSniff     = []byte("nosniff")
	valueNoReferrer  = []byte("no-referrer")
	valueCache       = []byte("public, max-age=" + strconv.Itoa(int(maxAge/time.Second)))
	valueNoStore     = []byte("no-store")
	valueVaryAE      = []byte("Accept-Encoding")
	valueGzip        = []byte("gzip")
	valueAllow       = []byte("GET, HEAD")
	valueText        = []byte("text/plain; charset=utf-8")
	bodyMethodRefuse = []byte("405 method not allowed: the pages answer GET and HEAD\n")
)

// Page answers a request for one of the pages or their files and reports
// true, or reports false, writing nothing, when the path is not one of
// them. GET and HEAD are answered; any other method on a page's path is
// 405.
func (p *Pages) Page(ctx *fasthttp.RequestCtx) bool {
	f := p.files[string(ctx.Path())]
	if f == nil {
		return false
	}
	resp := &ctx.Response
	if !ctx.IsGet() && !ctx.IsHead() {
		resp.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		resp.Header.SetCanonical(headerAllow, valueAllow)
		resp.Header.SetCanonical(headerCacheControl, valueNoStore)
		resp.Header.SetContentTypeBytes(valueText)
		resp.SetBodyRaw(bodyMethodRefuse)
		return true
	}
	// Browsers never refuse gzip with q=0; a client that names it is
	// taken at its word.
	useGzip := ctx.Request.Header.HasAcceptEncodingBytes(valueGzip)
	etag := f.etag
	if useGzip {
		etag = f.etagGzip
	}
	resp.Header.SetCanonical(headerCacheControl, valueCache)
	resp.Header.SetCanonical(headerETag, etag)
	resp.Header.SetCanonical(headerVary, valueVaryAE)
	resp.Header.SetCanonical(headerCSP, f.policy)
	resp.Header.SetCanonical(headerNoSniff, valueNoSniff)
	resp.Header.SetCanonical(headerReferrer, valueNoReferrer)
	if matches(ctx.Request.Header.Peek(fasthttp.HeaderIfNoneMatch), etag) {
		resp.SetStatusCode(fasthttp.StatusNotModified)
		resp.Header.SetNoDefaultContentType(true)
		return true
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentTypeBytes(f.contentType)
	if useGzip {
		resp.Header.SetCanonical(headerContentEnc, valueGzip)
		resp.SetBodyRaw(f.gzipped())
		return true
	}
	resp.SetBodyRaw(f.body)
	return true
}

// matches reports whether an If-None-Match value names etag, weakly (W/"x"
// names "x") as RFC 9110 has it, or is "*". A tag is a quoted base64url
// hash, so finding it quoted in the list is finding it as an item.
func matches(ifNoneMatch, etag []byte) bool {
	return bytes.Contains(ifNoneMatch, etag) || string(bytes.TrimSpace(ifNoneMatch)) == "*"
}

// sizes reports each page and file served, by path, with its size as
// served and gzipped, for the documentation and its test.
func (p *Pages) sizes() []size {
	var out []size
	for _, r := range routes {
		f := p.files[r.path]
		out = append(out, size{path: r.path, bytes: len(f.body), gzip: len(f.gzipped())})
	}
	return out
}

// size is one file's size as served and gzipped, in bytes.
type size struct {
	path        string
	bytes, gzip int
}
