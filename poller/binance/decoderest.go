package binance

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"marketfeed/poller/venue"
)

// The REST decoders: one per call, each from the body to venue values, by
// the rules of field.go.

// exchangeInfo is the part of /fapi/v1/exchangeInfo the catalog uses.
type exchangeInfo struct {
	RateLimits []rateLimit  `json:"rateLimits"`
	Symbols    []symbolInfo `json:"symbols"`
}

type rateLimit struct {
	Type        field `json:"rateLimitType"`
	Interval    field `json:"interval"`
	IntervalNum field `json:"intervalNum"`
	Limit       field `json:"limit"`
}

type symbolInfo struct {
	Symbol       field `json:"symbol"`
	ContractType field `json:"contractType"`
	Status       field `json:"status"`
	BaseAsset    field `json:"baseAsset"`
	QuoteAsset   field `json:"quoteAsset"`
	OnboardDate  field `json:"onboardDate"`
}

// defaultWeightLimit is the per-minute weight assumed when exchangeInfo
// states no usable REQUEST_WEIGHT limit: Binance's documented limit, which
// Aster shares. The poller spends only a fraction of it.
const defaultWeightLimit = 2400

// decodeCatalog decodes /fapi/v1/exchangeInfo.
//
// Every symbol entry becomes a Market, tradable or not: Perpetual is
// contractType PERPETUAL (dated futures such as BTCUSDT_261225 are not),
// Trading is status TRADING (a delisted perpetual stays listed as SETTLING);
// Onboard is onboardDate, when it is a count of ms.
// An entry without a symbol, baseAsset or quoteAsset string is skipped:
// nothing could be published for it. A body with no usable entry is bad
// data, so that a broken answer never empties the market list.
//
// WeightLimit is the most restrictive REQUEST_WEIGHT limit, normalised to a
// minute (see perMinute); defaultWeightLimit when none is usable.
func decodeCatalog(body []byte) (venue.Catalog, error) {
	var info exchangeInfo
	if err := unmarshal(body, '{', &info); err != nil {
		return venue.Catalog{}, err
	}
	markets := make([]venue.Market, 0, len(info.Symbols))
	for _, s := range info.Symbols {
		sym, ok1 := s.Symbol.text()
		base, ok2 := s.BaseAsset.text()
		quote, ok3 := s.QuoteAsset.text()
		if !ok1 || !ok2 || !ok3 || sym == "" || base == "" || quote == "" {
			continue
		}
		contract, _ := s.ContractType.text()
		status, _ := s.Status.text()
		onboard, ok := s.OnboardDate.natural()
		if !ok {
			onboard = 0 // absent or not a count of ms: not said
		}
		markets = append(markets, venue.Market{
			Symbol:    sym,
			Base:      base,
			Quote:     quote,
			Perpetual: contract == "PERPETUAL",
			Trading:   status == "TRADING",
			Onboard:   onboard,
		})
	}
	if len(markets) == 0 {
		return venue.Catalog{}, badData("exchangeInfo lists no usable symbol")
	}
	return venue.Catalog{Markets: markets, WeightLimit: weightLimit(info.RateLimits)}, nil
}

// weightLimit returns the smallest per-minute REQUEST_WEIGHT limit, or
// defaultWeightLimit when there is none.
func weightLimit(limits []rateLimit) int {
	best := 0
	for _, rl := range limits {
		if t, _ := rl.Type.text(); t != "REQUEST_WEIGHT" {
			continue
		}
		if n, ok := perMinute(rl); ok && (best == 0 || n < best) {
			best = n
		}
	}
	if best == 0 {
		return defaultWeightLimit
	}
	return best
}

// maxWeightLimit keeps an absurd venue limit within an int on any platform.
const maxWeightLimit = math.MaxInt32

