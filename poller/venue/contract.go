package venue

import "context"

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

// ContractReader is implemented by venues that read perpetual contract data
// over REST. Like Venue's methods, each call reads the venue once and
// neither retries nor sleeps.
type ContractReader interface {
	// Contracts returns the mark price, index and funding of every
	// perpetual the venue lists, and how many of its rows were unusable
	// (a field missing, not a plain decimal, or out of range): one bad row
	// never spoils the others, and the count is the caller's to report.
	Contracts(ctx context.Context) (rows []Contract, invalid int, err error)
	// OpenInterest returns one contract's open interest.
	OpenInterest(ctx context.Context, symbol string) (OpenInterest, error)
	// ContractsWeight and OpenInterestWeight are what one call of each
	// costs against the venue's per-minute weight limit; 0 for a venue
	// without one.
	ContractsWeight() int
	OpenInterestWeight() int
}
