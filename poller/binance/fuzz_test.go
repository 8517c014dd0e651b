package binance

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// The fuzz targets check what the rest of the service relies on, whatever
// the venue sends: no panic; an error wraps ErrBadData and quotes nothing;
// a success holds only plain decimals copied byte for byte from the body;
// and decoding the same bytes twice gives the same result (the decoder
// library pools state between calls).

// addSeeds seeds f with every fixture: good, partial and bad bodies of all
// calls, so that each target also starts from the other calls' shapes.
func addSeeds(f *testing.F) {
	for _, pattern := range []string{"*.json", "bad/*", "partial/*"} {
		files, err := filepath.Glob(filepath.Join("testdata", pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// checkErr: a decoder fails only with bad data, and says nothing of the body.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, venue.ErrBadData) {
		t.Fatalf("error %v does not wrap ErrBadData", err)
	}
	if strings.ContainsAny(err.Error(), "{}[]<>\"\\") {
		t.Fatalf("error %q contains body punctuation", err)
	}
}

// checkDecimal: s is a plain decimal (positive when asked) that the body
// holds as a JSON string, byte for byte.
func checkDecimal(t *testing.T, data []byte, what, s string, positive bool) {
	t.Helper()
	if !plainRE.MatchString(s) {
		t.Fatalf("%s %q is not a plain decimal", what, s)
	}
	if positive && (s[0] == '-' || strings.Trim(s, "0.") == "") {
		t.Fatalf("%s %q is not positive", what, s)
	}
	if s[0] == '-' {
		t.Fatalf("%s %q is negative", what, s)
	}
	if !bytes.Contains(data, []byte(`"`+s+`"`)) {
		t.Fatalf("%s %q is not in the body as sent", what, s)
	}
}

func checkSame(t *testing.T, a, b any) {
	t.Helper()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two decodings differ:\n%+v\n%+v", a, b)
	}
}

func FuzzDecodeCatalog(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := decodeCatalog(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeCatalog(data)
		checkSame(t, cat, again)
		if len(cat.Markets) == 0 {
			t.Fatal("success without markets")
		}
		if cat.WeightLimit < 1 || cat.WeightLimit > math.MaxInt32 {
			t.Fatalf("WeightLimit %d", cat.WeightLimit)
		}
		for _, m := range cat.Markets {
			if m.Symbol == "" || m.Base == "" || m.Quote == "" {
				t.Fatalf("market %+v has an empty name", m)
			}
		}
	})
}

func FuzzDecodeStats(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		stats, err := decodeStats(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeStats(data)
		checkSame(t, stats, again)
		if len(stats) == 0 {
			t.Fatal("success without items")
		}
		for _, s := range stats {
			if s.Symbol == "" {
				t.Fatalf("stat %+v has no symbol", s)
			}
			checkDecimal(t, data, "lastPrice", s.LastPrice, false)
			checkDecimal(t, data, "highPrice", s.High, false)
			checkDecimal(t, data, "lowPrice", s.Low, false)
			checkDecimal(t, data, "quoteVolume", s.QuoteVolume, false)
			if s.BaseVolume != "" {
				checkDecimal(t, data, "volume", s.BaseVolume, false)
			}
		}
	})
}

func FuzzDecodeQuotes(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		quotes, err := decodeQuotes(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeQuotes(data)
		checkSame(t, quotes, again)
		if len(quotes) == 0 {
			t.Fatal("success without items")
		}
		for _, q := range quotes {
			if q.Symbol == "" {
				t.Fatalf("quote %+v has no symbol", q)
			}
			if q.Bid != "" {
				checkDecimal(t, data, "bidPrice", q.Bid, true)
			}
			if q.Ask != "" {
				checkDecimal(t, data, "askPrice", q.Ask, true)
			}
		}
	})
}

func FuzzDecodeBook(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		book, err := decodeBook(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeBook(data)
		checkSame(t, book, again)
		if book.Time <= 0 {
			t.Fatalf("time %d", book.Time)
		}
		if len(book.Bids) == 0 || len(book.Asks) == 0 {
			t.Fatalf("success with %d bids and %d asks", len(book.Bids), len(book.Asks))
		}
		for _, lv := range append(book.Bids[:len(book.Bids):len(book.Bids)], book.Asks...) {
			checkDecimal(t, data, "price", lv.Price, true)
			checkDecimal(t, data, "size", lv.Size, true)
		}
	})
}

func FuzzDecodeNewestTradeID(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`[{"id":229020340,"price":"11494.05","qty":"0.080","quoteQty":"919.52","time":1602819642335,"isBuyerMaker":true}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := decodeNewestTradeID(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		if again, _ := decodeNewestTradeID(data); again != id || id < 0 {
			t.Fatalf("id %d, then %d", id, again)
		}
	})
}

func FuzzDecodeTrades(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		trades, err := decodeAggTrades(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeAggTrades(data)
		checkSame(t, trades, again)
		for i, tr := range trades {
			if tr.ID < 0 || i > 0 && tr.ID < trades[i-1].ID {
				t.Fatalf("trade %d id %d out of order or negative", i, tr.ID)
			}
			if tr.Time <= 0 {
				t.Fatalf("trade %d time %d not positive", i, tr.Time)
			}
			checkDecimal(t, data, "price", tr.Price, true)
			checkDecimal(t, data, "qty", tr.Size, true)
			if tr.QuoteQty != "" {
				t.Fatalf("trade %d quote quantity %q from an aggregate trade", i, tr.QuoteQty)
			}
		}
	})
}
