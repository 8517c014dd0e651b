package binance

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

// sameAsThreePass fails unless decodeFrame and the three-pass reference
// agree on data: the same frame, and no error or the same error. The error
// text is compared too, which makes "the same frames are JSON" exact: the
// reference says "body is not JSON" for every frame json.Valid refuses and
// never otherwise.
func sameAsThreePass(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := decodeFrameThreePass(data)
	// decodeFrame gets a copy that is spoilt once it returns: what it
	// returns must not share the caller's bytes, which a connection may
	// reuse for the next frame.
	b := append([]byte(nil), data...)
	got, err := decodeFrame(b)
	for i := range b {
		b[i] = 'x'
	}
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("%q: error %v, three-pass error %v", data, err, wantErr)
	case err != nil && (err.Error() != wantErr.Error() || !errors.Is(err, venue.ErrBadData)):
		t.Fatalf("%q: error %q, three-pass error %q", data, err, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%q:\ngot        %+v\nthree-pass %+v", data, got, want)
	}
}

// FuzzDecodeFrameOracle: on any bytes, the one-pass decoder gives what the
// three-pass decoder it replaced gave.
func FuzzDecodeFrameOracle(f *testing.F) {
	addFrameSeeds(f)
	addSeeds(f)
	for _, c := range oracleCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsThreePass(t, data)
	})
}

const (
	goodDepthData = `{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","0"]],"a":[["2","1.5"]]}`
	goodTradeData = `{"e":"aggTrade","E":2,"s":"BTCUSDT","a":1,"p":"1","q":"1","f":1,"l":1,"T":1,"m":true}`
	goodTickData  = `[{"e":"24hrTicker","s":"AUSDT","c":"1","h":"2","l":"0.5","v":"10","q":"10"}]`
)

