// Package binance reads market data from a Binance USDⓈ-M futures compatible
// REST API and turns it into the poller's values. One Client serves every
// venue that speaks that API (Binance itself, Aster): a Preset gives the
// venue's name, public URL and call weights.
//
// The package owns the venue's wire format and nothing else. Each call reads
// the venue once: pacing, budgets and back-off belong to the poller, which
// tells failures apart by their error kind:
//
//   - a venue answer with a status other than 200 is a *venue.StatusError
//     carrying the status and Retry-After;
//   - an answer that arrived but cannot be used (not JSON, wrong shape, a
//     value that is not a plain decimal, an oversize body) wraps
//     venue.ErrBadData;
//   - anything else is a transport error or the context's error, wrapped
//     so that errors.Is still finds context.DeadlineExceeded or
//     context.Canceled.
//
// No error ever carries bytes of a venue body: bodies can be HTML pages from
// a firewall, and errors end up in logs.
package binance

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"marketfeed/poller/venue"
)

// Weights is what each call costs against the venue's per-minute request
// weight limit.
type Weights struct {
	Catalog int // /fapi/v1/exchangeInfo
	Stats   int // /fapi/v1/ticker/24hr for all symbols
	Quotes  int // /fapi/v1/ticker/bookTicker for all symbols
	Book    int // /fapi/v1/depth at limit 100, the depth the poller reads
	// Trades is one aggregate-trades read (/fapi/v1/aggTrades or the
	// preset's AggTradesPath), whatever its limit: Binance documents 20.
	Trades int
	// Contracts is /fapi/v1/premiumIndex for all symbols: Binance
	// documents 10 (1 for one symbol, which the client never reads).
	Contracts int
	// OpenInterest is /fapi/v1/openInterest for one symbol.
	OpenInterest int
	// TradeID is /fapi/v1/trades at limit 1, the newest single trade of
	// one symbol: Binance documents 5 for the recent-trades list, Aster 1.
	TradeID int
}

// Preset describes one Binance-compatible venue.
type Preset struct {
	// Name is the lowercase venue name, as used in price_source.
	Name string
	// URL is the venue's public base URL, without a trailing slash.
	URL string
	// AggTradesPath is the path of the aggregate-trades list, which
	// differs between venues (Aster serves it under /fapi/v3).
	AggTradesPath string
	// Weights are the venue's published call weights.
	Weights Weights
	// Streams describes the venue's market streams.
	Streams StreamPreset
}

// StreamPreset describes a venue's websocket market streams and the limits
// its servers enforce on them.
type StreamPreset struct {
	// URL is the public stream base URL, without a trailing slash.
	URL string
	// DepthPath is where diff depth streams are served; MarketPath where
	// aggregate trade and all-market ticker streams are. Binance routes them
	// to different paths and a stream subscribed on the wrong one is
	// acknowledged but never delivers; Aster serves both on one path.
	DepthPath  string
	MarketPath string
	// PerConn is the most streams one connection may carry.
	PerConn int
	// ControlPerSecond is how many messages the client sends per second
	// per connection. The venue closes a connection at 10 incoming messages
	// per second, pongs included, so this stays well below.
	ControlPerSecond int
	// NamesPerSubscribe is the most stream names in one SUBSCRIBE.
	NamesPerSubscribe int
	// Lifetime is how long the venue keeps a connection open before it
	// closes it.
	Lifetime time.Duration
}

// Binance is Binance USDⓈ-M futures.
var Binance = Preset{
	Name:          "binance",
	URL:           "https://fapi.binance.com",
	AggTradesPath: "/fapi/v1/aggTrades",
	Weights:       Weights{Catalog: 1, Stats: 40, Quotes: 5, Book: 5, Trades: 20, Contracts: 10, OpenInterest: 1, TradeID: 5},
	Streams: StreamPreset{
		URL:        "wss://fstream.binance.com",
		DepthPath:  "/public/stream",
		MarketPath: "/market/stream",
		// Binance documents 1024 streams per connection, but a mirror of its
		// documentation says 200; 200 is safe either way.
		PerConn:           200,
		ControlPerSecond:  5,
		NamesPerSubscribe: 200,
		Lifetime:          24 * time.Hour,
	},
}

