// Package wire holds the public API's response bodies as Go values, for the
// tests and tools that read the API as its clients do. It is the one
// definition of the bodies' fields outside the server, which never decodes
// them: the contract is docs/api.md and docs/openapi.yaml.
package wire

// Pair is one item of /api/public/pairs.
type Pair struct {
	TickerID    string `json:"ticker_id"`
	Base        string `json:"base"`
	Target      string `json:"target"`
	Kind        string `json:"kind"`
	PriceSource string `json:"price_source"`
}

// Ticker is one item of /api/public/tickers.
type Ticker struct {
	TickerID       string `json:"ticker_id"`
	BaseCurrency   string `json:"base_currency"`
	TargetCurrency string `json:"target_currency"`
	LastPrice      string `json:"last_price"`
	BaseVolume     string `json:"base_volume"`
	TargetVolume   string `json:"target_volume"`
	Bid            string `json:"bid"`
	Ask            string `json:"ask"`
	High           string `json:"high"`
	Low            string `json:"low"`
	Timestamp      int64  `json:"timestamp"`
}

// Book is the body of /api/public/orderbook: levels are [price, size].
type Book struct {
	TickerID  string      `json:"ticker_id"`
	Timestamp int64       `json:"timestamp"`
	Bids      [][2]string `json:"bids"`
	Asks      [][2]string `json:"asks"`
}

// Trade is one item of /api/public/trades and /api/public/historical_trades.
type Trade struct {
	TradeID        string `json:"trade_id"`
	Price          string `json:"price"`
	BaseVolume     string `json:"base_volume"`
	TargetVolume   string `json:"target_volume"`
	TradeTimestamp int64  `json:"trade_timestamp"`
	Type           string `json:"type"`
}

// Contract is one item of /api/public/contracts: the perpetual that prices
// a pair. The nullable fields are nil for null.
type Contract struct {
	TickerID                 string  `json:"ticker_id"`
	BaseCurrency             string  `json:"base_currency"`
	TargetCurrency           string  `json:"target_currency"`
	LastPrice                string  `json:"last_price"`
	BaseVolume               string  `json:"base_volume"`
	TargetVolume             string  `json:"target_volume"`
	Bid                      string  `json:"bid"`
	Ask                      string  `json:"ask"`
	High                     string  `json:"high"`
	Low                      string  `json:"low"`
	ProductType              string  `json:"product_type"`
	OpenInterest             *string `json:"open_interest"`
	OpenInterestUSD          *string `json:"open_interest_usd"`
	OpenInterestTimestamp    *int64  `json:"open_interest_timestamp"`
	IndexPrice               string  `json:"index_price"`
	IndexName                string  `json:"index_name"`
	IndexCurrency            string  `json:"index_currency"`
	StartTimestamp           *int64  `json:"start_timestamp"`
	EndTimestamp             *int64  `json:"end_timestamp"`
	FundingRate              string  `json:"funding_rate"`
	NextFundingRate          string  `json:"next_funding_rate"`
	NextFundingRateTimestamp int64   `json:"next_funding_rate_timestamp"`
	ContractType             string  `json:"contract_type"`
	ContractPrice            string  `json:"contract_price"`
	ContractPriceCurrency    string  `json:"contract_price_currency"`
	Timestamp                int64   `json:"timestamp"`
}

// ContractSpec is one item of /api/public/contract_specs.
type ContractSpec struct {
	TickerID              string `json:"ticker_id"`
	ContractType          string `json:"contract_type"`
	ContractPrice         string `json:"contract_price"`
	ContractPriceCurrency string `json:"contract_price_currency"`
}
