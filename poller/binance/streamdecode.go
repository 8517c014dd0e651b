package binance

import (
	stdjson "encoding/json"
	"errors"
	"strings"
	"unsafe"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// This file turns market-stream frames into poller values. Like decode.go it
// is pure, so that tests and fuzzing reach it without a connection, and it
// follows the same rules: decimals are plain decimals in JSON strings,
// unknown fields are ignored, and no error carries a byte of the frame.

// frameKind says what a frame carried.
type frameKind int

const (
	frameUnknown    frameKind = iota // a stream or reply this client does not use
	frameDepth                       // a depthUpdate event
	frameTrade                       // an aggTrade event
	frameTickers                     // rows of the all-market ticker stream
	frameMarkPrices                  // rows of the all-market mark price stream
	frameReply                       // the answer to a SUBSCRIBE or UNSUBSCRIBE
	numFrameKinds
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
	// tickersTime is the newest event time (E) of the ticker rows, 0 when
	// none had one.
	tickersTime int64
	// marks are the usable rows of a mark price frame, which the frame's
	// buffer does not hold, and marksTime their newest time.
	marks     []venue.Contract
	marksTime int64
	reply     reply
}

// knownFunc reports whether the event of a symbol's stream of kind with
// the venue id at time, which came on the stream named name, was delivered
// already (see dedup.check). A reader asks it before it reads the bulk of
// an event (see readDepth).
type knownFunc func(kind snapshot.Stream, name, symbol string, id, time int64) bool

// errDuplicate is the error for a depth event known to be a copy of one
// delivered: it is dropped with its levels unread. It is not bad data.
var errDuplicate = errors.New("a copy of a depth event delivered already")

// reply is the venue's answer to a control message.
type reply struct {
	id int64
	ok bool // {"result":null,"id":N}; false for an error reply
	// code is the venue's error code, for logs: a number the venue defines,
	// never free text from the frame.
	code int64
}

// The envelope's keys (see lookup for how a key finds its name). "result"
// is read and dropped.
const (
	envStream = iota
	envData
	envID
	envResult
	envError
	envCode
)

var envelopeKeys = [...]string{
	envStream: "stream", envData: "data", envID: "id", envResult: "result", envError: "error", envCode: "code",
}

// envelopeIndex finds the name of an envelope key (see keyList).
var envelopeIndex = newKeyList(envelopeKeys[:])

// errorKeys are the keys of the object in an error reply's "error".
var (
	errorKeys  = [...]string{"code"}
	errorIndex = newKeyList(errorKeys[:])
)

// envelope is what a frame's top-level object held. A key the venue repeats
// counts as its last occurrence, and null as absent, as they did when the
// frame was decoded into a Go struct.
type envelope struct {
	stream, id, code field
	// name is the stream's name when it is a string, named says whether it
	// is, and streamKind is what that name carries: data that follows it is
	// read as that kind of event, in place.
	name       string
	named      bool
	streamKind frameKind
	// errSent is the "error" member as sent; errCode the "code" inside it
	// when it is an object.
	errSent, errCode field
	// data is the last "data" value as sent ("" when there was none),
	// dataKind what it was read as, and event and err what that gave.
	data     string
	dataKind frameKind
	event    frame
	err      error
	// known, when not nil, tells a depth event already delivered.
	known knownFunc
	// lend gathers depth events' sides (see decodeLent).
	lend *lender
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
// The frame is read once (see framescan.go). Binance sends "stream" before
// "data", so the event is decoded where it stands, its decimals checked on
// the way; only a frame whose data comes first, or whose stream is named
// twice, has its data read again once the name is known. A frame that is
// not JSON anywhere is bad data with no stream, even when the event was
// already decoded.
//
// Errors wrap venue.ErrBadData.
func decodeFrame(b []byte) (f frame, err error) { return decodeFrameWith(b, nil) }

// decodeFrameWith decodes one stream message as decodeFrame does, except a
// depth event that known says was delivered already: its levels are not
// read, and it comes back as errDuplicate with its kind and name. Nothing
// it returns shares b: the frame is copied once into a string, and a depth
// event's levels are substrings of that copy.
func decodeFrameWith(b []byte, known knownFunc) (frame, error) {
	return decode(string(b), known, new(lender))
}

// lender holds the levels a connection's decoder gathers a depth event's
// sides in, reused from one frame to the next (see decodeLent).
type lender struct{ bids, asks []venue.Level }

// decodeLent decodes one stream message as decodeFrameWith does, but
// copies nothing of a depth event, the bulk of what a connection reads:
// its symbol, the frame's name and its levels' decimals are b's bytes, and
// its sides are l's slices, so what it returns is lent, valid only until b
// or l is used again (venue.DepthUpdate says what a consumer keeps). At
// hundreds of pairs, copying every frame and each event's sides was most
// of the ingest's allocations. A trade is lent the same way (venue.Sink
// says what a sink keeps); ticker rows are still copied out.
func decodeLent(b []byte, known knownFunc, l *lender) (frame, error) {
	return decode(unsafe.String(unsafe.SliceData(b), len(b)), known, l)
}

// decode decodes one stream message held in src, gathering a depth event's
// sides in l; nothing of a depth event is copied out of src.
func decode(src string, known knownFunc, l *lender) (f frame, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = frame{}, unreadable(r)
		}
	}()
	s := scanner{src: src}
	if s.peek() != '{' {
		s.value()
		s.end()
		return frame{}, badData("body is not a JSON object")
	}
	e := envelope{known: known, lend: l}
	e.read(&s)
	s.end()
	return e.frame()
}

