package binance

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// The events of testdata/markPrice_arr.json (written from the documented
// layout: no mark price frame was recorded) carry the values of the
// premiumIndex fixture's rows at their event time.
var (
	btcMark = atTime(btcContract, 1767196800500)
	ethMark = atTime(ethContract, 1767196800500)
)

func atTime(c venue.Contract, ms int64) venue.Contract {
	c.Time = ms
	return c
}

// markEvent is one markPriceUpdate event for BTCUSDT with the value of key
// replaced ("" leaves the key out).
func markEvent(key, value string) string {
	vals := []string{"e", `"markPriceUpdate"`, "E", "1767196800500", "s", `"BTCUSDT"`, "p", `"64820.35000000"`,
		"P", `"64801.44120051"`, "i", `"64809.12345678"`, "r", `"0.00010000"`, "T", "1767225600000"}
	var b strings.Builder
	b.WriteByte('{')
	for j := 0; j < len(vals); j += 2 {
		v := vals[j+1]
		if vals[j] == key {
			if v = value; v == "" {
				continue
			}
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + vals[j] + `":` + v)
	}
	return b.String() + "}"
}

func TestDecodeMarkPrices(t *testing.T) {
	negativeFunding := btcMark
	negativeFunding.FundingRate = "-0.00375000"
	frame := readFixture(t, "markPrice_arr.json")
	arr := frame[strings.Index(string(frame), "[") : len(frame)-2]
	both := []venue.Contract{btcMark, ethMark}
	for _, tc := range []struct {
		name, body string
		stream     string
		rows       []venue.Contract
		invalid    int
	}{
		{"combined", string(frame), MarkPriceStream, both, 0},
		{"bare array", string(arr), "", both, 0},
		{"data first", `{"data":` + string(arr) + `,"stream":"!markPrice@arr@1s"}`, MarkPriceStream, both, 0},
		{"3 s stream", `{"stream":"!markPrice@arr","data":` + string(arr) + `}`, "!markPrice@arr", both, 0},
		{"one symbol", `{"stream":"btcusdt@markPrice@1s","data":` + markEvent("", "") + `}`, "btcusdt@markPrice@1s", both[:1], 0},
		{"bare event", markEvent("", ""), "", both[:1], 0},
		{"null data", `{"stream":"!markPrice@arr@1s","data":null}`, MarkPriceStream, nil, 0},
		{"no data", `{"stream":"!markPrice@arr@1s"}`, MarkPriceStream, nil, 0},
		{"empty", `{"stream":"!markPrice@arr@1s","data":[]}`, MarkPriceStream, nil, 0},
		{"unknown keys", `{"stream":"!markPrice@arr@1s","x":{"a":[1]},"data":[` + strings.Replace(markEvent("", ""), "{", `{"new":[{"k":null}],`, 1) + `]}`,
			MarkPriceStream, both[:1], 0},
		{"data not a container", `{"stream":"!markPrice@arr@1s","data":"x"}`, MarkPriceStream, nil, 1},
		{"bad rows", `{"stream":"!markPrice@arr@1s","data":[` + strings.Join([]string{
			markEvent("p", `"-1"`), markEvent("p", ""), markEvent("r", `""`), markEvent("e", `"24hrTicker"`),
			markEvent("i", `"1e5"`), markEvent("E", "0"), markEvent("T", `"1"`), markEvent("s", `""`),
			"1", `"x"`, "[]", "null", markEvent("", ""),
		}, ",") + `]}`, MarkPriceStream, both[:1], 11},
		{"negative funding", `[` + markEvent("r", `"-0.00375000"`) + `]`, "", []venue.Contract{negativeFunding}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeMarkPrices([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if f.name != tc.stream || f.invalid != tc.invalid || !reflect.DeepEqual(f.rows, tc.rows) {
				t.Errorf("got %q %+v invalid %d\nwant %q %+v invalid %d", f.name, f.rows, f.invalid, tc.stream, tc.rows, tc.invalid)
			}
		})
	}
}

func TestDecodeMarkPricesBad(t *testing.T) {
	for _, body := range []string{
		``, `x`, `42`, `"markPriceUpdate"`, `null`, `{`, `[`, `{}`, `{"result":null,"id":1}`,
		`{"stream":"btcusdt@aggTrade","data":[]}`,
		`{"stream":"!ticker@arr","data":[]}`,
		`{"stream":7,"data":[]}`,
		`{"data":[]}`,
		`{"stream":"!markPrice@arr@1s","data":[]} x`,
		`{"stream":"!markPrice@arr@1s","data":[{"e":"markPriceUpdate",]}`,
		`[` + markEvent("", "") + `,]`,
	} {
		_, err := decodeMarkPrices([]byte(body))
		if !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%q: error %v, want ErrBadData", body, err)
			continue
		}
		assertNoBody(t, err, []byte(body), "stream")
	}
}

// TestDecodeMarkPricesOwnsRows: the frame's buffer is the connection's,
// reused for the next frame; the rows must not change with it.
func TestDecodeMarkPricesOwnsRows(t *testing.T) {
	buf := readFixture(t, "markPrice_arr.json")
	f, err := decodeMarkPrices(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = '#'
	}
	if f.name != MarkPriceStream || !reflect.DeepEqual(f.rows, []venue.Contract{btcMark, ethMark}) {
		t.Errorf("after the buffer was reused: %q %+v", f.name, f.rows)
	}
}

func TestMarkPriceNames(t *testing.T) {
	for name, want := range map[string]bool{
		"!markPrice@arr@1s": true, "!markPrice@arr": true, "btcusdt@markPrice@1s": true, "btcusdt@markPrice": true,
		"@markPrice@1s": false, "!markPrice@1s": false, "btcusdt@aggTrade": false, "!ticker@arr": false,
		"btcusdt@markPriceKline_1m": false, "": false,
	} {
		if got := isMarkPriceName(name); got != want {
			t.Errorf("isMarkPriceName(%q) = %v, want %v", name, got, want)
		}
	}
	if got := Binance.Streams.markPricePath(); got != "/market/stream" {
		t.Errorf("Binance markPricePath = %q, want the market path", got)
	}
	if got := Aster.Streams.markPricePath(); got != Aster.Streams.DepthPath {
		t.Errorf("Aster markPricePath = %q, want its one path", got)
	}
	if !strings.HasSuffix(MarkPriceStream, "@1s") || !strings.HasSuffix(MarkPriceSuffix, "@1s") {
		t.Error("the client reads the 1 s mark price streams")
	}
}
