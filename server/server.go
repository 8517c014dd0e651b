// Package server owns the public HTTP API: routing, query validation, the
// error bodies, the caching and cross-origin headers, the per-client rate
// limit and the choice of client address behind trusted proxies.
//
// It serves the pre-serialized snapshots a snapshot.Store holds and computes
// no JSON: a request picks a snapshot, slices its bytes and writes them. A 200
// answer allocates nothing at steady state. The venue is never called on a
// request's behalf except through Feed.Load, when a pair has no fresh
// snapshot yet, or its book vouches for fewer levels than the request asks.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"marketfeed/internal/logkey"
	"marketfeed/snapshot"
)

// Feed is the server's view of the poller.
type Feed interface {
	// Want marks a pair's stream as asked for at now (Unix ns), keeping it
	// hot. It is called on every /orderbook and /trades request for a
	// listed pair, so it must not allocate; now is the request's time, the
	// one the server already took for it, so that Want need not read the
	// clock again. tickerID is valid only during the call.
	Want(tickerID []byte, s snapshot.Stream, now int64)
	// Load reads the stream from the venue now (one read shared by
	// concurrent callers) and returns once it is published or has failed,
	// or ctx is done. For a book, depth is the levels a side must serve
	// (1..snapshot.MaxDepth; see snapshot.Book.Serves): a fresh book that
	// vouches for fewer on a side the venue may hold more of is read
	// deeper. Trades ignore it.
	Load(ctx context.Context, tickerID string, s snapshot.Stream, depth int) error
}

// Pages is what the public address gives a browser besides the API: a
// page or one of its files, for a path that is no API route. Page answers
// the request and reports true when the path is one of its own, and
// reports false, writing nothing, otherwise.
type Pages interface {
	Page(ctx *fasthttp.RequestCtx) bool
}

// Config configures a Server. Zero values select the documented defaults.
type Config struct {
	// Store holds the snapshots to serve. Required.
	Store *snapshot.Store
	// Feed marks pairs hot and loads cold ones. nil: no hot marking and no
	// cold loads, so a pair without a fresh snapshot is answered with 502.
	Feed Feed
	// Pages answers the paths outside /api/public/ (the pages of package
	// pages) before they are 404: it is asked only once a path is known
	// not to be the API's. nil: every such path is 404.
	Pages Pages
	// Logger receives panics and cold-load failures. nil: discard.
	Logger *slog.Logger
	// Metrics receives the server's metrics (requests by route and status,
	// their latency, the clients the rate limiter holds). nil: a private
	// set, so that servers in tests do not share counters. One set holds
	// the metrics of one Server: the names would collide.
	Metrics *metrics.Set

	// MaxStale is the age past which a book, trades or tickers snapshot is
	// not served (502). For books and trades one Load is tried first.
	// Default 10s.
	MaxStale time.Duration
	// PairsMaxStale is the age past which /pairs is not served (502). The
	// catalog is refreshed about once a minute. Default 10m.
	PairsMaxStale time.Duration
	// ColdTimeout is how long a request waits on Load. Default 2s.
	ColdTimeout time.Duration

	// RateLimit is the number of requests allowed per client address in
	// any minute (any 60 s window), all of which may be spent at once; see
	// limiter for how the window is kept. 0 or less: no limit.
	RateLimit int
	// RateLimitKeys bounds how many client keys the rate limiter holds, and
	// so its memory: at most about 60 bytes a key, under 60 MiB at the
	// default DefaultRateLimitKeys, however many addresses call (about 100
	// bytes a key with a RateLimit over 65,535). When more
	// clients are active at once than it holds, arbitrary ones are forgotten
	// and start afresh.
	RateLimitKeys int
	// RateLimitExempt lists client addresses that are not limited.
	RateLimitExempt []netip.Prefix
	// TrustedProxies lists peers whose ClientIPHeader is believed.
	TrustedProxies []netip.Prefix
	// ClientIPHeader names the header that carries the client address when
	// the peer is a trusted proxy: "X-Forwarded-For" (the default; the
	// rightmost hop that is not a trusted proxy is the client) or a
	// single-value header such as "CF-Connecting-IP".
	ClientIPHeader string

	// Now is the clock. nil: the time fasthttp took when the request arrived
	// (or time.Now outside a fasthttp server).
	Now func() time.Time

	// ReadTimeout, WriteTimeout and IdleTimeout guard against slow clients.
	// Defaults 5s, 5s and 60s. ReadTimeout bounds reading a request, from
	// its first bytes (a connection's first request: from the connection);
	// WriteTimeout writing an answer, from the end of its handling;
	// IdleTimeout the wait for the next request on a keep-alive
	// connection, from the end of the last answer's write. Each fires at
	// the time it says or up to a tenth of the smallest of them later (500
	// ms with the defaults): a busy connection's deadlines are moved only
	// that often, rather than three times a request.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns is the most connections open at once. A connection over it
	// is answered 503 {"code":"OVERLOADED",...} with Retry-After and closed.
	// Default 10000.
	MaxConns int
}

