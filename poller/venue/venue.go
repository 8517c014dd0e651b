// Package venue is the contract between the poller and a venue adapter: the
// REST reads a venue offers (Venue), its market streams (Streams) and what
// they deliver to (Sink), the values both carry, the errors they return, and
// the one classification of a call's outcome that the back-off, the metrics
// and the stream-fed pairs' retries all derive from. Adapters import this
// package (and snapshot) and nothing else of the poller's.
package venue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"marketfeed/snapshot"
)

// Venue is what the poller reads market data from: the embedded simulator or
// a Binance-compatible REST API. Implementations must be safe for concurrent
// use. Every method reads the venue once; none retries or sleeps, because
// pacing and back-off belong to the poller.
type Venue interface {
	// Name is the lowercase venue name used in price_source ("sim", "binance").
	Name() string
	// Catalog lists every market the venue has, tradable or not.
	Catalog(ctx context.Context) (Catalog, error)
	// Stats returns 24 h statistics for every market.
	Stats(ctx context.Context) ([]Stat, error)
	// Quotes returns the best bid and ask of every market.
	Quotes(ctx context.Context) ([]Quote, error)
	// Book returns up to depth levels per side of one market, best first.
	Book(ctx context.Context, symbol string, depth int) (Book, error)
	// Trades returns up to limit recent trades of one market, oldest first,
	// as the venue's market stream publishes them (Binance: aggregate
	// trades), each with its venue id.
	Trades(ctx context.Context, symbol string, limit int) ([]Trade, error)
	// TradesFrom returns up to limit trades of one market from the trade
	// with id fromID on, oldest first (Binance: aggTrades?fromId=): the
	// trades a window missed, read without reading the window again. It
	// weighs as Trades.
	TradesFrom(ctx context.Context, symbol string, fromID int64, limit int) ([]Trade, error)
	// Weight is what one call of the given kind costs against the venue's
	// per-minute weight limit; 0 for a venue without one.
	Weight(c Call) int
}

// UsedWeightReporter is implemented by venues that report the weight the
// venue itself has counted for this client (Binance: X-MBX-USED-WEIGHT-1M).
// The poller reconciles its own budget with it after every call.
type UsedWeightReporter interface {
	// UsedWeight returns the last weight the venue reported for its current
	// minute, and false when it has reported none yet.
	UsedWeight() (int, bool)
}

// TradeIDReader is implemented by venues that number single trades beneath
// their aggregate ones (Trade.LastID) and read the newest single trade's id
// on its own, for less than a read of trades (Binance: /fapi/v1/trades at
// limit 1, weight 5, against 20 for aggTrades). A window that may have
// missed trades while its stream was down is settled by it when it missed
// none, which is what most quiet markets did.
type TradeIDReader interface {
	// NewestTradeID returns the id of the market's newest single trade; 0
	// for a market without trades. It weighs Weight(CallTradeID).
	NewestTradeID(ctx context.Context, symbol string) (int64, error)
}

// DepthWeigher is implemented by venues whose book call costs more for a
// deeper book (Binance: 5 at 100 levels, 10 at 500, 20 at 1000). Without it
// every book read weighs Weight(CallBook).
type DepthWeigher interface {
	// BookWeight returns the weight of one book read of depth levels.
	BookWeight(depth int) int
}

// IsPlainDecimal reports whether s is a decimal in plain notation: an
// optional minus sign, digits, and optionally a dot and digits. It is
// snapshot.IsPlain, the one check every venue adapter and the local books
// apply before a venue's string may reach a response.
func IsPlainDecimal(s string) bool { return snapshot.IsPlain(s) }

// IsZeroDecimal reports whether the plain decimal s is zero ("0", "0.000").
func IsZeroDecimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '1' && s[i] <= '9' {
			return false
		}
	}
	return true
}

// Call names one kind of venue call, for weights and metrics.
type Call int

// The venue calls, one per Venue method.
const (
	CallCatalog Call = iota
	CallStats
	CallQuotes
	CallBook
	CallTrades
	CallContracts    // every perpetual's mark, index and funding (ContractReader)
	CallOpenInterest // one perpetual's open interest (ContractReader)
	CallTradeID      // one market's newest single trade id (TradeIDReader)
	// NumCalls is the number of calls, for tables indexed by Call.
	NumCalls
)

var callNames = [NumCalls]string{"catalog", "stats", "quotes", "book", "trades", "contracts", "open_interest", "trade_id"}

func (c Call) String() string {
	if c < 0 || c >= NumCalls {
		return fmt.Sprintf("call(%d)", int(c))
	}
	return callNames[c]
}

// Catalog is the venue's market list and its request-weight limit.
type Catalog struct {
	Markets []Market
	// WeightLimit is the venue's request weight allowed per minute; 0 means
	// the venue has no limit (the simulator).
	WeightLimit int
}

// Book is one order book as the venue sent it.
type Book struct {
	Time int64 // the venue's clock for this book, ms since the Unix epoch
	// LastUpdateID is the venue's update id the book is current at (Binance
	// lastUpdateId): where a local book fed by the diff stream starts.
	// 0 when the venue sends none.
	LastUpdateID int64
	Bids         []Level
	Asks         []Level
}

// The venue's values are the snapshot package's inputs; the aliases let a
// venue adapter depend on this package alone.
type (
	// Market is one venue market.
	Market = snapshot.Market
	// Level is one order book level.
	Level = snapshot.Level
	// Trade is one venue trade.
	Trade = snapshot.Trade
	// Stat is one market's 24 h statistics.
	Stat = snapshot.Stat
	// Quote is one market's best bid and ask.
	Quote = snapshot.Quote
)

// StatusError is a venue answer with an HTTP status other than 200. The
// venue's body is deliberately not kept: it must never reach a response.
type StatusError struct {
	Status int
	// RetryAfter is the venue's Retry-After header; 0 when absent.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("venue answered %d (retry after %s)", e.Status, e.RetryAfter)
	}
	return fmt.Sprintf("venue answered %d", e.Status)
}

// ErrBadData marks a venue answer that arrived but cannot be used: a body that
// is not JSON, JSON of the wrong shape, or a value that is not a plain decimal.
// Adapters wrap it with the detail.
var ErrBadData = errors.New("unusable venue data")
