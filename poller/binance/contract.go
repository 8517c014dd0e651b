package binance

import (
	"context"
	"fmt"
	"net/url"

	"marketfeed/poller/venue"
)

// This file reads perpetual contract data over REST: mark price, index
// price and funding of every symbol (premiumIndex), and one symbol's open
// interest. The mark price stream, which carries the same values once a
// second, is read by markprice.go.

var _ venue.ContractReader = (*Client)(nil)

// The contract data paths.
const (
	pathPremiumIndex = "/fapi/v1/premiumIndex"
	pathOpenInterest = "/fapi/v1/openInterest"
)

// ContractsWeight returns the weight of one Contracts call: the preset's
// premiumIndex weight for all symbols.
func (c *Client) ContractsWeight() int { return c.weights.Contracts }

// OpenInterestWeight returns the weight of one OpenInterest call.
func (c *Client) OpenInterestWeight() int { return c.weights.OpenInterest }

// Contracts reads /fapi/v1/premiumIndex for all symbols (see
// decodeContracts): the usable rows, and how many were not.
func (c *Client) Contracts(ctx context.Context) ([]venue.Contract, int, error) {
	body, err := c.get(ctx, pathPremiumIndex, "", maxBody)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch premiumIndex: %w", err)
	}
	rows, invalid, err := decodeContracts(body)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch premiumIndex: %w", err)
	}
	return rows, invalid, nil
}

// OpenInterest reads /fapi/v1/openInterest?symbol=S (see
// decodeOpenInterest). An answer about another symbol than the one asked
// for is bad data.
func (c *Client) OpenInterest(ctx context.Context, symbol string) (venue.OpenInterest, error) {
	if symbol == "" {
		return venue.OpenInterest{}, fmt.Errorf("fetch openInterest: invalid request (no symbol)")
	}
	body, err := c.get(ctx, pathOpenInterest, "symbol="+url.QueryEscape(symbol), maxBody)
	if err != nil {
		return venue.OpenInterest{}, fmt.Errorf("fetch openInterest %s: %w", symbol, err)
	}
	oi, err := decodeOpenInterest(body)
	if err == nil && oi.Symbol != symbol {
		err = badData("openInterest answers for another symbol")
	}
	if err != nil {
		return venue.OpenInterest{}, fmt.Errorf("fetch openInterest %s: %w", symbol, err)
	}
	return oi, nil
}

// premiumIndexItem is one row of /fapi/v1/premiumIndex. interestRate is
// sent too and not used.
type premiumIndexItem struct {
	Symbol      field `json:"symbol"`
	MarkPrice   field `json:"markPrice"`
	IndexPrice  field `json:"indexPrice"`
	SettlePrice field `json:"estimatedSettlePrice"`
	FundingRate field `json:"lastFundingRate"`
	NextFunding field `json:"nextFundingTime"`
	Time        field `json:"time"`
}

// decodeContracts decodes /fapi/v1/premiumIndex for all symbols: a JSON
// array of rows, each checked by contractOf.
//
// A row that contractOf refuses, or that is not an object, is counted in
// invalid and left out: one bad row never spoils the others, and a body
// whose rows are all bad is still an answer (every row counted), not an
// error. A row sent as null is neither kept nor counted. A body that is not
// a JSON array is bad data.
func decodeContracts(body []byte) (rows []venue.Contract, invalid int, err error) {
	var raw []field
	if err := unmarshal(body, '[', &raw); err != nil {
		return nil, 0, err
	}
	rows = make([]venue.Contract, 0, len(raw))
	for _, r := range raw {
		if !r.present() {
			continue
		}
		var it premiumIndexItem
		if unmarshal([]byte(r.raw), '{', &it) != nil {
			invalid++
			continue
		}
		c, ok := contractOf(it.Symbol, it.MarkPrice, it.IndexPrice, it.SettlePrice, it.FundingRate, it.NextFunding, it.Time)
		if !ok {
			invalid++
			continue
		}
		rows = append(rows, c)
	}
	return rows, invalid, nil
}

// contractOf checks one contract's fields, shared by the premiumIndex rows
// and the mark price stream's events: symbol a non-empty string; mark and
// index prices positive plain decimals; the estimated settle price a
// non-negative one (the venue gives it meaning only before a delivery); the
// funding rate a plain decimal of either sign; the next funding time and the
// venue's time positive integers. Any other value, or an absent one, makes
// the row unusable.
func contractOf(symbol, mark, index, settle, rate, next, t field) (venue.Contract, bool) {
	sym, ok := symbol.text()
	if !ok || sym == "" {
		return venue.Contract{}, false
	}
	m, ok1 := mark.positive()
	i, ok2 := index.positive()
	s, ok3 := settle.nonNegative()
	r, ok4 := rate.decimal()
	n, ok5 := next.natural()
	ms, ok6 := t.natural()
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || n == 0 || ms == 0 {
		return venue.Contract{}, false
	}
	return venue.Contract{Symbol: sym, MarkPrice: m, IndexPrice: i, SettlePrice: s, FundingRate: r, NextFunding: n, Time: ms}, true
}

// openInterestBody is /fapi/v1/openInterest.
type openInterestBody struct {
	Symbol       field `json:"symbol"`
	OpenInterest field `json:"openInterest"`
	Time         field `json:"time"`
}

// decodeOpenInterest decodes /fapi/v1/openInterest: symbol a non-empty
// string, openInterest a non-negative plain decimal (a market nobody holds
// has none), time a positive integer. The body is one row, so an unusable
// value makes it bad data.
func decodeOpenInterest(body []byte) (venue.OpenInterest, error) {
	var b openInterestBody
	if err := unmarshal(body, '{', &b); err != nil {
		return venue.OpenInterest{}, err
	}
	sym, ok := b.Symbol.text()
	if !ok || sym == "" {
		return venue.OpenInterest{}, badData("openInterest has no symbol")
	}
	amount, ok := b.OpenInterest.nonNegative()
	if !ok {
		return venue.OpenInterest{}, badData("openInterest is not a non-negative plain decimal")
	}
	ms, ok := b.Time.natural()
	if !ok || ms == 0 {
		return venue.OpenInterest{}, badData("openInterest time is not a positive integer")
	}
	return venue.OpenInterest{Symbol: sym, Amount: amount, Time: ms}, nil
}
