package snapshot

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ericlagergren/decimal"

	"marketfeed/internal/golden"
)

// contractKeys are the /contracts item's fields, in the order served.
var contractKeys = []string{"ticker_id", "base_currency", "target_currency", "last_price", "base_volume",
	"target_volume", "bid", "ask", "high", "low", "product_type", "open_interest", "open_interest_usd",
	"open_interest_timestamp", "index_price", "index_name", "index_currency", "start_timestamp",
	"end_timestamp", "funding_rate", "next_funding_rate", "next_funding_rate_timestamp", "contract_type",
	"contract_price", "contract_price_currency", "timestamp"}

var specKeys = []string{"ticker_id", "contract_type", "contract_price", "contract_price_currency"}

type contractJSON struct {
	TickerID              string `json:"ticker_id"`
	BaseCurrency          string `json:"base_currency"`
	TargetCurrency        string `json:"target_currency"`
	LastPrice             dec    `json:"last_price"`
	BaseVolume            dec    `json:"base_volume"`
	TargetVolume          dec    `json:"target_volume"`
	Bid                   dec    `json:"bid"`
	Ask                   dec    `json:"ask"`
	High                  dec    `json:"high"`
	Low                   dec    `json:"low"`
	ProductType           string `json:"product_type"`
	OpenInterest          *dec   `json:"open_interest"`
	OpenInterestUSD       *dec   `json:"open_interest_usd"`
	OpenInterestTimestamp *int64 `json:"open_interest_timestamp"`
	IndexPrice            dec    `json:"index_price"`
	IndexName             string `json:"index_name"`
	IndexCurrency         string `json:"index_currency"`
	StartTimestamp        *int64 `json:"start_timestamp"`
	EndTimestamp          *int64 `json:"end_timestamp"`
	FundingRate           dec    `json:"funding_rate"`
	NextFundingRate       dec    `json:"next_funding_rate"`
	NextFundingTimestamp  int64  `json:"next_funding_rate_timestamp"`
	ContractType          string `json:"contract_type"`
	ContractPrice         dec    `json:"contract_price"`
	ContractCurrency      string `json:"contract_price_currency"`
	Timestamp             int64  `json:"timestamp"`
}

// contractPairs publishes BTC_USDT as spot and ETH_USDT, 1000PEPE_USDT and
// ETH_BTC as perps: ETH_BTC's quote is not the dollar.
func contractPairs() *Pairs {
	markets := []Market{perp("BTC", "USDT"), perp("ETH", "USDT"), perp("1000PEPE", "USDT"), perp("ETH", "BTC")}
	return NewPairs(markets, PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, readAt)
}

func contractInput() ContractsInput {
	stats := append(tickerStats()[:2], tickerStats()[3], Stat{Symbol: "ETHBTC", LastPrice: "0.05", High: "0.051",
		Low: "0.049", BaseVolume: "10", QuoteVolume: "0.5"})
	books := append(tickerQuotes()[:2], tickerQuotes()[3], Quote{Symbol: "ETHBTC", Bid: "0.0499", Ask: "0.0501"})
	return ContractsInput{
		Stats: stats,
		Books: books,
		Marks: []Contract{
			{Symbol: "BTCUSDT", MarkPrice: "65000.05", IndexPrice: "64990.1", FundingRate: "0.00010000", NextFunding: 1767254400000, Time: 1767225600000},
			{Symbol: "ETHUSDT", MarkPrice: "3100.15", IndexPrice: "3100", FundingRate: "-0.00025", NextFunding: 1767254400000, Time: 1767225600000},
			{Symbol: "1000PEPEUSDT", MarkPrice: "0.0123", IndexPrice: "0.01231", FundingRate: "0", NextFunding: 1767254400000, Time: 1767225600000},
			{Symbol: "ETHBTC", MarkPrice: "0.05", IndexPrice: "0.0501", FundingRate: "0.0001", NextFunding: 1767254400000, Time: 1767225600000},
		},
		Interest: []OpenInterest{
			{Symbol: "BTCUSDT", Amount: "81234.567", Time: 1767225590000},
			{Symbol: "ETHBTC", Amount: "12.5", Time: 1767225595000},
		},
		Onboard: map[string]int64{"BTCUSDT": 1569398400000},
		ReadAt:  readAt,
	}
}

func contractsByID(t *testing.T, c *Contracts) map[string]contractJSON {
	t.Helper()
	items := checkItems[contractJSON](t, c.Body(), contractKeys)
	if len(items) != c.Len() {
		t.Fatalf("body holds %d contracts, Len() = %d", len(items), c.Len())
	}
	out := map[string]contractJSON{}
	for _, it := range items {
		out[it.TickerID] = it
	}
	return out
}