// oracleCases are frames that take the decoders down their less usual
// paths: key order, repeated keys, keys in another case or escaped, null,
// values of the wrong type, strings and numbers at the edge of the grammar.
var oracleCases = []string{
	// Levels at the edges of the one-pass path for the usual level (see
	// plainLevel): each is read as the general path reads it.
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["0","1"],["0.000","1"]],"a":[]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["01.50","0"],["1.","1"]],"a":[["1","-1"]]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[[ "1","1"],["2" ,"1" ],["3","1","x"]],"a":[["1e5","1"],[".5","1"]]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","1",]],"a":[]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1a,"1"]],"a":[]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","1a]"]],"a":[]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","1"]`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1\u0030","1"],["1","2"],["0.0010","0.5"]],"a":[["1","1"]]}}`,
	// Data before the stream, and a stream named again after its data.
	`{"data":` + goodDepthData + `,"stream":"btcusdt@depth@100ms"}`,
	`{"data":` + goodTradeData + `,"stream":"btcusdt@aggTrade"}`,
	`{"data":` + goodTickData + `,"stream":"!ticker@arr"}`,
	`{"stream":"btcusdt@aggTrade","data":` + goodDepthData + `,"stream":"btcusdt@depth@100ms"}`,
	`{"stream":"btcusdt@depth@100ms","data":` + goodDepthData + `,"stream":"ethusdt@depth@100ms"}`,
	`{"stream":"btcusdt@depth@100ms","data":` + goodDepthData + `,"stream":null,"id":4}`,
	`{"stream":5,"data":` + goodTradeData + `,"stream":"btcusdt@aggTrade"}`,
	`{"stream":"btcusdt@depth@100ms"}`,
	`{"stream":"!ticker@arr","data":null}`,
	`{"data":[{"e":"markPriceUpdate","E":1,"s":"BTCUSDT","p":"100","P":"99","i":"99.5","r":"-0.0001","T":2}],"stream":"!markPrice@arr@1s"}`,
	`{"stream":"!markPrice@arr@1s","data":[null,{"e":"markPriceUpdate","E":1,"s":"BTCUSDT","p":"1e2"},5]}`,
	`{"stream":"!markPrice@arr@1s","data":{"e":"markPriceUpdate","E":1,"s":"BTCUSDT","p":"100","P":"99","i":"99.5","r":"0","T":2}}`,
	`{"stream":"btcusdt@aggTrade","data":` + goodTradeData + `,"data":[]}`,
	`{"stream":"btcusdt@aggTrade","data":[],"data":` + goodTradeData + `}`,
	// Keys matched as encoding/json matches them.
	`{"STREAM":"btcusdt@aggTrade","Data":` + goodTradeData + `}`,
	`{"ſtream":"btcusdt@aggTrade","data":` + goodTradeData + `}`,
	`{"\u0073tream":"btcusdt@aggTrade","d\u0061ta":` + goodTradeData + `}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"ſ":"BTCUSDT","U":1,"u":2,"Pu":0,"PU":7}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","S":"X","U":1,"u":2,"pU":0,"B":[1],"A":{}}}`,
	`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"BTCUSDT","a":1,"A":-1,"p":"1","P":"x","q":"1","T":1,"t":0,"m":true,"M":0}}`,
	`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"BTC\u0055SDT","a":1,"p":"1","q":"1","T":1,"m":true}}`,
	`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"BTC` + "\xff" + `","a":1,"p":"1","q":"1","T":1,"m":true}}`,
	`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"BTC` + "\xff" + `\n\ud800","a":1,"p":"1","q":"1","T":1,"m":true}}`,
	`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"BTCUSDT","a":1,"p":"\u0031","q":"1","T":1,"m":true}}`,
	`{"stream":"x@d\u0065pth@100ms","data":` + goodDepthData + `}`,
	`{"stream":"x@depth@100ms` + "\xe2\x80" + `","data":` + goodDepthData + `}`,
	// Repeated and null values.
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","s":null,"U":1,"u":2,"pu":0}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","2"]],"b":null}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[1],"b":[["1","2"]]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["x","2"]],"b":[["1","2"]]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","2","3",{"x":[]}],null]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1"]],"a":[["0","1"]]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["x","1"],"y"]}}`,
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":3,"u":2,"pu":0,"b":[{}]}}`,
	`{"stream":"!ticker@arr","data":[null,{"e":"24hrTicker","s":"AUSDT","c":"1","h":"2","l":"0.5","q":"10","v":null}]}`,
	`{"stream":"!ticker@arr","data":[{"e":"24hrTicker","s":"AUSDT","c":"1","h":"2","l":"0.5","q":"10"},5]}`,
	`{"stream":"!ticker@arr","data":[{"e":"24hrTicker","s":"AUSDT","c":"1","h":"2","l":"0.5","q":"10","e":"x"}]}`,
	// Replies.
	`{"id":1,"error":{"code":5,"CODE":6}}`,
	`{"id":1,"error":{"code":5,"code":null},"code":3}`,
	`{"id":1,"error":{"code":5},"error":null,"code":-3}`,
	`{"id":1,"error":[],"code":3}`,
	`{"id":1,"id":null}`,
	`{"Id":1,"ID":2,"result":{"x":[1,2]}}`,
	`{"id":9223372036854775808}`,
	`{"id":1.0}`,
	// The grammar's edges.
	` {"result":null,"id":1} ` + "\t\r\n",
	`{"result":null,"id":1}x`,
	`{"result":null,"id":1,}`,
	`{"result":null "id":1}`,
	`{"result":nul,"id":1}`,
	`{"result":-,"id":1}`,
	`{"result":-0.0e+5,"id":1}`,
	`{"result":01,"id":1}`,
	`{"result":1.,"id":1}`,
	`{"result":1e,"id":1}`,
	`{"result":.5,"id":1}`,
	`{"result":"\x","id":1}`,
	`{"result":"\u12G4","id":1}`,
	`{"result":"` + "\x01" + `","id":1}`,
	`{"result":"` + "\x1f" + `","id":1}`, // the highest control byte
	`{"result":"` + "\x7f\xff\xfe" + `","id":1}`,
	`{"result":[1,],"id":1}`,
	`{"result":[,1],"id":1}`,
	`{"result":{"a"},"id":1}`,
	`{"result":{1:2},"id":1}`,
	`{"result":true,"id":1` + "\x00",
	`{"result":null,"id":1` + "\u00a0}",
	"\xef\xbb\xbf" + `{"result":null,"id":1}`,
	`[{"result":null,"id":1}]`,
	`"stream"`,
	``,
	` `,
}

func TestDecodeFrameMatchesThreePass(t *testing.T) {
	for _, c := range oracleCases {
		sameAsThreePass(t, []byte(c))
	}
}

