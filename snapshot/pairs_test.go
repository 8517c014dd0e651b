package snapshot

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"marketfeed/internal/golden"
)

// perp is a tradable perpetual market named the way Binance names them.
func perp(base, quote string) Market {
	return Market{Symbol: base + quote, Base: base, Quote: quote, Perpetual: true, Trading: true}
}

func ids(p *Pairs) []string {
	var out []string
	for _, pair := range p.List() {
		out = append(out, pair.TickerID)
	}
	return out
}

func kinds(p *Pairs) map[string]string {
	out := map[string]string{}
	for _, pair := range p.List() {
		out[pair.TickerID] = pair.Kind
	}
	return out
}

func TestNewPairsOnlyTradingPerpetuals(t *testing.T) {
	markets := []Market{
		perp("BTC", "USDT"),
		// Dated future of a coin that has no perpetual: same base and quote
		// shape, so only the contract type keeps it out.
		{Symbol: "ETHUSDT_261225", Base: "ETH", Quote: "USDT", Perpetual: false, Trading: true},
		{Symbol: "BTCUSDT_261225", Base: "BTC", Quote: "USDT", Perpetual: false, Trading: true},
		// A perpetual being delisted (SETTLING) is not tradable.
		{Symbol: "XRPUSDT", Base: "XRP", Quote: "USDT", Perpetual: true, Trading: false},
	}
	p := NewPairs(markets, PairsConfig{Venue: "binance"}, readAt)
	if got, want := ids(p), []string{"BTC_USDT"}; !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	if got := p.List()[0].Symbol; got != "BTCUSDT" {
		t.Errorf("BTC_USDT is priced from %s, want the perpetual BTCUSDT", got)
	}
}

func TestNewPairsAssetForm(t *testing.T) {
	for _, c := range []struct {
		base, quote string
		published   bool
	}{
		{"BTC", "USDT", true},
		{"OP", "USDT", true},              // 2 characters
		{"ABCDEFGHIJKLMNO", "USDT", true}, // 15 characters
		{"BTC", "ABCDEFGHIJKLMNO", true},
		{"1000PEPE", "USDT", true},
		{"btc", "USDT", false},
		{"Btc", "USDT", false},
		{"BTC", "usdt", false},
		{"B", "USDT", false},
		{"BTC", "U", false},
		{"ABCDEFGHIJKLMNOP", "USDT", false}, // 16 characters
		{"BTC", "ABCDEFGHIJKLMNOP", false},
		{"BTC-X", "USDT", false},
		{"BT.C", "USDT", false},
		{"BTC_X", "USDT", false},
		{"BTC X", "USDT", false},
		{"币安", "USDT", false},
		{"", "USDT", false},
		{"BTC", "", false},
	} {
		p := NewPairs([]Market{perp(c.base, c.quote)}, PairsConfig{Venue: "sim"}, readAt)
		_, got := p.Lookup(c.base + "_" + c.quote)
		if got != c.published || len(p.List()) != map[bool]int{true: 1, false: 0}[c.published] {
			t.Errorf("base %q quote %q: published %v (list %v), want %v", c.base, c.quote, got, ids(p), c.published)
		}
	}
}

func TestNewPairsSpotNeedsExactPerp(t *testing.T) {
	markets := []Market{perp("BTC", "USDT"), perp("1000PEPE", "USDT")}
	cfg := PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT", "PEPE_USDT"}}
	p := NewPairs(markets, cfg, readAt)
	want := map[string]string{"BTC_USDT": KindSpot, "1000PEPE_USDT": KindPerp}
	if got := kinds(p); !maps.Equal(got, want) {
		t.Fatalf("published %v, want %v (PEPE_USDT has no exact perpetual)", got, want)
	}
}

func TestNewPairsKeepsMultiplier(t *testing.T) {
	// Rule 3: a venue name with a multiplier is published as is; a spot id
	// without the multiplier does not match it. 1INCH is a coin name, not a
	// multiplier, and must not be taken apart either.
	markets := []Market{perp("1000PEPE", "USDT"), perp("1MBABYDOGE", "USDT"), perp("1000SHIB", "USDT"), perp("1INCH", "USDT")}
	cfg := PairsConfig{Venue: "sim", Spot: []string{"PEPE_USDT", "BABYDOGE_USDT", "SHIB_USDT", "INCH_USDT", "1INCH_USDT"}}
	p := NewPairs(markets, cfg, readAt)
	want := map[string]string{
		"1000PEPE_USDT":   KindPerp,
		"1MBABYDOGE_USDT": KindPerp,
		"1000SHIB_USDT":   KindPerp,
		"1INCH_USDT":      KindSpot,
	}
	if got := kinds(p); !maps.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	for _, pair := range p.List() {
		if pair.Base+"_"+pair.Target != pair.TickerID || pair.Symbol != pair.Base+pair.Target {
			t.Errorf("%+v: base/target or symbol do not match the venue's names", pair)
		}
	}
}

