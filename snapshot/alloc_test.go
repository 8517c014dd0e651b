//go:build !race

// The race detector instruments memory accesses and allocates on its own, so
// allocation counts are only meaningful without it.

package snapshot

import "testing"

func TestReadPathDoesNotAllocate(t *testing.T) {
	// The server looks a pair up with the ticker_id bytes of the request and
	// slices the snapshot; none of it may allocate per request.
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt)
	s.PutBook(bookFor(t, "BTC_USDT"))
	s.PutTrades(tradesFor(t, "BTC_USDT"))
	docs := docValues(t)
	s.PutDoc(docs[DocTickers], readAt)
	s.PutDoc(docs[DocContracts], readAt)
	id := []byte("BTC_USDT")
	unknown := []byte("XRP_USDT")
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		if !ValidTickerID(id) || !s.Listed(id, readAt.UnixNano()) || s.Listed(unknown, readAt.UnixNano()) {
			t.Fatal("lookup failed")
		}
		b, _ := s.Book(id, readAt.UnixNano())
		head, middle, tail := b.Parts(2)
		tr, _ := s.Trades(id, readAt.UnixNano())
		th, tt := tr.Parts(SideBuy, 1)
		_, _ = s.Book(unknown, readAt.UnixNano())
		_, _ = s.Trades(unknown, readAt.UnixNano())
		sink += len(head) + len(middle) + len(tail) + len(th) + len(tt) + len(s.Pairs().Body()) +
			len(s.Tickers().Body()) + len(s.Contracts().Specs().Body())
	})
	if allocs != 0 {
		t.Errorf("read path allocates %v times per request", allocs)
	}
	if sink == 0 {
		t.Error("nothing was read")
	}
}

func BenchmarkStoreBookParts(b *testing.B) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	bk, err := NewBook("BTC_USDT", bookTime, ladder(MaxDepth, true), ladder(MaxDepth, false), readAt)
	if err != nil {
		b.Fatal(err)
	}
	s.PutBook(bk)
	id := []byte("BTC_USDT")
	b.ReportAllocs()
	for b.Loop() {
		book, _ := s.Book(id, readAt.UnixNano())
		book.Parts(20)
	}
}
