package binance

import (
	"strings"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// This file reads the events inside stream frames: depth updates, aggregate
// trades and the all-market ticker rows. Each reader takes the event's
// values off the scanner as they pass, checks them with the same functions
// the REST decoders use, and copies out of the frame only what it returns.
//
// The key lists name every key the venue's payloads use, read or not, and
// each letter in both cases: a key goes to the name it equals, or else to
// the first it equals without regard to case (see lookup), so a list
// declares "S" for an "S" not to be taken for the symbol "s". Their order is
// part of that rule; it is the order of the struct fields the events were
// decoded into before, so that every key lands where it did.

// errMisshapen is the error for an event with a value of the wrong JSON type
// where its shape needs one: a side of a depth event that is not an array,
// a level or a ticker row that is neither an array (an object) nor null.
// The whole event is bad then, even where the value was later repeated
// with the right type, as it was when decoding into Go types failed.
var errMisshapen = badData("event is not of the expected shape")

// readEvent reads the data of a frame of the given kind, which came on the
// stream named name, with the reader its stream's row names (see readers);
// the data of a stream this client does not use is read and dropped.
// known, when not nil, tells an event already delivered (see readDepth);
// lend gathers a depth event's sides (see decodeLent).
func readEvent(s *scanner, kind frameKind, name string, known knownFunc, lend *lender) (f frame, err error) {
	*s, f, err = readers[kind](*s, name, known, lend)
	return f, err
}

// skipEvent is the reader of the frames of no row: their data is read and
// dropped.
func skipEvent(s scanner, _ string, _ knownFunc, _ *lender) (scanner, frame, error) {
	s.value()
	return s, frame{}, nil
}

// readFields reads the object at the cursor into fields, into[i] taking
// the value of the key that names' name i stands for; the values of other
// keys are read and dropped.
func readFields(s *scanner, names *keyList, into []field) {
	for ok := s.open('{'); ok; ok = s.more('}') {
		if k := names.find(s.key()); k >= 0 {
			into[k] = s.value()
		} else {
			s.value()
		}
	}
}

// The keys of a depthUpdate event.
const (
	depEvent     = iota // e
	depEventTime        // E
	depTime             // T
	depLowerT           // t
	depSymbol           // s
	depUpperS           // S
	depFirst            // U
	depLast             // u
	depPrev             // pu
	depUpperPU          // PU
	depBids             // b
	depAsks             // a
	depUpperB           // B
	depUpperA           // A
)

var depthKeys = [...]string{
	depEvent: "e", depEventTime: "E", depTime: "T", depLowerT: "t", depSymbol: "s", depUpperS: "S",
	depFirst: "U", depLast: "u", depPrev: "pu", depUpperPU: "PU",
	depBids: "b", depAsks: "a", depUpperB: "B", depUpperA: "A",
}

// depthIndex finds the name of a depthUpdate key (see keyList).
var depthIndex = newKeyList(depthKeys[:])

// readDepth reads a depthUpdate event; depthUpdateOf says what it must
// hold, and readLevels what a side must.
//
// When known says, at the first side, that the event was delivered already
// (another line brought it first), its sides are passed over unread and it
// comes back as errDuplicate: the venue sends the symbol, ids and time
// before the levels, so a copy costs the scan of its bytes and no more.
//
// The sides are gathered in the lender's slices and returned in them; the
// symbol and the decimals are the frame's (see decodeLent).
func readDepth(s *scanner, kind snapshot.Stream, name string, known knownFunc, lend *lender) (venue.DepthUpdate, error) {
	if s.peek() != '{' {
		s.value()
		return venue.DepthUpdate{}, badData("event is not a JSON object")
	}
	var (
		f              [len(depthKeys)]field
		bidErr, askErr error
		misshapen      bool
		checked, dup   bool
	)
	// A side that is absent is empty, as one sent as null is.
	bids, asks := []venue.Level{}, []venue.Level{}
	for ok := s.open('{'); ok; ok = s.more('}') {
		k := depthIndex.find(s.key())
		if (k == depBids || k == depAsks) && known != nil && !checked {
			checked = true
			dup = delivered(kind, name, known, &f)
		}
		if dup && (k == depBids || k == depAsks) {
			s.value()
			continue
		}
		switch k {
		case depBids:
			bids, bidErr = readLevels(s, "bid", lend.bids[:0])
			misshapen = misshapen || bidErr == errMisshapen
		case depAsks:
			asks, askErr = readLevels(s, "ask", lend.asks[:0])
			misshapen = misshapen || askErr == errMisshapen
		case -1:
			s.value()
		default:
			f[k] = s.value()
		}
	}
	if dup {
		return venue.DepthUpdate{}, errDuplicate
	}
	if misshapen {
		return venue.DepthUpdate{}, errMisshapen
	}
	u, err := depthUpdateOf(f[depEvent], f[depSymbol], f[depFirst], f[depLast], f[depPrev], f[depTime])
	if err == nil {
		err = bidErr
	}
	if err == nil {
		err = askErr
	}
	if err != nil {
		return venue.DepthUpdate{}, err
	}
	// Keep what the sides grew to for the next frame.
	if cap(bids) > cap(lend.bids) {
		lend.bids = bids[:0]
	}
	if cap(asks) > cap(lend.asks) {
		lend.asks = asks[:0]
	}
	u.Bids, u.Asks = bids, asks
	return u, nil
}

// delivered asks known about the depth event, of the stream named name,
// whose fields f holds so far; an event that has not shown its symbol,
// last id and time yet is not known.
func delivered(kind snapshot.Stream, name string, known knownFunc, f *[len(depthKeys)]field) bool {
	sym, ok1 := f[depSymbol].text()
	last, ok2 := f[depLast].natural()
	t, ok3 := f[depTime].natural()
	return ok1 && ok2 && ok3 && known(kind, name, sym, last, t)
}

// depthUpdateOf checks a depthUpdate's own fields: e is "depthUpdate"; s a
// non-empty string; U, u and pu integers without a sign with U <= u; T a
// positive integer. Its levels are checked by levelOf. Either side may be
// empty: a diff lists only the levels that changed.
func depthUpdateOf(event, symbol, first, last, prev, t field) (venue.DepthUpdate, error) {
	if ev, _ := event.text(); ev != "depthUpdate" {
		return venue.DepthUpdate{}, badData("depth event type is not depthUpdate")
	}
	sym, ok := symbol.text()
	if !ok || sym == "" {
		return venue.DepthUpdate{}, badData("depth event has no symbol")
	}
	u, ok1 := first.natural()
	l, ok2 := last.natural()
	pu, ok3 := prev.natural()
	if !ok1 || !ok2 || !ok3 || u > l {
		return venue.DepthUpdate{}, badData("depth event update ids are not ordered unsigned integers")
	}
	ms, ok := t.natural()
	if !ok || ms == 0 {
		return venue.DepthUpdate{}, badData("depth event time is not a positive integer")
	}
	return venue.DepthUpdate{Symbol: sym, First: u, Last: l, Prev: pu, Time: ms}, nil
}

// readLevels reads one side of a depth event: null, or an array of levels,
// each checked by levelOf as it is read. A level is a [price, quantity]
// array; elements after the second are read and ignored, and a missing
// one, or a level sent as null, is absent and fails its check. An error
// names the first bad level; errMisshapen, for a value of the wrong type,
// outranks it.
//
// The levels are appended to buf and returned in it. Their decimals are
// substrings of the frame, not clones: most levels of an event change a
// level the book holds, which keeps only the new size, so the book copies
// what it keeps (see venue.DepthUpdate).
func readLevels(s *scanner, side string, buf []venue.Level) ([]venue.Level, error) {
	switch s.peek() {
	case '[':
	case 'n':
		s.value()
		return []venue.Level{}, nil
	default:
		s.value()
		return nil, errMisshapen
	}
	var err error
	levels := buf
	for i, ok := 0, s.open('['); ok; i, ok = i+1, s.more(']') {
		var pair [2]field
		switch s.peek() {
		case '[':
			if lv, ok := s.plainLevel(); ok {
				if err == nil {
					levels = append(levels, lv)
				}
				continue
			}
			for j, ok := 0, s.open('['); ok; j, ok = j+1, s.more(']') {
				if v := s.value(); j < len(pair) {
					pair[j] = v
				}
			}
		case 'n':
			s.value()
		default:
			s.value()
			err = errMisshapen
		}
		if err == nil {
			var lv venue.Level
			if lv, err = levelOf(pair, side, i); err == nil {
				levels = append(levels, lv)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if levels == nil {
		return []venue.Level{}, nil // empty, as a side sent as null is
	}
	return levels, nil
}

// levelOf checks level i of a depth event's side: the price is a positive
// plain decimal and the quantity a non-negative one ("0" removes the
// level). This is the one check of a streamed level's decimals; the book
// trusts them from here on.
func levelOf(pair [2]field, side string, i int) (venue.Level, error) {
	price, ok := pair[0].positive()
	if !ok {
		return venue.Level{}, badData("%s %d price is not a positive plain decimal", side, i)
	}
	size, ok := pair[1].nonNegative()
	if !ok {
		return venue.Level{}, badData("%s %d quantity is not a non-negative plain decimal", side, i)
	}
	return venue.Level{Price: price, Size: size}, nil
}

// The keys of an aggTrade event.
const (
	aggEvent     = iota // e
	aggEventTime        // E
	aggSymbol           // s
	aggUpperS           // S
	aggID               // a
	aggUpperA           // A
	aggPrice            // p
	aggUpperP           // P
	aggQty              // q
	aggUpperQ           // Q
	aggFirst            // f
	aggUpperF           // F
	aggLast             // l
	aggUpperL           // L
	aggTime             // T
	aggLowerT           // t
	aggMaker            // m
	aggUpperM           // M
)

var aggTradeKeys = [...]string{
	aggEvent: "e", aggEventTime: "E", aggSymbol: "s", aggUpperS: "S", aggID: "a", aggUpperA: "A",
	aggPrice: "p", aggUpperP: "P", aggQty: "q", aggUpperQ: "Q", aggFirst: "f", aggUpperF: "F",
	aggLast: "l", aggUpperL: "L", aggTime: "T", aggLowerT: "t", aggMaker: "m", aggUpperM: "M",
}

// aggTradeIndex finds the name of an aggTrade key (see keyList).
var aggTradeIndex = newKeyList(aggTradeKeys[:])

// readTrade reads an aggTrade event; aggTradeEventOf says what it must
// hold.
//
// The trade is the frame's: its decimals and symbol are substrings of it,
// lent to the sink as the frame is (see venue.Sink), which copies what it
// keeps; the connection only compares the symbol with its stream's.
func readTrade(s *scanner) (string, venue.Trade, error) {
	if s.peek() != '{' {
		s.value()
		return "", venue.Trade{}, badData("event is not a JSON object")
	}
	var f [len(aggTradeKeys)]field
	readFields(s, aggTradeIndex, f[:])
	sym, tr, err := aggTradeEventOf(f[aggEvent], f[aggSymbol], f[aggID], f[aggPrice], f[aggQty], f[aggTime], f[aggMaker], f[aggLast])
	if err != nil {
		return "", venue.Trade{}, err
	}
	return sym, tr, nil
}

// aggTradeEventOf checks an aggTrade event: e is "aggTrade", s a non-empty
// string, and a, p, q, T, m and l as in the REST list (see aggTradeOf).
func aggTradeEventOf(event, symbol, id, price, qty, t, maker, last field) (string, venue.Trade, error) {
	if ev, _ := event.text(); ev != "aggTrade" {
		return "", venue.Trade{}, badData("trade event type is not aggTrade")
	}
	sym, ok := symbol.text()
	if !ok || sym == "" {
		return "", venue.Trade{}, badData("trade event has no symbol")
	}
	tr, err := aggTradeOf(id, price, qty, t, maker, last)
	if err != nil {
		return "", venue.Trade{}, err
	}
	return sym, tr, nil
}

// The keys of a row of !ticker@arr.
const (
	tickEvent       = iota // e
	tickEventTime          // E
	tickSymbol             // s
	tickUpperS             // S
	tickChange             // p
	tickChangePct          // P
	tickWeighted           // w
	tickUpperW             // W
	tickLast               // c
	tickCloseTime          // C
	tickLastQty            // Q
	tickQuoteVolume        // q
	tickOpen               // o
	tickOpenTime           // O
	tickHigh               // h
	tickUpperH             // H
	tickLow                // l
	tickLastID             // L
	tickVolume             // v
	tickUpperV             // V
	tickFirstID            // F
	tickLowerF             // f
	tickCount              // n
	tickUpperN             // N
)

var tickerKeys = [...]string{
	tickEvent: "e", tickEventTime: "E", tickSymbol: "s", tickUpperS: "S", tickChange: "p", tickChangePct: "P",
	tickWeighted: "w", tickUpperW: "W", tickLast: "c", tickCloseTime: "C", tickLastQty: "Q", tickQuoteVolume: "q",
	tickOpen: "o", tickOpenTime: "O", tickHigh: "h", tickUpperH: "H", tickLow: "l", tickLastID: "L",
	tickVolume: "v", tickUpperV: "V", tickFirstID: "F", tickLowerF: "f", tickCount: "n", tickUpperN: "N",
}

// tickerIndex finds the name of a ticker row key (see keyList).
var tickerIndex = newKeyList(tickerKeys[:])

// readTickers reads the rows of !ticker@arr, which must be an array. A row
// that tickerStatOf refuses, or one sent as null, is dropped (the venue
// lists only symbols that changed, so the row's market keeps its last
// values until the next one); a row that is neither an object nor null
// makes the frame errMisshapen.
func readTickers(s *scanner) ([]venue.Stat, int64, error) {
	if s.peek() != '[' {
		s.value()
		return nil, 0, badData("event is not a JSON array")
	}
	stats := []venue.Stat{}
	misshapen := false
	var newest int64
	for ok := s.open('['); ok; ok = s.more(']') {
		var f [len(tickerKeys)]field
		switch s.peek() {
		case '{':
			readFields(s, tickerIndex, f[:])
		case 'n':
			s.value()
			continue
		default:
			s.value()
			misshapen = true
			continue
		}
		st, ok := tickerStatOf(f[tickEvent], tickerItem{
			Symbol:      f[tickSymbol],
			LastPrice:   f[tickLast],
			HighPrice:   f[tickHigh],
			LowPrice:    f[tickLow],
			Volume:      f[tickVolume],
			QuoteVolume: f[tickQuoteVolume],
		})
		if t, ok := f[tickEventTime].natural(); ok {
			newest = max(newest, t)
		}
		if ok && !misshapen {
			stats = append(stats, venue.Stat{
				Symbol:      strings.Clone(st.Symbol),
				LastPrice:   strings.Clone(st.LastPrice),
				High:        strings.Clone(st.High),
				Low:         strings.Clone(st.Low),
				BaseVolume:  strings.Clone(st.BaseVolume),
				QuoteVolume: strings.Clone(st.QuoteVolume),
			})
		}
	}
	if misshapen {
		return nil, 0, errMisshapen
	}
	return stats, newest, nil
}

// tickerStatOf checks a row of !ticker@arr: e is "24hrTicker", and the
// values are those of a REST ticker item (see statOf).
func tickerStatOf(event field, it tickerItem) (venue.Stat, bool) {
	if ev, _ := event.text(); ev != "24hrTicker" {
		return venue.Stat{}, false
	}
	return statOf(it)
}
