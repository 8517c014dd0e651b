package snapshot

import (
	"bytes"
	"compress/gzip"
	"io"
	"sync"
	"testing"
	"time"
)

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("broken gzip: %v", err)
	}
	return out
}

// Each value's gzip form, decompressed by the standard library, is exactly
// its default body: a client that asks for gzip reads the same bytes.
func TestGzipFormsDecompressToTheDefaultBody(t *testing.T) {
	pairs := NewPairs([]Market{perp("BTC", "USDT"), perp("ETH", "USDT")}, PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, readAt)
	tickers, _ := NewTickers(pairs,
		[]Stat{{Symbol: "BTCUSDT", LastPrice: "1", High: "2", Low: "0.5", BaseVolume: "3", QuoteVolume: "3"}},
		[]Quote{{Symbol: "BTCUSDT", Bid: "1", Ask: "1.2"}}, readAt)
	book := mustBook(t, ladder(100, true), ladder(100, false))
	trades := mustTrades(t, tradeTape(100))
	for _, tc := range []struct {
		name       string
		gz, plain  []byte
		compresses bool
	}{
		{"pairs", pairs.Gzip(), pairs.Body(), false},
		{"tickers", tickers.Gzip(), tickers.Body(), false},
		{"book", book.Gzip(), book.Body(), true},
		{"trades", trades.Gzip(), trades.Body(SideAll), true},
	} {
		if got := gunzip(t, tc.gz); !bytes.Equal(got, tc.plain) {
			t.Errorf("%s: gzip form decompresses to %d bytes that differ from the %d-byte body", tc.name, len(got), len(tc.plain))
		}
		if tc.compresses && len(tc.gz)*2 > len(tc.plain) {
			t.Errorf("%s: gzip form is %d bytes for a %d-byte body: not worth serving", tc.name, len(tc.gz), len(tc.plain))
		}
	}
}

// A book's or trades' gzip form is built once per value, by the first
// caller, whoever calls after it and however many at once: each gets the
// same bytes, and a confirmed copy, which has the same body and tag, shares
// them instead of compressing again.
func TestBooksAndTradesCompressOncePerValue(t *testing.T) {
	book := mustBook(t, ladder(100, true), ladder(100, false))
	trades := mustTrades(t, tradeTape(100))
	forms := make(chan [2][]byte, 8)
	var wg sync.WaitGroup
	for range cap(forms) {
		wg.Go(func() { forms <- [2][]byte{book.Gzip(), trades.Gzip()} })
	}
	wg.Wait()
	close(forms)
	first := <-forms
	for f := range forms {
		if &f[0][0] != &first[0][0] || &f[1][0] != &first[1][0] {
			t.Fatal("concurrent first calls kept more than one gzip form")
		}
	}
	cb, ct := book.Confirmed(readAt.Add(time.Second)), trades.Confirmed(readAt.Add(time.Second))
	if &cb.Gzip()[0] != &first[0][0] || &ct.Gzip()[0] != &first[1][0] {
		t.Fatal("a confirmed copy compressed its body again")
	}
	if n := testing.AllocsPerRun(100, func() { book.Gzip(); trades.Gzip() }); n != 0 {
		t.Fatalf("a compressed value's gzip form costs %v allocations a call, want 0", n)
	}
}

func TestTagsAreDistinctPerValueAndQuotable(t *testing.T) {
	a := mustBook(t, ladder(3, true), ladder(3, false))
	b := mustBook(t, ladder(3, true), ladder(3, false))
	if bytes.Equal(a.Tag(), b.Tag()) {
		t.Fatalf("two reads share the tag %s", a.Tag())
	}
	for _, tag := range [][]byte{a.Tag(), b.Tag(), mustTrades(t, tradeTape(3)).Tag()} {
		for _, c := range tag {
			// An entity tag is a quoted string of visible characters other
			// than the quote itself; ours are hex, a dash and base 36.
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-') {
				t.Fatalf("tag %q has %q", tag, c)
			}
		}
	}
}

func TestUnchangedPairListKeepsItsTag(t *testing.T) {
	markets := []Market{perp("BTC", "USDT")}
	s := NewStore()
	first := NewPairs(markets, PairsConfig{Venue: "sim"}, readAt)
	s.PutPairs(first)
	same := NewPairs(markets, PairsConfig{Venue: "sim"}, readAt)
	s.PutPairs(same)
	if !bytes.Equal(s.Pairs().Tag(), first.Tag()) {
		t.Fatalf("tag changed from %s to %s for identical bytes", first.Tag(), s.Pairs().Tag())
	}
	changed := NewPairs(append(markets, perp("ETH", "USDT")), PairsConfig{Venue: "sim"}, readAt)
	s.PutPairs(changed)
	if bytes.Equal(s.Pairs().Tag(), first.Tag()) {
		t.Fatal("a changed pair list kept the old tag")
	}
}

func BenchmarkCompress(b *testing.B) {
	book := bookOrPanic(ladder(100, true), ladder(100, false))
	trades, err := NewTrades("BTC_USDT", tradeTape(100), readAt)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{{"book100", book.Body()}, {"trades100", trades.Body(SideAll)}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				compress(tc.body)
			}
		})
	}
}

func bookOrPanic(bids, asks []Level) *Book {
	b, err := NewBook("BTC_USDT", bookTime, bids, asks, readAt)
	if err != nil {
		panic(err)
	}
	return b
}