// Defaults for the zero values of Config.
const (
	DefaultMaxStale       = 10 * time.Second
	DefaultPairsMaxStale  = 10 * time.Minute
	DefaultColdTimeout    = 2 * time.Second
	DefaultReadTimeout    = 5 * time.Second
	DefaultWriteTimeout   = 5 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultMaxConns       = 10000
	DefaultClientIPHeader = "X-Forwarded-For"

	// The API takes no request body and small headers; anything larger is
	// refused before it costs memory.
	maxBodySize   = 1 << 10
	maxHeaderSize = 8 << 10
)

// Server answers the public API. Handler is safe for concurrent use.
type Server struct {
	store         *snapshot.Store
	feed          Feed
	pages         Pages // nil: no pages
	log           *slog.Logger
	now           func() time.Time
	maxStale      time.Duration
	pairsMaxStale time.Duration
	coldTimeout   time.Duration
	limit         rateLimiter // nil: no rate limit
	exempt        []netip.Prefix
	ip            clientIP
	metrics       *serverMetrics
	maxConns      int              // connections open at once; more are refused with 503
	timeouts      connTimeouts     // the connections' timeouts, which they keep themselves
	refusedConns  *metrics.Counter // connections refused over maxConns

	srv *fasthttp.Server

	mu     sync.Mutex
	closed bool
	lns    []*onceCloseListener
	caps   []*capListener // one per Serve; Shutdown waits for their refusals
}

// ShareRateLimit makes the rate limiter count, per client, the requests it
// allows, for DrainRateCounts: replicas behind a round-robin balancer each
// see a part of a client's requests, and charge one another's (see
// ChargeRate) to limit the client as one. It reports false, and does
// nothing, without a rate limit. Call it before Serve.
func (s *Server) ShareRateLimit() bool {
	if s.limit == nil {
		return false
	}
	s.limit.count()
	return true
}

// DrainRateCounts hands f every client key with the requests this server
// allowed it since the last drain, and forgets them. f must not call the
// server.
func (s *Server) DrainRateCounts(f func(key uint64, n uint32)) {
	if s.limit != nil {
		s.limit.drain(f)
	}
}

// ChargeRate records n requests of the client key made at another replica
// (a key DrainRateCounts handed it there), as if this server had allowed
// them now: they count in the client's current bucket of its window.
func (s *Server) ChargeRate(key uint64, n uint32) {
	if s.limit == nil {
		return
	}
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	s.limit.charge(key, n, now.UnixNano())
}

