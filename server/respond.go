package server

import (
	"bytes"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"marketfeed/snapshot"
)

// Header names and values are package-level bytes so that writing them costs
// a copy into the response's reused buffers and nothing else. Names are in
// canonical form, which lets them go through SetCanonical unnormalised, and
// be looked up in a request with PeekCanonical, without the copy and
// normalising PeekBytes makes of its key on every call: the server stores
// parsed request header names in canonical form.
var (
	headerACAO         = []byte("Access-Control-Allow-Origin")
	headerACAM         = []byte("Access-Control-Allow-Methods")
	headerACAH         = []byte("Access-Control-Allow-Headers")
	headerACMA         = []byte("Access-Control-Max-Age")
	headerACRH         = []byte("Access-Control-Request-Headers")
	headerAllow        = []byte("Allow")
	headerCacheControl = []byte("Cache-Control")
	headerRetryAfter   = []byte("Retry-After")
	headerVary         = []byte("Vary")
	headerETag         = []byte("ETag")
	headerContentEnc   = []byte("Content-Encoding")
	headerIfNoneMatch  = []byte("If-None-Match")
	headerAcceptEnc    = []byte("Accept-Encoding")

	valueJSON       = []byte("application/json")
	valueAnyOrigin  = []byte("*")
	valueGet        = []byte("GET")
	valueAllow      = []byte("GET, OPTIONS")
	valueMaxAge     = []byte("86400")
	valuePublic     = []byte("public, max-age=" + strconv.Itoa(int(snapshot.CacheMaxAge/time.Second)))
	valueNoStore    = []byte("no-store")
	valueVaryACRH   = []byte("Access-Control-Request-Headers")
	valueRetryAfter = []byte("1")
	valueGzip       = []byte("gzip")
	valueVaryAE     = []byte("Accept-Encoding")
	weakPrefix      = []byte("W/")
	gzipSuffix      = []byte("-gz")
)

// apiError is one error answer: its status and its complete body. Every
// message is a fixed string of ours, so no request and no venue can put text
// into a response. The values are package-level and never mutated, which is
// what lets the body go out with SetBodyRaw.
type apiError struct {
	status int
	body   []byte
}

func validation(message string) *apiError {
	return &apiError{fasthttp.StatusBadRequest, []byte(`{"code":"VALIDATION_ERROR","message":"` + message + `"}`)}
}

func upstream(message string) *apiError {
	return &apiError{fasthttp.StatusBadGateway, []byte(`{"code":"UPSTREAM_UNAVAILABLE","message":"` + message + `"}`)}
}

func coded(status int, code, message string) *apiError {
	return &apiError{status, []byte(`{"code":"` + code + `","message":"` + message + `"}`)}
}

