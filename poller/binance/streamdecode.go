package binance

import (
	stdjson "encoding/json"
	"strings"

	"github.com/goccy/go-json"

	"marketfeed/poller/venue"
)

// This file turns market-stream frames into poller values. Like decode.go it
// is pure, so that tests and fuzzing reach it without a connection, and it
// follows the same rules: decimals are plain decimals in JSON strings,
// unknown fields are ignored, and no error carries a byte of the frame.

// frameKind says what a frame carried.
type frameKind int

const (
	frameUnknown frameKind = iota // a stream or reply this client does not use
	frameDepth                    // a depthUpdate event
	frameTrade                    // an aggTrade event
	frameTickers                  // rows of the all-market ticker stream
	frameReply                    // the answer to a SUBSCRIBE or UNSUBSCRIBE
)

// Stream name suffixes and the all-market ticker name, as the venue spells
// them. An explicit "@250ms" is not a valid spelling; "@100ms" is.
const (
	depthSuffix = "@depth@100ms"
	tradeSuffix = "@aggTrade"
	tickerName  = "!ticker@arr"
)

// frame is one decoded stream message.
type frame struct {
	kind frameKind
	// name is the combined-stream name the event came on; "" for a reply.
	name    string
	depth   venue.DepthUpdate
	trade   venue.Trade
	symbol  string // the trade's symbol (the depth update has its own)
	tickers []venue.Stat
	reply   reply
}

// reply is the venue's answer to a control message.
type reply struct {
	id int64
	ok bool // {"result":null,"id":N}; false for an error reply
	// code is the venue's error code, for logs: a number the venue defines,
	// never free text from the frame.
	code int64
}

// wireFrame is either a combined-stream event or a reply to a request.
type wireFrame struct {
	Stream field           `json:"stream"`
	Data   json.RawMessage `json:"data"`
	ID     field           `json:"id"`
	Result field           `json:"result"`
	Error  field           `json:"error"`
	Code   field           `json:"code"`
}

type wireError struct {
	Code field `json:"code"`
}

// depthEvent is the payload of <symbol>@depth@100ms. Keys differing only in
// case (e and E, u and U, t and T, b and B, a and A) are all declared: the
// decoder matches keys without regard to case when no field matches exactly.
type depthEvent struct {
	Event     field      `json:"e"`
	EventTime field      `json:"E"`
	Time      field      `json:"T"`
	LowerT    field      `json:"t"`
	Symbol    field      `json:"s"`
	UpperS    field      `json:"S"`
	First     field      `json:"U"`
	Last      field      `json:"u"`
	Prev      field      `json:"pu"`
	UpperPU   field      `json:"PU"`
	Bids      [][2]field `json:"b"`
	Asks      [][2]field `json:"a"`
	UpperB    field      `json:"B"`
	UpperA    field      `json:"A"`
}

// aggTradeEvent is the payload of <symbol>@aggTrade.
type aggTradeEvent struct {
	Event     field `json:"e"`
	EventTime field `json:"E"`
	Symbol    field `json:"s"`
	UpperS    field `json:"S"`
	ID        field `json:"a"`
	UpperA    field `json:"A"`
	Price     field `json:"p"`
	UpperP    field `json:"P"`
	Qty       field `json:"q"`
	UpperQ    field `json:"Q"`
	First     field `json:"f"`
	UpperF    field `json:"F"`
	Last      field `json:"l"`
	UpperL    field `json:"L"`
	Time      field `json:"T"`
	LowerT    field `json:"t"`
	Maker     field `json:"m"`
	UpperM    field `json:"M"`
}

// tickerRow is one row of !ticker@arr.
type tickerRow struct {
	Event       field `json:"e"`
	EventTime   field `json:"E"`
	Symbol      field `json:"s"`
	UpperS      field `json:"S"`
	Change      field `json:"p"`
	ChangePct   field `json:"P"`
	Weighted    field `json:"w"`
	UpperW      field `json:"W"`
	Last        field `json:"c"`
	CloseTime   field `json:"C"`
	LastQty     field `json:"Q"`
	QuoteVolume field `json:"q"`
	Open        field `json:"o"`
	OpenTime    field `json:"O"`
	High        field `json:"h"`
	UpperH      field `json:"H"`
	Low         field `json:"l"`
	LastID      field `json:"L"`
	Volume      field `json:"v"`
	UpperV      field `json:"V"`
	FirstID     field `json:"F"`
	LowerF      field `json:"f"`
	Count       field `json:"n"`
	UpperN      field `json:"N"`
}

