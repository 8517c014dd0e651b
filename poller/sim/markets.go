package sim

import (
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"

	"marketfeed/poller/venue"
)

// DefaultSpot is the platform spot list used when none is configured, so that
// the service run with no flags publishes spot tickers as well as perps.
//
// PEPE_USDT is listed on purpose and must not be published: the venue has no
// PEPE/USDT perpetual, only 1000PEPEUSDT (base "1000PEPE"), and the
// publication rules forbid multiplier arithmetic. ADA_USDT is listed because
// ADAUSDT is the market whose 24 h statistics lack the base volume, so the
// ticker's computed base_volume shows up in a default run.
//
// Callers must treat the slice as read-only.
var DefaultSpot = []string{
	"BTC_USDT",
	"ETH_USDT",
	"SOL_USDT",
	"BNB_USDT",
	"XRP_USDT",
	"DOGE_USDT",
	"ADA_USDT",
	"LINK_USDT",
	"LTC_USDT",
	"TRX_USDT",
	"AVAX_USDT",
	"BTC_USDC",
	"PEPE_USDT",
}

// class is a liquidity class: how deep, how busy and how volatile a market
// is. Sizes are given as quote-currency notionals and turned into lots per
// market, so one class fits a coin at 65000 and one at 0.0095 alike.
type class struct {
	levelNotional int64  // typical resting size of one book level, in quote units
	tradeNotional int64  // typical trade size, in quote units
	dayNotional   int64  // typical 24 h volume, in quote units
	idle          uint64 // out of 256: share of 100 ms buckets without a trade
	spread        int64  // narrowest spread, in ticks
	vol           int64  // amplitude of the price path, percent of the base amplitude
}

var (
	major = class{levelNotional: 60_000, tradeNotional: 4_000, dayNotional: 12_000_000_000, idle: 40, spread: 1, vol: 100}
	large = class{levelNotional: 25_000, tradeNotional: 1_500, dayNotional: 1_500_000_000, idle: 90, spread: 1, vol: 140}
	mid   = class{levelNotional: 8_000, tradeNotional: 600, dayNotional: 250_000_000, idle: 150, spread: 2, vol: 180}
	small = class{levelNotional: 3_000, tradeNotional: 250, dayNotional: 40_000_000, idle: 200, spread: 2, vol: 250}
	thin  = class{levelNotional: 1_500, tradeNotional: 200, dayNotional: 8_000_000, idle: 235, spread: 3, vol: 120}
)

// spec is one built-in market as written in the table below. Prices and tick
// sizes are decimal strings so the table reads like the venue's catalog and no
// float is involved; the price string's decimals are the price precision.
type spec struct {
	symbol, base, quote string
	price, tick         string
	qtyDecimals         int
	cls                 *class
	perpetual, trading  bool
	noBaseVolume        bool // 24 h statistics without the base volume
	noQuoteQty          bool // trades without the quote quantity
}

func perp(symbol, base, quote, price, tick string, qtyDecimals int, cls *class) spec {
	return spec{symbol: symbol, base: base, quote: quote, price: price, tick: tick,
		qtyDecimals: qtyDecimals, cls: cls, perpetual: true, trading: true}
}

// settling is a delisted perpetual: still in the catalog, no longer tradable
// (Binance status SETTLING).
func settling(symbol, base, quote, price, tick string, qtyDecimals int) spec {
	s := perp(symbol, base, quote, price, tick, qtyDecimals, &thin)
	s.trading = false
	return s
}

// delivery is a dated quarterly future, tradable but not a perpetual.
func delivery(symbol, base, quote, price, tick string, qtyDecimals int) spec {
	s := perp(symbol, base, quote, price, tick, qtyDecimals, &thin)
	s.perpetual = false
	return s
}