// The error answers. 400 messages name the parameter and say what is wrong.
var (
	errTickerMissing  = validation("ticker_id is required")
	errTickerRepeated = validation("ticker_id is given more than once")
	errTickerEmpty    = validation("ticker_id is empty")
	errTickerForm     = validation("ticker_id must have the form BASE_TARGET, each side 2 to 15 uppercase letters or digits")
	errDepthRepeated  = validation("depth is given more than once")
	errDepthSyntax    = validation("depth must be an integer: digits only, optionally preceded by -")
	errDepthNegative  = validation("depth must not be negative")
	errLimitRepeated  = validation("limit is given more than once")
	errLimitSyntax    = validation("limit must be an integer: digits only, optionally preceded by -")
	errLimitNegative  = validation("limit must not be negative")
	errTypeRepeated   = validation("type is given more than once")
	errType           = validation("type must be buy or sell")

	errUnknownTicker = &apiError{fasthttp.StatusNotFound, []byte(`{"error":"UNKNOWN_TICKER","message":"ticker_id is not listed by /api/public/pairs"}`)}
	errNotFound      = coded(fasthttp.StatusNotFound, "NOT_FOUND", "no such route; the routes are /api/public/pairs, tickers, contracts, contract_specs, orderbook, trades and historical_trades")
	errMethod        = coded(fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "only GET is allowed")
	errRateLimited   = &apiError{fasthttp.StatusTooManyRequests, []byte(`{"statusCode":429,"code":"RATE_LIMITED","message":"too many requests from this address; retry after the number of seconds in Retry-After"}`)}
	errInternal      = coded(fasthttp.StatusInternalServerError, "INTERNAL", "internal error")

	errNoCatalog      = upstream("the pair list has not been read from the venue yet")
	errCatalogStale   = upstream("the pair list could not be refreshed from the venue")
	errNoTickers      = upstream("tickers could not be read from the venue")
	errNoContracts    = upstream("contracts could not be read from the venue")
	errNoBook         = upstream("the order book could not be read from the venue")
	errNoTrades       = upstream("trades could not be read from the venue")
	errBadRequest     = coded(fasthttp.StatusBadRequest, "BAD_REQUEST", "the request could not be parsed")
	errRequestTimeout = coded(fasthttp.StatusRequestTimeout, "REQUEST_TIMEOUT", "the request was not received in time")
	errBodyTooLarge   = coded(fasthttp.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", "the request body is too large")
	errHeaderTooLarge = coded(fasthttp.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE", "the request headers are too large")
)

// gzipForm is a snapshot whose default body has a gzip form. Books and
// trades compress it for the first request that takes it (see
// snapshot.Book.Gzip), so answer asks for it only when it sends it, never
// for a 304.
type gzipForm interface{ Gzip() []byte }

// answer starts the answer for one variant of a snapshot: a 304 when the
// client's If-None-Match already names it, the gzip body of gz when the
// caller passes one (the variant has a compressed form and the client
// accepts gzip), and otherwise a 200 whose identity body the caller writes,
// which answer reports by returning true.
//
// The entity tag is the snapshot's tag plus suffix, which names the variant
// (depth, side, limit), plus "-gz" for the compressed form: a strong tag
// must differ between two representations. Every 200 and 304 says Vary:
// Accept-Encoding, because a cache in front must not hand gzip to a client
// that did not ask for it, or the reverse.
func answer(ctx *fasthttp.RequestCtx, tag, suffix []byte, gz gzipForm) (writeBody bool) {
	resp := &ctx.Response
	useGzip := gz != nil
	var buf [96]byte
	etag := append(buf[:0], '"')
	etag = append(etag, tag...)
	etag = append(etag, suffix...)
	if useGzip {
		etag = append(etag, gzipSuffix...)
	}
	etag = append(etag, '"')
	resp.Header.SetCanonical(headerACAO, valueAnyOrigin)
	resp.Header.SetCanonical(headerCacheControl, valuePublic)
	resp.Header.SetCanonical(headerETag, etag)
	resp.Header.SetCanonical(headerVary, valueVaryAE)
	if etagMatches(ctx.Request.Header.PeekCanonical(headerIfNoneMatch), etag) {
		resp.SetStatusCode(fasthttp.StatusNotModified)
		resp.Header.SetNoDefaultContentType(true)
		return false
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentTypeBytes(valueJSON)
	if useGzip {
		resp.Header.SetCanonical(headerContentEnc, valueGzip)
		resp.SetBodyRaw(gz.Gzip())
		return false
	}
	return true
}

// etagMatches reports whether an If-None-Match value names etag. The
// comparison is weak, as RFC 9110 prescribes for If-None-Match: W/"x"
// matches "x"; "*" matches any current representation.
func etagMatches(header, etag []byte) bool {
	for len(header) > 0 {
		var item []byte
		item, header = nextItem(header, ',')
		if len(item) == 1 && item[0] == '*' {
			return true
		}
		if bytes.Equal(bytes.TrimPrefix(item, weakPrefix), etag) {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip: it
// names gzip (or x-gzip) without q=0. "*" is not taken as consent: identity
// is always acceptable, so answering uncompressed is never wrong.
func acceptsGzip(header []byte) bool {
	for len(header) > 0 {
		var item []byte
		item, header = nextItem(header, ',')
		name, params := nextItem(item, ';')
		if !bytes.EqualFold(name, valueGzip) && !bytes.EqualFold(name, []byte("x-gzip")) {
			continue
		}
		return !qZero(params)
	}
	return false
}

// nextItem splits the first item off a header list separated by sep and
// returns it without surrounding spaces, and the rest of the list.
func nextItem(list []byte, sep byte) (item, rest []byte) {
	if i := bytes.IndexByte(list, sep); i >= 0 {
		return bytes.TrimSpace(list[:i]), list[i+1:]
	}
	return bytes.TrimSpace(list), nil
}

// qZero reports whether coding parameters carry a zero quality (q=0, q=0.0,
// q=0.000), which refuses the coding.
func qZero(params []byte) bool {
	for len(params) > 0 {
		var p []byte
		p, params = nextItem(params, ';')
		if len(p) < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		v := p[2:]
		if len(v) == 0 || v[0] != '0' {
			return false
		}
		for _, c := range v[1:] {
			if c != '0' && c != '.' {
				return false
			}
		}
		return true
	}
	return false
}

// fail writes an error answer. Non-2xx answers must not be cached anywhere:
// a failed read that a CDN kept would hide the recovery.
func fail(resp *fasthttp.Response, e *apiError) {
	resp.SetStatusCode(e.status)
	resp.Header.SetContentTypeBytes(valueJSON)
	resp.Header.SetCanonical(headerACAO, valueAnyOrigin)
	resp.Header.SetCanonical(headerCacheControl, valueNoStore)
	if e == errMethod {
		resp.Header.SetCanonical(headerAllow, valueAllow)
	}
	resp.SetBodyRaw(e.body)
}

// rateLimited writes the 429 answer; wait is how long until the client's next
// request would pass, in nanoseconds, sent as whole seconds rounded up.
func rateLimited(resp *fasthttp.Response, wait int64) {
	fail(resp, errRateLimited)
	secs := (wait + 1e9 - 1) / 1e9
	if secs <= 1 {
		resp.Header.SetCanonical(headerRetryAfter, valueRetryAfter)
		return
	}
	var buf [20]byte
	resp.Header.SetCanonical(headerRetryAfter, strconv.AppendInt(buf[:0], secs, 10))
}

// preflight answers a CORS preflight. It has no body, so no Content-Type.
// The echoed request headers make the answer depend on them; Vary says so to
// any cache in front, since 2xx answers are public.
func preflight(ctx *fasthttp.RequestCtx) {
	resp := &ctx.Response
	resp.SetStatusCode(fasthttp.StatusNoContent)
	resp.Header.SetNoDefaultContentType(true)
	resp.Header.SetCanonical(headerACAO, valueAnyOrigin)
	resp.Header.SetCanonical(headerACAM, valueGet)
	if h := ctx.Request.Header.PeekCanonical(headerACRH); len(h) > 0 {
		resp.Header.SetCanonical(headerACAH, h)
	}
	resp.Header.SetCanonical(headerACMA, valueMaxAge)
	resp.Header.SetCanonical(headerCacheControl, valuePublic)
	resp.Header.SetCanonical(headerVary, valueVaryACRH)
	resp.ResetBody()
}