// perMinute converts a limit per intervalNum × interval (SECOND, MINUTE,
// HOUR or DAY) to a limit per minute, rounded down and at least 1. An absent
// intervalNum means 1. The result is a rate, not a window: the poller spreads
// its calls evenly, so "50 per 10 s" and "300 per minute" spend alike.
func perMinute(rl rateLimit) (int, bool) {
	limit, ok := rl.Limit.natural()
	if !ok || limit == 0 {
		return 0, false
	}
	num := int64(1)
	if rl.IntervalNum.present() {
		if num, ok = rl.IntervalNum.natural(); !ok || num == 0 {
			return 0, false
		}
	}
	var seconds float64
	switch interval, _ := rl.Interval.text(); interval {
	case "SECOND":
		seconds = 1
	case "MINUTE":
		seconds = 60
	case "HOUR":
		seconds = 3600
	case "DAY":
		seconds = 86400
	default:
		return 0, false
	}
	// float64 is exact for any limit a venue publishes and cannot overflow
	// on absurd ones; this is a rate budget, not money.
	per := math.Floor(float64(limit) * 60 / (float64(num) * seconds))
	return int(min(max(per, 1), maxWeightLimit)), true
}

// tickerItem is one item of /fapi/v1/ticker/24hr.
type tickerItem struct {
	Symbol      field `json:"symbol"`
	LastPrice   field `json:"lastPrice"`
	HighPrice   field `json:"highPrice"`
	LowPrice    field `json:"lowPrice"`
	Volume      field `json:"volume"`
	QuoteVolume field `json:"quoteVolume"`
}

// decodeStats decodes /fapi/v1/ticker/24hr for all symbols.
//
// lastPrice, highPrice, lowPrice and quoteVolume are required non-negative
// plain decimals (zero is kept: a market without trades in 24 h reports
// zeros). volume is optional: absent or null gives BaseVolume "", which the
// snapshot fills in from quoteVolume / lastPrice; present, it must be a
// non-negative plain decimal.
//
// One bad item does not spoil the others: an item without a symbol or with
// an unusable value is left out and its market simply has no ticker values
// until the venue sends usable ones. A body that is not a JSON array of
// objects, or in which no item is usable, is bad data.
func decodeStats(body []byte) ([]venue.Stat, error) {
	var items []tickerItem
	if err := unmarshal(body, '[', &items); err != nil {
		return nil, err
	}
	stats := make([]venue.Stat, 0, len(items))
	for _, it := range items {
		if st, ok := statOf(it); ok {
			stats = append(stats, st)
		}
	}
	if len(stats) == 0 {
		return nil, badData("ticker/24hr has no usable item")
	}
	return stats, nil
}

func statOf(it tickerItem) (venue.Stat, bool) {
	sym, ok := it.Symbol.text()
	if !ok || sym == "" {
		return venue.Stat{}, false
	}
	last, ok1 := it.LastPrice.nonNegative()
	high, ok2 := it.HighPrice.nonNegative()
	low, ok3 := it.LowPrice.nonNegative()
	quoteVol, ok4 := it.QuoteVolume.nonNegative()
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return venue.Stat{}, false
	}
	baseVol := ""
	if it.Volume.present() {
		if baseVol, ok = it.Volume.nonNegative(); !ok {
			return venue.Stat{}, false
		}
	}
	return venue.Stat{
		Symbol:      sym,
		LastPrice:   last,
		High:        high,
		Low:         low,
		BaseVolume:  baseVol,
		QuoteVolume: quoteVol,
	}, true
}

// bookTickerItem is one item of /fapi/v1/ticker/bookTicker.
type bookTickerItem struct {
	Symbol   field `json:"symbol"`
	BidPrice field `json:"bidPrice"`
	BidQty   field `json:"bidQty"`
	AskPrice field `json:"askPrice"`
	AskQty   field `json:"askQty"`
}

// decodeQuotes decodes /fapi/v1/ticker/bookTicker for all symbols.
//
// A side whose price or quantity is absent, null, "" or zero is empty and
// comes out as "" (Bid or Ask): the item is kept so that the consumer sees
// the market has no mid right now, rather than a stale one. A side value
// that is there but is not a non-negative plain decimal makes the item
// unusable; like an item without a symbol, it is left out. A body that is
// not a JSON array of objects, or in which no item is usable, is bad data.
func decodeQuotes(body []byte) ([]venue.Quote, error) {
	var items []bookTickerItem
	if err := unmarshal(body, '[', &items); err != nil {
		return nil, err
	}
	quotes := make([]venue.Quote, 0, len(items))
	for _, it := range items {
		sym, ok := it.Symbol.text()
		if !ok || sym == "" {
			continue
		}
		bid, ok1 := side(it.BidPrice, it.BidQty)
		ask, ok2 := side(it.AskPrice, it.AskQty)
		if !ok1 || !ok2 {
			continue
		}
		quotes = append(quotes, venue.Quote{Symbol: sym, Bid: bid, Ask: ask})
	}
	if len(quotes) == 0 {
		return nil, badData("bookTicker has no usable item")
	}
	return quotes, nil
}

