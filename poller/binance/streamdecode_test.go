package binance

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

func TestDecodeFrameRecorded(t *testing.T) {
	for _, tc := range []struct {
		file string
		want frame
	}{
		{"recorded/binance-ws-depthUpdate100ms-combined-cryptofeed-SUSHIUSDT.json", frame{
			kind: frameDepth, name: "sushiusdt@depth@100ms",
			depth: venue.DepthUpdate{
				Symbol: "SUSHIUSDT", First: 600859599090, Last: 600859600917, Prev: 600859598061, Time: 1626992741024,
				Bids: []venue.Level{{Price: "7.5040", Size: "813"}, {Price: "7.6090", Size: "0"}, {Price: "7.6110", Size: "2"}},
				Asks: []venue.Level{{Price: "7.6150", Size: "1563"}, {Price: "7.6220", Size: "3284"}},
			},
		}},
		{"recorded/binance-ws-depthUpdate100ms-combined-cryptomsgparser-BTCUSDT.json", frame{
			kind: frameDepth, name: "btcusdt@depth@100ms",
			depth: venue.DepthUpdate{
				Symbol: "BTCUSDT", First: 475776377463, Last: 475776380184, Prev: 475776377452, Time: 1622371244687,
				Bids: []venue.Level{{Price: "35729.77", Size: "1.600"}, {Price: "35750.00", Size: "5.106"}},
				Asks: []venue.Level{{Price: "35819.20", Size: "0.211"}, {Price: "35820.31", Size: "0.001"}},
			},
		}},
		{"recorded/binance-ws-aggTrade-combined-cryptofeed-SUSHIUSDT.json", frame{
			kind: frameTrade, name: "sushiusdt@aggTrade", symbol: "SUSHIUSDT",
			trade: venue.Trade{ID: 87353230, LastID: 126902927, Time: 1626992744108, Price: "7.6120", Size: "297", Sell: false},
		}},
		{"recorded/binance-ws-tickerArr-combined-cryptomsgparser.json", frame{
			kind: frameTickers, name: "!ticker@arr",
			tickers:     []venue.Stat{{Symbol: "IOTXUSDT", LastPrice: "0.03529", High: "0.03645", Low: "0.03465", BaseVolume: "346584392", QuoteVolume: "12312309.61000"}},
			tickersTime: 1653814800126,
		}},
		// Streams this client does not subscribe are recognised as unknown.
		{"recorded/binance-ws-depth20-combined-cryptomsgparser-ETHUSDT.json", frame{name: "ethusdt@depth20"}},
		{"recorded/binance-ws-ticker-combined-cryptomsgparser-ETHUSDT.json", frame{name: "ethusdt@ticker"}},
		{"recorded/binance-ws-bookTicker-combined-cryptofeed-SUSHIUSDT.json", frame{name: "sushiusdt@bookTicker"}},
		{"recorded/binance-ws-bookTicker-combined-cryptomsgparser-ETHUSDT.json", frame{name: "ethusdt@bookTicker"}},
		{"recorded/binance-ws-allBookTicker-combined-cryptomsgparser-BALUSDT.json", frame{name: "!bookTicker"}},
	} {
		got, err := decodeFrame(readFixture(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

// TestDecodeFrameAster wraps Aster's documented raw payloads in the
// combined-stream wrapper its documentation describes.
func TestDecodeFrameAster(t *testing.T) {
	wrap := func(name, file string) []byte {
		return []byte(`{"stream":"` + name + `","data":` + string(readFixture(t, "recorded/"+file)) + `}`)
	}
	for _, tc := range []struct {
		name, file string
		want       frame
	}{
		{"btcusdt@depth@100ms", "aster-doc-ws-depthUpdate.json", frame{
			kind: frameDepth, name: "btcusdt@depth@100ms",
			depth: venue.DepthUpdate{
				Symbol: "BTCUSDT", First: 157, Last: 160, Prev: 149, Time: 123456788,
				Bids: []venue.Level{{Price: "0.0024", Size: "10"}}, Asks: []venue.Level{{Price: "0.0026", Size: "100"}},
			},
		}},
		{"btcusdt@aggTrade", "aster-doc-ws-aggTrade.json", frame{
			kind: frameTrade, name: "btcusdt@aggTrade", symbol: "BTCUSDT",
			trade: venue.Trade{ID: 5933014, LastID: 105, Time: 123456785, Price: "0.001", Size: "100", Sell: true},
		}},
		{"!ticker@arr", "aster-doc-ws-tickerArr.json", frame{
			kind: frameTickers, name: "!ticker@arr",
			tickers:     []venue.Stat{{Symbol: "BTCUSDT", LastPrice: "0.0025", High: "0.0025", Low: "0.0010", BaseVolume: "10000", QuoteVolume: "18"}},
			tickersTime: 123456789,
		}},
		{"btcusdt@ticker", "aster-doc-ws-ticker.json", frame{name: "btcusdt@ticker"}},
		{"btcusdt@bookTicker", "aster-doc-ws-bookTicker.json", frame{name: "btcusdt@bookTicker"}},
		{"btcusdt@depth5", "aster-doc-ws-depth20-partial.json", frame{name: "btcusdt@depth5"}},
	} {
		got, err := decodeFrame(wrap(tc.name, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

// TestDecodeFrameRecording decodes every frame of thirty seconds of real
// combined streams, and replays each symbol's depth events onto its real
// snapshot the way the venue prescribes: the chain of pu has no gap, and the
// first applicable event is where the recording says it is.
func TestDecodeFrameRecording(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "recorded", "binance-ws-combined-cryptofeed-20210722.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snapshots := map[string]int64{}
	for _, sym := range []string{"SUSHIUSDT", "AKROUSDT", "KEEPUSDT", "CTKUSDT"} {
		book, err := decodeBook(readFixture(t, "recorded/binance-depth-cryptofeed-"+sym+"-limit1000-20210722.json"))
		if err != nil {
			t.Fatal(err)
		}
		snapshots[sym] = book.LastUpdateID
	}
	wantFirst := map[string]int{"SUSHIUSDT": 12, "AKROUSDT": 10, "KEEPUSDT": 30, "CTKUSDT": 28}

	counts := map[frameKind]int{}
	lastU := map[string]int64{}
	firstApplied := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		fr, err := decodeFrame(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		counts[fr.kind]++
		switch fr.kind {
		case frameDepth:
			u := fr.depth
			if fr.name != strings.ToLower(u.Symbol)+depthSuffix {
				t.Fatalf("line %d: stream %s carries %s", line, fr.name, u.Symbol)
			}
			if prev, ok := lastU[u.Symbol]; ok && u.Prev != prev {
				t.Errorf("line %d: %s pu %d after u %d", line, u.Symbol, u.Prev, prev)
			}
			lastU[u.Symbol] = u.Last
			if id := snapshots[u.Symbol]; firstApplied[u.Symbol] == 0 && u.Last >= id && u.First <= id {
				firstApplied[u.Symbol] = line
			}
		case frameTrade:
			if fr.trade.ID <= 0 || fr.name != strings.ToLower(fr.symbol)+tradeSuffix {
				t.Fatalf("line %d: trade %+v on %s", line, fr.trade, fr.name)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if line != 1535 || counts[frameDepth] != 764 || counts[frameTrade] != 91 || counts[frameUnknown] != 613+67 {
		t.Errorf("%d lines: %d depth, %d trades, %d unknown", line, counts[frameDepth], counts[frameTrade], counts[frameUnknown])
	}
	if !reflect.DeepEqual(firstApplied, wantFirst) {
		t.Errorf("first applicable events on lines %v, want %v", firstApplied, wantFirst)
	}
}

func TestDecodeFrameReplies(t *testing.T) {
	for _, tc := range []struct {
		body string
		want reply
	}{
		{`{"result":null,"id":1}`, reply{id: 1, ok: true}},
		{`{"id":7,"result":null}`, reply{id: 7, ok: true}},
		{`{"error":{"code":2,"msg":"Invalid request: unknown variant"},"id":3}`, reply{id: 3, code: 2}},
		{`{"code":-1121,"msg":"Invalid symbol.","id":4}`, reply{id: 4, code: -1121}},
		{`{"error":"bad","id":5}`, reply{id: 5}},
	} {
		got, err := decodeFrame([]byte(tc.body))
		if err != nil || got.kind != frameReply || got.reply != tc.want {
			t.Errorf("%s: %+v, %v; want reply %+v", tc.body, got, err, tc.want)
		}
	}
}

// TestDecodeFrameBad: a frame that cannot be read is bad data with no
// stream; a depth or trade event with a bad field is bad data that still
// names its stream, so that the stream can be reported lost.
func TestDecodeFrameBad(t *testing.T) {
	depth := func(data string) string { return `{"stream":"btcusdt@depth@100ms","data":` + data + `}` }
	trade := func(data string) string { return `{"stream":"btcusdt@aggTrade","data":` + data + `}` }
	const goodDepth = `{"e":"depthUpdate","T":1,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1","0"]],"a":[]}`
	const goodTrade = `{"e":"aggTrade","s":"BTCUSDT","a":1,"p":"1","q":"1","T":1,"m":true}`
	for _, tc := range []struct {
		body string
		name string // "" when the frame itself is unreadable
	}{
		{``, ""},
		{`not json`, ""},
		{`[1,2]`, ""},
		{`{"stream":"btcusdt@aggTrade","data":`, ""},
		{`{}`, ""},
		{`{"id":-1,"result":null}`, ""},
		{`{"id":"1","result":null}`, ""},
		{`{"stream":5,"data":{}}`, ""},
		{`{"stream":"","data":{}}`, ""},
		{depth(`[]`), "btcusdt@depth@100ms"},
		{depth(`null`), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"depthUpdate"`, `"aggTrade"`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"s":"BTCUSDT",`, ``, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"U":1`, `"U":3`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"pu":0`, `"pu":-1`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"u":2`, `"u":"2"`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `"T":1`, `"T":0`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["1e3","1"]`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["0","1"]`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["1","-1"]`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["1",1]`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["1"]`, 1)), "btcusdt@depth@100ms"},
		{depth(strings.Replace(goodDepth, `["1","0"]`, `["NaN","1"]`, 1)), "btcusdt@depth@100ms"},
		{trade(`[]`), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"a":1,`, ``, 1)), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"a":1`, `"a":1.5`, 1)), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"p":"1"`, `"p":"1.5e2"`, 1)), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"q":"1"`, `"q":" 1"`, 1)), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"m":true`, `"m":"true"`, 1)), "btcusdt@aggTrade"},
		{trade(strings.Replace(goodTrade, `"e":"aggTrade"`, `"e":"trade"`, 1)), "btcusdt@aggTrade"},
		{`{"stream":"!ticker@arr","data":{"e":"24hrTicker"}}`, "!ticker@arr"},
	} {
		got, err := decodeFrame([]byte(tc.body))
		if !errors.Is(err, venue.ErrBadData) {
			t.Errorf("%s: error %v, want ErrBadData", tc.body, err)
			continue
		}
		if got.name != tc.name {
			t.Errorf("%s: stream %q, want %q", tc.body, got.name, tc.name)
		}
		assertNoBody(t, err, []byte(tc.body), "depthUpdate", "aggTrade", "stream", "arr")
	}
	// The good events these were made from decode.
	for _, b := range []string{depth(goodDepth), trade(goodTrade)} {
		if _, err := decodeFrame([]byte(b)); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}

// TestDecodeTickerRowsSkipsBad: unusable rows are dropped, the others kept.
func TestDecodeTickerRowsSkipsBad(t *testing.T) {
	body := `{"stream":"!ticker@arr","data":[` +
		`{"e":"24hrTicker","s":"AUSDT","c":"1","h":"2","l":"0.5","v":"10","q":"10"},` +
		`{"e":"24hrTicker","s":"BUSDT","c":"1e2","h":"2","l":"0.5","v":"10","q":"10"},` +
		`{"e":"24hrMiniTicker","s":"CUSDT","c":"1","h":"2","l":"0.5","v":"10","q":"10"},` +
		`{"e":"24hrTicker","c":"1","h":"2","l":"0.5","v":"10","q":"10"},` +
		`{"e":"24hrTicker","s":"DUSDT","c":"3","h":"4","l":"2","q":"30","st":2}]}`
	f, err := decodeFrame([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []venue.Stat{
		{Symbol: "AUSDT", LastPrice: "1", High: "2", Low: "0.5", BaseVolume: "10", QuoteVolume: "10"},
		{Symbol: "DUSDT", LastPrice: "3", High: "4", Low: "2", QuoteVolume: "30"},
	}
	if !reflect.DeepEqual(f.tickers, want) {
		t.Errorf("got %+v, want %+v", f.tickers, want)
	}
}

func TestEncodeControl(t *testing.T) {
	got := encodeControl("SUBSCRIBE", []string{"btcusdt@aggTrade", `a"b`}, 12)
	if want := `{"method":"SUBSCRIBE","params":["btcusdt@aggTrade","a\"b"],"id":12}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzDecodeFrame: whatever a connection delivers, the frame decoder does
// not panic, fails only with quiet bad data, and delivers only plain
// decimals that the frame holds byte for byte.
func FuzzDecodeFrame(f *testing.F) {
	addFrameSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := decodeFrame(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, _ := decodeFrame(data)
		checkSame(t, fr, again)
		switch fr.kind {
		case frameDepth:
			if fr.depth.First > fr.depth.Last || fr.depth.Time <= 0 || fr.depth.Symbol == "" {
				t.Fatalf("depth %+v", fr.depth)
			}
			for _, lv := range append(fr.depth.Bids[:len(fr.depth.Bids):len(fr.depth.Bids)], fr.depth.Asks...) {
				checkDecimal(t, data, "price", lv.Price, true)
				checkDecimal(t, data, "size", lv.Size, false)
			}
		case frameTrade:
			if fr.trade.ID < 0 || fr.trade.Time <= 0 || fr.symbol == "" {
				t.Fatalf("trade %+v", fr.trade)
			}
			checkDecimal(t, data, "price", fr.trade.Price, true)
			checkDecimal(t, data, "qty", fr.trade.Size, true)
		case frameTickers:
			for _, st := range fr.tickers {
				checkDecimal(t, data, "last", st.LastPrice, false)
				checkDecimal(t, data, "quote volume", st.QuoteVolume, false)
			}
		}
	})
}

// addFrameSeeds seeds f with recorded frames of every stream and replies.
func addFrameSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "recorded", "*-ws-*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	jsonl, err := os.ReadFile(filepath.Join("testdata", "recorded", "binance-ws-combined-cryptofeed-20210722.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for i, line := range bytes.Split(jsonl, []byte("\n")) {
		if i%50 == 0 {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"result":null,"id":1}`))
	f.Add([]byte(`{"error":{"code":2,"msg":"x"},"id":3}`))
}
