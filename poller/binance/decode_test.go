package binance

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// plainRE is the contract's definition of a plain decimal, kept apart from
// IsPlainDecimal so that each checks the other.
var plainRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ourWords are words of this package's own error messages that can also
// occur in a venue body; finding them in an error is not a leak.
var ourWords = map[string]bool{
	"fetch": true, "body": true, "JSON": true, "array": true, "object": true, "venue": true,
	"answered": true, "retry": true, "after": true, "unusable": true, "data": true, "read": true,
	"exceeds": true, "bytes": true, "symbol": true, "price": true, "quantity": true, "quoteQty": true,
	"time": true, "isBuyerMaker": true, "maker": true, "flag": true, "unsigned": true, "lastUpdateId": true, "id": true, "bids": true, "asks": true, "depth": true, "trades": true,
	"trade": true, "item": true, "plain": true, "decimal": true, "positive": true, "integer": true,
	"boolean": true, "pair": true, "usable": true, "not": true, "has": true, "nor": true,
	"bid": true, "ask": true, "qty": true, "and": true, "lists": true, "exchangeInfo": true,
	"bookTicker": true, "ticker/24hr": true, "expected": true, "shape": true, "neither": true,
}

// assertNoBody fails when err's text contains what looks like a piece of
// body: JSON or HTML punctuation, or any word of three or more characters
// taken from the body other than our own vocabulary and the given words
// (the requested symbol, the status code).
func assertNoBody(t testing.TB, err error, body []byte, allowed ...string) {
	t.Helper()
	msg := err.Error()
	if i := strings.IndexAny(msg, "{}[]<>\"\\"); i >= 0 {
		t.Errorf("error %q contains body punctuation %q", msg, msg[i])
	}
	words := strings.FieldsFunc(string(body), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '-' || r == '+' || r == '_' || r == '/')
	})
	for _, w := range words {
		if len(w) < 3 || ourWords[w] || slices.Contains(allowed, w) {
			continue
		}
		if strings.Contains(msg, w) {
			t.Errorf("error %q contains body text %q", msg, w)
		}
	}
}

func TestIsPlain(t *testing.T) {
	for _, s := range []string{
		"0", "1", "-1", "0.5", "-0.5", "007.50", "65000.10", "12345678901234567890.123456789",
		"", "-", ".", ".5", "5.", "1e3", "1E3", "1.5e-3", "+1", "--1", "1.2.3", " 1", "1 ", "1,5",
		"NaN", "Inf", "-Inf", "0x10", "１", "1_000", `"1"`, "1-", "-.5",
	} {
		if got, want := venue.IsPlainDecimal(s), plainRE.MatchString(s); got != want {
			t.Errorf("IsPlainDecimal(%q) = %v, regexp says %v", s, got, want)
		}
	}
}