// side returns one side's price, or "" when the side is empty. ok is false
// when the price or quantity is there but is not a usable decimal.
func side(price, qty field) (string, bool) {
	p, ok1 := optional(price)
	q, ok2 := optional(qty)
	if !ok1 || !ok2 {
		return "", false
	}
	if p == "" || q == "" || venue.IsZeroDecimal(p) || venue.IsZeroDecimal(q) {
		return "", true
	}
	return p, true
}

// optional returns a non-negative plain decimal, or "" for a value that is
// absent, null or the empty string.
func optional(f field) (string, bool) {
	if !f.present() || f.raw == `""` {
		return "", true
	}
	return f.nonNegative()
}

// depthBody is /fapi/v1/depth.
type depthBody struct {
	LastUpdateID field `json:"lastUpdateId"`
	T            field `json:"T"` // engine time: the book's timestamp
	E            field `json:"E"` // output time: the fallback
	// The venue sends no lowercase t or e. Declaring them keeps one that
	// appears from landing in T or E: the decoder matches keys without
	// regard to case when no field matches exactly.
	LowerT field `json:"t"`
	LowerE field `json:"e"`
	// A level is [price, quantity]. A fixed array costs no allocation per
	// level; a missing element stays absent and fails the check, and later
	// elements, if the venue ever adds any, are ignored.
	Bids [][2]field `json:"bids"`
	Asks [][2]field `json:"asks"`
}

// decodeBook decodes /fapi/v1/depth.
//
// Book.Time is T, or E when T is absent; a present T or E that is not a
// positive integer, or neither being sent, is bad data. LastUpdateID is
// lastUpdateId, 0 when absent; present, it must be an integer without a sign. Every level is a
// [price, quantity] array of positive plain decimals. A book with no bid or no ask is bad
// data: it cannot have a mid and is more likely a broken answer than a real
// market state. Levels keep the venue's order, best first.
func decodeBook(body []byte) (venue.Book, error) {
	var d depthBody
	if err := unmarshal(body, '{', &d); err != nil {
		return venue.Book{}, err
	}
	var (
		t  int64
		ok bool
	)
	switch {
	case d.T.present():
		if t, ok = d.T.natural(); !ok || t == 0 {
			return venue.Book{}, badData("depth T is not a positive integer")
		}
	case d.E.present():
		if t, ok = d.E.natural(); !ok || t == 0 {
			return venue.Book{}, badData("depth E is not a positive integer")
		}
	default:
		return venue.Book{}, badData("depth has neither T nor E")
	}
	var lastID int64
	if d.LastUpdateID.present() {
		if lastID, ok = d.LastUpdateID.natural(); !ok {
			return venue.Book{}, badData("depth lastUpdateId is not an unsigned integer")
		}
	}
	bids, err := levels(d.Bids, "bid")
	if err != nil {
		return venue.Book{}, err
	}
	asks, err := levels(d.Asks, "ask")
	if err != nil {
		return venue.Book{}, err
	}
	return venue.Book{Time: t, LastUpdateID: lastID, Bids: bids, Asks: asks}, nil
}

func levels(raw [][2]field, name string) ([]venue.Level, error) {
	if len(raw) == 0 {
		return nil, badData("depth has no %ss", name)
	}
	out := make([]venue.Level, len(raw))
	for i, lv := range raw {
		price, ok := lv[0].positive()
		if !ok {
			return nil, badData("%s %d price is not a positive plain decimal", name, i)
		}
		size, ok := lv[1].positive()
		if !ok {
			return nil, badData("%s %d quantity is not a positive plain decimal", name, i)
		}
		out[i] = venue.Level{Price: price, Size: size}
	}
	return out, nil
}