// New returns a Server for cfg. It panics if cfg.Store is nil.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("server: nil Store")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	header := cfg.ClientIPHeader
	if header == "" {
		header = DefaultClientIPHeader
	}
	canonical := []byte(header)
	normalizeHeaderName(canonical)
	s := &Server{
		store:         cfg.Store,
		feed:          cfg.Feed,
		pages:         cfg.Pages,
		log:           log.With(logkey.Component, "server"),
		now:           cfg.Now,
		maxStale:      orDefault(cfg.MaxStale, DefaultMaxStale),
		pairsMaxStale: orDefault(cfg.PairsMaxStale, DefaultPairsMaxStale),
		coldTimeout:   orDefault(cfg.ColdTimeout, DefaultColdTimeout),
		exempt:        normalizePrefixes(cfg.RateLimitExempt),
		ip: clientIP{
			trusted: normalizePrefixes(cfg.TrustedProxies),
			header:  canonical,
			xff:     string(canonical) == fasthttp.HeaderXForwardedFor,
		},
	}
	if cfg.RateLimit > 0 {
		keys := cfg.RateLimitKeys
		if keys <= 0 {
			keys = DefaultRateLimitKeys
		}
		s.limit = newLimiter(cfg.RateLimit, keys)
	}
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	s.metrics = newServerMetrics(set, func() int {
		if s.limit == nil {
			return 0
		}
		return s.limit.len()
	})
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	s.maxConns = maxConns
	s.refusedConns = set.NewCounter("marketfeed_connections_refused_total")
	read := orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	write := orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	idle := orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	s.timeouts = connTimeouts{read: int64(read), write: int64(write), idle: int64(idle),
		slack: int64(min(read, write, idle) / deadlineSlackPart)}
	s.srv = &fasthttp.Server{
		Handler:      s.Handler,
		ErrorHandler: s.requestError,
		// No ReadTimeout, WriteTimeout or IdleTimeout: the connections
		// keep theirs themselves (see cappedConn), without the clock
		// readings fasthttp takes for its own on every request, told by
		// connState where fasthttp's loop is.
		ConnState: connState,
		// The cap is capListener's, which answers in the API's format;
		// fasthttp's own must never be the one that trips.
		Concurrency:           maxConns + connCapSlack,
		MaxRequestBodySize:    maxBodySize,
		ReadBufferSize:        maxHeaderSize,
		WriteBufferSize:       writeBufferSize,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{s.log},
	}
	return s
}

// deadlineSlackPart is the part of the smallest timeout a connection's
// deadlines may fire late (see deadline).
const deadlineSlackPart = 10

// writeBufferSize holds a whole answer, headers and body: with fasthttp's
// default of 4 KiB, every body over it (a full book, /pairs, 100 trades)
// took two write calls, and the profile of a full-book load run was three
// quarters in that syscall. 16 KiB holds the full book and 100 trades of
// the busiest pairs in one write; larger answers still go out whole, in more.
const writeBufferSize = 16 << 10

// connCapSlack keeps fasthttp's connection limit above the listener's: a
// connection closed by fasthttp leaves the listener's count a moment before
// fasthttp's own.
const connCapSlack = 256

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// normalizeHeaderName writes a header name the way fasthttp stores parsed
// request headers: upper case at the start and after each '-', lower case
// elsewhere ("CF-Connecting-IP" is stored as "Cf-Connecting-Ip").
func normalizeHeaderName(b []byte) {
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
		upper = c == '-'
	}
}

// Serve answers requests on ln until Shutdown. It returns nil once the server
// is shut down, also when Shutdown came first.
func (s *Server) Serve(ln net.Listener) error {
	l := &onceCloseListener{Listener: ln}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return nil
	}
	capped := newCapListener(l, s.maxConns, s.refusedConns, s.timeouts)
	s.lns = append(s.lns, l)
	s.caps = append(s.caps, capped)
	s.mu.Unlock()
	return s.srv.Serve(capped)
}

// Shutdown stops accepting connections and waits until the requests in
// flight are answered, or ctx is done. Connections being refused over
// MaxConns are closed, and their goroutines have returned when it does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	lns, caps := s.lns, s.caps
	s.mu.Unlock()
	// Closing the listeners here as well covers a Serve that has not yet
	// handed its listener to fasthttp, which would otherwise serve on.
	for _, l := range lns {
		_ = l.Close()
	}
	for _, c := range caps {
		c.stop()
	}
	return s.srv.ShutdownWithContext(ctx)
}

// onceCloseListener lets Shutdown and fasthttp both close a listener.
type onceCloseListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *onceCloseListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// Handler answers one request. It is the whole request path, usable on a
// fasthttp.RequestCtx directly.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	// fasthttp reads the clock just before calling the handler; only a
	// context built outside a server (tests) lacks that time.
	start := ctx.Time()
	if start.IsZero() {
		start = time.Now()
	}
	label := labelOther
	defer s.finish(ctx, start, &label)
	s.serve(ctx, &label)
}