// decodeFrame decodes one stream message.
//
// A reply (an "id" and no "stream") is frameReply: ok when it carries
// neither "error" nor "code". A combined-stream event is classified by its
// stream name: depth and trade events must be well-formed in every field;
// when one is not, the frame's kind and name are still returned with the
// error, so that the caller can tell which stream went bad. A ticker frame
// keeps the rows that are usable and drops the others, like the REST
// ticker. A stream this client does not use is frameUnknown, not an error.
//
// Errors wrap venue.ErrBadData.
func decodeFrame(b []byte) (frame, error) {
	var w wireFrame
	if err := unmarshal(b, '{', &w); err != nil {
		return frame{}, err
	}
	if !w.Stream.present() {
		if !w.ID.present() {
			return frame{}, badData("frame is neither an event nor a reply")
		}
		id, ok := w.ID.natural()
		if !ok {
			return frame{}, badData("reply id is not an unsigned integer")
		}
		r := reply{id: id, ok: !w.Error.present() && !w.Code.present()}
		if w.Error.present() {
			var e wireError
			if first([]byte(w.Error.raw)) == '{' && json.Unmarshal([]byte(w.Error.raw), &e) == nil {
				r.code, _ = e.Code.integer()
			}
		} else {
			r.code, _ = w.Code.integer()
		}
		return frame{kind: frameReply, reply: r}, nil
	}
	name, ok := w.Stream.text()
	if !ok || name == "" {
		return frame{}, badData("stream name is not a string")
	}
	f := frame{name: name}
	switch {
	case strings.HasSuffix(name, depthSuffix):
		f.kind = frameDepth
		u, err := decodeDepthEvent(w.Data)
		if err != nil {
			return f, err
		}
		f.depth = u
	case strings.HasSuffix(name, tradeSuffix):
		f.kind = frameTrade
		sym, tr, err := decodeAggTradeEvent(w.Data)
		if err != nil {
			return f, err
		}
		f.symbol, f.trade = sym, tr
	case name == tickerName:
		f.kind = frameTickers
		rows, err := decodeTickerRows(w.Data)
		if err != nil {
			return f, err
		}
		f.tickers = rows
	}
	return f, nil
}

// integer returns the field when it is a JSON integer, signed or not.
func (f field) integer() (int64, bool) {
	if n, ok := f.natural(); ok {
		return n, true
	}
	if neg, ok := strings.CutPrefix(f.raw, "-"); ok {
		n, ok := field{raw: neg}.natural()
		return -n, ok
	}
	return 0, false
}

// decodeData decodes an event payload, which is part of a frame already
// checked to be valid JSON.
func decodeData(data []byte, kind byte, v any) (err error) {
	if first(data) != kind {
		return badData("event is not a JSON %s", kindName(kind))
	}
	defer func() {
		if recover() != nil {
			err = badData("event could not be decoded")
		}
	}()
	if json.Unmarshal(data, v) != nil {
		return badData("event is not of the expected shape")
	}
	return nil
}

