package binance

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// No recorded premiumIndex, openInterest or markPriceUpdate payload exists
// among the recorded venue data: testdata/premiumIndex.json,
// openInterest.json, markPrice_arr.json and partial/premiumIndex_mixed.json
// are written from the venue's documented field layout, with invented
// values.

var (
	btcContract = venue.Contract{Symbol: "BTCUSDT", MarkPrice: "64820.35000000", IndexPrice: "64809.12345678",
		SettlePrice: "64801.44120051", FundingRate: "0.00010000", NextFunding: 1767225600000, Time: 1767196800000}
	ethContract = venue.Contract{Symbol: "ETHUSDT", MarkPrice: "3114.86500000", IndexPrice: "3115.20113208",
		SettlePrice: "3115.03310571", FundingRate: "-0.00002710", NextFunding: 1767225600000, Time: 1767196800001}
)

func TestDecodeContracts(t *testing.T) {
	rows, invalid, err := decodeContracts(readFixture(t, "premiumIndex.json"))
	if err != nil || invalid != 0 {
		t.Fatalf("invalid %d, err %v", invalid, err)
	}
	want := []venue.Contract{btcContract, ethContract, {Symbol: "1000PEPEUSDT", MarkPrice: "0.0109430",
		IndexPrice: "0.01094108", SettlePrice: "0.01093921", FundingRate: "0.00005000", NextFunding: 1767225600000, Time: 1767196800002}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got %+v\nwant %+v", rows, want)
	}
}