func TestNewPairsSpotWinsOverPerp(t *testing.T) {
	p := NewPairs([]Market{perp("BTC", "USDT")}, PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, readAt)
	if got := p.List(); len(got) != 1 || got[0].Kind != KindSpot {
		t.Fatalf("list %+v, want one spot item", got)
	}
	if n := strings.Count(string(p.Body()), `"BTC_USDT"`); n != 1 {
		t.Errorf("body names BTC_USDT %d times, want once: %s", n, p.Body())
	}
}

func TestNewPairsSpotWithoutTradablePerp(t *testing.T) {
	// Rule 2: a custodied coin whose perpetual is settling, dated or absent
	// has no tradable pair and is not published at all.
	markets := []Market{
		{Symbol: "ETHUSDT", Base: "ETH", Quote: "USDT", Perpetual: true, Trading: false},
		{Symbol: "DOGEUSDT_261225", Base: "DOGE", Quote: "USDT", Perpetual: false, Trading: true},
	}
	cfg := PairsConfig{Venue: "sim", Spot: []string{"ETH_USDT", "DOGE_USDT", "XRP_USDT"}}
	p := NewPairs(markets, cfg, readAt)
	if len(p.List()) != 0 || string(p.Body()) != "[]" {
		t.Fatalf("published %v (%s), want nothing", ids(p), p.Body())
	}
}

func TestNewPairsMalformedSpotID(t *testing.T) {
	// A configured id must match a perpetual exactly; a lowercase or
	// otherwise malformed id matches nothing, whatever the venue lists.
	p := NewPairs([]Market{perp("BTC", "USDT")}, PairsConfig{Venue: "sim", Spot: []string{"btc_usdt", "BTCUSDT", "BTC__USDT"}}, readAt)
	if got := kinds(p); !maps.Equal(got, map[string]string{"BTC_USDT": KindPerp}) {
		t.Fatalf("published %v, want only the perp BTC_USDT", got)
	}
}

func TestNewPairsQuoteAllowList(t *testing.T) {
	markets := []Market{perp("BTC", "USDT"), perp("BTC", "USDC"), perp("ETH", "BUSD")}
	cfg := PairsConfig{Venue: "sim", Spot: []string{"ETH_BUSD"}, Quotes: []string{"USDT"}}
	p := NewPairs(markets, cfg, readAt)
	// The allow-list narrows perp items; spot items are configured one by
	// one and are not filtered by it.
	want := map[string]string{"BTC_USDT": KindPerp, "ETH_BUSD": KindSpot}
	if got := kinds(p); !maps.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
}

func TestNewPairsPriceSource(t *testing.T) {
	markets := []Market{perp("BTC", "USDT"), perp("ETH", "USDT")}
	for _, venue := range []string{"sim", "binance", "aster"} {
		p := NewPairs(markets, PairsConfig{Venue: venue, Spot: []string{"BTC_USDT"}}, readAt)
		items := checkItems[pairJSON](t, p.Body(), pairKeys)
		if len(items) != 2 || items[0].Kind != KindSpot || items[1].Kind != KindPerp {
			t.Fatalf("%s: items %+v, want one spot and one perp", venue, items)
		}
		for _, it := range items {
			if it.PriceSource != venue+"-perp" {
				t.Errorf("%s: %s price_source %q, want %q", venue, it.TickerID, it.PriceSource, venue+"-perp")
			}
		}
	}
}

func TestNewPairsSorted(t *testing.T) {
	markets := []Market{perp("ETH", "USDT"), perp("BTC", "USDT"), perp("BTCDOM", "USDT"), perp("1000PEPE", "USDT"), perp("BTC", "USDC")}
	p := NewPairs(markets, PairsConfig{Venue: "sim", Spot: []string{"ETH_USDT"}}, readAt)
	// Byte order: digits before letters, and "BTCDOM_" before "BTC_"
	// because 'D' sorts before '_'.
	want := []string{"1000PEPE_USDT", "BTCDOM_USDT", "BTC_USDC", "BTC_USDT", "ETH_USDT"}
	if got := ids(p); !slices.Equal(got, want) {
		t.Fatalf("list order %v, want %v", got, want)
	}
	var bodyOrder []string
	for _, it := range checkItems[pairJSON](t, p.Body(), pairKeys) {
		bodyOrder = append(bodyOrder, it.TickerID)
	}
	if !slices.Equal(bodyOrder, want) {
		t.Errorf("body order %v, want %v", bodyOrder, want)
	}
}

func TestNewPairsOneItemPerTickerID(t *testing.T) {
	// Two tradable perpetuals with the same base and quote: one item, and
	// the same one whatever order the catalog lists them in.
	a := Market{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}
	b := Market{Symbol: "BTCUSDT2", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}
	for _, markets := range [][]Market{{a, b}, {b, a}} {
		p := NewPairs(markets, PairsConfig{Venue: "sim"}, readAt)
		if got := p.List(); len(got) != 1 || got[0].Symbol != "BTCUSDT" {
			t.Errorf("catalog %v: list %+v, want one item priced from BTCUSDT", markets, got)
		}
	}
}

