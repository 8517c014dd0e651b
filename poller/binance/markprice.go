package binance

import (
	"strings"
	"unsafe"

	"marketfeed/poller/venue"
)

// This file reads the mark price streams: every perpetual's mark price,
// index price, estimated settle price, funding rate and next funding time,
// once a second, in markPriceUpdate events. It follows streamdecode.go's
// rules (one pass of the scanner, decimals checked as they pass, no byte of
// the frame in an error) with one difference: an unusable row is counted
// and left out, never an error for the frame, since the frame carries every
// symbol and one bad row must not cost the others their second.
//
// Streams carries the all-market stream on each line: its row in
// wholeMarket (kinds.go) names readMarkPriceFrame as its reader.

// The mark price stream names, as the venue spells them. The venue also
// serves a 3 s cadence without the "@1s"; the client reads the 1 s one.
const (
	// MarkPriceStream is the all-market mark price stream: one array of
	// markPriceUpdate events, every perpetual, once a second.
	MarkPriceStream = "!markPrice@arr@1s"
	// MarkPriceSuffix ends one symbol's mark price stream name, after the
	// lower-case symbol: "btcusdt@markPrice@1s".
	MarkPriceSuffix = "@markPrice@1s"
)

// markPricePath returns the path the mark price streams are served on: the
// market path. Binance's notice of its 2026 split of the stream paths
// routes markPrice to /market with aggTrade and the tickers (and the
// streams doc says a name subscribed on the wrong path is acknowledged and
// never delivers); Aster serves every stream on one path.
func (p StreamPreset) markPricePath() string { return p.MarketPath }

// isMarkPriceName reports whether a combined stream's name is a mark price
// stream, at either cadence: "!markPrice@arr", "!markPrice@arr@1s",
// "<s>@markPrice", "<s>@markPrice@1s".
func isMarkPriceName(name string) bool {
	switch {
	case name == "!markPrice@arr", name == MarkPriceStream:
		return true
	case strings.HasSuffix(name, "@markPrice"), strings.HasSuffix(name, MarkPriceSuffix):
		return !strings.HasPrefix(name, "@") && !strings.HasPrefix(name, "!")
	}
	return false
}

// markPrices is what one frame of a mark price stream carried.
type markPrices struct {
	// name is the combined-stream name the rows came on; "" for a bare
	// payload (/ws/<name>).
	name string
	// rows are the usable events, in the frame's order; invalid counts
	// those left out.
	rows    []venue.Contract
	invalid int
}

// The keys of a markPriceUpdate event (see streamevents.go for why both
// cases of each letter are declared).
const (
	mpEvent     = iota // e
	mpEventTime        // E: the values' time
	mpSymbol           // s
	mpUpperS           // S
	mpMark             // p
	mpSettle           // P: the estimated settle price
	mpIndex            // i
	mpUpperI           // I
	mpRate             // r: the funding rate
	mpUpperR           // R
	mpNext             // T: the next funding time
	mpLowerT           // t
)

var markPriceKeys = [...]string{
	mpEvent: "e", mpEventTime: "E", mpSymbol: "s", mpUpperS: "S", mpMark: "p", mpSettle: "P",
	mpIndex: "i", mpUpperI: "I", mpRate: "r", mpUpperR: "R", mpNext: "T", mpLowerT: "t",
}

// markPriceIndex finds the name of a markPriceUpdate key (see keyList).
var markPriceIndex = newKeyList(markPriceKeys[:])

// The keys of a combined-stream envelope that a mark price frame reads.
const (
	mpEnvStream = iota
	mpEnvData
)

var (
	markPriceEnvelope      = [...]string{mpEnvStream: "stream", mpEnvData: "data"}
	markPriceEnvelopeIndex = newKeyList(markPriceEnvelope[:])
)

// decodeMarkPrices decodes one frame of a mark price stream: a
// combined-stream envelope ({"stream":"!markPrice@arr@1s","data":[...]},
// or a single symbol's stream with one event as its data), or a bare
// payload as /ws/<name> sends it (the array, or one event).
//
// Each event is checked by contractOf, and must say e "markPriceUpdate";
// its time is E. An event that fails, or an element of the array that is
// not an object, counts in invalid; null elements are skipped. A frame
// that is not JSON, an envelope whose stream is not a mark price stream,
// and an object that is neither an envelope nor an event are bad data.
//
// The frame is read in place, without a copy; the rows returned share
// nothing with b (their strings are one new allocation per frame), so the
// consumer keeps them as they are.
func decodeMarkPrices(b []byte) (f markPrices, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = markPrices{}, unreadable(r)
		}
	}()
	s := scanner{src: unsafe.String(unsafe.SliceData(b), len(b))}
	switch s.peek() {
	case '[':
		f.rows, f.invalid = readMarkPrices(&s)
	case '{':
		f, err = readMarkPriceObject(&s)
	default:
		s.value()
		err = badData("body is not a JSON object or array")
	}
	s.end()
	if err != nil {
		return markPrices{}, err
	}
	f.name = strings.Clone(f.name)
	ownContracts(f.rows)
	return f, nil
}

