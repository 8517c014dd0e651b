package binance

import (
	"bytes"
	"testing"

	"marketfeed/poller/venue"
)

// The contract decoders are fuzzed for what fuzz_test.go checks of the
// others, and one thing more: a bad row is counted, never an error, so
// every error is about the body as a whole.

// checkContract: a kept row holds a symbol, prices and a funding rate
// copied byte for byte from the body, and positive times.
func checkContract(t *testing.T, data []byte, c venue.Contract) {
	t.Helper()
	if c.Symbol == "" || c.NextFunding <= 0 || c.Time <= 0 {
		t.Fatalf("contract %+v", c)
	}
	checkDecimal(t, data, "mark price", c.MarkPrice, true)
	checkDecimal(t, data, "index price", c.IndexPrice, true)
	checkDecimal(t, data, "settle price", c.SettlePrice, false)
	// The funding rate may be negative: checked here rather than by
	// checkDecimal, which refuses a sign.
	if !plainRE.MatchString(c.FundingRate) || !bytes.Contains(data, []byte(`"`+c.FundingRate+`"`)) {
		t.Fatalf("funding rate %q is not a plain decimal of the body", c.FundingRate)
	}
}

func FuzzDecodeContracts(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, invalid, err := decodeContracts(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, n, _ := decodeContracts(data)
		checkSame(t, rows, again)
		if invalid < 0 || n != invalid {
			t.Fatalf("invalid %d, then %d", invalid, n)
		}
		for _, c := range rows {
			checkContract(t, data, c)
		}
	})
}

func FuzzDecodeOpenInterest(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		oi, err := decodeOpenInterest(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeOpenInterest(data)
		checkSame(t, oi, again)
		if oi.Symbol == "" || oi.Time <= 0 {
			t.Fatalf("open interest %+v", oi)
		}
		checkDecimal(t, data, "open interest", oi.Amount, false)
	})
}

func FuzzDecodeMarkPrices(f *testing.F) {
	addSeeds(f)
	addFrameSeeds(f)
	f.Add([]byte(`{"stream":"btcusdt@markPrice@1s","data":` + markEvent("", "") + `}`))
	f.Add([]byte(`[` + markEvent("r", `"-0.0001"`) + `,null,1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The decoder reads the frame in place: give it a buffer of its
		// own and overwrite it afterwards, as a connection reuses its
		// buffer, so that a row still pointing into it shows.
		buf := bytes.Clone(data)
		fr, err := decodeMarkPrices(buf)
		clear(buf)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeMarkPrices(data)
		checkSame(t, fr, again)
		if fr.invalid < 0 || fr.name != "" && !isMarkPriceName(fr.name) {
			t.Fatalf("frame %q invalid %d", fr.name, fr.invalid)
		}
		for _, c := range fr.rows {
			checkContract(t, data, c)
		}
	})
}
