package snapshot

import (
	"fmt"
	"time"
)

// Tickers is the /tickers response: one item per published spot pair, in
// ticker_id order. It is never mutated after Store publishes it.
type Tickers struct{ document }

// Omission says why a spot pair has no ticker in a Tickers value.
type Omission struct {
	TickerID string
	Reason   string
}

// NewTickers builds the tickers of the spot pairs in pairs from the venue's
// bulk statistics and best quotes. bid and ask are both the perpetual's exact
// mid. base_volume is the venue's own when it sends one, otherwise the
// truncated fallback (see baseVolumeFallback). A pair whose statistics or
// quote are missing or unusable is left out and reported, so one bad symbol
// does not take the whole route down. readAt is when the venue was read and
// becomes every item's timestamp.
func NewTickers(pairs *Pairs, stats []Stat, quotes []Quote, readAt time.Time) (*Tickers, []Omission) {
	statOf := make(map[string]*Stat, len(stats))
	for i := range stats {
		statOf[stats[i].Symbol] = &stats[i]
	}
	quoteOf := make(map[string]*Quote, len(quotes))
	for i := range quotes {
		quoteOf[quotes[i].Symbol] = &quotes[i]
	}
	ms := readAt.UnixMilli()
	var omitted []Omission
	body := []byte{'['}
	count := 0
	for _, p := range pairs.list {
		if p.Kind != KindSpot {
			continue
		}
		item, err := tickerItem(p, statOf[p.Symbol], quoteOf[p.Symbol], ms)
		if err != nil {
			omitted = append(omitted, Omission{TickerID: p.TickerID, Reason: err.Error()})
			continue
		}
		if count > 0 {
			body = append(body, ',')
		}
		body = append(body, item...)
		count++
	}
	body = append(body, ']')
	return &Tickers{newDocument(body, count, readAt.UnixNano())}, omitted
}

func tickerItem(p Pair, st *Stat, q *Quote, ms int64) ([]byte, error) {
	if st == nil {
		return nil, fmt.Errorf("no 24h statistics for %s", p.Symbol)
	}
	if q == nil {
		return nil, fmt.Errorf("no best bid and ask for %s", p.Symbol)
	}
	if !isPositive(q.Bid) || !isPositive(q.Ask) {
		return nil, fmt.Errorf("no mid: bid %q, ask %q", q.Bid, q.Ask)
	}
	mid, err := Mid(q.Bid, q.Ask)
	if err != nil {
		return nil, err
	}
	b, err := appendStatHead(make([]byte, 0, 320), p, st)
	if err != nil {
		return nil, err
	}
	b = appendStringField(b, "bid", mid, false)
	b = appendStringField(b, "ask", mid, false)
	b = appendStringField(b, "high", st.High, false)
	b = appendStringField(b, "low", st.Low, false)
	b = appendIntField(b, "timestamp", ms, false)
	return append(b, '}'), nil
}

// appendStatHead checks a pair's 24 h statistics and appends the fields a
// ticker and a contract begin with, from '{' to target_volume: the
// venue's base volume, or the fallback when it sends none. A price or
// volume that is not a plain decimal, or is negative, is refused.
func appendStatHead(b []byte, p Pair, st *Stat) ([]byte, error) {
	for _, f := range [...]struct{ name, v string }{
		{"last price", st.LastPrice}, {"high", st.High}, {"low", st.Low}, {"quote volume", st.QuoteVolume},
	} {
		if !isNonNegative(f.v) {
			return nil, fmt.Errorf("%s %q is not a non-negative plain decimal", f.name, f.v)
		}
	}
	baseVolume := st.BaseVolume
	switch {
	case baseVolume == "":
		var err error
		if baseVolume, err = baseVolumeFallback(st.QuoteVolume, st.LastPrice); err != nil {
			return nil, fmt.Errorf("base volume fallback: %w", err)
		}
	case !isNonNegative(baseVolume):
		return nil, fmt.Errorf("base volume %q is not a non-negative plain decimal", baseVolume)
	}
	b = append(b, '{')
	b = appendStringField(b, "ticker_id", p.TickerID, true)
	b = appendStringField(b, "base_currency", p.Base, false)
	b = appendStringField(b, "target_currency", p.Target, false)
	b = appendStringField(b, "last_price", st.LastPrice, false)
	b = appendStringField(b, "base_volume", baseVolume, false)
	return appendStringField(b, "target_volume", st.QuoteVolume, false), nil
}

// isNonNegative reports whether s is a plain decimal not below zero ("-0"
// is not: a venue that sends it sends something odd).
func isNonNegative(s string) bool { return IsPlain(s) && s[0] != '-' }
