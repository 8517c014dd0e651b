package snapshot

// The types in this file are what a venue reads turn into before they become
// snapshots. Decimal fields are the venue's own strings, kept byte for byte;
// the builders check that each one is a plain decimal before it can reach a
// response.

// Market is one venue market as the venue's catalog lists it.
type Market struct {
	Symbol    string // the venue's symbol, e.g. "1000PEPEUSDT"
	Base      string // base asset, multiplier included, e.g. "1000PEPE"
	Quote     string // quote asset, e.g. "USDT"
	Perpetual bool   // a perpetual contract (not dated, not spot)
	Trading   bool   // currently tradable
	Onboard   int64  // when the venue listed it, ms since the Unix epoch; 0: the venue does not say
}

// Level is one order book level.
type Level struct {
	Price string
	Size  string
}

// Trade is one venue trade.
type Trade struct {
	// ID is the venue's id of the trade (Binance: the aggregate trade id
	// "a"), increasing in trade order; 0 when the venue sends none. It
	// orders and deduplicates trades and keeps a published trade_id stable;
	// it is never published.
	ID int64
	// LastID is the venue's id of the last single trade this one covers
	// (Binance: an aggregate trade's "l"), in the sequence of single
	// trades the venue's recent-trades list numbers; 0 when the venue
	// sends none. A window whose newest trade's LastID is the venue's
	// newest single trade missed nothing, which a read of one recent
	// trade proves for a quarter of the weight of a read of aggregate
	// trades. It is never published.
	LastID   int64
	Time     int64  // trade time, ms since the Unix epoch
	Price    string // trade price
	Size     string // size in base currency
	QuoteQty string // size in quote currency; "" when the venue sends none
	Sell     bool   // the aggressor (taker) sold
}

// Stat is one market's rolling 24 h statistics.
type Stat struct {
	Symbol      string
	LastPrice   string
	High        string
	Low         string
	BaseVolume  string // "" when the venue does not send it
	QuoteVolume string
}

// Quote is one market's best bid and ask.
type Quote struct {
	Symbol string
	Bid    string
	Ask    string
}

// Contract is one perpetual contract's mark price, index price and funding
// as the venue sent them (Binance: a row of GET /fapi/v1/premiumIndex or a
// markPriceUpdate event of the mark price stream). The decimals are the
// venue's own strings, checked by the adapter: the prices are positive
// plain decimals (SettlePrice may be zero), the funding rate a plain decimal
// that may be negative, since shorts pay longs when the contract trades
// below its index.
//
// A Contract handed over by an adapter shares no memory with the bytes it
// was read from: the consumer may keep it.
type Contract struct {
	Symbol      string // the venue's symbol, upper case as in the catalog
	MarkPrice   string
	IndexPrice  string
	SettlePrice string // the estimated settle price
	// FundingRate is the rate of the current funding interval as a
	// fraction, not a percentage ("0.00010000" is 0.01 %), as the venue
	// sends it.
	FundingRate string
	NextFunding int64 // when the next funding is paid, ms since the Unix epoch
	Time        int64 // the venue's time of these values, ms since the Unix epoch
}

// OpenInterest is one contract's open interest as the venue sent it
// (Binance: GET /fapi/v1/openInterest): the contracts held open, counted in
// the base asset, a non-negative plain decimal.
type OpenInterest struct {
	Symbol string
	Amount string // in base units
	Time   int64  // the venue's time of the value, ms since the Unix epoch
}
