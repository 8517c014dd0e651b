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

// A trade list rebuilt after a read that shares most of its trades with
// the previous value, as every pair's is every second, allocates the value's
// own memory and nothing for each trade, new or kept: the value with its
// lazily built forms, its items' ends and its venue ids, and its body,
// sized for its new trades at once, also after a burst of them.
func TestNewTradesAfterAllocatesNothingPerTrade(t *testing.T) {
	const valueAllocs = 2
	for _, added := range []int{1, 5, 30} {
		tape := venueTape(MaxTrades + added)
		for i := range tape {
			tape[i].QuoteQty = "" // target volumes computed
		}
		prev := mustTrades(t, tape[:MaxTrades])
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := NewTradesAfter(prev, "BTC_USDT", tape[added:], readAt); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > valueAllocs {
			t.Errorf("%d new trades: %v allocations, want at most %d", added, allocs, valueAllocs)
		}
	}
}

// Every listed book is built about three times a second: a book's value is
// two allocations, itself and its body, whatever its depth.
func TestNewLocalBookIsTwoAllocations(t *testing.T) {
	for _, depth := range []int{1, MaxDepth} {
		bids, asks := ladder(depth, true), ladder(depth, false)
		allocs := testing.AllocsPerRun(100, func() {
			NewLocalBook("BTC_USDT", bookTime, 7, bids, asks, Open{}, readAt)
		})
		if allocs != 2 {
			t.Errorf("%d levels a side: %v allocations, want 2", depth, allocs)
		}
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

// /contracts is built every second: a build allocates its value, its two
// bodies and its indexes, nothing per contract, and compresses and hashes
// nothing until a request asks.
func TestNewContractsAllocatesNothingPerContract(t *testing.T) {
	var allocs [2]float64
	for i, n := range []int{10, 846} {
		pairs, in := benchContracts(n)
		NewContracts(pairs, in) // sizes the next build's bodies
		allocs[i] = testing.AllocsPerRun(20, func() { NewContracts(pairs, in) })
	}
	if allocs[1] != allocs[0] || allocs[0] > 20 {
		t.Errorf("%v allocations for 10 contracts, %v for 846; want the same, at most 20", allocs[0], allocs[1])
	}
}
