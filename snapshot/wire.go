package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The wire forms carry a value to another process that serves it exactly as
// this one does: its bytes, its read time, and the offsets its responses are
// cut at, so that the receiver neither parses JSON nor serializes anything,
// and answers with the same bytes and the same tags. A decoder checks every
// offset against the body it indexes and refuses a value that does not hold
// together, so a damaged value is never served; what a sender vouched for
// (decimals, order) is not checked again, as with NewCheckedBook.
//
// A form is a byte naming its kind, then varints and length-prefixed byte
// strings, read in the order the Append methods write them; read times are
// Unix ns. A served value's form ends with its default body's gzip form
// (see appendWireGzip).

// The kinds of wire form, each form's first byte: a form of one kind is
// never taken for another.
const (
	wireBook      = 'B'
	wireDepth     = 'D'
	wireTrades    = 'T'
	wirePairs     = 'P'
	wireTickers   = 'K'
	wireContracts = 'C'
)

// wireNames name the kinds in errors.
var wireNames = map[byte]string{wireBook: "book", wireDepth: "depth", wireTrades: "trade list", wirePairs: "pair list", wireTickers: "ticker list", wireContracts: "contract list"}

// ErrBadWire reports a wire form that cannot be decoded into a value.
var ErrBadWire = errors.New("unusable wire form")

// wireReader reads a wire form; the first error sticks and every later read
// returns zero.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadWire, fmt.Sprintf(format, args...))
	}
}

// appendBookHead appends what the forms of a book and of a depth begin
// with: the kind, the ticker_id, the venue's time, the update id and the
// read time.
func appendBookHead(dst []byte, kind byte, id string, venueTime, seq, readAt int64) []byte {
	dst = appendWireBytes(append(dst, kind), []byte(id))
	dst = binary.AppendVarint(dst, venueTime)
	dst = binary.AppendVarint(dst, seq)
	return binary.AppendVarint(dst, readAt)
}

// bookHead reads what appendBookHead wrote, of a form of the given kind.
func (r *wireReader) bookHead(kind byte) (id string, venueTime, seq, readAt int64) {
	r.kind(kind)
	id = string(r.bytes("ticker_id"))
	return id, r.varint("time"), r.varint("update id"), r.varint("read time")
}

// kind reads the form's first byte, which must be want.
func (r *wireReader) kind(want byte) {
	if len(r.b) == 0 || r.b[0] != want {
		r.fail("not the form of a %s", wireNames[want])
		return
	}
	r.b = r.b[1:]
}

func (r *wireReader) uint(what string) uint64 { return readVarint(r, what, binary.Uvarint) }

func (r *wireReader) varint(what string) int64 { return readVarint(r, what, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint).
func readVarint[T int64 | uint64](r *wireReader, what string, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.fail("%s: not a varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a value that must fit an int32 offset or a count.
func (r *wireReader) int(what string) int {
	v := r.uint(what)
	if v > 1<<31-1 {
		r.fail("%s: %d is out of range", what, v)
		return 0
	}
	return int(v)
}

func (r *wireReader) bytes(what string) []byte {
	n := r.int(what)
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("%s: %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// ends reads a count and that many offsets, at most limit, each greater
// than the one before and than after, at most before, and each at a byte
// last.
func (r *wireReader) ends(what string, limit, after, before int, body []byte, last byte) []int32 {
	n := r.int(what)
	if n > limit {
		r.fail("%s: %d, more than %d", what, n, limit)
	}
	if r.err != nil {
		return nil
	}
	ends := make([]int32, n)
	for i := range ends {
		e := r.int(what)
		if r.err != nil {
			return nil
		}
		if e <= after || e > before || body[e-1] != last {
			r.fail("%s: offset %d of %d is %d, not an item's end within %d..%d", what, i+1, n, e, after, before)
			return nil
		}
		ends[i], after = int32(e), e
	}
	return ends
}

func (r *wireReader) finish() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the value", len(r.b))
	}
	return r.err
}

func appendWireBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// appendWireGzip appends a value's gzip form, the last field of every
// served value's form: a receiver serves it as it is instead of compressing
// the body itself. Empty: none, and the receiver compresses what its
// requests read, as a process alone does. The pair list always carries
// its own (it is compressed when built, once a publication); the other
// values only when a request on the sender had compressed them (see
// lazyGzip).
func appendWireGzip(dst, gz []byte) []byte { return appendWireBytes(dst, gz) }

// gzip reads what appendWireGzip wrote: nil for none. The bytes must at
// least start as a gzip member does (RFC 1952: 1f 8b, deflate); what they
// hold is the sender's word, as the offsets of a body are.
func (r *wireReader) gzip() []byte {
	gz := r.bytes("gzip")
	if len(gz) == 0 || r.err != nil {
		return nil
	}
	if len(gz) < 18 || gz[0] != 0x1f || gz[1] != 0x8b || gz[2] != 8 {
		r.fail("gzip: %d bytes that are not a gzip member", len(gz))
		return nil
	}
	return slices.Clone(gz)
}

func appendWireEnds(dst []byte, ends []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ends)))
	for _, e := range ends {
		dst = binary.AppendUvarint(dst, uint64(e))
	}
	return dst
}