// TestDecodeFrameDepthLimit: frames nested as deeply as encoding/json
// allows decode as before, and one level deeper are not JSON, wherever the
// nesting stands.
func TestDecodeFrameDepthLimit(t *testing.T) {
	for _, n := range []int{maxDepth - 3, maxDepth - 2, maxDepth - 1, maxDepth} {
		nest := strings.Repeat("[", n) + strings.Repeat("]", n)
		for _, c := range []string{
			`{"stream":"x@foo","data":` + nest + `}`,
			`{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","s":"A","a":1,"p":"1","q":"1","T":1,"m":true,"f":` + nest + `}}`,
			`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"A","U":1,"u":2,"pu":0,"b":[["1","2",` + nest + `]]}}`,
			`{"stream":"!ticker@arr","data":[{"x":` + nest + `}]}`,
			`{"id":1,"error":{"x":` + nest + `}}`,
			`{"data":{"x":` + nest + `},"stream":"btcusdt@depth@100ms"}`,
		} {
			sameAsThreePass(t, []byte(c))
		}
	}
}

// TestDecodeFrameNullLevelAfterRepeat: a level sent as null is bad, also in
// a side the event repeats. The three-pass decoder took the level the
// earlier array had at that place, one the venue had replaced.
func TestDecodeFrameNullLevelAfterRepeat(t *testing.T) {
	body := `{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,` +
		`"b":[["1","2"]],"b":[null]}}`
	f, err := decodeFrame([]byte(body))
	if !errors.Is(err, venue.ErrBadData) || f.kind != frameDepth || f.name != "btcusdt@depth@100ms" {
		t.Fatalf("got %+v, %v; want a bad depth event", f, err)
	}
}

// slotsUsed counts the slots of l that hold a name.
func slotsUsed(l *keyList) int {
	n := 0
	for _, i := range l.slots {
		if i != 0 {
			n++
		}
	}
	return n
}

// A key's name is found by the index as lookup finds it: the name it
// equals, else the first it equals without regard to case, Unicode's
// folding included, else none; in every key list the decoders use, in one
// with a name too long to pack and a name listed twice, and in the longest
// list, indexed and, when no multiplier tried spreads it, without slots.
func TestKeyListFindsWhatLookupFinds(t *testing.T) {
	many := make([]string, maxKeyNames)
	for i := range many {
		many[i] = fmt.Sprintf("k%02d", i)
	}
	spread, unspread := indexKeys(many, keySeeds), indexKeys(many, 1)
	if n := slotsUsed(spread); n != len(many) {
		t.Errorf("%d names indexed in %d slots, want one each", len(many), n)
	}
	if n := slotsUsed(unspread); n != 0 {
		t.Errorf("%d names left unspread by the one multiplier tried hold %d slots, want none", len(many), n)
	}
	lists := map[string]*keyList{
		"envelope": envelopeIndex, "error": errorIndex, "depth": depthIndex, "aggTrade": aggTradeIndex,
		"ticker": tickerIndex, "markPrice": markPriceIndex, "markPriceEnvelope": markPriceEnvelopeIndex,
		"other": newKeyList([]string{"b", "sevenup", "eightbit", "a", "B", "b", "stream"}),
		"many":  spread, "many without slots": unspread,
	}
	keys := []string{"", "\x00", "e\x00", "\x00e", "ſ", "ſtream", "K", "\u212a", "ſevenup", "eightbi\u212a",
		"eightbits", "eightbi", "streams", "strea", "datum"}
	for c := range 256 {
		keys = append(keys, string(rune(c)), string([]byte{byte(c)}))
	}
	for a := 'A'; a <= 'z'; a++ {
		for b := 'A'; b <= 'z'; b++ {
			keys = append(keys, string([]rune{a, b}))
		}
	}
	for _, l := range lists {
		for _, n := range l.names {
			keys = append(keys, n, strings.ToUpper(n), strings.ToLower(n), n+"x", "x"+n)
		}
	}
	for what, l := range lists {
		for _, k := range keys {
			if got, want := l.find(k), lookup(l.names, k); got != want {
				t.Errorf("%s keys: %q found name %d, lookup finds %d", what, k, got, want)
			}
		}
	}
	// What that means for a depth event's keys.
	for key, want := range map[string]int{
		"pu": depPrev, "PU": depUpperPU, "Pu": depPrev, "pU": depPrev, // the first name it folds to
		"s": depSymbol, "S": depUpperS, "ſ": depSymbol, "b": depBids, "B": depUpperB,
		"x": -1, "": -1, "bb": -1, "depthUpdate": -1,
	} {
		if got := depthIndex.find(key); got != want {
			t.Errorf("depth key %q found name %d, want %d", key, got, want)
		}
	}
}