func TestDecodeCatalog(t *testing.T) {
	cat, err := decodeCatalog(readFixture(t, "exchangeInfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := venue.Catalog{
		WeightLimit: 2400,
		Markets: []venue.Market{
			{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true, Onboard: 1569398400000},
			{Symbol: "ETHUSDT", Base: "ETH", Quote: "USDT", Perpetual: true, Trading: true, Onboard: 1569398400000},
			{Symbol: "BTCUSDT_261225", Base: "BTC", Quote: "USDT", Perpetual: false, Trading: true, Onboard: 1766649600000},
			{Symbol: "1000PEPEUSDT", Base: "1000PEPE", Quote: "USDT", Perpetual: true, Trading: true, Onboard: 1683244800000},
			{Symbol: "1INCHUSDT", Base: "1INCH", Quote: "USDT", Perpetual: true, Trading: true, Onboard: 1608768000000},
			{Symbol: "OLDCOINUSDT", Base: "OLDCOIN", Quote: "USDT", Perpetual: true, Trading: false, Onboard: 1640995200000},
			{Symbol: "ETHBTC", Base: "ETH", Quote: "BTC", Perpetual: true, Trading: false, Onboard: 1640995200000},
		},
	}
	if !reflect.DeepEqual(cat, want) {
		t.Errorf("got  %+v\nwant %+v", cat, want)
	}
}

func TestDecodeCatalogWeightLimit(t *testing.T) {
	const symbols = `"symbols":[{"symbol":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT"}]`
	rl := func(interval string, num, limit string) string {
		s := `{"rateLimitType":"REQUEST_WEIGHT","interval":"` + interval + `"`
		if num != "" {
			s += `,"intervalNum":` + num
		}
		return s + `,"limit":` + limit + `}`
	}
	for _, tc := range []struct {
		name, limits string
		want         int
	}{
		{"minute", rl("MINUTE", "1", "2400"), 2400},
		{"two minutes", rl("MINUTE", "2", "2400"), 1200},
		{"second", rl("SECOND", "1", "40"), 2400},
		{"ten seconds", rl("SECOND", "10", "300"), 1800},
		{"hour", rl("HOUR", "1", "60000"), 1000},
		{"day", rl("DAY", "1", "1440000"), 1000},
		{"rounds down", rl("MINUTE", "7", "100"), 14},
		{"at least one", rl("HOUR", "1", "30"), 1},
		{"intervalNum absent means one", rl("MINUTE", "", "1200"), 1200},
		{"most restrictive wins", rl("MINUTE", "1", "2400") + "," + rl("SECOND", "10", "50"), 300},
		{"orders only", `{"rateLimitType":"ORDERS","interval":"MINUTE","intervalNum":1,"limit":1200}`, defaultWeightLimit},
		{"unknown interval", rl("WEEK", "1", "1000"), defaultWeightLimit},
		{"zero limit", rl("MINUTE", "1", "0"), defaultWeightLimit},
		{"zero intervalNum", rl("MINUTE", "0", "100"), defaultWeightLimit},
		{"negative limit", rl("MINUTE", "1", "-5"), defaultWeightLimit},
		{"string limit", rl("MINUTE", "1", `"2400"`), defaultWeightLimit},
		{"float limit", rl("MINUTE", "1", "2400.5"), defaultWeightLimit},
		{"huge limit", rl("SECOND", "1", "9223372036854775807"), maxWeightLimit},
		{"huge intervalNum", rl("DAY", "9223372036854775807", "1"), 1},
		{"none", ``, defaultWeightLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := decodeCatalog([]byte(`{"rateLimits":[` + tc.limits + `],` + symbols + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if cat.WeightLimit != tc.want {
				t.Errorf("WeightLimit = %d, want %d", cat.WeightLimit, tc.want)
			}
		})
	}
	t.Run("rateLimits absent", func(t *testing.T) {
		cat, err := decodeCatalog([]byte(`{` + symbols + `}`))
		if err != nil || cat.WeightLimit != defaultWeightLimit {
			t.Errorf("got %d, %v; want %d", cat.WeightLimit, err, defaultWeightLimit)
		}
	})
	t.Run("fixture with several kinds", func(t *testing.T) {
		cat, err := decodeCatalog(readFixture(t, "partial/exchangeInfo_limits.json"))
		if err != nil || cat.WeightLimit != 1500 {
			t.Errorf("got %d, %v; want 1500", cat.WeightLimit, err)
		}
	})
}

func TestDecodeCatalogSkipsUnusableSymbols(t *testing.T) {
	cat, err := decodeCatalog([]byte(`{"symbols":[
		{"symbol":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT"},
		{"symbol":"NOBASE","contractType":"PERPETUAL","status":"TRADING","quoteAsset":"USDT"},
		{"symbol":"","contractType":"PERPETUAL","status":"TRADING","baseAsset":"X","quoteAsset":"USDT"},
		{"symbol":42,"contractType":"PERPETUAL","status":"TRADING","baseAsset":"X","quoteAsset":"USDT"},
		{"symbol":"ODDTYPES","contractType":7,"status":true,"baseAsset":"ODD","quoteAsset":"USDT"},
		{"symbol":"\u0045SCUSDT","baseAsset":"ESC","quoteAsset":"USDT"},
		null]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Market{
		{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true},
		{Symbol: "ODDTYPES", Base: "ODD", Quote: "USDT"},
		{Symbol: "ESCUSDT", Base: "ESC", Quote: "USDT"},
	}
	if !reflect.DeepEqual(cat.Markets, want) {
		t.Errorf("got  %+v\nwant %+v", cat.Markets, want)
	}
}

func TestDecodeStats(t *testing.T) {
	stats, err := decodeStats(readFixture(t, "ticker_24hr.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Stat{
		{Symbol: "BTCUSDT", LastPrice: "64820.40", High: "65990.00", Low: "64011.10", BaseVolume: "187342.517", QuoteVolume: "12153229187.61"},
		{Symbol: "ETHUSDT", LastPrice: "3114.87", High: "3150.00", Low: "3071.45", BaseVolume: "2034511.880", QuoteVolume: "6327432004.12"},
		{Symbol: "BTCUSDT_261225", LastPrice: "65944.1", High: "67100.0", Low: "65120.0", BaseVolume: "1412.118", QuoteVolume: "93213300.55"},
		{Symbol: "1000PEPEUSDT", LastPrice: "0.0109431", High: "0.0111200", Low: "0.0103700", BaseVolume: "912345678901", QuoteVolume: "9828841234.5678"},
		{Symbol: "1INCHUSDT", LastPrice: "0.2605", High: "0.2630", Low: "0.2549", BaseVolume: "41234567", QuoteVolume: "10643210.77"},
		{Symbol: "OLDCOINUSDT", LastPrice: "0.0000", High: "0.0000", Low: "0.0000", BaseVolume: "0", QuoteVolume: "0.00"},
	}
	if !reflect.DeepEqual(stats, want) {
		t.Errorf("got  %+v\nwant %+v", stats, want)
	}
}

// TestDecodeStatsSkipsBadItems: one unusable item is left out, the rest
// stay; an absent or null volume is "" rather than a reason to drop.
func TestDecodeStatsSkipsBadItems(t *testing.T) {
	stats, err := decodeStats(readFixture(t, "partial/ticker_24hr_mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Stat{
		{Symbol: "BTCUSDT", LastPrice: "64820.40", High: "65990.00", Low: "64011.10", BaseVolume: "187342.517", QuoteVolume: "12153229187.61"},
		{Symbol: "NOVOLUSDT", LastPrice: "1.2345", High: "1.3000", Low: "1.2000", BaseVolume: "", QuoteVolume: "123456.78"},
		{Symbol: "NULLVOLUSDT", LastPrice: "2.5", High: "2.6", Low: "2.4", BaseVolume: "", QuoteVolume: "1000.0"},
		{Symbol: "ZEROUSDT", LastPrice: "0.0000", High: "0.0000", Low: "0.0000", BaseVolume: "0", QuoteVolume: "0.00"},
	}
	if !reflect.DeepEqual(stats, want) {
		t.Errorf("got  %+v\nwant %+v", stats, want)
	}
}

func TestDecodeQuotes(t *testing.T) {
	quotes, err := decodeQuotes(readFixture(t, "bookTicker.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Quote{
		{Symbol: "BTCUSDT", Bid: "64820.30", Ask: "64820.40"},
		{Symbol: "ETHUSDT", Bid: "3114.86", Ask: "3114.87"},
		{Symbol: "BTCUSDT_261225", Bid: "65943.9", Ask: "65944.1"},
		{Symbol: "1000PEPEUSDT", Bid: "0.0109430", Ask: "0.0109431"},
		{Symbol: "1INCHUSDT", Bid: "0.2604", Ask: "0.2605"},
		{Symbol: "OLDCOINUSDT", Bid: "", Ask: ""},
	}
	if !reflect.DeepEqual(quotes, want) {
		t.Errorf("got  %+v\nwant %+v", quotes, want)
	}
}

// TestDecodeQuotesEmptySides: an empty or zero side is kept as "" so the
// consumer sees there is no mid; a malformed value drops the item.
func TestDecodeQuotesEmptySides(t *testing.T) {
	quotes, err := decodeQuotes(readFixture(t, "partial/bookTicker_mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Quote{
		{Symbol: "BTCUSDT", Bid: "64820.30", Ask: "64820.40"},
		{Symbol: "NOBIDUSDT", Bid: "", Ask: "1.2345"},
		{Symbol: "ZEROQTYUSDT", Bid: "", Ask: "1.2345"},
		{Symbol: "EMPTYASKUSDT", Bid: "1.2340", Ask: ""},
		{Symbol: "ABSENTASKUSDT", Bid: "1.2340", Ask: ""},
		{Symbol: "NULLASKUSDT", Bid: "1.2340", Ask: ""},
	}
	if !reflect.DeepEqual(quotes, want) {
		t.Errorf("got  %+v\nwant %+v", quotes, want)
	}
}

func TestDecodeBook(t *testing.T) {
	book, err := decodeBook(readFixture(t, "depth.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := venue.Book{
		Time:         1767225600450, // T, not E
		LastUpdateID: 8812345679100,
		Bids: []venue.Level{
			{Price: "64820.30", Size: "4.127"}, {Price: "64820.20", Size: "0.051"}, {Price: "64820.10", Size: "1.300"},
			{Price: "64819.80", Size: "0.002"}, {Price: "64819.00", Size: "12.500"},
		},
		Asks: []venue.Level{
			{Price: "64820.40", Size: "2.310"}, {Price: "64820.50", Size: "0.400"},
			{Price: "64820.90", Size: "7.015"}, {Price: "64821.30", Size: "0.120"},
		},
	}
	if !reflect.DeepEqual(book, want) {
		t.Errorf("got  %+v\nwant %+v", book, want)
	}
}

func TestDecodeBookTime(t *testing.T) {
	one := venue.Book{
		LastUpdateID: 8812345679100,
		Bids:         []venue.Level{{Price: "64820.30", Size: "4.127"}},
		Asks:         []venue.Level{{Price: "64820.40", Size: "2.310"}},
	}
	for _, tc := range []struct {
		file string
		time int64
	}{
		{"partial/depth_e_only.json", 1767225600456},
		{"partial/depth_t_null.json", 1767225600456},
		// Lowercase t and e are other fields; a third level element is ignored.
		{"partial/depth_extra.json", 1767225600450},
	} {
		book, err := decodeBook(readFixture(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		want := one
		want.Time = tc.time
		if !reflect.DeepEqual(book, want) {
			t.Errorf("%s: got %+v, want %+v", tc.file, book, want)
		}
	}
}

// TestDecodeBadFixtures: every file under testdata/bad is bad data for the
// decoder its name starts with (files named after no decoder, for all of
// them), and no error quotes the body.
func TestDecodeBadFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*"))
	if err != nil || len(files) == 0 {
		t.Fatal("no bad fixtures", err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(file)
		matched := false
		for _, d := range decoders {
			if strings.HasPrefix(base, d.prefix+"_") {
				matched = true
			}
		}
		for _, d := range decoders {
			if matched && !strings.HasPrefix(base, d.prefix+"_") {
				continue
			}
			err := d.decode(body)
			if !errors.Is(err, venue.ErrBadData) {
				t.Errorf("%s as %s: error %v, want ErrBadData", base, d.prefix, err)
				continue
			}
			assertNoBody(t, err, body)
		}
	}
}

// TestDecimalForms feeds each decimal form to the price of every decoder
// and checks it is accepted exactly when it is a plain decimal (positive
// where a price must be). For the bulk calls the one item is dropped, which
// leaves nothing usable: bad data too.
func TestDecimalForms(t *testing.T) {
	bodies := map[string]func(price string) string{
		"depth": func(p string) string {
			return `{"T":1767225600450,"bids":[[` + p + `,"1"]],"asks":[["2","1"]]}`
		},
		"trades": func(p string) string {
			return `[{"a":1,"p":` + p + `,"q":"1","T":1767225600450,"m":false}]`
		},
		"ticker_24hr": func(p string) string {
			return `[{"symbol":"BTCUSDT","lastPrice":` + p + `,"highPrice":"2","lowPrice":"1","volume":"1","quoteVolume":"1"}]`
		},
		"bookTicker": func(p string) string {
			return `[{"symbol":"BTCUSDT","bidPrice":` + p + `,"bidQty":"1","askPrice":"2","askQty":"1"}]`
		},
	}
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{`"1"`, true}, {`"0.5"`, true}, {`"007.50"`, true}, {`"65000.10"`, true},
		{`"1e3"`, false}, {`"1E3"`, false}, {`"1.5e-3"`, false}, {`"\"1\""`, false},
		{`" 1"`, false}, {`"1 "`, false}, {`""`, false}, {`"NaN"`, false}, {`"Inf"`, false},
		{`"+1"`, false}, {`".5"`, false}, {`"5."`, false}, {`"1,5"`, false}, {`"0x10"`, false},
		{`"\u0031"`, false}, {`"１"`, false}, {`"-1"`, false},
		{`1`, false}, {`1.5`, false}, {`1e3`, false}, {`true`, false}, {`["1"]`, false}, {`{"v":"1"}`, false},
	} {
		for name, body := range bodies {
			b := []byte(body(tc.token))
			var err error
			for _, d := range decoders {
				if d.prefix == name {
					err = d.decode(b)
				}
			}
			ok := tc.ok
			if name == "bookTicker" && tc.token == `""` {
				ok = true // an empty side, not a malformed one
			}
			switch {
			case ok && err != nil:
				t.Errorf("%s price %s: %v, want success", name, tc.token, err)
			case !ok && !errors.Is(err, venue.ErrBadData):
				t.Errorf("%s price %s: error %v, want ErrBadData", name, tc.token, err)
			case err != nil:
				assertNoBody(t, err, b)
			}
		}
	}
}

// TestZeroPrice: a book level or trade at price zero is bad data; a stats
// item may be all zeros (no trades in 24 h); a zero quote side is empty.
func TestZeroPrice(t *testing.T) {
	if _, err := decodeBook([]byte(`{"T":1,"bids":[["0","1"]],"asks":[["2","1"]]}`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("book: %v", err)
	}
	if _, err := decodeBook([]byte(`{"T":1,"bids":[["1","1"]],"asks":[["2","0.0"]]}`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("book size: %v", err)
	}
	if _, err := decodeAggTrades([]byte(`[{"a":1,"p":"0.000","q":"1","T":1,"m":false}]`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("trades: %v", err)
	}
	if _, err := decodeAggTrades([]byte(`[{"a":1,"p":"1","q":"0","T":1,"m":false}]`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("trades qty: %v", err)
	}
	if _, err := decodeAggTrades([]byte(`[{"a":1,"p":"1","q":"1","T":0,"m":false}]`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("trades time: %v", err)
	}
	if _, err := decodeBook([]byte(`{"T":0,"bids":[["1","1"]],"asks":[["2","1"]]}`)); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("book time: %v", err)
	}
}

// TestDecodeBookRecorded decodes the venues' own depth bodies: lastUpdateId
// and T as sent, every level kept.
func TestDecodeBookRecorded(t *testing.T) {
	for _, tc := range []struct {
		file       string
		lastID     int64
		time       int64
		bids, asks int
	}{
		{"recorded/binance-depth-cryptofeed-SUSHIUSDT-limit1000-20210722.json", 600859605926, 1626992741261, 1000, 1000},
		{"recorded/binance-depth-cryptofeed-AKROUSDT-limit1000-20210722.json", 600859605486, 0, 609, 763},
		{"recorded/binance-depth-cryptofeed-KEEPUSDT-limit1000-20210722.json", 600859619434, 0, 400, 612},
		{"recorded/binance-depth-cryptofeed-CTKUSDT-limit1000-20210722.json", 600859618836, 0, 485, 744},
		{"recorded/binance-depth-gocryptotrader-BTCUSDT-limit100-20241101.json", 5643869211110, 1730440386476, 100, 100},
		{"recorded/binance-depth-cryptomsgparser-BTCUSDT-3levels.json", 1570255790655, 1654232606695, 3, 3},
		{"recorded/aster-doc-depth.json", 1027024, 1589436922959, 1, 1},
	} {
		book, err := decodeBook(readFixture(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if book.LastUpdateID != tc.lastID || (tc.time != 0 && book.Time != tc.time) ||
			len(book.Bids) != tc.bids || len(book.Asks) != tc.asks {
			t.Errorf("%s: lastUpdateId %d, time %d, %d bids, %d asks", tc.file, book.LastUpdateID, book.Time, len(book.Bids), len(book.Asks))
		}
	}
}

func TestDecodeBookLastUpdateID(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int64
		ok    bool
	}{
		{`1`, 1, true}, {`0`, 0, true}, {`null`, 0, true}, {`9223372036854775807`, 9223372036854775807, true},
		{`-1`, 0, false}, {`1.5`, 0, false}, {`1e3`, 0, false}, {`"1"`, 0, false}, {`9223372036854775808`, 0, false},
	} {
		body := []byte(`{"lastUpdateId":` + tc.value + `,"T":1,"bids":[["1","1"]],"asks":[["2","1"]]}`)
		book, err := decodeBook(body)
		switch {
		case tc.ok && (err != nil || book.LastUpdateID != tc.want):
			t.Errorf("lastUpdateId %s: %d, %v; want %d", tc.value, book.LastUpdateID, err, tc.want)
		case !tc.ok && !errors.Is(err, venue.ErrBadData):
			t.Errorf("lastUpdateId %s: error %v, want ErrBadData", tc.value, err)
		case err != nil:
			assertNoBody(t, err, body)
		}
	}
}
