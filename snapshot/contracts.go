package snapshot

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ProductPerpetual and ContractVanilla are what every item of /contracts
// says of its product and contract: the venues behind this feed list
// perpetuals only, each a linear contract of one unit of base, margined
// and settled in the quote.
const (
	ProductPerpetual = "Perpetual"
	ContractVanilla  = "Vanilla"
)

// ContractsInput is what a /contracts publication is built from: the
// venue's 24 h statistics, the local books' best bid and ask (the real
// sides, not the tickers' mid), the marks, and the open interest read so
// far.
type ContractsInput struct {
	Stats    []Stat
	Books    []Quote
	Marks    []Contract
	Interest []OpenInterest
	// Onboard is when each perpetual was listed on the venue (ms); a symbol
	// without one has a null start_timestamp.
	Onboard map[string]int64
	// ReadAt is when the marks were read: the publication's read time,
	// against which -max-stale is checked.
	ReadAt time.Time
}

// usdQuotes are the quotes whose amounts /contracts takes as US dollars in
// open_interest_usd: the dollar and the stablecoins redeemable for one.
var usdQuotes = map[string]bool{"USD": true, "USDT": true, "USDC": true, "FDUSD": true, "BUSD": true, "TUSD": true}

// Contracts is a /contracts publication: one item per published pair, the
// perpetual that prices it described in the derivatives aggregators'
// layout, and the /contract_specs list of the same contracts. It is never
// mutated after Store publishes it.
type Contracts struct {
	document
	specs ContractSpecs
}

// ContractSpecs is the /contract_specs response of a Contracts value.
type ContractSpecs struct{ document }

// Specs is the /contract_specs response of the same contracts.
func (c *Contracts) Specs() *ContractSpecs { return &c.specs }

// NewContracts builds the contracts of the pairs in pairs, in ticker_id
// order. A pair whose perpetual lacks its statistics, a best bid and ask or
// a mark, or whose venue values are not usable (a missing, non-decimal or
// negative price, volume or open interest; a funding rate that is not a
// decimal; no next funding time), is left out and reported, so that one bad
// row does not take the route down. Open interest not read yet is null, as
// is its timestamp.
func NewContracts(pairs *Pairs, in ContractsInput) (*Contracts, []Omission) {
	statOf := index(in.Stats, func(s *Stat) string { return s.Symbol })
	quoteOf := index(in.Books, func(q *Quote) string { return q.Symbol })
	markOf := index(in.Marks, func(m *Contract) string { return m.Symbol })
	interestOf := index(in.Interest, func(i *OpenInterest) string { return i.Symbol })
	var omitted []Omission
	body, specs := []byte{'['}, []byte{'['}
	count := 0
	for _, p := range pairs.list {
		c := contract{pair: p, stat: statOf[p.Symbol], quote: quoteOf[p.Symbol], mark: markOf[p.Symbol],
			interest: interestOf[p.Symbol]}
		c.onboard, c.listed = in.Onboard[p.Symbol]
		item, spec, err := c.items()
		if err != nil {
			omitted = append(omitted, Omission{TickerID: p.TickerID, Reason: err.Error()})
			continue
		}
		if count > 0 {
			body, specs = append(body, ','), append(specs, ',')
		}
		body, specs = append(body, item...), append(specs, spec...)
		count++
	}
	readAt := in.ReadAt.UnixNano()
	c := &Contracts{document: newDocument(append(body, ']'), count, readAt)}
	c.specs.document = newDocument(append(specs, ']'), count, readAt)
	return c, omitted
}

func index[T any](rows []T, key func(*T) string) map[string]*T {
	m := make(map[string]*T, len(rows))
	for i := range rows {
		m[key(&rows[i])] = &rows[i]
	}
	return m
}

// contract is what one item is built from.
type contract struct {
	pair     Pair
	stat     *Stat
	quote    *Quote
	mark     *Contract
	interest *OpenInterest
	onboard  int64
	listed   bool
}

// items returns the pair's /contracts and /contract_specs items.
func (c *contract) items() (item, spec []byte, err error) {
	st, q, m := c.stat, c.quote, c.mark
	switch {
	case st == nil:
		return nil, nil, fmt.Errorf("no 24h statistics for %s", c.pair.Symbol)
	case q == nil:
		return nil, nil, fmt.Errorf("no best bid and ask for %s", c.pair.Symbol)
	case m == nil:
		return nil, nil, fmt.Errorf("no mark price for %s", c.pair.Symbol)
	}
	for _, f := range [...]struct{ name, v string }{
		{"bid", q.Bid}, {"ask", q.Ask}, {"mark price", m.MarkPrice}, {"index price", m.IndexPrice},
	} {
		if !isNonNegative(f.v) {
			return nil, nil, fmt.Errorf("%s %q is not a non-negative plain decimal", f.name, f.v)
		}
	}
	if !isPositive(m.MarkPrice) {
		return nil, nil, fmt.Errorf("mark price %q is not positive", m.MarkPrice)
	}
	if m.NextFunding <= 0 {
		return nil, nil, fmt.Errorf("no next funding time for %s", c.pair.Symbol)
	}
	funding, err := Percent(m.FundingRate)
	if err != nil {
		return nil, nil, fmt.Errorf("funding rate: %w", err)
	}
	p := &c.pair
	b, err := appendStatHead(make([]byte, 0, 768), *p, st)
	if err != nil {
		return nil, nil, err
	}
	b = appendStringField(b, "bid", q.Bid, false)
	b = appendStringField(b, "ask", q.Ask, false)
	b = appendStringField(b, "high", st.High, false)
	b = appendStringField(b, "low", st.Low, false)
	b = appendStringField(b, "product_type", ProductPerpetual, false)
	if b, err = c.appendInterest(b); err != nil {
		return nil, nil, err
	}
	b = appendStringField(b, "index_price", m.IndexPrice, false)
	b = appendStringField(b, "index_name", p.Base+"-"+p.Target, false)
	b = appendStringField(b, "index_currency", p.Target, false)
	if c.listed && c.onboard > 0 {
		b = appendIntField(b, "start_timestamp", c.onboard, false)
	} else {
		b = append(b, `,"start_timestamp":null`...)
	}
	b = append(b, `,"end_timestamp":null`...)
	b = appendStringField(b, "funding_rate", funding, false)
	b = appendStringField(b, "next_funding_rate", funding, false)
	b = appendIntField(b, "next_funding_rate_timestamp", m.NextFunding, false)
	itemEnd := len(b)
	b = appendStringField(b, "contract_type", ContractVanilla, false)
	b = appendStringField(b, "contract_price", m.MarkPrice, false)
	b = appendStringField(b, "contract_price_currency", p.Target, false)
	specFields := b[itemEnd:]
	b = appendIntField(b, "timestamp", m.Time, false)
	b = append(b, '}')

	s := make([]byte, 0, 160)
	s = append(s, '{')
	s = appendStringField(s, "ticker_id", p.TickerID, true)
	s = append(s, specFields...)
	return b, append(s, '}'), nil
}