// aggTradeItem is one row of the aggregate-trades list: a, p, q, f, l, T,
// m. The first single trade's id f is not used.
type aggTradeItem struct {
	ID    field `json:"a"`
	Price field `json:"p"`
	Qty   field `json:"q"`
	Last  field `json:"l"`
	Time  field `json:"T"`
	Maker field `json:"m"`
	// Declared so that a lowercase t or uppercase M, which the venue may
	// add, never lands in T or m: the decoder matches keys without regard
	// to case when no field matches exactly.
	LowerT field `json:"t"`
	UpperM field `json:"M"`
	UpperA field `json:"A"`
	UpperP field `json:"P"`
	UpperQ field `json:"Q"`
	UpperL field `json:"L"`
}

// decodeAggTrades decodes the aggregate-trades list and returns the trades
// oldest first.
//
// a (the aggregate id, which becomes Trade.ID) is a required integer without
// a sign; p and q are required positive plain decimals; T a required
// positive integer; m a required boolean: true means the buyer was the
// maker, so the taker sold and Sell is true; l (the last single trade's
// id, which becomes Trade.LastID) an optional integer without a sign. Aggregate trades carry no quote
// quantity: QuoteQty is always "" and the snapshot computes price × size.
//
// One bad trade makes the whole body bad data: dropping it would publish a
// trade list with a silent hole. An empty array is a market without recent
// trades, not an error. Aggregate ids increase in trade order; a stable sort
// by id keeps the venue's order and repairs any other.
func decodeAggTrades(body []byte) ([]venue.Trade, error) {
	var items []aggTradeItem
	if err := unmarshal(body, '[', &items); err != nil {
		return nil, err
	}
	trades := make([]venue.Trade, len(items))
	for i, it := range items {
		tr, err := aggTradeOf(it.ID, it.Price, it.Qty, it.Time, it.Maker, it.Last)
		if err != nil {
			return nil, fmt.Errorf("trade %d %w", i, err)
		}
		trades[i] = tr
	}
	slices.SortStableFunc(trades, func(a, b venue.Trade) int { return cmp.Compare(a.ID, b.ID) })
	return trades, nil
}

// aggTradeOf checks one aggregate trade's fields, shared by the REST list
// and the aggTrade stream. Its error names the field and wraps ErrBadData.
// The last single trade's id is optional: without it the trade's LastID
// is 0, and a window ending in it is read again rather than proven
// complete by the newest single trade's id.
func aggTradeOf(id, price, qty, t, maker, last field) (venue.Trade, error) {
	n, ok := id.natural()
	if !ok {
		return venue.Trade{}, badData("id is not an unsigned integer")
	}
	p, ok := price.positive()
	if !ok {
		return venue.Trade{}, badData("price is not a positive plain decimal")
	}
	q, ok := qty.positive()
	if !ok {
		return venue.Trade{}, badData("qty is not a positive plain decimal")
	}
	ms, ok := t.natural()
	if !ok || ms == 0 {
		return venue.Trade{}, badData("time is not a positive integer")
	}
	sell, ok := maker.boolean()
	if !ok {
		return venue.Trade{}, badData("maker flag is not a boolean")
	}
	var lastID int64
	if last.present() {
		if lastID, ok = last.natural(); !ok {
			return venue.Trade{}, badData("last trade id is not an unsigned integer")
		}
	}
	return venue.Trade{ID: n, LastID: lastID, Time: ms, Price: p, Size: q, Sell: sell}, nil
}

// tradeItem is one row of the recent-trades list (/fapi/v1/trades): id,
// price, qty, quoteQty, time, isBuyerMaker. Only the id is read.
type tradeItem struct {
	ID field `json:"id"`
	// Declared so that an uppercase ID, should the venue add one, never
	// lands in id: the decoder matches keys without regard to case when
	// no field matches exactly.
	UpperID field `json:"ID"`
}

// decodeNewestTradeID decodes a recent-trades list and returns the largest
// single-trade id in it (the list is oldest first, one row at limit 1), or 0
// for an empty list: a market without trades. Every id must be an integer
// without a sign, or the body is bad data: a wrong id would settle a window
// that missed trades.
func decodeNewestTradeID(body []byte) (int64, error) {
	var items []tradeItem
	if err := unmarshal(body, '[', &items); err != nil {
		return 0, err
	}
	var newest int64
	for i, it := range items {
		id, ok := it.ID.natural()
		if !ok {
			return 0, fmt.Errorf("trade %d %w", i, badData("id is not an unsigned integer"))
		}
		newest = max(newest, id)
	}
	return newest, nil
}