// builtin is the simulated venue's catalog. Price levels and tick sizes follow
// the real USDⓈ-M contracts closely enough that the published numbers look
// familiar, including the price precision that is finer than the tick (BTC
// ticks by 0.10 and prints two decimals).
//
// Markets that exercise the publication rules:
//   - 1000PEPEUSDT, 1000SHIBUSDT, 1000BONKUSDT, 1MBABYDOGEUSDT and
//     1000000MOGUSDT carry a multiplier in the base; 1INCHUSDT starts with a
//     digit but is not a multiplier.
//   - OCEANUSDT, AGIXUSDT and FTTUSDT are delisted perpetuals (not tradable).
//   - BTCUSDT_260925 and the other underscored symbols are dated futures.
//   - SUPERLONGMEMECOINUSDT is a tradable perpetual whose base has 17
//     characters, more than a ticker_id side allows, so it is never published.
//   - ADAUSDT's 24 h statistics have no base volume; DOGEUSDT's trades have no
//     quote quantity.
//
// Every market, tradable or not, has a live book, trades and statistics, as
// the bulk calls of a real venue also cover markets nobody may publish: the
// catalog flags alone decide what is published.
var builtin = []spec{
	perp("BTCUSDT", "BTC", "USDT", "65000.00", "0.10", 3, &major),
	perp("ETHUSDT", "ETH", "USDT", "3200.00", "0.01", 3, &major),
	perp("SOLUSDT", "SOL", "USDT", "150.0000", "0.0100", 2, &large),
	perp("BNBUSDT", "BNB", "USDT", "580.000", "0.010", 2, &large),
	perp("XRPUSDT", "XRP", "USDT", "0.5200", "0.0001", 1, &large),
	withoutQuoteQty(perp("DOGEUSDT", "DOGE", "USDT", "0.120000", "0.000010", 0, &large)),
	withoutBaseVolume(perp("ADAUSDT", "ADA", "USDT", "0.45000", "0.00010", 0, &large)),
	perp("AVAXUSDT", "AVAX", "USDT", "28.0000", "0.0010", 0, &mid),
	perp("LINKUSDT", "LINK", "USDT", "14.000", "0.001", 2, &mid),
	perp("DOTUSDT", "DOT", "USDT", "6.500", "0.001", 1, &mid),
	perp("LTCUSDT", "LTC", "USDT", "80.00", "0.01", 3, &mid),
	perp("TRXUSDT", "TRX", "USDT", "0.12000", "0.00001", 0, &mid),
	perp("BCHUSDT", "BCH", "USDT", "380.00", "0.01", 3, &mid),
	perp("NEARUSDT", "NEAR", "USDT", "5.200", "0.001", 0, &mid),
	perp("POLUSDT", "POL", "USDT", "0.40000", "0.00010", 0, &mid),
	perp("UNIUSDT", "UNI", "USDT", "7.500", "0.001", 0, &mid),
	perp("ATOMUSDT", "ATOM", "USDT", "6.800", "0.001", 2, &mid),
	perp("ETCUSDT", "ETC", "USDT", "22.000", "0.001", 2, &mid),
	perp("FILUSDT", "FIL", "USDT", "4.200", "0.001", 1, &mid),
	perp("APTUSDT", "APT", "USDT", "8.50000", "0.00010", 1, &mid),
	perp("ARBUSDT", "ARB", "USDT", "0.7500", "0.0001", 1, &mid),
	perp("OPUSDT", "OP", "USDT", "1.6000", "0.0001", 1, &mid),
	perp("SUIUSDT", "SUI", "USDT", "1.1000", "0.0001", 1, &mid),
	perp("INJUSDT", "INJ", "USDT", "22.000", "0.001", 1, &mid),
	perp("AAVEUSDT", "AAVE", "USDT", "95.000", "0.010", 1, &mid),
	perp("XLMUSDT", "XLM", "USDT", "0.10000", "0.00001", 0, &small),
	perp("HBARUSDT", "HBAR", "USDT", "0.08000", "0.00001", 0, &small),
	perp("TONUSDT", "TON", "USDT", "5.5000", "0.0001", 1, &small),
	perp("WIFUSDT", "WIF", "USDT", "2.1000", "0.0001", 1, &small),
	perp("1000PEPEUSDT", "1000PEPE", "USDT", "0.0095000", "0.0000001", 0, &small),
	perp("1000SHIBUSDT", "1000SHIB", "USDT", "0.017500", "0.000001", 0, &small),
	perp("1000BONKUSDT", "1000BONK", "USDT", "0.022000", "0.000001", 0, &small),
	perp("1MBABYDOGEUSDT", "1MBABYDOGE", "USDT", "0.0016000", "0.0000001", 0, &small),
	perp("1000000MOGUSDT", "1000000MOG", "USDT", "1.2000", "0.0001", 1, &small),
	perp("1INCHUSDT", "1INCH", "USDT", "0.3800", "0.0001", 0, &small),
	perp("ENAUSDT", "ENA", "USDT", "0.6000", "0.0001", 0, &small),
	perp("TIAUSDT", "TIA", "USDT", "6.000", "0.001", 0, &small),
	perp("SEIUSDT", "SEI", "USDT", "0.4000", "0.0001", 0, &small),
	perp("RUNEUSDT", "RUNE", "USDT", "4.500", "0.001", 0, &small),
	perp("FETUSDT", "FET", "USDT", "1.3000", "0.0001", 0, &small),
	perp("RENDERUSDT", "RENDER", "USDT", "7.000", "0.001", 1, &small),
	perp("ORDIUSDT", "ORDI", "USDT", "35.000", "0.001", 1, &small),
	perp("BTCUSDC", "BTC", "USDC", "65000.0", "0.1", 3, &large),
	perp("ETHUSDC", "ETH", "USDC", "3200.00", "0.01", 3, &large),
	perp("SOLUSDC", "SOL", "USDC", "150.000", "0.010", 2, &mid),
	perp("XRPUSDC", "XRP", "USDC", "0.5200", "0.0001", 1, &mid),

	perp("SUPERLONGMEMECOINUSDT", "SUPERLONGMEMECOIN", "USDT", "0.012000", "0.000001", 0, &thin),

	settling("OCEANUSDT", "OCEAN", "USDT", "0.5200", "0.0001", 0),
	settling("AGIXUSDT", "AGIX", "USDT", "0.6000", "0.0001", 0),
	settling("FTTUSDT", "FTT", "USDT", "1.5000", "0.0001", 1),

	delivery("BTCUSDT_260925", "BTC", "USDT", "66200.0", "0.1", 3),
	delivery("BTCUSDT_261225", "BTC", "USDT", "67300.0", "0.1", 3),
	delivery("ETHUSDT_260925", "ETH", "USDT", "3260.00", "0.01", 3),
	delivery("ETHUSDT_261225", "ETH", "USDT", "3310.00", "0.01", 3),
}

