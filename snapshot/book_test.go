package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"marketfeed/internal/golden"
)

const bookTime = 1767225600456 // the venue's clock for the fixture books

// ladder returns n levels one cent apart starting at 650.00, falling for bids
// and rising for asks, with sizes that differ per level so that a level taken
// from the wrong place shows.
func ladder(n int, falling bool) []Level {
	levels := make([]Level, n)
	for i := range levels {
		cents := 65000 + i + 1
		if falling {
			cents = 65000 - i
		}
		levels[i] = Level{Price: fmt.Sprintf("%d.%02d", cents/100, cents%100), Size: fmt.Sprintf("%d.5", i+1)}
	}
	return levels
}

func levelsJSON(levels []Level) [][]dec {
	out := make([][]dec, len(levels))
	for i, l := range levels {
		out[i] = []dec{dec(l.Price), dec(l.Size)}
	}
	return out
}

func equalLevels(a, b [][]dec) bool {
	return slices.EqualFunc(a, b, func(x, y []dec) bool { return slices.Equal(x, y) })
}

func mustBook(t *testing.T, bids, asks []Level) *Book {
	t.Helper()
	b, err := NewBook("BTC_USDT", bookTime, bids, asks, readAt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBookGolden(t *testing.T) {
	b := mustBook(t,
		[]Level{{"65000.0", "0.5"}, {"64999.9", "1.25"}, {"64990", "10"}},
		[]Level{{"65000.1", "0.001"}, {"65001.00", "3"}},
	)
	golden.Check(t, "book", b.Body())
	got := checkBook(t, b.Body())
	if got.TickerID != "BTC_USDT" || got.Timestamp != bookTime {
		t.Errorf("ticker_id %s timestamp %d, want BTC_USDT %d (the venue's clock)", got.TickerID, got.Timestamp, bookTime)
	}
}

func TestBookParts(t *testing.T) {
	// 120 levels given per side: 100 are kept.
	bids, asks := ladder(120, true), ladder(120, false)
	b := mustBook(t, bids, asks)
	for _, c := range []struct{ depth, want int }{
		{1, 1}, {5, 5}, {99, 99}, {100, 100},
		{0, 100}, {-1, 100}, {101, 100}, {1 << 40, 100},
	} {
		head, middle, tail := b.Parts(c.depth)
		got := checkBook(t, concat(head, middle, tail))
		if got.TickerID != "BTC_USDT" || got.Timestamp != bookTime {
			t.Errorf("depth %d: ticker_id %s timestamp %d", c.depth, got.TickerID, got.Timestamp)
		}
		if !equalLevels(got.Bids, levelsJSON(bids[:c.want])) {
			t.Errorf("depth %d: bids are not the first %d levels: %v", c.depth, c.want, got.Bids)
		}
		if !equalLevels(got.Asks, levelsJSON(asks[:c.want])) {
			t.Errorf("depth %d: asks are not the first %d levels: %v", c.depth, c.want, got.Asks)
		}
	}
}

func TestBookPartsDeeperThanHeld(t *testing.T) {
	// Fewer bids than asks, and a depth between the two.
	bids, asks := ladder(3, true), ladder(7, false)
	b := mustBook(t, bids, asks)
	for _, c := range []struct{ depth, bids, asks int }{{1, 1, 1}, {3, 3, 3}, {5, 3, 5}, {7, 3, 7}, {100, 3, 7}, {0, 3, 7}} {
		head, middle, tail := b.Parts(c.depth)
		got := checkBook(t, concat(head, middle, tail))
		if !equalLevels(got.Bids, levelsJSON(bids[:c.bids])) || !equalLevels(got.Asks, levelsJSON(asks[:c.asks])) {
			t.Errorf("depth %d: %d bids %d asks, want %d and %d", c.depth, len(got.Bids), len(got.Asks), c.bids, c.asks)
		}
	}
}

func TestBookPartsFullDepthIsBody(t *testing.T) {
	for _, n := range []int{0, 1, 3, 100, 150} {
		b := mustBook(t, ladder(n, true), ladder(n/2, false))
		for _, depth := range []int{0, MaxDepth} {
			head, middle, tail := b.Parts(depth)
			if got := concat(head, middle, tail); !bytes.Equal(got, b.Body()) {
				t.Errorf("%d levels, depth %d: parts\n%s\ndiffer from body\n%s", n, depth, got, b.Body())
			}
		}
	}
}

func TestBookPartsShareBody(t *testing.T) {
	// The server writes the parts with zero copy; they must be views of the
	// immutable body, not copies.
	b := mustBook(t, ladder(10, true), ladder(10, false))
	head, _, tail := b.Parts(3)
	body := b.Body()
	if &head[0] != &body[0] || &tail[len(tail)-1] != &body[len(body)-1] {
		t.Error("Parts copied the body")
	}
}

func TestBookKeepsMaxDepth(t *testing.T) {
	bids, asks := ladder(250, true), ladder(101, false)
	b := mustBook(t, bids, asks)
	if nb, na := b.Levels(); nb != MaxDepth || na != MaxDepth {
		t.Fatalf("Levels() = %d, %d; want %d each", nb, na, MaxDepth)
	}
	got := checkBook(t, b.Body())
	if !equalLevels(got.Bids, levelsJSON(bids[:MaxDepth])) || !equalLevels(got.Asks, levelsJSON(asks[:MaxDepth])) {
		t.Error("the body does not hold the best 100 levels of each side")
	}
}

func TestBookEmptySides(t *testing.T) {
	for _, c := range []struct {
		name       string
		bids, asks []Level
		want       string
	}{
		{"both", nil, nil, `{"ticker_id":"BTC_USDT","timestamp":1767225600456,"bids":[],"asks":[]}`},
		{"bids", nil, []Level{{"1", "2"}}, `{"ticker_id":"BTC_USDT","timestamp":1767225600456,"bids":[],"asks":[["1","2"]]}`},
		{"asks", []Level{{"1", "2"}}, []Level{}, `{"ticker_id":"BTC_USDT","timestamp":1767225600456,"bids":[["1","2"]],"asks":[]}`},
	} {
		b := mustBook(t, c.bids, c.asks)
		if string(b.Body()) != c.want {
			t.Errorf("%s empty: body %s, want %s", c.name, b.Body(), c.want)
		}
		head, middle, tail := b.Parts(5)
		if got := concat(head, middle, tail); string(got) != c.want {
			t.Errorf("%s empty: parts %s, want %s", c.name, got, c.want)
		}
	}
}

func TestBookOrderAcrossSpellings(t *testing.T) {
	// Order is by value, whatever the number of digits or leading zeros.
	ok := []struct{ bids, asks []string }{
		{[]string{"100", "99.99", "9.5", "0.001"}, []string{"0.001", "0.0011", "0.01", "1", "10", "0100.5"}},
		{[]string{"010", "9.9999999999"}, []string{"9.99999999991", "10.0000000001"}},
	}
	for _, c := range ok {
		if _, err := NewBook("BTC_USDT", bookTime, priced(c.bids), priced(c.asks), readAt); err != nil {
			t.Errorf("bids %v asks %v: %v", c.bids, c.asks, err)
		}
	}
}

func priced(prices []string) []Level {
	out := make([]Level, len(prices))
	for i, p := range prices {
		out[i] = Level{Price: p, Size: "1"}
	}
	return out
}

func TestBookRejects(t *testing.T) {
	good := []Level{{"100", "1"}, {"99", "1"}}
	goodAsks := []Level{{"101", "1"}, {"102", "1"}}
	for _, c := range []struct {
		name       string
		bids, asks []Level
	}{
		{"zero bid price", []Level{{"0", "1"}}, goodAsks},
		{"negative bid price", []Level{{"-100", "1"}}, goodAsks},
		{"exponent bid price", []Level{{"1e2", "1"}}, goodAsks},
		{"empty bid price", []Level{{"", "1"}}, goodAsks},
		{"garbage ask price", good, []Level{{"abc", "1"}}},
		{"NaN ask price", good, []Level{{"NaN", "1"}}},
		{"zero bid size", []Level{{"100", "0.000"}}, goodAsks},
		{"negative ask size", good, []Level{{"101", "-1"}}},
		{"quoted ask size", good, []Level{{"101", `"1"`}}},
		{"bids rising", []Level{{"99", "1"}, {"100", "1"}}, goodAsks},
		{"bids equal", []Level{{"100.10", "1"}, {"100.1", "1"}}, goodAsks},
		{"asks falling", good, []Level{{"102", "1"}, {"101", "1"}}},
		{"asks equal", good, []Level{{"1.0", "1"}, {"1", "1"}}},
		{"bad level deep in the book", ladder(50, true), append(ladder(49, false), Level{"1", "1"})},
	} {
		b, err := NewBook("BTC_USDT", bookTime, c.bids, c.asks, readAt)
		if !errors.Is(err, ErrBadBook) || b != nil {
			t.Errorf("%s: NewBook = %v, %v; want ErrBadBook", c.name, b, err)
		}
	}
}

func TestBookAccessors(t *testing.T) {
	b := mustBook(t, ladder(2, true), ladder(3, false))
	if b.TickerID() != "BTC_USDT" || b.Time() != bookTime || b.ReadAt() != readAt.UnixNano() {
		t.Errorf("TickerID %s Time %d ReadAt %d", b.TickerID(), b.Time(), b.ReadAt())
	}
	if nb, na := b.Levels(); nb != 2 || na != 3 {
		t.Errorf("Levels() = %d, %d; want 2, 3", nb, na)
	}
	if got, want := b.String(), "BTC_USDT book @1767225600456"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// A local book's top is published without its levels checked again: the
// same bytes and parts as the checked constructor gives.
func TestCheckedBookIsTheSameBook(t *testing.T) {
	bids, asks := ladder(250, true), ladder(101, false)
	want := mustBook(t, bids, asks)
	got := NewCheckedBook("BTC_USDT", bookTime, 0, bids, asks, readAt)
	if !bytes.Equal(got.Body(), want.Body()) {
		t.Fatalf("body\n%s\nwant\n%s", got.Body(), want.Body())
	}
	for _, depth := range []int{1, 5, 20, MaxDepth} {
		gh, gm, gt := got.Parts(depth)
		wh, wm, wt := want.Parts(depth)
		if !bytes.Equal(gh, wh) || !bytes.Equal(gm, wm) || !bytes.Equal(gt, wt) {
			t.Fatalf("depth %d: parts differ", depth)
		}
	}
}

// What checking a local book's 100 levels a side again would cost each
// publication (compare the two: go test -run XXX -bench Book/ ./snapshot).
func BenchmarkBook(b *testing.B) {
	bids, asks := ladder(MaxDepth, true), ladder(MaxDepth, false)
	b.Run("checked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = NewBook("BTC_USDT", bookTime, bids, asks, readAt)
		}
	})
	b.Run("vouched", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewCheckedBook("BTC_USDT", bookTime, 0, bids, asks, readAt)
		}
	})
	// A stream-fed book's publication, every listed book's about three
	// times a second.
	b.Run("local", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewLocalBook("BTC_USDT", bookTime, 0, bids, asks, Open{}, readAt)
		}
	})
}

