package snapshot

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// The responses a receiver must serve as the sender does: every body and
// part a request can ask of a value, its tag, and its wire form again.

func bookResponses(b *Book) [][]byte {
	out := [][]byte{b.Body(), b.Tag(), []byte(b.String()), b.AppendWire(nil)}
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
	return out
}

func tickersResponses(tk *Tickers) [][]byte {
	return [][]byte{tk.Body(), tk.Tag(), tk.Gzip(), tk.AppendWire(nil)}
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
	decodeBook    = decodeTo(DecodeBook, bookResponses)
	decodeTrades  = decodeTo(DecodeTrades, tradesResponses)
	decodePairs   = decodeTo(DecodePairs, pairsResponses)
	decodeTickers = decodeTo(DecodeTickers, tickersResponses)
)

func wireCases(t testing.TB) []wireCase {
	var cases []wireCase
	for _, n := range [][2]int{{120, 120}, {3, 0}, {0, 4}, {0, 0}} {
		b, err := NewBook("BTC_USDT", bookTime, ladder(n[0], true), ladder(n[1], false), readAt)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, wireCase{"book", b.AppendWire(nil), bookResponses(b), decodeBook})
	}
	for _, n := range []int{100, 3, 0} {
		tr, err := NewTrades("BTC_USDT", tradeTape(n), readAt)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, wireCase{"trades", tr.AppendWire(nil), tradesResponses(tr), decodeTrades})
	}
	for _, p := range []*Pairs{pairsOf("BTC_USDT", "ETH_USDT", "SOL_USDT"), pairsOf(), tickerPairs()} {
		cases = append(cases, wireCase{"pairs", p.AppendWire(nil), pairsResponses(p), decodePairs})
	}
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	return append(cases, wireCase{"tickers", tk.AppendWire(nil), tickersResponses(tk), decodeTickers})
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
	decoders := []func([]byte) ([][]byte, error){decodeBook, decodeTrades, decodePairs, decodeTickers}
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
