package snapshot

import (
	"slices"
	"strings"
	"testing"

	"marketfeed/internal/golden"
)

// tickerPairs publishes BTC_USDT, ETH_USDT and SOL_USDT as spot and
// 1000PEPE_USDT as perp.
func tickerPairs() *Pairs {
	markets := []Market{perp("BTC", "USDT"), perp("ETH", "USDT"), perp("SOL", "USDT"), perp("1000PEPE", "USDT")}
	return NewPairs(markets, PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"}}, readAt)
}

func tickerStats() []Stat {
	return []Stat{
		{Symbol: "BTCUSDT", LastPrice: "65000.10", High: "66000.00", Low: "64000.5", BaseVolume: "1234.5000", QuoteVolume: "80246913.58"},
		{Symbol: "ETHUSDT", LastPrice: "3", High: "3200.5", Low: "3000.25", BaseVolume: "", QuoteVolume: "10"},
		{Symbol: "SOLUSDT", LastPrice: "150.25", High: "155", Low: "149.1", BaseVolume: "", QuoteVolume: "0"},
		{Symbol: "1000PEPEUSDT", LastPrice: "0.0123", High: "0.013", Low: "0.012", BaseVolume: "1", QuoteVolume: "0.0123"},
	}
}

func tickerQuotes() []Quote {
	return []Quote{
		{Symbol: "BTCUSDT", Bid: "65000.0", Ask: "65000.1"},
		{Symbol: "ETHUSDT", Bid: "3100.10", Ask: "3100.20"},
		{Symbol: "SOLUSDT", Bid: "0.00000001", Ask: "0.00000002"},
		{Symbol: "1000PEPEUSDT", Bid: "0.0122", Ask: "0.0124"},
	}
}

func tickersByID(t *testing.T, tk *Tickers) map[string]tickerJSON {
	t.Helper()
	items := checkItems[tickerJSON](t, tk.Body(), tickerKeys)
	if len(items) != tk.Len() {
		t.Fatalf("body holds %d tickers, Len() = %d", len(items), tk.Len())
	}
	out := map[string]tickerJSON{}
	for _, it := range items {
		out[it.TickerID] = it
	}
	return out
}

func TestTickersOnlySpot(t *testing.T) {
	tk, omitted := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	if len(omitted) != 0 {
		t.Fatalf("omitted %v", omitted)
	}
	var got []string
	for _, it := range checkItems[tickerJSON](t, tk.Body(), tickerKeys) {
		got = append(got, it.TickerID)
	}
	// 1000PEPE_USDT has statistics and a quote but is a perp: no ticker.
	if want := []string{"BTC_USDT", "ETH_USDT", "SOL_USDT"}; !slices.Equal(got, want) {
		t.Errorf("tickers %v, want %v", got, want)
	}
}

func TestTickersBidAskAreMid(t *testing.T) {
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	for id, mid := range map[string]dec{"BTC_USDT": "65000.05", "ETH_USDT": "3100.15", "SOL_USDT": "0.000000015"} {
		it := tickersByID(t, tk)[id]
		if it.Bid != mid || it.Ask != mid {
			t.Errorf("%s: bid %s ask %s, want both %s", id, it.Bid, it.Ask, mid)
		}
	}
}

func TestTickersVenueValuesByteForByte(t *testing.T) {
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	it := tickersByID(t, tk)["BTC_USDT"]
	want := tickerJSON{
		TickerID: "BTC_USDT", BaseCurrency: "BTC", TargetCurrency: "USDT",
		LastPrice: "65000.10", BaseVolume: "1234.5000", TargetVolume: "80246913.58",
		Bid: "65000.05", Ask: "65000.05", High: "66000.00", Low: "64000.5",
		Timestamp: readAt.UnixMilli(),
	}
	if it != want {
		t.Errorf("BTC_USDT ticker\n got %+v\nwant %+v", it, want)
	}
}

func TestTickersBaseVolumeFallback(t *testing.T) {
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	got := tickersByID(t, tk)
	// ETH: no venue base volume, 10 / 3 truncated to eight places.
	if v := got["ETH_USDT"].BaseVolume; v != "3.33333333" {
		t.Errorf("ETH_USDT base_volume %s, want 3.33333333", v)
	}
	// SOL: no venue base volume and no quote volume.
	if v := got["SOL_USDT"].BaseVolume; v != "0" {
		t.Errorf("SOL_USDT base_volume %s, want 0", v)
	}
}

func TestTickersZeroLastPriceZeroVolume(t *testing.T) {
	stats := tickerStats()
	stats[1].LastPrice, stats[1].QuoteVolume = "0", "0"
	tk, omitted := NewTickers(tickerPairs(), stats, tickerQuotes(), readAt)
	if len(omitted) != 0 {
		t.Fatalf("omitted %v, want none: zero volume at zero price is a base volume of 0", omitted)
	}
	if it := tickersByID(t, tk)["ETH_USDT"]; it.BaseVolume != "0" || it.LastPrice != "0" {
		t.Errorf("ETH_USDT %+v, want last_price 0 and base_volume 0", it)
	}
}

func TestTickersOmissions(t *testing.T) {
	// Each case spoils ETH_USDT only; the other spot tickers must survive it.
	for _, c := range []struct {
		name  string
		spoil func(stats []Stat, quotes []Quote) ([]Stat, []Quote)
	}{
		{"zero last price with volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].LastPrice = "0"; return s, q }},
		{"zero last price with volume, long zero", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].LastPrice = "0.000"; return s, q }},
		{"no statistics", func(s []Stat, q []Quote) ([]Stat, []Quote) { return slices.Delete(s, 1, 2), q }},
		{"no quote", func(s []Stat, q []Quote) ([]Stat, []Quote) { return s, slices.Delete(q, 1, 2) }},
		{"empty bid", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Bid = ""; return s, q }},
		{"empty ask", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Ask = ""; return s, q }},
		{"zero bid", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Bid = "0"; return s, q }},
		{"zero ask", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Ask = "0.00"; return s, q }},
		{"negative bid", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Bid = "-1"; return s, q }},
		{"exponent bid", func(s []Stat, q []Quote) ([]Stat, []Quote) { q[1].Bid = "3.1e3"; return s, q }},
		{"exponent last price", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].LastPrice = "3E0"; return s, q }},
		{"garbage high", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].High = "abc"; return s, q }},
		{"NaN low", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].Low = "NaN"; return s, q }},
		{"empty low", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].Low = ""; return s, q }},
		{"quoted quote volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].QuoteVolume = `"10"`; return s, q }},
		{"exponent base volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].BaseVolume = "1E2"; return s, q }},
		{"padded base volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].BaseVolume = " 1"; return s, q }},
		{"negative quote volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].QuoteVolume = "-10"; return s, q }},
		{"negative base volume", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].BaseVolume = "-1"; return s, q }},
		{"negative last price", func(s []Stat, q []Quote) ([]Stat, []Quote) { s[1].LastPrice = "-3"; return s, q }},
	} {
		t.Run(c.name, func(t *testing.T) {
			stats, quotes := c.spoil(tickerStats(), tickerQuotes())
			tk, omitted := NewTickers(tickerPairs(), stats, quotes, readAt)
			if len(omitted) != 1 || omitted[0].TickerID != "ETH_USDT" || omitted[0].Reason == "" {
				t.Fatalf("omitted %+v, want ETH_USDT with a reason", omitted)
			}
			got := tickersByID(t, tk)
			if _, ok := got["ETH_USDT"]; ok {
				t.Error("ETH_USDT is still published")
			}
			if len(got) != 2 {
				t.Errorf("published %d tickers, want BTC_USDT and SOL_USDT", len(got))
			}
			if strings.Contains(string(tk.Body()), "ETH") {
				t.Errorf("body mentions ETH: %s", tk.Body())
			}
		})
	}
}