// AppendWire appends the wire form of b.
func (b *Book) AppendWire(dst []byte) []byte {
	dst = appendBookHead(dst, wireBook, b.tickerID, b.time, b.seq, b.readAt)
	dst = appendWireBytes(dst, b.body)
	for _, off := range []int32{b.bidsOpen, b.bidsClose, b.asksOpen, b.asksClose} {
		dst = binary.AppendUvarint(dst, uint64(off))
	}
	dst = appendWireEnds(dst, b.bidEnds)
	dst = appendWireEnds(dst, b.askEnds)
	dst = appendWireGzip(dst, b.later.gz.peek())
	return append(dst, b.open.bits())
}

// The bits of a book's open sides in its wire form, which ends with them
// (a byte; a form of a version that had none is given a zero byte, both
// sides closed, by the member that reads it, as they were served then).
const (
	wireOpenBids = 1 << iota
	wireOpenAsks
)

func (o Open) bits() byte {
	var b byte
	if o.Bids {
		b |= wireOpenBids
	}
	if o.Asks {
		b |= wireOpenAsks
	}
	return b
}

// open reads the bits of a book's open sides.
func (r *wireReader) open() Open {
	if r.err != nil {
		return Open{}
	}
	if len(r.b) == 0 {
		r.fail("no open sides")
		return Open{}
	}
	b := r.b[0]
	r.b = r.b[1:]
	if b&^(wireOpenBids|wireOpenAsks) != 0 {
		r.fail("open sides: %#x", b)
	}
	return Open{Bids: b&wireOpenBids != 0, Asks: b&wireOpenAsks != 0}
}

// DecodeBook returns the book whose wire form is data. The book keeps
// none of data.
func DecodeBook(data []byte) (*Book, error) {
	r := wireReader{b: data}
	id, venueTime, seq, readAt := r.bookHead(wireBook)
	body := r.bytes("body")
	bidsOpen, bidsClose := r.int("bids open"), r.int("bids close")
	asksOpen, asksClose := r.int("asks open"), r.int("asks close")
	if r.err == nil && !(bidsOpen > 0 && bidsOpen <= bidsClose && bidsClose < asksOpen &&
		asksOpen <= asksClose && asksClose < len(body) && body[bidsOpen-1] == '[' &&
		body[bidsClose] == ']' && body[asksOpen-1] == '[' && body[asksClose] == ']') {
		r.fail("sides at %d..%d and %d..%d of %d bytes", bidsOpen, bidsClose, asksOpen, asksClose, len(body))
	}
	bidEnds := r.ends("bids", MaxDepth, bidsOpen, bidsClose, body, ']')
	askEnds := r.ends("asks", MaxDepth, asksOpen, asksClose, body, ']')
	gz := r.gzip()
	open := r.open()
	if err := r.finish(); err != nil {
		return nil, err
	}
	if !ValidTickerID([]byte(id)) || !strings.HasPrefix(string(body), `{"ticker_id":"`+id+`",`) {
		return nil, fmt.Errorf("%w: book body is not %s's", ErrBadWire, id)
	}
	if len(bidEnds) > 0 && int(bidEnds[len(bidEnds)-1]) != bidsClose || len(askEnds) > 0 && int(askEnds[len(askEnds)-1]) != asksClose {
		return nil, fmt.Errorf("%w: %s: a side's levels do not end where it closes", ErrBadWire, id)
	}
	later := new(lazyForms)
	later.gz.keep(gz)
	return &Book{
		tickerID: id, time: venueTime, seq: seq, open: open, readAt: readAt, version: nextVersion(),
		body: slices.Clone(body), later: later, bidEnds: bidEnds, askEnds: askEnds,
		bidsOpen: int32(bidsOpen), bidsClose: int32(bidsClose), asksOpen: int32(asksOpen), asksClose: int32(asksClose),
	}, nil
}