// unreadable is the error for a frame whose reading panicked: a
// syntaxError when the frame is not JSON, anything else a fault of the
// reader, which is bad data rather than a crash, as in unmarshal.
func unreadable(r any) error {
	if _, ok := r.(syntaxError); ok {
		return badData("body is not JSON")
	}
	return badData("body could not be decoded")
}

// read reads the envelope object at the cursor.
func (e *envelope) read(s *scanner) {
	for ok := s.open('{'); ok; ok = s.more('}') {
		switch envelopeIndex.find(s.key()) {
		case envStream:
			e.stream = s.value()
			e.name, e.named = e.stream.text()
			e.streamKind = classify(e.name)
		case envData:
			s.ws()
			start := s.pos
			e.event, e.err = readEvent(s, e.streamKind, e.name, e.known, e.lend)
			e.data, e.dataKind = s.src[start:s.pos], e.streamKind
		case envID:
			e.id = s.value()
		case envError:
			e.errSent, e.errCode = field{}, field{}
			if s.peek() != '{' {
				e.errSent = s.value()
				break
			}
			start := s.pos
			var code [len(errorKeys)]field
			readFields(s, errorIndex, code[:])
			e.errSent, e.errCode = field{raw: s.src[start:s.pos]}, code[0]
		case envCode:
			e.code = s.value()
		default:
			s.value()
		}
	}
}

// frame makes the frame out of a whole envelope.
func (e *envelope) frame() (frame, error) {
	if !e.stream.present() {
		return replyOf(e.id, e.errSent, e.errCode, e.code)
	}
	if !e.named || e.name == "" {
		return frame{}, badData("stream name is not a string")
	}
	f := frame{kind: e.streamKind, name: e.name}
	if f.kind == frameUnknown {
		return f, nil
	}
	if e.dataKind != f.kind {
		// The data came before the name, or under another name, or not at
		// all (which is no event, as null is): read it as what the name
		// says. The frame is JSON by now, so this reading cannot fail on
		// syntax.
		data := e.data
		if data == "" {
			data = "null"
		}
		e.event, e.err = readEvent(&scanner{src: data}, f.kind, f.name, e.known, e.lend)
	}
	if e.err != nil {
		return f, e.err
	}
	e.event.kind, e.event.name = f.kind, f.name
	return e.event, nil
}

// replyOf checks a reply: id is an integer without a sign; the reply is ok
// when it has neither error nor code; the code is the error object's, or
// else the top-level one, and 0 when neither is an integer.
func replyOf(id, errSent, errCode, code field) (frame, error) {
	if !id.present() {
		return frame{}, badData("frame is neither an event nor a reply")
	}
	n, ok := id.natural()
	if !ok {
		return frame{}, badData("reply id is not an unsigned integer")
	}
	r := reply{id: n, ok: !errSent.present() && !code.present()}
	if errSent.present() {
		r.code, _ = errCode.integer()
	} else {
		r.code, _ = code.integer()
	}
	return frame{kind: frameReply, reply: r}, nil
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