func withoutBaseVolume(s spec) spec { s.noBaseVolume = true; return s }
func withoutQuoteQty(s spec) spec   { s.noQuoteQty = true; return s }

// extraSpec returns the i-th synthetic market (i from 1): SIM001USDT, base
// SIM001, and so on. Its price comes from the index alone, not the seed, so a
// load test sees the same catalog and price levels whatever the seed. The
// family sets only how the price is written; how many ticks the price is
// worth, which decides how far a 1000-level book reaches, is drawn as the
// venue's catalog spreads it (priceTicks).
func extraSpec(i int) spec {
	n := strconv.Itoa(i)
	if len(n) < 3 {
		n = strings.Repeat("0", 3-len(n)) + n
	}
	base := "SIM" + n
	h := mix(uint64(i)*golden + 0x51a7)
	ticks := ticksAt(int64(h >> 8 % 1000))
	var price, tick string
	var qd int
	switch h % 4 {
	case 0:
		price, tick, qd = decimalString(ticks, 2), "0.01", 2
	case 1:
		price, tick, qd = decimalString(ticks, 4), "0.0001", 1
	case 2:
		price, tick, qd = decimalString(ticks, 6), "0.000001", 0
	default:
		price, tick, qd = decimalString(ticks, 1), "0.1", 3
	}
	cls := &mid
	if h>>40&1 == 1 {
		cls = &small
	}
	return perp(base+"USDT", base, "USDT", price, tick, qd, cls)
}

// priceTicks is how many ticks a market's price is worth across the venue's
// USDⓈ-M catalog, by share of markets (per mille), from its tick sizes
// against its quoted prices: a tenth of its markets have a tick under 0.34
// basis points of the price (over 29,000 ticks to the price, books as dense
// as the majors'), half under 1.7 (5,700 ticks), a tenth over 5.4 (1,850),
// the coarsest 38 (260). A 1000-level side spans some 1,200 ticks, so
// that is what decides how far the price moves before a local book needs a
// deeper snapshot, and why most of the venue's markets hardly ever do; a
// market of a few hundred ticks has fewer than 1000 bids, all there are, as
// the venue's thin books do.
var priceTicks = [...]struct{ at, ticks int64 }{
	{0, 110_000}, {100, 29_000}, {250, 12_800}, {500, 5_700}, {750, 2_800}, {900, 1_850}, {1000, 260},
}

