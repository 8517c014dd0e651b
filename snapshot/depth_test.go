package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// A depth keeps DepthLevels levels a side, and decodes from its wire form
// to the same levels, update id and times, and the same form.
func TestDepthRoundTrip(t *testing.T) {
	d := NewDepth("BTC_USDT", bookTime, 77, ladder(DepthLevels+100, true), ladder(DepthLevels+50, false), readAt)
	got, err := DecodeDepth(d.AppendWire(nil))
	if err != nil {
		t.Fatal(err)
	}
	bids, asks := got.Sides()
	if !slices.Equal(bids, ladder(DepthLevels, true)) || !slices.Equal(asks, ladder(DepthLevels, false)) {
		t.Fatalf("decoded %d bids and %d asks, want the first %d of each side", len(bids), len(asks), DepthLevels)
	}
	if got.TickerID() != "BTC_USDT" || got.Seq() != 77 || got.Time() != bookTime || got.ReadAt() != readAt.UnixNano() {
		t.Fatalf("decoded %s at update id %d, time %d, read at %d", got.TickerID(), got.Seq(), got.Time(), got.ReadAt())
	}
	if !bytes.Equal(got.AppendWire(nil), d.AppendWire(nil)) {
		t.Fatal("the decoded depth encodes to another form")
	}
	one := NewDepth("BTC_USDT", bookTime, 1, ladder(1, true), nil, readAt)
	if bids, asks := one.Sides(); len(bids) != 1 || len(asks) != 0 {
		t.Fatalf("a depth of one bid gives back %v and %v", bids, asks)
	}
}

// A depth cut short, with a byte after it, of another kind, with a level
// that is not a positive decimal or out of order, with more levels than
// DepthLevels, or without an update id, is refused.
func TestDepthBadWireIsRefused(t *testing.T) {
	good := NewDepth("BTC_USDT", bookTime, 9, ladder(3, true), ladder(2, false), readAt).AppendWire(nil)
	for n := range len(good) {
		if _, err := DecodeDepth(good[:n]); !errors.Is(err, ErrBadWire) {
			t.Fatalf("cut to %d of %d bytes: %v, want ErrBadWire", n, len(good), err)
		}
	}
	// form builds a depth's wire form as a sender would, levels unchecked.
	form := func(id string, seq int64, nBids, nAsks int, levels ...string) []byte {
		w := appendWireBytes([]byte{wireDepth}, []byte(id))
		w = binary.AppendVarint(w, bookTime)
		w = binary.AppendVarint(w, seq)
		w = binary.AppendVarint(w, readAt.UnixNano())
		w = binary.AppendUvarint(w, uint64(nBids))
		w = binary.AppendUvarint(w, uint64(nAsks))
		for _, s := range levels {
			w = appendWireBytes(w, []byte(s))
		}
		return w
	}
	if _, err := DecodeDepth(form("BTC_USDT", 9, 1, 1, "2", "1", "3", "1")); err != nil {
		t.Fatalf("a well-formed depth: %v", err)
	}
	for name, wire := range map[string][]byte{
		"a byte after it":  append(bytes.Clone(good), 0),
		"a book's form":    NewCheckedBook("BTC_USDT", bookTime, 9, ladder(3, true), ladder(2, false), readAt).AppendWire(nil),
		"bids rising":      form("BTC_USDT", 9, 2, 0, "2", "1", "3", "1"),
		"asks falling":     form("BTC_USDT", 9, 0, 2, "3", "1", "2", "1"),
		"a price repeated": form("BTC_USDT", 9, 2, 0, "2", "1", "2", "1"),
		"a zero size":      form("BTC_USDT", 9, 1, 0, "2", "0"),
		"a price in e":     form("BTC_USDT", 9, 1, 0, "2e3", "1"),
		"a negative size":  form("BTC_USDT", 9, 1, 0, "2", "-1"),
		"too many levels":  form("BTC_USDT", 9, DepthLevels+1, 0),
		"no update id":     form("BTC_USDT", 0, 1, 1, "2", "1", "3", "1"),
		"a bad ticker_id":  form("BTC-USDT", 9, 1, 1, "2", "1", "3", "1"),
	} {
		if _, err := DecodeDepth(wire); !errors.Is(err, ErrBadWire) {
			t.Errorf("%s: %v, want ErrBadWire", name, err)
		}
	}
	if _, err := DecodeBook(good); err == nil {
		t.Error("a depth's form decodes as a book")
	}
	book := NewCheckedBook("BTC_USDT", bookTime, 9, ladder(3, true), ladder(2, false), readAt).AppendWire(nil)
	if _, err := DecodeDepth(book); err == nil || !strings.Contains(err.Error(), "not the form of a depth") {
		t.Errorf("a book's form decoded as a depth: %v, want the error to say it is not a depth's form", err)
	}
}

// The store keeps a listed pair's depth and hands it on, but not an older
// one than it holds, nor one of a pair it does not list; a pair listed
// anew starts with none.
func TestStorePutDepth(t *testing.T) {
	s := NewStore()
	var handed []int64
	s.OnPublish(func(v Published) {
		if d, ok := v.(*Depth); ok {
			handed = append(handed, d.Seq())
		}
	})
	depth := func(id string, seq int64) *Depth {
		return NewDepth(id, bookTime, seq, ladder(2, true), ladder(2, false), readAt)
	}
	if s.PutDepth(depth("BTC_USDT", 5)) || s.Depth([]byte("BTC_USDT")) != nil {
		t.Fatal("a depth kept before any pair list")
	}
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	if s.PutDepth(depth("ETH_USDT", 5)) {
		t.Fatal("an unlisted pair's depth kept")
	}
	for _, seq := range []int64{5, 4, 8} {
		s.PutDepth(depth("BTC_USDT", seq))
	}
	if d := s.Depth([]byte("BTC_USDT")); d == nil || d.Seq() != 8 || !slices.Equal(handed, []int64{5, 8}) {
		t.Fatalf("kept %v, handed on %v; want 8, after 5 and 8 but not the older 4", d, handed)
	}
	s.PutDoc(pairsOf(), readAt)
	s.PutDoc(pairsOf("BTC_USDT"), readAt.Add(2*CacheMaxAge))
	if d := s.Depth([]byte("BTC_USDT")); d != nil {
		t.Fatalf("a pair listed anew holds the depth of update id %d from before", d.Seq())
	}
}