// readMarkPriceObject reads a frame that is an object: an envelope, or a
// bare event.
func readMarkPriceObject(s *scanner) (markPrices, error) {
	var (
		f         markPrices
		stream    field
		enveloped bool
		ev        [len(markPriceKeys)]field
	)
	for ok := s.open('{'); ok; ok = s.more('}') {
		key := s.key()
		switch markPriceEnvelopeIndex.find(key) {
		case mpEnvStream:
			enveloped = true
			stream = s.value()
		case mpEnvData:
			enveloped = true
			f.rows, f.invalid = readMarkPrices(s)
		default:
			if k := markPriceIndex.find(key); k >= 0 {
				ev[k] = s.value()
			} else {
				s.value()
			}
		}
	}
	if !enveloped {
		if !ev[mpEvent].present() {
			return markPrices{}, badData("frame is neither a stream envelope nor an event")
		}
		f.rows, f.invalid = appendMarkPrice(nil, 0, &ev)
		return f, nil
	}
	name, ok := stream.text()
	if !ok || !isMarkPriceName(name) {
		return markPrices{}, badData("stream is not a mark price stream")
	}
	f.name = name
	return f, nil
}

// readMarkPrices reads the data of a mark price stream: an array of events
// (the all-market stream) or one event (a symbol's stream); null is no
// event, and anything else one unusable event. This is the reader a frame
// decoder that knows the stream's name calls for its data.
func readMarkPrices(s *scanner) (rows []venue.Contract, invalid int) {
	switch s.peek() {
	case '[':
	case '{':
		var ev [len(markPriceKeys)]field
		readFields(s, markPriceIndex, ev[:])
		return appendMarkPrice(nil, 0, &ev)
	case 'n':
		s.value()
		return nil, 0
	default:
		s.value()
		return nil, 1
	}
	for ok := s.open('['); ok; ok = s.more(']') {
		switch s.peek() {
		case '{':
			var ev [len(markPriceKeys)]field
			readFields(s, markPriceIndex, ev[:])
			rows, invalid = appendMarkPrice(rows, invalid, &ev)
		case 'n':
			s.value()
		default:
			s.value()
			invalid++
		}
	}
	return rows, invalid
}

// readMarkPriceFrame reads the data of a frame of the all-market mark
// price stream (see readMarkPrices): its usable rows, which outlive the
// frame, and their newest time. A row left out as unusable is the venue's
// to fix, not the frame's: the others are delivered, and the frame is
// never an error.
func readMarkPriceFrame(s scanner, _ string, _ knownFunc, _ *lender) (scanner, frame, error) {
	rows, _ := readMarkPrices(&s)
	ownContracts(rows)
	var newest int64
	for _, r := range rows {
		newest = max(newest, r.Time)
	}
	return s, frame{marks: rows, marksTime: newest}, nil
}

// appendMarkPrice checks one event's fields and appends it to rows, or
// counts it in invalid.
func appendMarkPrice(rows []venue.Contract, invalid int, ev *[len(markPriceKeys)]field) ([]venue.Contract, int) {
	if e, _ := ev[mpEvent].text(); e != "markPriceUpdate" {
		return rows, invalid + 1
	}
	c, ok := contractOf(ev[mpSymbol], ev[mpMark], ev[mpIndex], ev[mpSettle], ev[mpRate], ev[mpNext], ev[mpEventTime])
	if !ok {
		return rows, invalid + 1
	}
	return append(rows, c), invalid
}

// ownContracts copies the strings of rows, read in place from a frame,
// into one new string, so that the rows outlive the frame's buffer at the
// cost of one allocation rather than five per row.
func ownContracts(rows []venue.Contract) {
	n := 0
	for i := range rows {
		r := &rows[i]
		n += len(r.Symbol) + len(r.MarkPrice) + len(r.IndexPrice) + len(r.SettlePrice) + len(r.FundingRate)
	}
	var w strings.Builder
	w.Grow(n)
	for i := range rows {
		r := &rows[i]
		for _, v := range [...]string{r.Symbol, r.MarkPrice, r.IndexPrice, r.SettlePrice, r.FundingRate} {
			w.WriteString(v)
		}
	}
	text := w.String()
	cut := func(v string) string {
		c := text[:len(v)]
		text = text[len(v):]
		return c
	}
	for i := range rows {
		r := &rows[i]
		r.Symbol, r.MarkPrice, r.IndexPrice = cut(r.Symbol), cut(r.MarkPrice), cut(r.IndexPrice)
		r.SettlePrice, r.FundingRate = cut(r.SettlePrice), cut(r.FundingRate)
	}
}