// A book serves a depth when each side holds that many levels or is closed
// (the venue's whole side): an open side of 40 levels serves depth 40 and
// not 41, whatever the other side holds; depth 0 or past MaxDepth means
// MaxDepth, and a side of MaxDepth levels serves every depth.
func TestBookServesOnlyTheDepthItsOpenSidesHold(t *testing.T) {
	for _, c := range []struct {
		name        string
		bids, asks  int
		open        Open
		serves, not []int
	}{
		{"closed and thin", 40, 3, Open{}, []int{1, 40, 100, 0, 500}, nil},
		{"open bids", 40, 100, Open{Bids: true}, []int{1, 40}, []int{41, 100, 0, 500}},
		{"open asks", 100, 40, Open{Asks: true}, []int{40}, []int{41, 0}},
		{"both open, shorter asks", 70, 40, Open{Bids: true, Asks: true}, []int{40}, []int{41, 70}},
		{"open but full", 100, 100, Open{Bids: true, Asks: true}, []int{1, 100, 0, 500}, nil},
		{"open and empty", 0, 100, Open{Bids: true}, nil, []int{1, 100}},
	} {
		b := NewLocalBook("BTC_USDT", bookTime, 1, ladder(c.bids, true), ladder(c.asks, false), c.open, readAt)
		for _, d := range c.serves {
			if !b.Serves(d) {
				t.Errorf("%s: does not serve depth %d", c.name, d)
			}
		}
		for _, d := range c.not {
			if b.Serves(d) {
				t.Errorf("%s: serves depth %d", c.name, d)
			}
		}
		if c.open != b.Open() || c.open != b.Confirmed(time.Unix(2e9, 0)).Open() {
			t.Errorf("%s: open %+v, confirmed copy %+v; want %+v", c.name, b.Open(), b.Confirmed(time.Unix(2e9, 0)).Open(), c.open)
		}
	}
}
