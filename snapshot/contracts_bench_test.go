package snapshot

import (
	"fmt"
	"strconv"
	"testing"
)

// benchContracts returns n perpetuals quoted in USDT, each with every input
// /contracts takes, shaped as the venue's (and venuesim's) strings are:
// prices of two to eight decimals, marks two decimals finer, volumes with
// the venue's trailing zeros, funding as "0.00010000", open interest read.
func benchContracts(n int) (*Pairs, ContractsInput) {
	markets := make([]Market, 0, n)
	in := ContractsInput{Onboard: make(map[string]int64, n), ReadAt: readAt}
	const at = 1767225600000
	for i := range n {
		base := fmt.Sprintf("C%03dX", i)
		m := perp(base, "USDT")
		markets = append(markets, m)
		dec := 2 + i%7
		price := int64(1000003 + i*7919)
		p := func(delta int64, d int) string {
			s := strconv.FormatInt(price*pow10(d-dec)+delta, 10)
			for len(s) <= d {
				s = "0" + s
			}
			return s[:len(s)-d] + "." + s[len(s)-d:]
		}
		in.Stats = append(in.Stats, Stat{Symbol: m.Symbol, LastPrice: p(3, dec), High: p(4000, dec), Low: p(-4000, dec),
			BaseVolume: "1234567.890", QuoteVolume: "987654321.12340000"})
		in.Books = append(in.Books, Quote{Symbol: m.Symbol, Bid: p(0, dec), Ask: p(1, dec)})
		in.Marks = append(in.Marks, Contract{Symbol: m.Symbol, MarkPrice: p(50, dec+2),
			IndexPrice: p(-700, dec+2), SettlePrice: p(-900, dec+2),
			FundingRate: fmt.Sprintf("0.%08d", 5000+(i*37)%20000), NextFunding: at + 3600000, Time: at})
		in.Interest = append(in.Interest, OpenInterest{Symbol: m.Symbol, Amount: strconv.Itoa(300000+i) + ".123", Time: at - int64(i)*1000})
		in.Onboard[m.Symbol] = 1569398400000 + int64(i)*86400000
	}
	return NewPairs(markets, PairsConfig{Venue: "sim"}, readAt), in
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// BenchmarkNewContracts builds /contracts and /contract_specs for 846
// perpetuals, the bench's market: the publication the poller makes every
// second.
func BenchmarkNewContracts(b *testing.B) {
	pairs, in := benchContracts(846)
	if c, omitted := NewContracts(pairs, in); len(omitted) != 0 || c.Len() != 846 {
		b.Fatalf("%d contracts, omitted %v", c.Len(), omitted)
	}
	b.ReportAllocs()
	for b.Loop() {
		NewContracts(pairs, in)
	}
}
