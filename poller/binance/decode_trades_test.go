package binance

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

func TestDecodeAggTrades(t *testing.T) {
	trades, err := decodeAggTrades(readFixture(t, "trades.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Trade{
		{ID: 6102345671, LastID: 4204691342, Time: 1767225599001, Price: "64820.30", Size: "0.015", Sell: true},
		{ID: 6102345672, LastID: 4204691344, Time: 1767225599120, Price: "64820.40", Size: "0.250", Sell: false},
		{ID: 6102345673, LastID: 4204691346, Time: 1767225599120, Price: "64820.40", Size: "0.001", Sell: false},
		{ID: 6102345674, LastID: 4204691348, Time: 1767225599530, Price: "64820.30", Size: "1.102", Sell: true},
		{ID: 6102345675, LastID: 4204691350, Time: 1767225600011, Price: "64820.40", Size: "0.030", Sell: false},
	}
	if !reflect.DeepEqual(trades, want) {
		t.Errorf("got  %+v\nwant %+v", trades, want)
	}
}

// TestDecodeAggTradesRecorded decodes the venues' own aggregate-trade
// bodies: every row, in id order, with the values as sent.
func TestDecodeAggTradesRecorded(t *testing.T) {
	for _, tc := range []struct {
		file        string
		n           int
		first, last venue.Trade
		sells       int
	}{
		{
			"recorded/binance-aggTrades-gocryptotrader-BTCUSDT-limit5-20201018.json", 5,
			venue.Trade{ID: 154676475, LastID: 230188317, Time: 1602989582346, Price: "11376.16", Size: "0.001"},
			venue.Trade{ID: 154676479, LastID: 230188321, Time: 1602989583660, Price: "11378.45", Size: "0.090", Sell: true},
			1,
		},
		{
			"recorded/aster-doc-aggTrades.json", 1,
			venue.Trade{ID: 26129, LastID: 27781, Time: 1498793709153, Price: "0.01633102", Size: "4.70443515", Sell: true},
			venue.Trade{ID: 26129, LastID: 27781, Time: 1498793709153, Price: "0.01633102", Size: "4.70443515", Sell: true},
			1,
		},
	} {
		trades, err := decodeAggTrades(readFixture(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		sells := 0
		for _, tr := range trades {
			if tr.Sell {
				sells++
			}
		}
		if len(trades) != tc.n || trades[0] != tc.first || trades[len(trades)-1] != tc.last || sells != tc.sells {
			t.Errorf("%s: %d trades (%d sells), first %+v, last %+v", tc.file, len(trades), sells, trades[0], trades[len(trades)-1])
		}
	}

	trades, err := decodeAggTrades(readFixture(t, "recorded/binance-aggTrades-gocryptotrader-LTCUSDT-500-20201016.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(trades) != 500 || trades[0].ID != 19427407 || trades[499].ID != 19427906 {
		t.Fatalf("%d trades, ids %d..%d", len(trades), trades[0].ID, trades[len(trades)-1].ID)
	}
	for i, tr := range trades {
		if tr.ID != 19427407+int64(i) || !plainRE.MatchString(tr.Price) || !plainRE.MatchString(tr.Size) || tr.QuoteQty != "" {
			t.Fatalf("trade %d: %+v", i, tr)
		}
	}
}

func TestDecodeAggTradesExtraFields(t *testing.T) {
	trades, err := decodeAggTrades(readFixture(t, "partial/trades_extra.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Trade{
		{ID: 2, Time: 1767225599120, Price: "64820.40", Size: "0.250", Sell: false},
		{ID: 3, Time: 1767225599121, Price: "64820.40", Size: "0.001", Sell: true},
		{ID: 4, Time: 1767225599122, Price: "0.0000012", Size: "1", Sell: true},
	}
	if !reflect.DeepEqual(trades, want) {
		t.Errorf("got  %+v\nwant %+v", trades, want)
	}
}

func TestDecodeAggTradesOrder(t *testing.T) {
	trades, err := decodeAggTrades(readFixture(t, "partial/trades_unordered.json"))
	if err != nil {
		t.Fatal(err)
	}
	var prices []string
	for _, tr := range trades {
		prices = append(prices, tr.Price)
	}
	// Sorted by aggregate id, whatever order the rows came in.
	if got, want := strings.Join(prices, " "), "1.0 2.0 3.0"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}

func TestDecodeAggTradesEmpty(t *testing.T) {
	trades, err := decodeAggTrades(readFixture(t, "partial/trades_empty.json"))
	if err != nil || len(trades) != 0 {
		t.Errorf("got %v, %v; want no trades and no error", trades, err)
	}
}

// decoders maps a fixture name prefix to its decoder.
var decoders = []struct {
	prefix string
	decode func([]byte) error
}{
	{"exchangeInfo", func(b []byte) error { _, err := decodeCatalog(b); return err }},
	{"ticker_24hr", func(b []byte) error { _, err := decodeStats(b); return err }},
	{"bookTicker", func(b []byte) error { _, err := decodeQuotes(b); return err }},
	{"depth", func(b []byte) error { _, err := decodeBook(b); return err }},
	{"trades", func(b []byte) error { _, err := decodeAggTrades(b); return err }},
}

// The newest single trade's id is the largest id of a recent-trades body:
// Binance's recorded body of five and Aster's documented one; an empty
// list is a market without trades; an id that is not an unsigned integer
// is bad data, never an id that could settle a window.
func TestDecodeNewestTradeID(t *testing.T) {
	for _, tc := range []struct {
		file string
		want int64
	}{
		{"recorded/binance-trades-gocryptotrader-BTCUSDT-limit5-20201016.json", 229020340},
		{"recorded/aster-doc-trades.json", 28457},
	} {
		got, err := decodeNewestTradeID(readFixture(t, tc.file))
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.file, got, err, tc.want)
		}
	}
	if got, err := decodeNewestTradeID([]byte(`[]`)); err != nil || got != 0 {
		t.Errorf("an empty list: %d, %v; want 0", got, err)
	}
	for _, body := range []string{
		`[{"id":-1}]`, `[{"id":"7"}]`, `[{"id":1.5}]`, `[{"price":"1"}]`, `{"id":1}`, `[{"id":1},{"id":null}]`,
	} {
		if _, err := decodeNewestTradeID([]byte(body)); !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%s: err %v, want bad data", body, err)
		}
	}
}

// An aggregate trade's l is optional, and an unsigned integer when sent.
func TestDecodeAggTradesLastID(t *testing.T) {
	trades, err := decodeAggTrades([]byte(`[{"a":1,"p":"1","q":"1","T":1,"m":false}]`))
	if err != nil || trades[0].LastID != 0 {
		t.Errorf("without l: %+v, %v; want LastID 0", trades, err)
	}
	for _, body := range []string{
		`[{"a":1,"p":"1","q":"1","l":-3,"T":1,"m":false}]`, `[{"a":1,"p":"1","q":"1","l":"3","T":1,"m":false}]`,
	} {
		if _, err := decodeAggTrades([]byte(body)); !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%s: err %v, want bad data", body, err)
		}
	}
}
