package main

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"marketfeed/poller/binance"
	"marketfeed/poller/venue"
)

// Perpetual contract data over the venue's protocol: the mark price streams
// (!markPrice@arr@1s and <s>@markPrice@1s on the market path, once a
// second), and premiumIndex and openInterest over REST.

// markPriceEvery is the mark price streams' cadence.
const markPriceEvery = time.Second

// interestRate is what premiumIndex reports as the interest rate of every
// market: the venue's usual 0.01 % per interval. The client does not read
// it; it is sent for the shape.
const interestRate = "0.00010000"

// runMarkPrices publishes the rows of the instant to the mark price
// streams every period until ctx is done.
func (h *wsHub) runMarkPrices(ctx context.Context, rows func(ms int64) []venue.Contract, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.markPrices(rows(h.now().UnixMilli()))
		}
	}
}

// markPrices fans one second's rows out to !markPrice@arr@1s and each
// symbol's <s>@markPrice@1s, leaving out delisted markets and those whose
// streams are muted, as Tickers does; a silenced stream name delivers
// nothing, as every other.
func (h *wsHub) markPrices(rows []venue.Contract) {
	kept := slices.DeleteFunc(slices.Clone(rows), func(r venue.Contract) bool { return h.hidden(r.Symbol) })
	h.mu.Lock()
	defer h.mu.Unlock()
	kept = slices.DeleteFunc(kept, func(r venue.Contract) bool { return h.muted(r.Symbol) })
	if len(kept) == 0 {
		return
	}
	h.publish(binance.MarkPriceStream, func() []byte {
		b := append(make([]byte, 0, 192*len(kept)), '[')
		for i, r := range kept {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMarkPrice(b, r)
		}
		return append(b, ']')
	})
	for _, r := range kept {
		h.publish(strings.ToLower(r.Symbol)+binance.MarkPriceSuffix, func() []byte { return appendMarkPrice(nil, r) })
	}
}

// appendMarkPrice appends a markPriceUpdate event; its time E is the
// values' time.
func appendMarkPrice(b []byte, r venue.Contract) []byte {
	b = append(b, `{"e":"markPriceUpdate","E":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	b = append(b, `,"s":`...)
	b = appendString(b, r.Symbol)
	b = append(b, `,"p":`...)
	b = appendString(b, r.MarkPrice)
	b = append(b, `,"P":`...)
	b = appendString(b, r.SettlePrice)
	b = append(b, `,"i":`...)
	b = appendString(b, r.IndexPrice)
	b = append(b, `,"r":`...)
	b = appendString(b, r.FundingRate)
	b = append(b, `,"T":`...)
	b = strconv.AppendInt(b, r.NextFunding, 10)
	return append(b, '}')
}

// premiumIndexRow is a row of /fapi/v1/premiumIndex.
type premiumIndexRow struct {
	Symbol               string `json:"symbol"`
	MarkPrice            string `json:"markPrice"`
	IndexPrice           string `json:"indexPrice"`
	EstimatedSettlePrice string `json:"estimatedSettlePrice"`
	LastFundingRate      string `json:"lastFundingRate"`
	InterestRate         string `json:"interestRate"`
	NextFundingTime      int64  `json:"nextFundingTime"`
	Time                 int64  `json:"time"`
}

// premiumIndex answers /fapi/v1/premiumIndex: every tradable perpetual's
// row, or with symbol that symbol's row alone, as an object. A symbol
// without one (unknown, delisted, or not a tradable perpetual) is an
// invalid symbol.
func (s *venueServer) premiumIndex(ctx context.Context, q url.Values) (any, error) {
	rows, _, err := s.venue.Contracts(ctx)
	if err != nil {
		return nil, err
	}
	hidden := s.hiddenSet()
	out := make([]premiumIndexRow, 0, len(rows))
	for _, r := range rows {
		if hidden[r.Symbol] {
			continue
		}
		row := premiumIndexRow{r.Symbol, r.MarkPrice, r.IndexPrice, r.SettlePrice, r.FundingRate, interestRate, r.NextFunding, r.Time}
		if q.Has("symbol") && r.Symbol == q.Get("symbol") {
			return row, nil
		}
		out = append(out, row)
	}
	if q.Has("symbol") {
		return nil, errDelisted
	}
	return out, nil
}

// openInterest answers /fapi/v1/openInterest?symbol=S.
func (s *venueServer) openInterest(ctx context.Context, symbol string) (any, error) {
	oi, err := s.venue.OpenInterest(ctx, symbol)
	if err != nil {
		return nil, err
	}
	return map[string]any{"symbol": oi.Symbol, "openInterest": oi.Amount, "time": oi.Time}, nil
}