func TestTickersBaseVolumeFromVenueWithZeroPrice(t *testing.T) {
	// The zero-price rule is about the computed fallback; a venue that sends
	// its own base volume needs no division.
	stats := tickerStats()
	stats[0].LastPrice = "0"
	tk, omitted := NewTickers(tickerPairs(), stats, tickerQuotes(), readAt)
	if len(omitted) != 0 {
		t.Fatalf("omitted %v", omitted)
	}
	if it := tickersByID(t, tk)["BTC_USDT"]; it.BaseVolume != "1234.5000" {
		t.Errorf("BTC_USDT base_volume %s, want the venue's 1234.5000", it.BaseVolume)
	}
}

func TestTickersTimestamp(t *testing.T) {
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	for id, it := range tickersByID(t, tk) {
		if it.Timestamp != 1767225600123 {
			t.Errorf("%s timestamp %d, want the read time 1767225600123", id, it.Timestamp)
		}
	}
	if tk.ReadAt() != readAt.UnixNano() {
		t.Errorf("ReadAt() = %d, want %d", tk.ReadAt(), readAt.UnixNano())
	}
}

func TestTickersNoSpotPairs(t *testing.T) {
	p := NewPairs([]Market{perp("BTC", "USDT")}, PairsConfig{Venue: "sim"}, readAt)
	tk, omitted := NewTickers(p, tickerStats(), tickerQuotes(), readAt)
	if string(tk.Body()) != "[]" || tk.Len() != 0 || len(omitted) != 0 {
		t.Errorf("body %s, Len %d, omitted %v; want [] and nothing omitted", tk.Body(), tk.Len(), omitted)
	}
}

func TestTickersGolden(t *testing.T) {
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	golden.Check(t, "tickers", tk.Body())
}
