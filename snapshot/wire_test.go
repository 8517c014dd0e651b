package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// lookalikeTape is n trades with venue ids from first on, every third one a
// lookalike of the one before (same time, side, price and size), as a
// venue's aggregate trades can be.
func lookalikeTape(n int, first int64) []Trade {
	out := tradeTape(n)
	for i := range out {
		out[i].ID = first + int64(i)
		if i%3 == 1 {
			out[i].Time, out[i].Price, out[i].Size, out[i].Sell, out[i].QuoteQty =
				out[i-1].Time, out[i-1].Price, out[i-1].Size, out[i-1].Sell, out[i-1].QuoteQty
		}
	}
	return out
}

// A book's wire form carries the update id its levels are current at, and
// the levels read back are the ones it was built from: what a local book
// in another process starts from.
func TestDecodedBookGivesBackItsLevelsAndUpdateID(t *testing.T) {
	for _, n := range [][2]int{{100, 100}, {3, 0}, {0, 4}, {0, 0}} {
		bids, asks := ladder(n[0], true), ladder(n[1], false)
		b := NewCheckedBook("BTC_USDT", bookTime, 123456789, bids, asks, readAt)
		got, err := DecodeBook(b.AppendWire(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq() != 123456789 {
			t.Errorf("%v levels: update id %d, want 123456789", n, got.Seq())
		}
		gotBids, gotAsks := got.Sides()
		if !slices.Equal(gotBids, bids) || !slices.Equal(gotAsks, asks) {
			t.Errorf("%v levels: sides read back as %v / %v, want %v / %v", n, gotBids, gotAsks, bids, asks)
		}
	}
}

// A book's wire form says which sides are open, so that a member serves a
// book to the depths the leader would, and reads it deeper where the
// leader would; a form without the bits, or with bits no version writes,
// is refused.
func TestDecodedBookKeepsItsOpenSides(t *testing.T) {
	for _, open := range []Open{{}, {Bids: true}, {Asks: true}, {Bids: true, Asks: true}} {
		b := NewLocalBook("BTC_USDT", bookTime, 7, ladder(40, true), ladder(60, false), open, readAt)
		got, err := DecodeBook(b.AppendWire(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got.Open() != open {
			t.Errorf("open %+v decoded as %+v", open, got.Open())
		}
		for _, depth := range []int{40, 41, 60, 100} {
			if got.Serves(depth) != b.Serves(depth) {
				t.Errorf("open %+v: decoded book serves %d: %v, the sender's %v", open, depth, got.Serves(depth), b.Serves(depth))
			}
		}
	}
	b := NewLocalBook("BTC_USDT", bookTime, 7, ladder(40, true), ladder(60, false), Open{Bids: true, Asks: true}, readAt)
	wire := b.AppendWire(nil)
	if _, err := DecodeBook(wire[:len(wire)-1]); !errors.Is(err, ErrBadWire) {
		t.Errorf("a form without the open bits: %v, want ErrBadWire", err)
	}
	wire[len(wire)-1] = 4
	if _, err := DecodeBook(wire); !errors.Is(err, ErrBadWire) {
		t.Errorf("open bits 0x4: %v, want ErrBadWire", err)
	}
}

// Trades decoded from their wire form give back the venue's trades, and a
// later read of the venue built on them gets the ids, lookalikes included,
// and the bytes the sender's own next value gets: a process that takes over
// reading the venue goes on numbering the trades as the one before it.
func TestDecodedTradesNumberALaterReadAsTheSender(t *testing.T) {
	tape := lookalikeTape(130, 5000)
	first, err := NewTrades("BTC_USDT", tape[:100], readAt)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeTrades(first.AppendWire(nil))
	if err != nil {
		t.Fatal(err)
	}
	back, err := decoded.VenueTrades()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(tape[:100])
	for i := range want {
		if want[i].QuoteQty == "" {
			want[i].QuoteQty, _ = Product(want[i].Price, want[i].Size)
		}
	}
	if !slices.Equal(back, want) {
		t.Fatalf("trades read back:\n%+v\nwant\n%+v", back[:3], want[:3])
	}
	next := tape[19:119] // trade 19 is a lookalike of 18, which leaves the window
	a, err := NewTradesAfter(first, "BTC_USDT", next, readAt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTradesAfter(decoded, "BTC_USDT", next, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.all.body, b.all.body) {
		t.Fatalf("the read after the decoded value:\n%s\nafter the sender's:\n%s", b.all.body, a.all.body)
	}
	// Without the decoded value the lookalikes that left the window
	// would number their repeats again: the bytes differ.
	c, err := NewTradesAfter(nil, "BTC_USDT", next, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.all.body, c.all.body) {
		t.Fatal("the tape has no lookalike whose number depends on the value before: the test proves nothing")
	}
}

// The responses a receiver must serve as the sender does: every body and
// part a request can ask of a value, its tag, and its wire form again.

func bookResponses(b *Book) [][]byte {
	out := [][]byte{b.Body(), b.Tag(), []byte(b.String()), b.AppendWire(nil), []byte(strconv.FormatInt(b.Seq(), 10))}
	for depth := range MaxDepth + 2 {
		head, middle, tail := b.Parts(depth)
		out = append(out, head, middle, tail)
	}
	return out
}

func tradesResponses(tr *Trades) [][]byte {
	out := [][]byte{tr.Tag(), tr.AppendWire(nil)}
	for _, side := range []Side{SideAll, SideBuy, SideSell} {
		for limit := range MaxTrades + 2 {
			head, tail := tr.Parts(side, limit)
			out = append(out, head, tail)
		}
	}
	return out
}

func pairsResponses(p *Pairs) [][]byte {
	out := [][]byte{p.Body(), p.Tag(), p.Gzip(), p.AppendWire(nil)}
	for _, pair := range p.List() {
		out = append(out, []byte(pair.TickerID+" "+pair.Base+" "+pair.Target+" "+pair.Kind+" "+pair.Symbol))
	}
	for _, pair := range p.Incoming() {
		out = append(out, []byte("incoming "+pair.TickerID+" "+pair.Base+" "+pair.Target+" "+pair.Kind+" "+pair.Symbol))
	}
	return out
}

func tickersResponses(tk *Tickers) [][]byte {
	return [][]byte{tk.Body(), tk.Tag(), tk.Gzip(), tk.AppendWire(nil)}
}

func contractsResponses(c *Contracts) [][]byte {
	return [][]byte{c.Body(), c.Tag(), c.Gzip(), c.Specs().Body(), c.Specs().Tag(), c.Specs().Gzip(), c.AppendWire(nil)}
}

// decodeTo decodes a wire form and returns the value's responses.
func decodeTo[V any](decode func([]byte) (V, error), responses func(V) [][]byte) func([]byte) ([][]byte, error) {
	return func(data []byte) ([][]byte, error) {
		v, err := decode(data)
		if err != nil {
			return nil, err
		}
		return responses(v), nil
	}
}

type wireCase struct {
	name   string
	wire   []byte
	want   [][]byte
	decode func([]byte) ([][]byte, error)
}

var (
	decodeBook      = decodeTo(DecodeBook, bookResponses)
	decodeTrades    = decodeTo(DecodeTrades, tradesResponses)
	decodePairs     = decodeTo(DecodePairs, pairsResponses)
	decodeTickers   = decodeTo(DecodeTickers, tickersResponses)
	decodeContracts = decodeTo(DecodeContracts, contractsResponses)
)

func wireCases(t testing.TB) []wireCase {
	var cases []wireCase
	for _, n := range [][2]int{{120, 120}, {3, 0}, {0, 4}, {0, 0}} {
		b := NewCheckedBook("BTC_USDT", bookTime, int64(n[0])<<40+7, ladder(min(n[0], MaxDepth), true), ladder(min(n[1], MaxDepth), false), readAt)
		cases = append(cases, wireCase{"book", b.AppendWire(nil), bookResponses(b), decodeBook})
	}
	for _, tape := range [][]Trade{tradeTape(100), tradeTape(3), tradeTape(0), lookalikeTape(100, 1000), lookalikeTape(7, 5)} {
		tr, err := NewTrades("BTC_USDT", tape, readAt)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, wireCase{"trades", tr.AppendWire(nil), tradesResponses(tr), decodeTrades})
	}
	incoming := pairsHolding(map[string]bool{"ETH_USDT": true, "SOL_USDT": true}, "BTC_USDT", "ETH_USDT", "SOL_USDT")
	for _, p := range []*Pairs{pairsOf("BTC_USDT", "ETH_USDT", "SOL_USDT"), pairsOf(), tickerPairs(), incoming} {
		cases = append(cases, wireCase{"pairs", p.AppendWire(nil), pairsResponses(p), decodePairs})
	}
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	cases = append(cases, wireCase{"tickers", tk.AppendWire(nil), tickersResponses(tk), decodeTickers})
	for _, p := range []*Pairs{contractPairs(), pairsOf()} {
		c, _ := NewContracts(p, contractInput())
		cases = append(cases, wireCase{"contracts", c.AppendWire(nil), contractsResponses(c), decodeContracts})
	}
	return cases
}

// A value decoded from its wire form answers every request with the bytes
// and the tag of the value it was encoded from, and encodes to the same form.
func TestWireFormServesTheSameBytes(t *testing.T) {
	for _, c := range wireCases(t) {
		got, err := c.decode(c.wire)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d responses, the original has %d", c.name, len(got), len(c.want))
		}
		for i := range got {
			if !bytes.Equal(got[i], c.want[i]) {
				t.Fatalf("%s: response %d is %q, the original's %q", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// A value cut short anywhere, or with anything after it, is refused, and
// never panics.
func TestWireFormCutShortIsRefused(t *testing.T) {
	for _, c := range wireCases(t) {
		for n := range len(c.wire) {
			if _, err := c.decode(c.wire[:n]); !errors.Is(err, ErrBadWire) {
				t.Fatalf("%s cut to %d of %d bytes: %v, want ErrBadWire", c.name, n, len(c.wire), err)
			}
		}
		if _, err := c.decode(append(bytes.Clone(c.wire), 0)); !errors.Is(err, ErrBadWire) {
			t.Fatalf("%s with a byte after it: %v, want ErrBadWire", c.name, err)
		}
	}
}

// A form of one kind is not taken for another, and a book whose body
// belongs to another pair is refused.
func TestWireFormOfAnotherKindIsRefused(t *testing.T) {
	cases := wireCases(t)
	for _, c := range cases {
		for _, other := range cases {
			if other.name == c.name {
				continue
			}
			if _, err := other.decode(c.wire); err == nil {
				t.Errorf("a %s's form decodes as a %s", c.name, other.name)
			}
		}
	}
	b := mustBook(t, ladder(3, true), ladder(3, false))
	wire := b.AppendWire(nil)
	wire = bytes.Replace(wire, []byte("BTC_USDT"), []byte("ETH_USDT"), 1) // the id, not the body's
	if _, err := DecodeBook(wire); !errors.Is(err, ErrBadWire) {
		t.Fatalf("a book named for another pair's id: %v, want ErrBadWire", err)
	}
}

// Whatever a form's bytes are damaged to, a decoder refuses it or returns
// a value that serves every request without panicking and encodes to a
// form that decodes again. The damage is random from a fixed seed, so a
// failure repeats.
func TestWireFormDamagedIsRefusedOrServes(t *testing.T) {
	decoders := []func([]byte) ([][]byte, error){decodeBook, decodeTrades, decodePairs, decodeTickers, decodeContracts}
	cases := wireCases(t)
	rng := rand.New(rand.NewPCG(1, 2))
	decoded := 0
	for range 20000 {
		data := bytes.Clone(cases[rng.IntN(len(cases))].wire)
		for range 1 + rng.IntN(3) {
			if len(data) > 0 {
				data[rng.IntN(len(data))] = byte(rng.IntN(256))
			}
		}
		decode := decoders[rng.IntN(len(decoders))]
		got, err := decode(data)
		if err != nil {
			if !errors.Is(err, ErrBadWire) {
				t.Fatalf("error %v does not wrap ErrBadWire", err)
			}
			continue
		}
		decoded++
		var again [][]byte
		for _, r := range got { // the value's own form is among its responses
			if again, err = decode(r); err == nil {
				break
			}
		}
		if err != nil || len(again) != len(got) {
			t.Fatalf("a decoded value's own form does not decode: %v", err)
		}
	}
	if decoded == 0 {
		t.Fatal("no damaged form decoded: the damage never left a value's bytes intact")
	}
}

// A value's form ends with its gzip form, which the receiver serves as it
// is, compressing nothing: here a sender's gzip at another level than this
// process's, which only adoption gives back. An empty gzip field (a form of
// the version before) has the receiver compress as a process alone does;
// a field that is not a gzip member is refused.
func TestWireFormCarriesTheSendersGzip(t *testing.T) {
	b := mustBook(t, ladder(20, true), ladder(20, false))
	gz := b.Gzip()
	theirs := gzipAt(t, b.Body(), 9)
	if bytes.Equal(theirs, gz) {
		t.Fatal("the test needs a gzip form other than this process's")
	}
	wire := b.AppendWire(nil)
	wire = wire[:len(wire)-1] // the open sides' bits, after the gzip form
	head := wire[:len(wire)-len(gz)-len(binary.AppendUvarint(nil, uint64(len(gz))))]
	withGzip := func(g []byte) []byte { return append(appendWireGzip(bytes.Clone(head), g), 0) }

	got, err := DecodeBook(withGzip(theirs))
	if err != nil || !bytes.Equal(got.Gzip(), theirs) {
		t.Fatalf("decoded %v: serves %d gzip bytes, want the sender's %d", err, len(got.Gzip()), len(theirs))
	}
	if got, err = DecodeBook(withGzip(nil)); err != nil || !bytes.Equal(got.Gzip(), gz) {
		t.Fatalf("decoded without a gzip form: %v; want it compressed here", err)
	}
	if _, err = DecodeBook(withGzip([]byte("not gzip at all, but long enough"))); !errors.Is(err, ErrBadWire) {
		t.Fatalf("a gzip field that is not gzip: %v, want ErrBadWire", err)
	}

	tr, err := NewTrades("BTC_USDT", tradeTape(10), readAt)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		gz     func() []byte
		decode func([]byte) ([]byte, error)
		wire   []byte
	}{
		"trades": {tr.Gzip, func(w []byte) ([]byte, error) { v, err := DecodeTrades(w); return gzipOf(v, err) }, tr.AppendWire(nil)},
		"pairs": {pairsOf("BTC_USDT").Gzip, func(w []byte) ([]byte, error) { v, err := DecodePairs(w); return gzipOf(v, err) },
			pairsOf("BTC_USDT").AppendWire(nil)},
	} {
		g, err := c.decode(c.wire)
		if err != nil || !bytes.Equal(g, c.gz()) {
			t.Errorf("%s: decoded %v, its gzip form differs from the sender's", name, err)
		}
	}
}

func gzipOf[V interface{ Gzip() []byte }](v V, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return v.Gzip(), nil
}

// gzipAt compresses body at level.
func gzipAt(t *testing.T, body []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(body)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A book, a trade list, the tickers, the contracts and their specs carry
// their gzip form in their wire form only once a request has compressed
// it: neither a process nor a cluster's leader compresses every value it
// builds (/contracts is built every second), and the member that receives
// one without it compresses what its own requests read, to the same bytes.
func TestWireFormCarriesOnlyAGzipARequestTook(t *testing.T) {
	b := mustBook(t, ladder(20, true), ladder(20, false))
	tr, err := NewTrades("BTC_USDT", tradeTape(10), readAt)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	c, _ := NewContracts(contractPairs(), contractInput())
	cs, _ := NewContracts(contractPairs(), contractInput())
	for name, v := range map[string]struct {
		wire   func() []byte
		gzip   func() []byte
		decode func([]byte) ([]byte, error)
	}{
		"book": {func() []byte { return b.AppendWire(nil) }, b.Gzip,
			func(w []byte) ([]byte, error) { v, err := DecodeBook(w); return gzipOf(v, err) }},
		"trades": {func() []byte { return tr.AppendWire(nil) }, tr.Gzip,
			func(w []byte) ([]byte, error) { v, err := DecodeTrades(w); return gzipOf(v, err) }},
		"tickers": {func() []byte { return tk.AppendWire(nil) }, tk.Gzip,
			func(w []byte) ([]byte, error) { v, err := DecodeTickers(w); return gzipOf(v, err) }},
		"contracts": {func() []byte { return c.AppendWire(nil) }, c.Gzip,
			func(w []byte) ([]byte, error) { v, err := DecodeContracts(w); return gzipOf(v, err) }},
		"contract specs": {func() []byte { return cs.AppendWire(nil) }, cs.Specs().Gzip,
			func(w []byte) ([]byte, error) {
				v, err := DecodeContracts(w)
				if err != nil {
					return nil, err
				}
				return v.Specs().Gzip(), nil
			}},
	} {
		cold := v.wire()
		gz := v.gzip()
		warm := v.wire()
		if want := len(cold) + len(gz) + len(binary.AppendUvarint(nil, uint64(len(gz)))) - 1; len(warm) != want {
			t.Errorf("%s: %d bytes once compressed, %d before; want the gzip form's %d more", name, len(warm), len(cold), len(gz))
		}
		for form, wire := range map[string][]byte{"before a request": cold, "after": warm} {
			got, err := v.decode(wire)
			if err != nil || !bytes.Equal(got, gz) {
				t.Errorf("%s put %s: received and served %d gzip bytes (%v), want the sender's %d", name, form, len(got), err, len(gz))
			}
		}
	}
}