// AppendWire appends the wire form of t: the view of both sides, and which
// of its items are sells. A receiver builds a side's view from them when a
// request first asks, as the sender does.
func (t *Trades) AppendWire(dst []byte) []byte {
	dst = appendWireBytes(append(dst, wireTrades), []byte(t.tickerID))
	dst = binary.AppendVarint(dst, t.readAt)
	dst = appendWireBytes(dst, t.all.body)
	dst = appendWireEnds(dst, t.all.ends)
	for _, w := range t.sells {
		dst = binary.AppendUvarint(dst, w)
	}
	// The venue ids, with the repeat numbers the published ids were hashed
	// with: a receiver that goes on to read the venue numbers the trades it
	// shares with this value as this value does (see NewTradesAfter).
	dst = binary.AppendUvarint(dst, uint64(len(t.ids.byVenue)))
	for _, k := range t.ids.byVenue {
		dst = binary.AppendVarint(dst, k.venueID)
		dst = binary.AppendUvarint(dst, uint64(k.n))
		dst = binary.AppendUvarint(dst, uint64(k.at))
	}
	return appendWireGzip(dst, t.later.gz.peek())
}

// DecodeTrades returns the trades whose wire form is data. The value keeps
// none of data. It numbers the trades it shares with a later read of the
// venue as the sender would (see NewTradesAfter), and gives its trades back
// (VenueTrades).
func DecodeTrades(data []byte) (*Trades, error) {
	r := wireReader{b: data}
	r.kind(wireTrades)
	id := string(r.bytes("ticker_id"))
	readAt := r.varint("read time")
	body := r.bytes("body")
	if r.err == nil && (len(body) < 2 || body[0] != '[' || body[len(body)-1] != ']') {
		r.fail("trades body is not an array")
	}
	ends := r.ends("trades", MaxTrades, 1, len(body)-1, body, '}')
	t := &Trades{tickerID: id, readAt: readAt, version: nextVersion(), later: new(laterForms)}
	for i := range t.sells {
		t.sells[i] = r.uint("sells")
	}
	known := make([]numberedID, min(r.int("venue ids"), len(ends)))
	for i := range known {
		known[i] = numberedID{venueID: r.varint("venue id"), n: int32(r.int("repeat")), at: int32(r.int("item"))}
	}
	t.later.gz.keep(r.gzip())
	if err := r.finish(); err != nil {
		return nil, err
	}
	if !ValidTickerID([]byte(id)) {
		return nil, fmt.Errorf("%w: trades of %q", ErrBadWire, id)
	}
	if n := len(ends); n > 0 && int(ends[n-1]) != len(body)-1 || n == 0 && len(body) != 2 {
		return nil, fmt.Errorf("%w: %s: the trades do not end where the array closes", ErrBadWire, id)
	}
	for j := len(ends); j < MaxTrades; j++ {
		if t.sells[j/64]&(1<<(j%64)) != 0 {
			return nil, fmt.Errorf("%w: %s: trade %d of %d is marked a sell", ErrBadWire, id, j+1, len(ends))
		}
	}
	t.all = tradeView{body: slices.Clone(body), ends: ends}
	for i := range known {
		k := &known[i]
		if k.venueID <= 0 || i > 0 && k.venueID <= known[i-1].venueID || int(k.at) >= len(ends) {
			return nil, fmt.Errorf("%w: %s: venue id %d of %d is not one of its trades", ErrBadWire, id, i+1, len(known))
		}
		if _, ok := itemID(t.all.item(int(k.at))); !ok {
			return nil, fmt.Errorf("%w: %s: trade %d has no id", ErrBadWire, id, k.at+1)
		}
	}
	if len(known) > 0 {
		t.ids.byVenue = known
	}
	t.ids.inOrder = t.ids.orderOf(len(ends))
	return t, nil
}

// AppendWire appends the wire form of p: its pairs and its body.
func (p *Pairs) AppendWire(dst []byte) []byte {
	dst = binary.AppendVarint(append(dst, wirePairs), p.readAt)
	dst = appendWirePairs(dst, p.list)
	dst = appendWireBytes(dst, p.body)
	dst = appendWirePairs(dst, p.incoming)
	return appendWireGzip(dst, p.gzipped)
}