// Aster is Aster perpetual futures, which serves Binance's paths and fields
// with its own weights.
var Aster = Preset{
	Name:          "aster",
	URL:           "https://fapi.asterdex.com",
	AggTradesPath: "/fapi/v3/aggTrades",
	// Aster publishes no aggTrades or premiumIndex weight of its own;
	// Binance's are assumed.
	Weights: Weights{Catalog: 1, Stats: 40, Quotes: 2, Book: 5, Trades: 20, Contracts: 10, OpenInterest: 1, TradeID: 1},
	Streams: StreamPreset{
		URL:               "wss://fstream.asterdex.com",
		DepthPath:         "/stream",
		MarketPath:        "/stream",
		PerConn:           200,
		ControlPerSecond:  5,
		NamesPerSubscribe: 200,
		Lifetime:          24 * time.Hour,
	},
}

// Presets lists every known venue, in the order help texts show them.
var Presets = []Preset{Binance, Aster}

// presetByName returns the preset whose Name is exactly name.
func presetByName(name string) (Preset, bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// DefaultTimeout bounds one venue call, from sending the request to the
// last byte of the body, when Options.Timeout is not set and the caller's
// context has no deadline of its own.
const DefaultTimeout = 5 * time.Second

// Options adjust a Client. The zero value is ready to use.
type Options struct {
	// BaseURL replaces the preset's URL, e.g. for a proxy or a test server.
	BaseURL string
	// HTTPClient sends the requests; nil means a client of the package's
	// own. Its Timeout should be unset: each call has its own deadline.
	HTTPClient *http.Client
	// Timeout bounds one call whose context has no deadline; zero or
	// negative means DefaultTimeout. A context's deadline always wins.
	Timeout time.Duration
}

// Client reads one Binance-compatible venue. It implements venue.Venue and
// venue.UsedWeightReporter and is safe for concurrent use.
type Client struct {
	name    string
	base    string
	weights Weights
	aggPath string
	hc      *http.Client
	timeout time.Duration

	// used is the venue's last X-MBX-USED-WEIGHT-1M; -1 until one arrives.
	used atomic.Int64
}

var (
	_ venue.Venue              = (*Client)(nil)
	_ venue.UsedWeightReporter = (*Client)(nil)
)

// New returns a client for the venue p describes. A malformed BaseURL is not
// reported here but by every call, as an error that is none of the venue
// kinds.
func New(p Preset, opts Options) *Client {
	base := p.URL
	if opts.BaseURL != "" {
		base = opts.BaseURL
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: newTransport()}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c := &Client{
		name:    p.Name,
		base:    strings.TrimRight(base, "/"),
		weights: p.Weights,
		aggPath: cmp.Or(p.AggTradesPath, pathAggTrades),
		hc:      hc,
		timeout: timeout,
	}
	c.used.Store(-1)
	return c
}

// newTransport is the default transport with room for the concurrent calls
// the poller makes to a single host (one book and one trades read per hot
// pair), so that they reuse connections instead of opening new ones.
func newTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = 32
	return t
}

// Name returns the lowercase venue name ("binance", "aster").
func (c *Client) Name() string { return c.name }

// Weight returns the preset's weight for one call of kind k. For
// venue.CallBook it is the weight at limit 100, the depth the poller reads;
// BookWeight gives it for other depths.
func (c *Client) Weight(k venue.Call) int {
	switch k {
	case venue.CallCatalog:
		return c.weights.Catalog
	case venue.CallStats:
		return c.weights.Stats
	case venue.CallQuotes:
		return c.weights.Quotes
	case venue.CallBook:
		return c.weights.Book
	case venue.CallTrades:
		return c.weights.Trades
	case venue.CallContracts:
		return c.weights.Contracts
	case venue.CallOpenInterest:
		return c.weights.OpenInterest
	case venue.CallTradeID:
		return c.weights.TradeID
	}
	return 0
}

