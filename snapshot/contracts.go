package snapshot

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
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
//
// The poller builds every contract again every second: each item is
// written in place into the two bodies, sized once from the last build's
// items (see contractsSize), so that a build allocates the bodies and the
// indexes and nothing per contract.
func NewContracts(pairs *Pairs, in ContractsInput) (*Contracts, []Omission) {
	statOf := index(in.Stats, func(s *Stat) string { return s.Symbol })
	quoteOf := index(in.Books, func(q *Quote) string { return q.Symbol })
	markOf := index(in.Marks, func(m *Contract) string { return m.Symbol })
	interestOf := index(in.Interest, func(i *OpenInterest) string { return i.Symbol })
	var omitted []Omission
	body := make([]byte, 1, sizeFor(&contractsSize.body, len(pairs.list), contractGuess))
	specs := make([]byte, 1, sizeFor(&contractsSize.specs, len(pairs.list), specGuess))
	body[0], specs[0] = '[', '['
	count := 0
	for _, p := range pairs.list {
		c := contract{pair: p, stat: statOf[p.Symbol], quote: quoteOf[p.Symbol], mark: markOf[p.Symbol],
			interest: interestOf[p.Symbol]}
		c.onboard, c.listed = in.Onboard[p.Symbol]
		bodyLen, specsLen := len(body), len(specs)
		if count > 0 {
			body, specs = append(body, ','), append(specs, ',')
		}
		var err error
		if body, specs, err = c.appendItems(body, specs); err != nil {
			omitted = append(omitted, Omission{TickerID: p.TickerID, Reason: err.Error()})
			body, specs = body[:bodyLen], specs[:specsLen]
			continue
		}
		count++
	}
	body, specs = append(body, ']'), append(specs, ']')
	if count > 0 {
		contractsSize.body.Store(int64(len(body) / count))
		contractsSize.specs.Store(int64(len(specs) / count))
	}
	readAt := in.ReadAt.UnixNano()
	c := &Contracts{document: newDocument(body, count, readAt)}
	c.specs.document = newDocument(specs, count, readAt)
	return c, omitted
}

// contractsSize is the length of an item of the last build's bodies, on
// average: the next is sized from it, an eighth over, so that neither body
// grows (and is copied) while it is written. Before the first, a body is
// sized by the guesses below. Only capacity depends on it, never bytes.
var contractsSize struct{ body, specs atomic.Int64 }

// sizeFor is the capacity of a body of n items whose last build's were
// *item bytes long on average (0 before the first), or guess.
func sizeFor(item *atomic.Int64, n, guess int) int {
	per := int(item.Load())
	if per == 0 {
		per = guess
	}
	return n*(per+per/8) + 2
}

// contractGuess and specGuess are the usual lengths of a /contracts and a
// /contract_specs item, the sizes of a first build's bodies per pair.
const (
	contractGuess = 720
	specGuess     = 120
)

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

