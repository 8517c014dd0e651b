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

// A book's or trades' gzip form and tag are each built once per value, by
// the first caller, whoever calls after it and however many at once: each
// gets the same bytes, and a confirmed copy, which has the same body, shares
// them instead of building them again. Later calls cost nothing.
func TestBooksAndTradesDeriveOncePerValue(t *testing.T) {
	for _, form := range []struct {
		name   string
		book   func(*Book) []byte
		trades func(*Trades) []byte
	}{
		{"gzip form", (*Book).Gzip, (*Trades).Gzip},
		{"tag", (*Book).Tag, (*Trades).Tag},
	} {
		book := mustBook(t, ladder(100, true), ladder(100, false))
		trades := mustTrades(t, tradeTape(100))
		forms := make(chan [2][]byte, 8)
		var wg sync.WaitGroup
		for range cap(forms) {
			wg.Go(func() { forms <- [2][]byte{form.book(book), form.trades(trades)} })
		}
		wg.Wait()
		close(forms)
		first := <-forms
		for f := range forms {
			if &f[0][0] != &first[0][0] || &f[1][0] != &first[1][0] {
				t.Fatalf("concurrent first calls kept more than one %s", form.name)
			}
		}
		cb, ct := book.Confirmed(readAt.Add(time.Second)), trades.Confirmed(readAt.Add(time.Second))
		if &form.book(cb)[0] != &first[0][0] || &form.trades(ct)[0] != &first[1][0] {
			t.Fatalf("a confirmed copy built its %s again", form.name)
		}
		if n := testing.AllocsPerRun(100, func() { form.book(book); form.trades(trades) }); n != 0 {
			t.Fatalf("a built %s costs %v allocations a call, want 0", form.name, n)
		}
	}
}

// A tag is the bytes' alone: two reads with the same bytes share it, other
// bytes get another, and it is a valid entity tag. The expected tag is
// written out: a change of the tag function would have every cache fetch
// every body again after a deploy, and replicas of two builds disagree. It
// is the first 12 bytes of the body's SHA-256 in base64url, as
// sha256sum | cut -c1-24 | xxd -r -p | base64 | tr '+/' '-_' gives it.
func TestTagIsTheBytesAlone(t *testing.T) {
	a := mustBook(t, ladder(3, true), ladder(3, false))
	b := mustBook(t, ladder(3, true), ladder(3, false))
	if a.Version() == b.Version() || !bytes.Equal(a.Tag(), b.Tag()) {
		t.Fatalf("two values of the same bytes: versions %d and %d, tags %s and %s", a.Version(), b.Version(), a.Tag(), b.Tag())
	}
	if got, want := string(a.Tag()), "KTnJ9PkelUAOoR4T"; got != want {
		t.Errorf("tag of %s = %s, want %s", a.Body(), got, want)
	}
	other := mustBook(t, ladder(3, true), ladder(4, false))
	if bytes.Equal(a.Tag(), other.Tag()) {
		t.Fatalf("two bodies share the tag %s", a.Tag())
	}
	trades := mustTrades(t, tradeTape(3))
	for _, tag := range [][]byte{a.Tag(), other.Tag(), trades.Tag(), trades.Confirmed(readAt).Tag()} {
		if len(tag) != 16 {
			t.Errorf("tag %q: %d characters, want 16", tag, len(tag))
		}
		for _, c := range tag {
			// An entity tag is a quoted string of visible characters other
			// than the quote itself; ours are base64url.
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
				t.Fatalf("tag %q has %q", tag, c)
			}
		}
	}
}

func TestUnchangedPairListKeepsItsTag(t *testing.T) {
	markets := []Market{perp("BTC", "USDT")}
	s := NewStore()
	first := NewPairs(markets, PairsConfig{Venue: "sim"}, readAt)
	s.PutDoc(first, readAt)
	same := NewPairs(markets, PairsConfig{Venue: "sim"}, readAt)
	s.PutDoc(same, readAt)
	if !bytes.Equal(s.Pairs().Tag(), first.Tag()) {
		t.Fatalf("tag changed from %s to %s for identical bytes", first.Tag(), s.Pairs().Tag())
	}
	changed := NewPairs(append(markets, perp("ETH", "USDT")), PairsConfig{Venue: "sim"}, readAt)
	s.PutDoc(changed, readAt)
	if bytes.Equal(s.Pairs().Tag(), first.Tag()) {
		t.Fatal("a changed pair list kept the old tag")
	}
}

// BenchmarkCompress measures what the first request for a value pays, once
// per value: compressing a default body, and hashing it for the tag.
func BenchmarkCompress(b *testing.B) {
	book := bookOrPanic(ladder(100, true), ladder(100, false))
	trades, err := NewTrades("BTC_USDT", tradeTape(100), readAt)
	if err != nil {
		b.Fatal(err)
	}
	tag := make([]byte, 0, tagLen)
	for _, tc := range []struct {
		name string
		body []byte
	}{{"book100", book.Body()}, {"trades100", trades.Body(SideAll)}} {
		for _, form := range []struct {
			name  string
			build func([]byte)
		}{
			{"gzip", func(body []byte) { compress(body) }},
			{"tag", func(body []byte) { appendTag(tag, body) }},
		} {
			b.Run(form.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(tc.body)))
				for b.Loop() {
					form.build(tc.body)
				}
			})
		}
	}
}

func bookOrPanic(bids, asks []Level) *Book {
	b, err := NewBook("BTC_USDT", bookTime, bids, asks, readAt)
	if err != nil {
		panic(err)
	}
	return b
}