// Every published pair, spot or perp, has the contract that prices it; its
// bid and ask are the book's two sides, not the tickers' mid; funding is a
// percentage; open interest not read yet is null, and its dollar value is
// null where the quote is not the dollar.
func TestContractsDescribeEveryPairsPerpetual(t *testing.T) {
	c, omitted := NewContracts(contractPairs(), contractInput())
	if len(omitted) != 0 {
		t.Fatalf("omitted %v", omitted)
	}
	got := contractsByID(t, c)
	if ids := slices.Sorted(func(yield func(string) bool) {
		for id := range got {
			if !yield(id) {
				return
			}
		}
	}); !slices.Equal(ids, []string{"1000PEPE_USDT", "BTC_USDT", "ETH_BTC", "ETH_USDT"}) {
		t.Fatalf("contracts for %v", ids)
	}
	btc := got["BTC_USDT"]
	if btc.Bid != "65000.0" || btc.Ask != "65000.1" || btc.FundingRate != "0.01" || btc.NextFundingRate != "0.01" ||
		*btc.OpenInterest != "81234.567" || *btc.OpenInterestUSD != "5280250916.72835" || *btc.OpenInterestTimestamp != 1767225590000 ||
		*btc.StartTimestamp != 1569398400000 || btc.EndTimestamp != nil || btc.ProductType != "Perpetual" ||
		btc.ContractType != "Vanilla" || btc.ContractPrice != "65000.05" || btc.ContractCurrency != "USDT" ||
		btc.IndexName != "BTC-USDT" || btc.IndexCurrency != "USDT" || btc.Timestamp != 1767225600000 {
		t.Errorf("BTC_USDT: %+v", btc)
	}
	if eth := got["ETH_USDT"]; eth.FundingRate != "-0.025" || eth.OpenInterest != nil || eth.OpenInterestUSD != nil ||
		eth.OpenInterestTimestamp != nil || eth.StartTimestamp != nil || eth.BaseVolume != "3.33333333" {
		t.Errorf("ETH_USDT (no open interest read, no onboard date, no venue base volume): %+v", eth)
	}
	if eb := got["ETH_BTC"]; *eb.OpenInterest != "12.5" || eb.OpenInterestUSD != nil || eb.ContractCurrency != "BTC" {
		t.Errorf("ETH_BTC (quoted in BTC): %+v", eb)
	}
	if pepe := got["1000PEPE_USDT"]; pepe.FundingRate != "0" {
		t.Errorf("1000PEPE_USDT: funding %s, want 0", pepe.FundingRate)
	}
	specs := checkItems[map[string]any](t, c.Specs().Body(), specKeys)
	if len(specs) != 4 || c.Specs().Len() != 4 || specs[1]["ticker_id"] != "BTC_USDT" ||
		specs[1]["contract_price"] != "65000.05" || specs[1]["contract_type"] != "Vanilla" {
		t.Errorf("specs %v", specs)
	}
	if c.ReadAt() != readAt.UnixNano() || c.Specs().ReadAt() != readAt.UnixNano() {
		t.Errorf("read at %d and %d, want %d", c.ReadAt(), c.Specs().ReadAt(), readAt.UnixNano())
	}
}

func TestContractsGolden(t *testing.T) {
	c, _ := NewContracts(contractPairs(), contractInput())
	golden.Check(t, "contracts", c.Body())
	golden.Check(t, "contract_specs", c.Specs().Body())
}