// appendItems appends the pair's /contracts item to body and its
// /contract_specs item to specs. On an error what it appended is garbage:
// the caller cuts both back.
//
// Each venue decimal is checked once, here, where it is copied into the
// response: the adapters check what they read (see Contract), but the
// books' quotes, the statistics and the open interest reach this point by
// several roads (streams, REST, a leader's contracts read back), and a
// check costs a few nanoseconds against the row's microsecond.
func (c *contract) appendItems(body, specs []byte) (_, _ []byte, err error) {
	st, q, m := c.stat, c.quote, c.mark
	switch {
	case st == nil:
		return body, specs, fmt.Errorf("no 24h statistics for %s", c.pair.Symbol)
	case q == nil:
		return body, specs, fmt.Errorf("no best bid and ask for %s", c.pair.Symbol)
	case m == nil:
		return body, specs, fmt.Errorf("no mark price for %s", c.pair.Symbol)
	}
	// isPositive checks the form as well: the mark is read once, and
	// only a refused one again, for the reason.
	markOK := isPositive(m.MarkPrice)
	for _, f := range [...]struct {
		name, v string
		ok      bool
	}{
		{"bid", q.Bid, isNonNegative(q.Bid)}, {"ask", q.Ask, isNonNegative(q.Ask)},
		{"mark price", m.MarkPrice, markOK || isNonNegative(m.MarkPrice)},
		{"index price", m.IndexPrice, isNonNegative(m.IndexPrice)},
	} {
		if !f.ok {
			return body, specs, fmt.Errorf("%s %q is not a non-negative plain decimal", f.name, f.v)
		}
	}
	if !markOK {
		return body, specs, fmt.Errorf("mark price %q is not positive", m.MarkPrice)
	}
	if m.NextFunding <= 0 {
		return body, specs, fmt.Errorf("no next funding time for %s", c.pair.Symbol)
	}
	p := &c.pair
	b := body
	if b, err = appendStatHead(b, *p, st); err != nil {
		return body, specs, err
	}
	b = appendStringField(b, "bid", q.Bid, false)
	b = appendStringField(b, "ask", q.Ask, false)
	b = appendStringField(b, "high", st.High, false)
	b = appendStringField(b, "low", st.Low, false)
	b = appendStringField(b, "product_type", ProductPerpetual, false)
	if b, err = c.appendInterest(b); err != nil {
		return body, specs, err
	}
	b = appendStringField(b, "index_price", m.IndexPrice, false)
	b = appendQuoted(appendKey(b, "index_name", false), p.Base, "-", p.Target)
	b = appendStringField(b, "index_currency", p.Target, false)
	if c.listed && c.onboard > 0 {
		b = appendIntField(b, "start_timestamp", c.onboard, false)
	} else {
		b = append(b, `,"start_timestamp":null`...)
	}
	b = append(b, `,"end_timestamp":null`...)
	b = append(appendKey(b, "funding_rate", false), '"')
	fundingAt := len(b)
	b, ok := appendPercent(b, m.FundingRate)
	if !ok {
		return body, specs, fmt.Errorf("funding rate: %q is not a plain decimal", m.FundingRate)
	}
	fundingEnd := len(b)
	b = append(appendKey(append(b, '"'), "next_funding_rate", false), '"')
	b = append(append(b, b[fundingAt:fundingEnd]...), '"')
	b = appendIntField(b, "next_funding_rate_timestamp", m.NextFunding, false)
	specAt := len(b)
	b = appendStringField(b, "contract_type", ContractVanilla, false)
	b = appendStringField(b, "contract_price", m.MarkPrice, false)
	b = appendStringField(b, "contract_price_currency", p.Target, false)
	specEnd := len(b)
	b = appendIntField(b, "timestamp", m.Time, false)
	b = append(b, '}')

	specs = appendStringField(append(specs, '{'), "ticker_id", p.TickerID, true)
	specs = append(append(specs, b[specAt:specEnd]...), '}')
	return b, specs, nil
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
		// Both factors are checked above: the product is plain, and
		// quoting it needs no escape.
		var err error
		if b, err = appendProduct(append(appendKey(b, "open_interest_usd", false), '"'), oi.Amount, c.mark.MarkPrice); err != nil {
			return nil, fmt.Errorf("open interest in dollars: %w", err)
		}
		b = append(b, '"')
	} else {
		b = append(b, `,"open_interest_usd":null`...)
	}
	return appendIntField(b, "open_interest_timestamp", oi.Time, false), nil
}

// Percent returns the plain decimal fraction f as a percentage, exactly:
// its point moved two places right ("0.0001" is "0.01", "-0.00025" is
// "-0.025"). It is an error for f not to be plain.
func Percent(f string) (string, error) {
	out, ok := appendPercent(nil, f)
	if !ok {
		return "", fmt.Errorf("%q is not a plain decimal", f)
	}
	return string(out), nil
}

// appendPercent appends Percent(f) to dst; ok is false, and dst unchanged,
// where f is not plain. It writes digit by digit, allocating nothing:
// every contract's funding rate takes one every second.
func appendPercent(dst []byte, f string) (_ []byte, ok bool) {
	if !IsPlain(f) {
		return dst, false
	}
	negative := f[0] == '-'
	if negative {
		f = f[1:]
	}
	whole, frac, _ := strings.Cut(f, ".")
	// The percentage's digits are whole, then frac's first two (zeros
	// where frac is shorter), a point, then the rest of frac; leading
	// zeros of the whole part and trailing zeros of the fraction dropped.
	digit := func(i int) byte { // the i-th digit of whole+frac+"00"
		switch {
		case i < len(whole):
			return whole[i]
		case i-len(whole) < len(frac):
			return frac[i-len(whole)]
		}
		return '0'
	}
	point := len(whole) + 2 // digits before the percentage's point
	first := 0
	for first < point-1 && digit(first) == '0' {
		first++
	}
	last := len(whole) + len(frac) // digits end; the fraction is digits point..last
	for last > point && digit(last-1) == '0' {
		last--
	}
	zero := first == point-1 && digit(first) == '0' && last <= point
	if negative && !zero {
		dst = append(dst, '-')
	}
	for i := first; i < point; i++ {
		dst = append(dst, digit(i))
	}
	if last > point {
		dst = append(dst, '.')
		for i := point; i < last; i++ {
			dst = append(dst, digit(i))
		}
	}
	return dst, true
}

// AppendWire appends the wire form of c: both responses, and their gzip
// forms where a request has compressed them.
func (c *Contracts) AppendWire(dst []byte) []byte {
	dst = binary.AppendVarint(append(dst, wireContracts), c.readAt)
	dst = binary.AppendUvarint(dst, uint64(c.count))
	dst = appendWireBytes(dst, c.body)
	dst = appendWireBytes(dst, c.specs.body)
	dst = appendWireGzip(dst, c.specs.later.gz.peek())
	return appendWireGzip(dst, c.later.gz.peek())
}

// DecodeContracts returns the contracts whose wire form is data, with the
// sender's gzip forms, or compressed by the first request that takes each.
// The value keeps none of data.
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