// appendInterest appends open_interest, open_interest_usd and
// open_interest_timestamp: null until the venue's count has been read, and
// open_interest_usd null for a quote that is not the dollar.
func (c *contract) appendInterest(b []byte) ([]byte, error) {
	oi := c.interest
	if oi == nil {
		return append(b, `,"open_interest":null,"open_interest_usd":null,"open_interest_timestamp":null`...), nil
	}
	if !isNonNegative(oi.Amount) {
		return nil, fmt.Errorf("open interest %q is not a non-negative plain decimal", oi.Amount)
	}
	b = appendStringField(b, "open_interest", oi.Amount, false)
	if usdQuotes[c.pair.Target] {
		usd, err := Product(oi.Amount, c.mark.MarkPrice)
		if err != nil {
			return nil, fmt.Errorf("open interest in dollars: %w", err)
		}
		b = appendStringField(b, "open_interest_usd", usd, false)
	} else {
		b = append(b, `,"open_interest_usd":null`...)
	}
	return appendIntField(b, "open_interest_timestamp", oi.Time, false), nil
}

// Percent returns the plain decimal fraction f as a percentage, exactly:
// its point moved two places right ("0.0001" is "0.01", "-0.00025" is
// "-0.025"). It is an error for f not to be plain.
func Percent(f string) (string, error) {
	if !IsPlain(f) {
		return "", fmt.Errorf("%q is not a plain decimal", f)
	}
	sign := ""
	if f[0] == '-' {
		sign, f = "-", f[1:]
	}
	whole, frac, _ := strings.Cut(f, ".")
	frac += strings.Repeat("0", max(0, 2-len(frac)))
	whole, frac = strings.TrimLeft(whole+frac[:2], "0"), strings.TrimRight(frac[2:], "0")
	if whole == "" {
		whole = "0"
	}
	if frac != "" {
		whole += "." + frac
	}
	if whole == "0" {
		sign = ""
	}
	return sign + whole, nil
}

// AppendWire appends the wire form of c: both responses and their gzip
// forms.
func (c *Contracts) AppendWire(dst []byte) []byte {
	dst = binary.AppendVarint(append(dst, wireContracts), c.readAt)
	dst = binary.AppendUvarint(dst, uint64(c.count))
	dst = appendWireBytes(dst, c.body)
	dst = appendWireBytes(dst, c.specs.body)
	dst = appendWireGzip(dst, c.specs.gzipped)
	return appendWireGzip(dst, c.gzipped)
}

// DecodeContracts returns the contracts whose wire form is data, with the
// sender's gzip forms, or compressed as NewContracts compresses them. The
// value keeps none of data.
func DecodeContracts(data []byte) (*Contracts, error) {
	r := wireReader{b: data}
	r.kind(wireContracts)
	readAt := r.varint("read time")
	count := r.int("count")
	body, specs := r.bytes("body"), r.bytes("specs")
	specsGz := r.gzip()
	gz := r.gzip()
	if err := r.finish(); err != nil {
		return nil, err
	}
	for _, b := range [][]byte{body, specs} {
		if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' || strings.Count(string(b), `{"ticker_id":`) != count {
			return nil, fmt.Errorf("%w: a body is not an array of %d contracts", ErrBadWire, count)
		}
	}
	c := &Contracts{document: wireDocument(body, gz, count, readAt)}
	c.specs.document = wireDocument(specs, specsGz, count, readAt)
	return c, nil
}

// Interest returns the open interest c publishes, by ticker_id: what a
// member that takes over the ingest starts from, so that /contracts keeps
// every contract's open interest while the new leader reads it again. The
// Symbol of each is empty; contracts whose open interest is null are not
// in it. It parses c's body, once per takeover, never on a request.
func (c *Contracts) Interest() map[string]OpenInterest {
	var items []struct {
		TickerID string  `json:"ticker_id"`
		Amount   *string `json:"open_interest"`
		Time     *int64  `json:"open_interest_timestamp"`
	}
	out := map[string]OpenInterest{}
	if c == nil || json.Unmarshal(c.body, &items) != nil {
		return out
	}
	for _, it := range items {
		if it.Amount != nil && it.Time != nil && isNonNegative(*it.Amount) {
			out[it.TickerID] = OpenInterest{Amount: *it.Amount, Time: *it.Time}
		}
	}
	return out
}