// BookWeight returns the weight of a Book call for depth. The venue charges
// by the limit actually sent (see depthLimits): 2 up to 50 levels, the
// preset's Book weight at 100, 10 at 500 and 20 at 1000.
func (c *Client) BookWeight(depth int) int {
	switch limit := depthLimit(depth); {
	case limit <= 50:
		return 2
	case limit <= 100:
		return c.weights.Book
	case limit <= 500:
		return 10
	default:
		return 20
	}
}

// UsedWeight returns the weight the venue last reported as used in its
// current minute (X-MBX-USED-WEIGHT-1M), taken from every answer whatever
// its status, and false before any answer carried it. Concurrent calls can
// finish out of order, so the value may briefly lag by one answer.
func (c *Client) UsedWeight() (int, bool) {
	v := c.used.Load()
	if v < 0 {
		return 0, false
	}
	return int(v), true
}

// The venue's paths.
const (
	pathExchangeInfo = "/fapi/v1/exchangeInfo"
	pathTicker24h    = "/fapi/v1/ticker/24hr"
	pathBookTicker   = "/fapi/v1/ticker/bookTicker"
	pathDepth        = "/fapi/v1/depth"
	pathAggTrades    = "/fapi/v1/aggTrades" // when a preset names none
	pathTrades       = "/fapi/v1/trades"    // single trades, read for the newest one's id
)

// Body size caps. exchangeInfo lists every symbol with its filters (about
// 2 MB on Binance today); the other bodies are far smaller. A body over its
// cap is refused as bad data rather than read without bound.
const (
	maxCatalogBody = 32 << 20
	maxBody        = 8 << 20
)

// Catalog reads /fapi/v1/exchangeInfo: every listed symbol, and the
// REQUEST_WEIGHT limit normalised to a minute (see decodeCatalog).
func (c *Client) Catalog(ctx context.Context) (venue.Catalog, error) {
	body, err := c.get(ctx, pathExchangeInfo, "", maxCatalogBody)
	if err != nil {
		return venue.Catalog{}, fmt.Errorf("fetch exchangeInfo: %w", err)
	}
	cat, err := decodeCatalog(body)
	if err != nil {
		return venue.Catalog{}, fmt.Errorf("fetch exchangeInfo: %w", err)
	}
	return cat, nil
}

// Stats reads /fapi/v1/ticker/24hr for all symbols. Items with unusable
// values are left out (see decodeStats).
func (c *Client) Stats(ctx context.Context) ([]venue.Stat, error) {
	body, err := c.get(ctx, pathTicker24h, "", maxBody)
	if err != nil {
		return nil, fmt.Errorf("fetch ticker/24hr: %w", err)
	}
	stats, err := decodeStats(body)
	if err != nil {
		return nil, fmt.Errorf("fetch ticker/24hr: %w", err)
	}
	return stats, nil
}

// Quotes reads /fapi/v1/ticker/bookTicker for all symbols. A side that is
// empty or zero is returned as "" (see decodeQuotes).
func (c *Client) Quotes(ctx context.Context) ([]venue.Quote, error) {
	body, err := c.get(ctx, pathBookTicker, "", maxBody)
	if err != nil {
		return nil, fmt.Errorf("fetch bookTicker: %w", err)
	}
	quotes, err := decodeQuotes(body)
	if err != nil {
		return nil, fmt.Errorf("fetch bookTicker: %w", err)
	}
	return quotes, nil
}

// depthLimits are the only limits /fapi/v1/depth accepts.
var depthLimits = []int{5, 10, 20, 50, 100, 500, 1000}

// depthLimit is the limit sent for a depth: the smallest the venue accepts
// that covers it, at most 1000. The limit is always sent because an omitted
// one means 500 and costs twice the weight of 100.
func depthLimit(depth int) int {
	for _, l := range depthLimits {
		if depth <= l {
			return l
		}
	}
	return depthLimits[len(depthLimits)-1]
}