// decodeDepthEvent checks a depthUpdate: e is "depthUpdate"; s a non-empty
// string; U, u and pu integers without a sign with U <= u; T a positive
// integer; every level a [price, quantity] pair where the price is positive
// and the quantity non-negative ("0" removes the level). Either side may be
// empty: a diff lists only the levels that changed.
func decodeDepthEvent(data []byte) (venue.DepthUpdate, error) {
	var e depthEvent
	if err := decodeData(data, '{', &e); err != nil {
		return venue.DepthUpdate{}, err
	}
	if ev, _ := e.Event.text(); ev != "depthUpdate" {
		return venue.DepthUpdate{}, badData("depth event type is not depthUpdate")
	}
	sym, ok := e.Symbol.text()
	if !ok || sym == "" {
		return venue.DepthUpdate{}, badData("depth event has no symbol")
	}
	first, ok1 := e.First.natural()
	last, ok2 := e.Last.natural()
	prev, ok3 := e.Prev.natural()
	if !ok1 || !ok2 || !ok3 || first > last {
		return venue.DepthUpdate{}, badData("depth event update ids are not ordered unsigned integers")
	}
	t, ok := e.Time.natural()
	if !ok || t == 0 {
		return venue.DepthUpdate{}, badData("depth event time is not a positive integer")
	}
	bids, err := diffLevels(e.Bids, "bid")
	if err != nil {
		return venue.DepthUpdate{}, err
	}
	asks, err := diffLevels(e.Asks, "ask")
	if err != nil {
		return venue.DepthUpdate{}, err
	}
	return venue.DepthUpdate{Symbol: sym, First: first, Last: last, Prev: prev, Time: t, Bids: bids, Asks: asks}, nil
}

func diffLevels(raw [][2]field, name string) ([]venue.Level, error) {
	out := make([]venue.Level, len(raw))
	for i, lv := range raw {
		price, ok := lv[0].positive()
		if !ok {
			return nil, badData("%s %d price is not a positive plain decimal", name, i)
		}
		size, ok := lv[1].nonNegative()
		if !ok {
			return nil, badData("%s %d quantity is not a non-negative plain decimal", name, i)
		}
		out[i] = venue.Level{Price: price, Size: size}
	}
	return out, nil
}

// decodeAggTradeEvent checks an aggTrade event: e is "aggTrade", s a
// non-empty string, and a, p, q, T and m as in the REST list.
func decodeAggTradeEvent(data []byte) (string, venue.Trade, error) {
	var e aggTradeEvent
	if err := decodeData(data, '{', &e); err != nil {
		return "", venue.Trade{}, err
	}
	if ev, _ := e.Event.text(); ev != "aggTrade" {
		return "", venue.Trade{}, badData("trade event type is not aggTrade")
	}
	sym, ok := e.Symbol.text()
	if !ok || sym == "" {
		return "", venue.Trade{}, badData("trade event has no symbol")
	}
	tr, err := aggTradeOf(e.ID, e.Price, e.Qty, e.Time, e.Maker)
	if err != nil {
		return "", venue.Trade{}, err
	}
	return sym, tr, nil
}

// decodeTickerRows checks the rows of !ticker@arr. The payload must be an
// array; a row whose e is not "24hrTicker", or that has no symbol or an
// unusable value, is dropped (the venue lists only symbols that changed,
// so the row's market keeps its last values until the next one).
func decodeTickerRows(data []byte) ([]venue.Stat, error) {
	var rows []tickerRow
	if err := decodeData(data, '[', &rows); err != nil {
		return nil, err
	}
	stats := make([]venue.Stat, 0, len(rows))
	for _, r := range rows {
		if ev, _ := r.Event.text(); ev != "24hrTicker" {
			continue
		}
		st, ok := statOf(tickerItem{
			Symbol:      r.Symbol,
			LastPrice:   r.Last,
			HighPrice:   r.High,
			LowPrice:    r.Low,
			Volume:      r.Volume,
			QuoteVolume: r.QuoteVolume,
		})
		if ok {
			stats = append(stats, st)
		}
	}
	return stats, nil
}

// controlMessage is a SUBSCRIBE or UNSUBSCRIBE request.
type controlMessage struct {
	Method string   `json:"method"`
	Params []string `json:"params"`
	ID     int64    `json:"id"`
}

// encodeControl returns the request's JSON. Names come from the catalog
// and are escaped by the encoder, whatever they hold.
func encodeControl(method string, names []string, id int64) []byte {
	b, err := stdjson.Marshal(controlMessage{Method: method, Params: names, ID: id})
	if err != nil {
		// A struct of strings and an integer always encodes.
		panic("encode control message: " + err.Error())
	}
	return b
}