// finish counts the answer and its latency, after turning a panic into a
// 500 and a logged stack: a bug in one request must not take the process,
// and every other request, down. recover works only when called by the
// deferred function itself, which is why both live here.
// label is the request's route label, set by serve once it has parsed the
// path, so the path is parsed once.
func (s *Server) finish(ctx *fasthttp.RequestCtx, start time.Time, label *int) {
	if r := recover(); r != nil {
		s.log.Error("panic in handler",
			slog.Any(logkey.Panic, r),
			slog.String(logkey.Method, string(ctx.Method())),
			slog.String(logkey.URI, string(ctx.RequestURI())),
			slog.String(logkey.Stack, string(debug.Stack())))
		ctx.Response.Reset()
		fail(&ctx.Response, errInternal)
	}
	d := time.Since(start)
	s.metrics.observe(ctx.ConnID(), *label, ctx.Response.StatusCode(), d)
	if c, ok := ctx.Conn().(*cappedConn); ok {
		// The answer's write timeout counts from now, which the latency
		// has just read.
		c.answered(int64(start.Sub(clockBase) + d))
	}
}

// serve answers the request and sets *label to its route label.
func (s *Server) serve(ctx *fasthttp.RequestCtx, label *int) {
	now := s.clock(ctx)
	options := ctx.IsOptions()
	r := routeOf(ctx.Path())
	*label = labelOf(r, ctx.Path())
	// Every request counts against the limit, errors included, except a
	// CORS preflight: browsers send those on their own, they carry no data
	// and Access-Control-Max-Age keeps them rare.
	if s.limit != nil && !options {
		if a := s.ip.addr(ctx); !containsAddr(s.exempt, a) {
			if ok, wait := s.limit.allow(key(a), now); !ok {
				rateLimited(&ctx.Response, wait)
				return
			}
		}
	}
	switch {
	case r == routeNone:
		// Nothing under /api/public/ is a page: the API's own 404.
		if s.pages == nil || bytes.HasPrefix(ctx.Path(), apiPrefix) || !s.pages.Page(ctx) {
			fail(&ctx.Response, errNotFound)
		}
		return
	case options:
		preflight(ctx)
		return
	case !ctx.IsGet():
		fail(&ctx.Response, errMethod)
		return
	}
	switch r {
	case routePairs:
		s.pairs(ctx, now)
	case routeTickers:
		s.tickers(ctx, now)
	case routeBook:
		s.book(ctx, now)
	case routeTrades:
		s.trades(ctx, now)
	case routeContracts:
		s.contracts(ctx, now, false)
	case routeContractSpecs:
		s.contracts(ctx, now, true)
	}
}

// clock returns now in Unix ns. Without an injected clock it uses the time
// fasthttp already took for the request rather than reading the clock again.
func (s *Server) clock(ctx *fasthttp.RequestCtx) int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	if t := ctx.Time(); !t.IsZero() {
		return t.UnixNano()
	}
	return time.Now().UnixNano()
}

func (s *Server) pairs(ctx *fasthttp.RequestCtx, now int64) {
	p := s.store.Pairs()
	if e := s.pairsFailure(p, now); e != nil {
		fail(&ctx.Response, e)
		return
	}
	if answer(ctx, p.Tag(), nil, gzipFor(ctx, p)) {
		ctx.Response.SetBodyRaw(p.Body())
	}
}

// pairsFailure is the error /pairs answers at now with p, nil when it
// answers p.
func (s *Server) pairsFailure(p *snapshot.Pairs, now int64) *apiError {
	switch {
	case p == nil:
		return errNoCatalog
	case !p.FreshAt(now, s.pairsMaxStale):
		return errCatalogStale
	}
	return nil
}

// Unavailable returns the whole-market routes (pairs, tickers, contracts,
// contract_specs) that answer 502 at now, their document missing or older
// than they may serve: what the operator's /readyz shows, since a member
// stays ready through a venue's failure (every member would fail alike).
// Off the request path: it allocates.
func (s *Server) Unavailable(now time.Time) []string {
	ns := now.UnixNano()
	var out []string
	if s.pairsFailure(s.store.Pairs(), ns) != nil {
		out = append(out, "pairs")
	}
	if !s.store.Tickers().FreshAt(ns, s.maxStale) {
		out = append(out, "tickers")
	}
	if !s.store.Contracts().FreshAt(ns, s.maxStale) {
		out = append(out, "contracts", "contract_specs")
	}
	return out
}