// ticksAt returns the price in ticks of the market at per mille q of
// priceTicks (0 <= q < 1000), between its points in a straight line.
func ticksAt(q int64) int64 {
	for j := 1; j < len(priceTicks); j++ {
		a, b := priceTicks[j-1], priceTicks[j]
		if q < b.at {
			return a.ticks + (b.ticks-a.ticks)*(q-a.at)/(b.at-a.at)
		}
	}
	return priceTicks[len(priceTicks)-1].ticks
}

func decimalString(v int64, decimals int) string {
	return string(appendDecimal(nil, v, decimals))
}

// parseDecimal reads a plain decimal of the built-in table as an integer
// count of 10^-decimals units. The table is fixed, so a malformed entry is a
// programming error and panics at New.
func parseDecimal(s string, decimals int) int64 {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > decimals {
		panic("sim: too many decimals in " + s)
	}
	frac += strings.Repeat("0", decimals-len(frac))
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || v <= 0 {
		panic("sim: bad decimal " + s)
	}
	return v
}

func decimalsOf(s string) int {
	if _, frac, ok := strings.Cut(s, "."); ok {
		return len(frac)
	}
	return 0
}

// newMarket turns a table entry into the market the generators read,
// deriving the per-market hash keys from the seed.
func newMarket(s spec, seed int64) market {
	pd := decimalsOf(s.price)
	price := parseDecimal(s.price, pd)
	tick := parseDecimal(s.tick, pd)
	scale := pow10(pd + s.qtyDecimals) // quote units per (price unit × lot)
	lots := func(notional int64) int64 {
		return max(1, mulDiv(notional, scale, price))
	}
	key := mix(uint64(seed) ^ fnv64(s.symbol))
	m := market{
		info: venue.Market{
			Symbol:    s.symbol,
			Base:      s.base,
			Quote:     s.quote,
			Perpetual: s.perpetual,
			Trading:   s.trading,
		},
		ref:          price / tick,
		tick:         tick,
		priceDec:     pd,
		qtyDec:       s.qtyDecimals,
		levelLots:    lots(s.cls.levelNotional),
		tradeLots:    lots(s.cls.tradeNotional),
		dayLots:      lots(s.cls.dayNotional),
		idle:         s.cls.idle,
		one:          s.cls.idle + (256-s.cls.idle)*5/10, // half the busy buckets hold one trade,
		two:          s.cls.idle + (256-s.cls.idle)*8/10, // 30 % two and 20 % three
		spread:       s.cls.spread,
		vol:          s.cls.vol,
		window:       DefaultDepthWindow,
		noBaseVolume: s.noBaseVolume,
		noQuoteQty:   s.noQuoteQty,
		topKey:       mix(key ^ domainTop),
		bidKey:       mix(key ^ domainBid),
		askKey:       mix(key ^ domainAsk),
		tradeKey:     mix(key ^ domainTrade),
		volumeKey:    mix(key ^ domainVolume),
		idKey:        mix(key ^ domainID),
		ids:          new(tradeIDs),
		fast:         new(atomic.Pointer[[]fastMove]),
	}
	// Ids start somewhere of the market's own, as two venue markets' counters
	// do, but far below where the heartbeats of this century take them.
	m.idBase = int64(m.idKey >> 28)
	m.tradeBase = int64(m.tradeKey >> 30)
	for o := range m.octaveKeys {
		m.octaveKeys[o] = mix((key ^ domainOctave) + uint64(o)*golden)
	}
	// Room for one level: the widest price (the path stays well under twice
	// the reference) and the largest size (a wall deep in the book), plus
	// separators. An underestimate only costs a buffer growth.
	m.levelBytes = digits(2*price) + 1 + digits(m.levelLots*6*11) + 1 + 2
	m.tradeBytes = 2*(digits(2*price)+1) + digits(m.tradeLots*48) + digits(2*price*m.tradeLots*48) + 4
	return m
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// digits returns the number of decimal digits of a non-negative v.
func digits(v int64) int {
	// bits.Len64 × log10(2), then one correction against a power of ten.
	d := bits.Len64(uint64(v)) * 1233 >> 12
	if d < len(powers) && uint64(v) >= powers[d] {
		d++
	}
	return max(d, 1)
}

// powers holds 10^0 .. 10^19.
var powers = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
