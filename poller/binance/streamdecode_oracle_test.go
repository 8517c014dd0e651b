package binance

import (
	"github.com/goccy/go-json"

	"marketfeed/poller/venue"
)

// This file keeps the three-pass frame decoder that decodeFrame replaced,
// as the reference it is checked against (FuzzDecodeFrameOracle): the whole
// frame validated by encoding/json, the envelope decoded by goccy/go-json
// with its data kept raw, then the data decoded again into the event's
// struct. The checks of the values are the production functions, which did
// not change; what the reference stands for is which bytes reach them.
//
// It differs from the decoder it was in one point, on purpose: a repeated
// "b" or "a" key is decoded into a fresh slice. Decoding into the same
// slice, as encoding/json does and goccy/go-json copies, let a level sent
// as null in the later array keep the level the earlier array had at its
// place, so that a frame could publish a level the venue had replaced.
// decodeFrame refuses a null level wherever it stands.

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

// wireDepth is the payload of <symbol>@depth@100ms. Keys differing only in
// case (e and E, u and U, t and T, b and B, a and A) are all declared: the
// decoder matches keys without regard to case when no field matches exactly.
type wireDepth struct {
	Event     field     `json:"e"`
	EventTime field     `json:"E"`
	Time      field     `json:"T"`
	LowerT    field     `json:"t"`
	Symbol    field     `json:"s"`
	UpperS    field     `json:"S"`
	First     field     `json:"U"`
	Last      field     `json:"u"`
	Prev      field     `json:"pu"`
	UpperPU   field     `json:"PU"`
	Bids      freshSide `json:"b"`
	Asks      freshSide `json:"a"`
	UpperB    field     `json:"B"`
	UpperA    field     `json:"A"`
}

// freshSide decodes a side into a new slice each time its key comes.
type freshSide [][2]field

func (s *freshSide) UnmarshalJSON(b []byte) error {
	var fresh [][2]field
	err := json.Unmarshal(b, &fresh)
	*s = fresh
	return err
}

// wireAggTrade is the payload of <symbol>@aggTrade.
type wireAggTrade struct {
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

// wireTickerRow is one row of !ticker@arr.
type wireTickerRow struct {
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

// decodeFrameThreePass is decodeFrame as it was.
func decodeFrameThreePass(b []byte) (frame, error) {
	var w wireFrame
	if err := unmarshal(b, '{', &w); err != nil {
		return frame{}, err
	}
	if !w.Stream.present() {
		var code field
		if w.Error.present() {
			var e wireError
			if first([]byte(w.Error.raw)) == '{' && json.Unmarshal([]byte(w.Error.raw), &e) == nil {
				code = e.Code
			}
		}
		return replyOf(w.ID, w.Error, code, w.Code)
	}
	name, ok := w.Stream.text()
	if !ok || name == "" {
		return frame{}, badData("stream name is not a string")
	}
	f := frame{kind: classify(name), name: name}
	switch f.kind {
	case frameDepth:
		var e wireDepth
		if err := decodeData(w.Data, '{', &e); err != nil {
			return f, err
		}
		u, err := depthUpdateOf(e.Event, e.Symbol, e.First, e.Last, e.Prev, e.Time)
		if err != nil {
			return f, err
		}
		if u.Bids, err = sideLevels(e.Bids, "bid"); err != nil {
			return f, err
		}
		if u.Asks, err = sideLevels(e.Asks, "ask"); err != nil {
			return f, err
		}
		f.depth = u
	case frameTrade:
		var e wireAggTrade
		if err := decodeData(w.Data, '{', &e); err != nil {
			return f, err
		}
		sym, tr, err := aggTradeEventOf(e.Event, e.Symbol, e.ID, e.Price, e.Qty, e.Time, e.Maker, e.Last)
		if err != nil {
			return f, err
		}
		f.symbol, f.trade = sym, tr
	case frameMarkPrices:
		mp, err := decodeMarkPrices(w.Data)
		if err != nil {
			return f, nil // a payload that is no mark price frame delivers nothing
		}
		f.marks = mp.rows
		for _, r := range mp.rows {
			f.marksTime = max(f.marksTime, r.Time)
		}
	case frameTickers:
		var rows []wireTickerRow
		if err := decodeData(w.Data, '[', &rows); err != nil {
			return f, err
		}
		f.tickers = make([]venue.Stat, 0, len(rows))
		for _, r := range rows {
			if t, ok := r.EventTime.natural(); ok {
				f.tickersTime = max(f.tickersTime, t)
			}
			st, ok := tickerStatOf(r.Event, tickerItem{
				Symbol:      r.Symbol,
				LastPrice:   r.Last,
				HighPrice:   r.High,
				LowPrice:    r.Low,
				Volume:      r.Volume,
				QuoteVolume: r.QuoteVolume,
			})
			if ok {
				f.tickers = append(f.tickers, st)
			}
		}
	}
	return f, nil
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

func sideLevels(raw [][2]field, side string) ([]venue.Level, error) {
	out := make([]venue.Level, len(raw))
	for i, pair := range raw {
		lv, err := levelOf(pair, side, i)
		if err != nil {
			return nil, err
		}
		out[i] = lv
	}
	return out, nil
}