func TestPairsLookupAndSpot(t *testing.T) {
	p := NewPairs([]Market{perp("BTC", "USDT"), perp("ETH", "USDT"), perp("SOL", "USDT")}, PairsConfig{Venue: "sim", Spot: []string{"SOL_USDT", "BTC_USDT"}}, readAt)
	if pair, ok := p.Lookup("ETH_USDT"); !ok || pair.Kind != KindPerp || pair.Symbol != "ETHUSDT" {
		t.Errorf("Lookup(ETH_USDT) = %+v, %v", pair, ok)
	}
	for _, id := range []string{"XRP_USDT", "", "AAA_USDT", "ZZZ_USDT"} {
		if _, ok := p.Lookup(id); ok {
			t.Errorf("Lookup(%q) found a pair", id)
		}
	}
	var spot []string
	for _, pair := range p.Spot() {
		spot = append(spot, pair.TickerID)
	}
	if want := []string{"BTC_USDT", "SOL_USDT"}; !slices.Equal(spot, want) {
		t.Errorf("Spot() = %v, want %v", spot, want)
	}
	if p.ReadAt() != readAt.UnixNano() {
		t.Errorf("ReadAt() = %d, want %d", p.ReadAt(), readAt.UnixNano())
	}
}

func TestPairsAnswerableFromStore(t *testing.T) {
	// Rule 1: every ticker_id /pairs returns is answerable by /orderbook and
	// /trades right after the list is published.
	p := NewPairs(catalog(), PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT", "ETH_USDT", "PEPE_USDT"}}, readAt)
	s := NewStore()
	s.PutDoc(p, readAt)
	for _, it := range checkItems[pairJSON](t, p.Body(), pairKeys) {
		id := []byte(it.TickerID)
		if !ValidTickerID(it.TickerID) {
			t.Errorf("%s does not fit the ticker_id form", it.TickerID)
		}
		if !s.Listed(id, readAt.UnixNano()) {
			t.Errorf("%s is in /pairs but not listed in the store", it.TickerID)
		}
		if _, ok := s.Book(id, readAt.UnixNano()); !ok {
			t.Errorf("%s: no book cell", it.TickerID)
		}
		if _, ok := s.Trades(id, readAt.UnixNano()); !ok {
			t.Errorf("%s: no trades cell", it.TickerID)
		}
	}
	if s.Listed([]byte("PEPE_USDT"), readAt.UnixNano()) {
		t.Error("PEPE_USDT is listed in the store but not published")
	}
}

// catalog is a venue catalog with every case the publication rules decide.
func catalog() []Market {
	return []Market{
		perp("ETH", "USDT"),
		perp("BTC", "USDT"),
		perp("1000PEPE", "USDT"),
		perp("1INCH", "USDT"),
		perp("BTC", "USDC"),
		{Symbol: "BTCUSDT_261225", Base: "BTC", Quote: "USDT", Perpetual: false, Trading: true},
		{Symbol: "LUNAUSDT", Base: "LUNA", Quote: "USDT", Perpetual: true, Trading: false},
		{Symbol: "btcusdt", Base: "btc", Quote: "usdt", Perpetual: true, Trading: true},
	}
}

func TestPairsGolden(t *testing.T) {
	p := NewPairs(catalog(), PairsConfig{Venue: "binance", Spot: []string{"BTC_USDT", "ETH_USDT", "PEPE_USDT", "LUNA_USDT"}}, readAt)
	golden.Check(t, "pairs", p.Body())
	checkItems[pairJSON](t, p.Body(), pairKeys)
}

func TestValidTickerID(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{"BTC_USDT", true},
		{"1000PEPE_USDT", true},
		{"OP_UP", true},                             // 2-character sides
		{"ABCDEFGHIJKLMNO_ABCDEFGHIJKLMNO", true},   // 15-character sides
		{"ABCDEFGHIJKLMNOP_USDT", false},            // 16-character base
		{"BTC_ABCDEFGHIJKLMNOP", false},             // 16-character quote
		{"B_USDT", false},                           // 1-character base
		{"BTC_U", false},                            // 1-character quote
		{"btc_usdt", false},                         // lowercase
		{"Btc_USDT", false},                         // mixed case
		{"BTCUSDT", false},                          // no underscore
		{"BTC_USDT_X", false},                       // two underscores
		{"BTC__USDT", false},                        // two underscores in a row
		{"_BTCUSDT", false},                         // empty base
		{"BTCUSDT_", false},                         // empty quote
		{"_", false},                                //
		{"", false},                                 // empty
		{"BTC-USDT", false},                         // other separator
		{"BTC_US DT", false},                        // space
		{"BTC_USDT\n", false},                       // control character
		{"BTC_ÜSDT", false},                         // non-ASCII letter
		{"BTC_USD%54", false},                       // escaped byte left in
		{"BTC_USDT ", false},                        // trailing space
		{"ABCDEFGHIJKLMNO_ABCDEFGHIJKLMNOP", false}, // quote one too long
	} {
		if got := ValidTickerID(c.id); got != c.want {
			t.Errorf("ValidTickerID(%q) = %v, want %v", c.id, got, c.want)
		}
		if got := ValidTickerID([]byte(c.id)); got != c.want {
			t.Errorf("ValidTickerID([]byte(%q)) = %v, want %v", c.id, got, c.want)
		}
	}
}