func (s *Server) tickers(ctx *fasthttp.RequestCtx, now int64) {
	t := s.store.Tickers()
	if !t.FreshAt(now, s.maxStale) {
		fail(&ctx.Response, errNoTickers)
		return
	}
	if answer(ctx, t.Tag(), nil, gzipFor(ctx, t)) {
		ctx.Response.SetBodyRaw(t.Body())
	}
}

// contracts answers /contracts, or with specs /contract_specs, from the
// same publication: the two lists always describe the same contracts.
func (s *Server) contracts(ctx *fasthttp.RequestCtx, now int64, specs bool) {
	c := s.store.Contracts()
	if !c.FreshAt(now, s.maxStale) {
		fail(&ctx.Response, errNoContracts)
		return
	}
	var doc wholeBody = c
	if specs {
		doc = c.Specs()
	}
	if answer(ctx, doc.Tag(), nil, gzipFor(ctx, doc)) {
		ctx.Response.SetBodyRaw(doc.Body())
	}
}

// wholeBody is a response served whole, as published.
type wholeBody interface {
	Body() []byte
	Gzip() []byte
	Tag() []byte
}

func (s *Server) book(ctx *fasthttp.RequestCtx, now int64) {
	raw := readQuery(ctx.URI())
	q, e := parseBook(&raw)
	if e != nil {
		fail(&ctx.Response, e)
		return
	}
	snap, e := s.perPair(&bookRoute, q.id, q.depth, now)
	if e != nil {
		fail(&ctx.Response, e)
		return
	}
	b := snap.(*snapshot.Book)
	bids, asks := b.Levels()
	if q.depth >= max(bids, asks) {
		if answer(ctx, b.Tag(), nil, gzipFor(ctx, b)) {
			ctx.Response.SetBodyRaw(b.Body()) // the whole book: no copy
		}
		return
	}
	var buf [8]byte
	if !answer(ctx, b.Tag(), strconv.AppendInt(append(buf[:0], '-', 'd'), int64(q.depth), 10), nil) {
		return
	}
	head, middle, tail := b.Parts(q.depth)
	ctx.Response.AppendBody(head)
	ctx.Response.AppendBody(middle)
	ctx.Response.AppendBody(tail)
}

func (s *Server) trades(ctx *fasthttp.RequestCtx, now int64) {
	raw := readQuery(ctx.URI())
	q, e := parseTrades(&raw)
	if e != nil {
		fail(&ctx.Response, e)
		return
	}
	snap, e := s.perPair(&tradesRoute, q.id, q.limit, now)
	if e != nil {
		fail(&ctx.Response, e)
		return
	}
	t := snap.(*snapshot.Trades)
	head, tail := t.Parts(q.side, q.limit)
	var buf [8]byte
	suffix := append(buf[:0], sideSuffix[q.side]...)
	if tail != nil {
		suffix = strconv.AppendInt(append(suffix, '-', 'l'), int64(q.limit), 10)
	}
	var gz gzipForm
	if tail == nil && q.side == snapshot.SideAll {
		// Only the default body, every trade of both sides, has a gzip form.
		gz = gzipFor(ctx, t)
	}
	if !answer(ctx, t.Tag(), suffix, gz) {
		return
	}
	if tail == nil {
		ctx.Response.SetBodyRaw(head) // every trade of the side: no copy
		return
	}
	ctx.Response.AppendBody(head)
	ctx.Response.AppendBody(tail)
}

// gzipFor returns gz when the request accepts gzip, nil otherwise: what
// answer sends compressed, for a variant that has a gzip form.
func gzipFor(ctx *fasthttp.RequestCtx, gz gzipForm) gzipForm {
	if acceptsGzip(ctx.Request.Header.PeekCanonical(headerAcceptEnc)) {
		return gz
	}
	return nil
}

// sideSuffix names a trade side in entity tags.
var sideSuffix = [...]string{snapshot.SideAll: "", snapshot.SideBuy: "-b", snapshot.SideSell: "-s"}