// Book reads /fapi/v1/depth?symbol=S&limit=N, N being the smallest limit
// the venue accepts that covers depth (at most 1000), and returns at most
// depth levels per side, best first. Book.Time is the venue's engine time T
// (its output time E only when T is absent); Book.LastUpdateID is the
// venue's lastUpdateId, where a book kept from the diff stream starts.
func (c *Client) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	if symbol == "" || depth < 1 {
		return venue.Book{}, fmt.Errorf("fetch depth %s: invalid request (depth %d)", symbol, depth)
	}
	query := "symbol=" + url.QueryEscape(symbol) + "&limit=" + strconv.Itoa(depthLimit(depth))
	body, err := c.get(ctx, pathDepth, query, maxBody)
	if err != nil {
		return venue.Book{}, fmt.Errorf("fetch depth %s: %w", symbol, err)
	}
	book, err := decodeBook(body)
	if err != nil {
		return venue.Book{}, fmt.Errorf("fetch depth %s: %w", symbol, err)
	}
	book.Bids = book.Bids[:min(len(book.Bids), depth)]
	book.Asks = book.Asks[:min(len(book.Asks), depth)]
	return book, nil
}

// maxTradesLimit is the largest limit the aggregate-trades list accepts.
const maxTradesLimit = 1000

// Trades reads the aggregate-trades list (/fapi/v1/aggTrades?symbol=S&limit=N
// on Binance) with N = limit (at most 1000) and returns the most recent
// aggregate trades, oldest first, each with its aggregate id: the same trades
// and ids the aggTrade stream publishes, so that a REST backfill and the
// stream can be merged. Aggregate trades carry no quote quantity.
func (c *Client) Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error) {
	trades, err := c.aggTrades(ctx, symbol, "", limit)
	if err != nil {
		return nil, err
	}
	if len(trades) > limit {
		trades = slices.Clip(trades[len(trades)-limit:])
	}
	return trades, nil
}

// TradesFrom reads the aggregate trades from id fromID on
// (aggTrades?symbol=S&fromId=F&limit=N), oldest first, at most limit (and
// at most 1000) of them.
func (c *Client) TradesFrom(ctx context.Context, symbol string, fromID int64, limit int) ([]venue.Trade, error) {
	if fromID < 0 {
		return nil, fmt.Errorf("fetch trades %s: invalid request (from id %d)", symbol, fromID)
	}
	trades, err := c.aggTrades(ctx, symbol, "&fromId="+strconv.FormatInt(fromID, 10), limit)
	if err != nil {
		return nil, err
	}
	if len(trades) > limit {
		trades = slices.Clip(trades[:limit])
	}
	return trades, nil
}

// NewestTradeID reads the id of the market's newest single trade
// (/fapi/v1/trades?symbol=S&limit=1; see decodeNewestTradeID): the id an
// aggregate trade's l names when no trade came after it.
func (c *Client) NewestTradeID(ctx context.Context, symbol string) (int64, error) {
	if symbol == "" {
		return 0, fmt.Errorf("fetch newest trade id: invalid request (no symbol)")
	}
	body, err := c.get(ctx, pathTrades, "symbol="+url.QueryEscape(symbol)+"&limit=1", maxBody)
	if err != nil {
		return 0, fmt.Errorf("fetch newest trade id %s: %w", symbol, err)
	}
	id, err := decodeNewestTradeID(body)
	if err != nil {
		return 0, fmt.Errorf("fetch newest trade id %s: %w", symbol, err)
	}
	return id, nil
}

// aggTrades reads and decodes one aggregate-trades list; from is the
// query's fromId part, or "" for the newest trades.
func (c *Client) aggTrades(ctx context.Context, symbol, from string, limit int) ([]venue.Trade, error) {
	if symbol == "" || limit < 1 {
		return nil, fmt.Errorf("fetch trades %s: invalid request (limit %d)", symbol, limit)
	}
	limit = min(limit, maxTradesLimit)
	query := "symbol=" + url.QueryEscape(symbol) + from + "&limit=" + strconv.Itoa(limit)
	body, err := c.get(ctx, c.aggPath, query, maxBody)
	if err != nil {
		return nil, fmt.Errorf("fetch trades %s: %w", symbol, err)
	}
	trades, err := decodeAggTrades(body)
	if err != nil {
		return nil, fmt.Errorf("fetch trades %s: %w", symbol, err)
	}
	return trades, nil
}
