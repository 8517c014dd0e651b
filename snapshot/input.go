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
	ID       int64
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