// A venue row with a missing, non-decimal or negative field leaves its
// contract out, with the reason, and the others are published.
func TestContractWithABadVenueRowIsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		breakf func(*ContractsInput)
		reason string
	}{
		{"no mark", func(in *ContractsInput) { in.Marks = in.Marks[1:] }, "no mark price"},
		{"no statistics", func(in *ContractsInput) { in.Stats = in.Stats[1:] }, "no 24h statistics"},
		{"no book", func(in *ContractsInput) { in.Books = in.Books[1:] }, "no best bid and ask"},
		{"mark not a decimal", func(in *ContractsInput) { in.Marks[0].MarkPrice = "1e5" }, "mark price"},
		{"mark zero", func(in *ContractsInput) { in.Marks[0].MarkPrice = "0" }, "mark price"},
		{"negative index", func(in *ContractsInput) { in.Marks[0].IndexPrice = "-1" }, "index price"},
		{"empty index", func(in *ContractsInput) { in.Marks[0].IndexPrice = "" }, "index price"},
		{"funding not a decimal", func(in *ContractsInput) { in.Marks[0].FundingRate = "NaN" }, "funding rate"},
		{"no next funding time", func(in *ContractsInput) { in.Marks[0].NextFunding = 0 }, "next funding time"},
		{"negative open interest", func(in *ContractsInput) { in.Interest[0].Amount = "-3" }, "open interest"},
		{"open interest not a decimal", func(in *ContractsInput) { in.Interest[0].Amount = "many" }, "open interest"},
		{"negative volume", func(in *ContractsInput) { in.Stats[0].QuoteVolume = "-5" }, "quote volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := contractInput()
			in.Marks, in.Stats, in.Books, in.Interest = slices.Clone(in.Marks), slices.Clone(in.Stats), slices.Clone(in.Books), slices.Clone(in.Interest)
			tc.breakf(&in)
			c, omitted := NewContracts(contractPairs(), in)
			if len(omitted) != 1 || omitted[0].TickerID != "BTC_USDT" || !strings.Contains(omitted[0].Reason, tc.reason) {
				t.Fatalf("omitted %v, want BTC_USDT for %q", omitted, tc.reason)
			}
			got := contractsByID(t, c)
			if _, ok := got["BTC_USDT"]; ok || len(got) != 3 || c.Specs().Len() != 3 {
				t.Errorf("published %d contracts (%d specs), BTC_USDT among them: %v", len(got), c.Specs().Len(), ok)
			}
		})
	}
}

// A contract whose pair leaves /pairs leaves /contracts in the publication
// built from the new list.
func TestContractOfAPairNoLongerListedIsGone(t *testing.T) {
	p := NewPairs([]Market{perp("BTC", "USDT")}, PairsConfig{Venue: "sim"}, readAt)
	c, omitted := NewContracts(p, contractInput())
	if len(omitted) != 0 || c.Len() != 1 || !strings.HasPrefix(string(c.Body()), `[{"ticker_id":"BTC_USDT",`) {
		t.Errorf("body %s, omitted %v; want BTC_USDT alone", c.Body(), omitted)
	}
	var specs []json.RawMessage
	decodeStrict(t, c.Specs().Body(), &specs)
	if len(specs) != 1 {
		t.Errorf("specs %s", c.Specs().Body())
	}
}

// A member taking over reads the open interest the last leader published
// back from its contracts, through the wire as it holds them.
func TestContractsInterestReadsBackWhatWasPublished(t *testing.T) {
	c, _ := NewContracts(contractPairs(), contractInput())
	d, err := DecodeContracts(c.AppendWire(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := d.Interest()
	want := map[string]OpenInterest{
		"BTC_USDT": {Amount: "81234.567", Time: 1767225590000},
		"ETH_BTC":  {Amount: "12.5", Time: 1767225595000},
	}
	if !maps.Equal(got, want) {
		t.Errorf("interest %v, want %v", got, want)
	}
	if n := len((*Contracts)(nil).Interest()); n != 0 {
		t.Errorf("no contracts: %d values", n)
	}
}

func TestPercentMovesThePointExactly(t *testing.T) {
	for in, want := range map[string]string{
		"0.0001": "0.01", "0.00010000": "0.01", "-0.00025": "-0.025", "0": "0", "-0.000": "0", "1": "100",
		"0.1": "10", "12.3456": "1234.56", "0.00000001": "0.000001", "-3.5": "-350", "007.001": "700.1",
	} {
		if got, err := Percent(in); err != nil || got != want {
			t.Errorf("Percent(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-", "1e-4", "+0.1", ".5", "5.", "NaN", "0x1"} {
		if got, err := Percent(bad); err == nil {
			t.Errorf("Percent(%q) = %q, want an error", bad, got)
		}
	}
}

// Percent agrees with exact decimal multiplication by 100 on every plain
// input, and refuses every other.
func FuzzPercent(f *testing.F) {
	for _, s := range []string{"0.0001", "-0.00025", "0", "12.3456", "1e-4", "-0.000", "007.001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Percent(s)
		if !IsPlain(s) {
			if err == nil {
				t.Fatalf("Percent(%q) = %q, want an error", s, got)
			}
			return
		}
		if err != nil || !IsPlain(got) {
			t.Fatalf("Percent(%q) = %q, %v", s, got, err)
		}
		want, err := Product(s, "100")
		if err != nil {
			t.Fatal(err)
		}
		g, w := new(decimal.Big), new(decimal.Big)
		if _, ok := g.SetString(got); !ok {
			t.Fatalf("Percent(%q) = %q does not parse", s, got)
		}
		if _, ok := w.SetString(want); !ok || g.Cmp(w) != 0 {
			t.Fatalf("Percent(%q) = %q, want %s", s, got, want)
		}
	})
}
