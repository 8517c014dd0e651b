package binance

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The decoders run once per venue read, not per API request; these
// benchmarks keep their cost visible next to the read cadence (a book every
// 350 ms per hot pair, bulk calls every second).

func BenchmarkDecodeBook100(b *testing.B) {
	var bids, asks []string
	for i := range 100 {
		bids = append(bids, `["`+strconv.Itoa(64820-i)+`.30","1.`+strconv.Itoa(i)+`"]`)
		asks = append(asks, `["`+strconv.Itoa(64821+i)+`.40","0.`+strconv.Itoa(i+1)+`"]`)
	}
	body := []byte(`{"lastUpdateId":8812345679100,"E":1767225600456,"T":1767225600450,"bids":[` +
		strings.Join(bids, ",") + `],"asks":[` + strings.Join(asks, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBook(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStats(b *testing.B) {
	body := readFixture(b, "ticker_24hr.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStats(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAggTrades(b *testing.B) {
	body := readFixture(b, "trades.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeAggTrades(body); err != nil {
			b.Fatal(err)
		}
	}
}

// A depth event as the venue sends one every 100 ms per market: the whole
// frame decoded, and for scale json.Valid alone over it, which is what
// checking the frame cost before the decoder read it (decodeFrame checks
// the syntax in the same pass now).
func BenchmarkDecodeDepthFrame(b *testing.B) {
	frame := readFixture(b, "recorded/binance-ws-depthUpdate100ms-combined-cryptofeed-SUSHIUSDT.json")
	b.Run("frame", func(b *testing.B) { benchmarkFrame(b, frame) })
	b.Run("valid", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			if !stdjson.Valid(frame) {
				b.Fatal("not JSON")
			}
		}
	})
}

// An aggTrade event, one per aggregate trade per market.
func BenchmarkDecodeTradeFrame(b *testing.B) {
	benchmarkFrame(b, readFixture(b, "recorded/binance-ws-aggTrade-combined-cryptofeed-SUSHIUSDT.json"))
}

// The all-market ticker frame, once a second: the recorded row for 300
// markets, about as many as the venue lists perpetuals.
func BenchmarkDecodeTickerFrame(b *testing.B) {
	rec := readFixture(b, "recorded/binance-ws-tickerArr-combined-cryptomsgparser.json")
	row := rec[bytes.IndexByte(rec, '[')+1 : bytes.LastIndexByte(rec, ']')]
	rows := make([]string, 300)
	for i := range rows {
		rows[i] = strings.Replace(string(row), "IOTXUSDT", fmt.Sprintf("S%03dUSDT", i), 1)
	}
	frame := []byte(`{"stream":"!ticker@arr","data":[` + strings.Join(rows, ",") + `]}`)
	if f, err := decodeFrame(frame); err != nil || len(f.tickers) != len(rows) {
		b.Fatalf("%d rows, %v", len(f.tickers), err)
	}
	benchmarkFrame(b, frame)
}

func benchmarkFrame(b *testing.B, frame []byte) {
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}