// TestDecodeContractsMixed: each unusable row is counted and left out, the
// others kept in order; a null row is neither.
func TestDecodeContractsMixed(t *testing.T) {
	rows, invalid, err := decodeContracts(readFixture(t, "partial/premiumIndex_mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []venue.Contract{btcContract, ethContract}; !reflect.DeepEqual(rows, want) {
		t.Errorf("got %+v\nwant %+v", rows, want)
	}
	// The dated future without funding, no mark, a negative mark, an
	// exponent, a funding rate sent as a number, a time sent as a string,
	// and a row that is a number.
	if invalid != 7 {
		t.Errorf("invalid = %d, want 7", invalid)
	}
}

// TestContractFields: one row with each field changed; the row is kept
// exactly when the value is usable.
func TestContractFields(t *testing.T) {
	row := func(key, value string) string {
		vals := map[string]string{"symbol": `"BTCUSDT"`, "markPrice": `"2.5"`, "indexPrice": `"2.4"`,
			"estimatedSettlePrice": `"2.45"`, "lastFundingRate": `"0.0001"`, "nextFundingTime": "1767225600000", "time": "1767196800000"}
		if value == "" {
			delete(vals, key)
		} else {
			vals[key] = value
		}
		var b strings.Builder
		b.WriteString("[{")
		first := true
		for _, k := range []string{"symbol", "markPrice", "indexPrice", "estimatedSettlePrice", "lastFundingRate", "nextFundingTime", "time"} {
			if v, ok := vals[k]; ok {
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.WriteString(strconv.Quote(k) + ":" + v)
			}
		}
		b.WriteString("}]")
		return b.String()
	}
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"symbol", "", false}, {"symbol", `""`, false}, {"symbol", "1", false},
		{"markPrice", "", false}, {"markPrice", `"0"`, false}, {"markPrice", `"-2.5"`, false}, {"markPrice", `"2.5e0"`, false},
		{"markPrice", "2.5", false}, {"markPrice", `" 2.5"`, false}, {"markPrice", `"NaN"`, false}, {"markPrice", "null", false},
		{"indexPrice", "", false}, {"indexPrice", `"0.000"`, false}, {"indexPrice", `"-1"`, false},
		{"estimatedSettlePrice", "", false}, {"estimatedSettlePrice", `"-1"`, false}, {"estimatedSettlePrice", `"0"`, true},
		{"lastFundingRate", "", false}, {"lastFundingRate", `""`, false}, {"lastFundingRate", "0.0001", false},
		{"lastFundingRate", `"-0.00037500"`, true}, {"lastFundingRate", `"0"`, true}, {"lastFundingRate", `"+0.0001"`, false},
		{"nextFundingTime", "", false}, {"nextFundingTime", "0", false}, {"nextFundingTime", "-1", false}, {"nextFundingTime", "1.5", false},
		{"time", "", false}, {"time", "0", false}, {"time", `"1767196800000"`, false},
		{"markPrice", `"65000.10"`, true},
	} {
		body := row(tc.key, tc.value)
		rows, invalid, err := decodeContracts([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := len(rows) == 1 && invalid == 0; got != tc.ok || len(rows)+invalid != 1 {
			t.Errorf("%s: %d rows, %d invalid; want usable %v", body, len(rows), invalid, tc.ok)
		}
	}
}

func TestDecodeContractsBad(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"symbol":"BTCUSDT","markPrice":"1"}`, `"x"`, `[`, `[{"symbol":"BTCUSDT"}`, `<html>x</html>`, `null`} {
		_, _, err := decodeContracts([]byte(body))
		if !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%q: error %v, want ErrBadData", body, err)
			continue
		}
		assertNoBody(t, err, []byte(body))
	}
	// An empty list, or one of unusable rows only, is an answer.
	for body, invalid := range map[string]int{`[]`: 0, `[null]`: 0, `[1,"x",[],{}]`: 4} {
		rows, n, err := decodeContracts([]byte(body))
		if err != nil || len(rows) != 0 || n != invalid {
			t.Errorf("%s: %d rows, %d invalid, %v; want 0, %d, nil", body, len(rows), n, err, invalid)
		}
	}
}

func TestDecodeOpenInterest(t *testing.T) {
	oi, err := decodeOpenInterest(readFixture(t, "openInterest.json"))
	if want := (venue.OpenInterest{Symbol: "BTCUSDT", Amount: "10659.509", Time: 1767196800003}); err != nil || oi != want {
		t.Fatalf("got %+v, %v; want %+v", oi, err, want)
	}
	oi, err = decodeOpenInterest([]byte(`{"openInterest":"0","symbol":"NEWUSDT","time":1,"extra":[{}]}`))
	if err != nil || oi.Amount != "0" {
		t.Errorf("zero open interest: %+v, %v", oi, err)
	}
	for _, body := range []string{
		`[]`, `{}`, `not json`,
		`{"openInterest":"-1","symbol":"BTCUSDT","time":1}`,
		`{"openInterest":"1e3","symbol":"BTCUSDT","time":1}`,
		`{"openInterest":10,"symbol":"BTCUSDT","time":1}`,
		`{"symbol":"BTCUSDT","time":1}`,
		`{"openInterest":"1","time":1}`,
		`{"openInterest":"1","symbol":"","time":1}`,
		`{"openInterest":"1","symbol":"BTCUSDT"}`,
		`{"openInterest":"1","symbol":"BTCUSDT","time":0}`,
		`{"openInterest":"1","symbol":"BTCUSDT","time":"1"}`,
		`{"code":-1121,"msg":"Invalid symbol."}`,
	} {
		_, err := decodeOpenInterest([]byte(body))
		if !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%s: error %v, want ErrBadData", body, err)
			continue
		}
		assertNoBody(t, err, []byte(body), "openInterest")
	}
}

func TestContractWeights(t *testing.T) {
	for _, p := range presets {
		c := New(p, Options{})
		if c.ContractsWeight() != 10 || c.OpenInterestWeight() != 1 {
			t.Errorf("%s: ContractsWeight %d, OpenInterestWeight %d; want 10, 1", p.Name, c.ContractsWeight(), c.OpenInterestWeight())
		}
	}
}

// TestClientContracts: the two calls go to the venue's paths with the
// expected queries, decode what it answers and classify what goes wrong
// as the other calls do.
func TestClientContracts(t *testing.T) {
	var (
		status int
		seen   []string
		// other, when set, is the symbol the open interest answers for
		// whatever the request asked.
		other  string
		oiBody = string(readFixture(t, "openInterest.json"))
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		if status != 0 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(status)
			return
		}
		w.Header().Set("X-MBX-USED-WEIGHT-1M", "11")
		switch r.URL.Path {
		case "/fapi/v1/premiumIndex":
			_, _ = w.Write(readFixture(t, "partial/premiumIndex_mixed.json"))
		case "/fapi/v1/openInterest":
			_, _ = w.Write([]byte(strings.ReplaceAll(oiBody, "BTCUSDT", cmp.Or(other, r.URL.Query().Get("symbol")))))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := New(Binance, Options{BaseURL: srv.URL})
	ctx := context.Background()

	rows, invalid, err := c.Contracts(ctx)
	if err != nil || len(rows) != 2 || invalid != 7 {
		t.Fatalf("Contracts: %d rows, %d invalid, %v", len(rows), invalid, err)
	}
	if w, ok := c.UsedWeight(); !ok || w != 11 {
		t.Errorf("UsedWeight = %d, %v", w, ok)
	}
	oi, err := c.OpenInterest(ctx, "ETHUSDT")
	if err != nil || oi.Symbol != "ETHUSDT" || oi.Amount != "10659.509" {
		t.Errorf("OpenInterest: %+v, %v", oi, err)
	}
	if want := []string{"/fapi/v1/premiumIndex?", "/fapi/v1/openInterest?symbol=ETHUSDT"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("requests %q, want %q", seen, want)
	}
	if _, err := c.OpenInterest(ctx, ""); err == nil || len(seen) != 2 {
		t.Errorf("OpenInterest without a symbol: %v after %d requests", err, len(seen))
	}

	// An answer about another symbol is not this symbol's open interest.
	other = "BTCUSDT"
	if _, err := c.OpenInterest(ctx, "XBTUSDT"); !errors.Is(err, venue.ErrBadData) {
		t.Errorf("OpenInterest of another symbol: %v, want ErrBadData", err)
	}

	status = http.StatusTooManyRequests
	_, _, err = c.Contracts(ctx)
	var se *venue.StatusError
	if !errors.As(err, &se) || se.Status != 429 || se.RetryAfter.Seconds() != 7 {
		t.Errorf("Contracts on 429: %v", err)
	}
	if _, err := c.OpenInterest(ctx, "BTCUSDT"); !errors.As(err, &se) || se.Status != 429 {
		t.Errorf("OpenInterest on 429: %v", err)
	}
}