// pairRoute is what differs between the per-pair routes, one row per
// stream kind they serve: everything else about the kind (how the store
// holds it, when it is fresh) is the kind's value's (see
// snapshot.PairValue), so the lookup path is written once.
type pairRoute struct {
	stream      snapshot.Stream
	unavailable *apiError // the 502 of a pair the venue could not be read for
}

var (
	bookRoute   = pairRoute{snapshot.StreamBook, errNoBook}
	tradesRoute = pairRoute{snapshot.StreamTrades, errNoTrades}
)

// perPair is the one lookup path of /orderbook and the trade routes: the
// catalog gates the pair, the feed is told it is wanted, and a pair without
// a fresh snapshot that serves n items (a book: n levels a side; see
// snapshot.PairValue.Serves) gets one load before the answer is a 502: a
// book is never served short of the levels the venue has. The store is read
// again after the load: the store, not the load's error, says whether there
// is something to serve, and the pair may have been delisted meanwhile.
// The route's handler asserts the value back to its kind's type.
func (s *Server) perPair(r *pairRoute, id []byte, n int, now int64) (snapshot.PairValue, *apiError) {
	if s.store.Pairs() == nil {
		return nil, errNoCatalog // no catalog: listed or not is unknown
	}
	snap, listed := s.store.Pair(r.stream, id, now)
	if !listed {
		return nil, errUnknownTicker
	}
	if s.feed != nil {
		s.feed.Want(id, r.stream, now)
	}
	if snap.FreshAt(now, s.maxStale) && snap.Serves(n) {
		return snap, nil
	}
	s.load(id, r.stream, n, snap, now)
	if snap, listed = s.store.Pair(r.stream, id, now); !listed {
		return nil, errUnknownTicker
	}
	if !snap.FreshAt(now, s.maxStale) || !snap.Serves(n) {
		return nil, r.unavailable
	}
	return snap, nil
}

// load asks the feed for one read of a pair's stream, deep enough for n
// items, and waits for it, at most ColdTimeout. Whatever it returns, the
// caller reads the store again: the store, not the error, says whether
// there is something to serve. The error is the venue's and never reaches
// a response. held is what the store held at now, which could not be
// served: a failed load is logged with why it was needed.
func (s *Server) load(id []byte, stream snapshot.Stream, n int, held snapshot.PairValue, now int64) {
	if s.feed == nil {
		return
	}
	// Not the request's context: fasthttp reuses it after the handler
	// returns, and a shared read may outlive this request.
	ctx, cancel := context.WithTimeout(context.Background(), s.coldTimeout)
	defer cancel()
	if err := s.feed.Load(ctx, string(id), stream, n); err != nil {
		s.log.Debug("cold load failed", slog.String(logkey.Pair, string(id)),
			slog.String(logkey.Stream, stream.String()), slog.String("held", unservable(held, now, s.maxStale)),
			slog.Any(logkey.Err, err))
	}
}

// unservable says why held, a pair's value in the store at now, could not
// answer the request that loaded it: nothing read yet, read too long ago,
// or short of the depth asked (a book the venue may hold more levels of).
func unservable(held snapshot.PairValue, now int64, maxStale time.Duration) string {
	switch at := held.ReadAt(); {
	case at == 0:
		return "nothing"
	case !held.FreshAt(now, maxStale):
		return "stale, read " + time.Duration(now-at).Round(time.Millisecond).String() + " before"
	default:
		return "short of the depth asked"
	}
}

// requestError answers a request fasthttp could not read, in the API's own
// error format, and counts it under the route "other": the path may not
// have been read.
func (s *Server) requestError(ctx *fasthttp.RequestCtx, err error) {
	e := errBadRequest
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &small):
		e = errHeaderTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = errBodyTooLarge
	case errors.As(err, &timeout) && timeout.Timeout():
		e = errRequestTimeout
	}
	ctx.Response.Reset()
	fail(&ctx.Response, e)
	s.metrics.count(ctx.ConnID(), labelOther, e.status)
}

// fasthttpLogger passes fasthttp's own messages (accept errors, connection
// errors) to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...), slog.String(logkey.Source, "fasthttp"))
}