func appendWirePairs(dst []byte, list []Pair) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(list)))
	for _, pair := range list {
		for _, s := range []string{pair.TickerID, pair.Base, pair.Target, pair.Kind, pair.Symbol} {
			dst = appendWireBytes(dst, []byte(s))
		}
	}
	return dst
}

// pairs reads what appendWirePairs wrote.
func (r *wireReader) pairs(what string) []Pair {
	n := r.int(what)
	if n > len(r.b) {
		r.fail("%d %s in %d bytes", n, what, len(r.b))
	}
	var list []Pair
	for i := 0; i < n && r.err == nil; i++ {
		list = append(list, Pair{
			TickerID: string(r.bytes("ticker_id")), Base: string(r.bytes("base")), Target: string(r.bytes("target")),
			Kind: string(r.bytes("kind")), Symbol: string(r.bytes("symbol")),
		})
	}
	return list
}

// DecodePairs returns the pair list whose wire form is data, with the
// sender's gzip form, or compressed as NewPairs compresses it. The value
// keeps none of data.
func DecodePairs(data []byte) (*Pairs, error) {
	r := wireReader{b: data}
	r.kind(wirePairs)
	readAt := r.varint("read time")
	list := r.pairs("pairs")
	body := r.bytes("body")
	incoming := r.pairs("incoming pairs")
	gz := r.gzip()
	if err := r.finish(); err != nil {
		return nil, err
	}
	for _, l := range [][]Pair{list, incoming} {
		for i, p := range l {
			if !ValidTickerID([]byte(p.TickerID)) || p.TickerID != p.Base+"_"+p.Target || p.Kind != KindSpot && p.Kind != KindPerp {
				return nil, fmt.Errorf("%w: pair %d is not a published pair: %+v", ErrBadWire, i+1, p)
			}
			if i > 0 && l[i-1].TickerID >= p.TickerID {
				return nil, fmt.Errorf("%w: pair %s is out of order", ErrBadWire, p.TickerID)
			}
		}
	}
	for _, p := range list {
		if !strings.Contains(string(body), `{"ticker_id":"`+p.TickerID+`",`) {
			return nil, fmt.Errorf("%w: the body does not list %s", ErrBadWire, p.TickerID)
		}
	}
	for _, p := range incoming {
		if _, listed := slices.BinarySearchFunc(list, p.TickerID, func(q Pair, id string) int { return strings.Compare(q.TickerID, id) }); listed {
			return nil, fmt.Errorf("%w: %s is both listed and incoming", ErrBadWire, p.TickerID)
		}
	}
	if len(body) < 2 || body[0] != '[' || body[len(body)-1] != ']' || strings.Count(string(body), `{"ticker_id":`) != len(list) {
		return nil, fmt.Errorf("%w: the body is not an array of the %d pairs", ErrBadWire, len(list))
	}
	body = slices.Clone(body)
	if gz == nil {
		gz = compress(body)
	}
	return &Pairs{list: list, incoming: incoming, body: body, gzipped: gz, tag: appendTag(nil, body),
		readAt: readAt, version: nextVersion()}, nil
}

// AppendWire appends the wire form of t.
func (t *Tickers) AppendWire(dst []byte) []byte {
	dst = binary.AppendVarint(append(dst, wireTickers), t.readAt)
	dst = binary.AppendUvarint(dst, uint64(t.count))
	dst = appendWireBytes(dst, t.body)
	return appendWireGzip(dst, t.later.gz.peek())
}

// DecodeTickers returns the tickers whose wire form is data, with the
// sender's gzip form, or compressed by the first request that takes it.
// The value keeps none of data.
func DecodeTickers(data []byte) (*Tickers, error) {
	r := wireReader{b: data}
	r.kind(wireTickers)
	readAt := r.varint("read time")
	count := r.int("count")
	body := r.bytes("body")
	gz := r.gzip()
	if err := r.finish(); err != nil {
		return nil, err
	}
	if len(body) < 2 || body[0] != '[' || body[len(body)-1] != ']' || strings.Count(string(body), `{"ticker_id":`) != count {
		return nil, fmt.Errorf("%w: the body is not an array of %d tickers", ErrBadWire, count)
	}
	return &Tickers{wireDocument(body, gz, count, readAt)}, nil
}
