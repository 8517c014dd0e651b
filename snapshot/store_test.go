package snapshot

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func pairsOf(ids ...string) *Pairs { return pairsHolding(nil, ids...) }

// pairsHolding is pairsOf with the pairs of incoming not listed yet.
func pairsHolding(incoming map[string]bool, ids ...string) *Pairs {
	var markets []Market
	for _, id := range ids {
		base, quote, _ := strings.Cut(id, "_")
		markets = append(markets, perp(base, quote))
	}
	return NewPairs(markets, PairsConfig{Venue: "sim", Incoming: incoming}, readAt)
}

func bookFor(t *testing.T, id string) *Book {
	t.Helper()
	b, err := NewBook(id, bookTime, ladder(3, true), ladder(3, false), readAt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tradesFor(t *testing.T, id string) *Trades {
	t.Helper()
	tr, err := NewTrades(id, tradeTape(3), readAt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestStoreEmpty(t *testing.T) {
	s := NewStore()
	if s.Pairs() != nil || s.Tickers() != nil {
		t.Error("a new store has pairs or tickers")
	}
	id := []byte("BTC_USDT")
	if s.Listed(id, readAt.UnixNano()) {
		t.Error("a new store lists BTC_USDT")
	}
	if b, ok := s.Book(id, readAt.UnixNano()); b != nil || ok {
		t.Errorf("Book = %v, %v before any pairs", b, ok)
	}
	if tr, ok := s.Trades(id, readAt.UnixNano()); tr != nil || ok {
		t.Errorf("Trades = %v, %v before any pairs", tr, ok)
	}
	if s.PutBook(bookFor(t, "BTC_USDT")) || s.PutTrades(tradesFor(t, "BTC_USDT")) {
		t.Error("a book or trades were accepted before any pairs")
	}
}

func TestStoreListedPairWithoutData(t *testing.T) {
	// Listed but never read: the server must tell this apart from unknown.
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	if b, ok := s.Book([]byte("BTC_USDT"), readAt.UnixNano()); b != nil || !ok {
		t.Errorf("Book = %v, %v; want nil, true", b, ok)
	}
	if tr, ok := s.Trades([]byte("BTC_USDT"), readAt.UnixNano()); tr != nil || !ok {
		t.Errorf("Trades = %v, %v; want nil, true", tr, ok)
	}
}

func TestStorePutDocPairsKeepsStillListed(t *testing.T) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt)
	btcBook, btcTrades, ethBook := bookFor(t, "BTC_USDT"), tradesFor(t, "BTC_USDT"), bookFor(t, "ETH_USDT")
	if !s.PutBook(btcBook) || !s.PutTrades(btcTrades) || !s.PutBook(ethBook) {
		t.Fatal("a put for a listed pair was refused")
	}

	next := pairsOf("BTC_USDT", "SOL_USDT")
	s.PutDoc(next, readAt)
	if s.Pairs() != next {
		t.Fatal("Pairs() is not the list just put")
	}
	if b, ok := s.Book([]byte("BTC_USDT"), readAt.UnixNano()); b != btcBook || !ok {
		t.Errorf("BTC_USDT book after a new list = %v, %v; want the same book", b, ok)
	}
	if tr, ok := s.Trades([]byte("BTC_USDT"), readAt.UnixNano()); tr != btcTrades || !ok {
		t.Errorf("BTC_USDT trades after a new list = %v, %v; want the same trades", tr, ok)
	}
	if b, ok := s.Book([]byte("SOL_USDT"), readAt.UnixNano()); b != nil || !ok {
		t.Errorf("SOL_USDT joined the list: Book = %v, %v; want nil, true", b, ok)
	}
}

// A pair that leaves the list leaves /pairs at once and is answered from
// what it holds for CacheMaxAge more, however many lists follow; then it is
// not. Listed again within that time, it keeps its book; after it, it
// starts empty.
func TestStoreUnlistedPairAnsweredForTheCacheMaxAge(t *testing.T) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt)
	eth := []byte("ETH_USDT")
	ethBook, ethTrades := bookFor(t, "ETH_USDT"), tradesFor(t, "ETH_USDT")
	s.PutBook(ethBook)
	s.PutTrades(ethTrades)
	answered := func(at time.Time) bool {
		t.Helper()
		b, okB := s.Book(eth, at.UnixNano())
		tr, okT := s.Trades(eth, at.UnixNano())
		listed := s.Listed(eth, at.UnixNano())
		if okB != listed || okT != listed || listed && (b != ethBook || tr != ethTrades) {
			t.Fatalf("at %v: Book %v %v, Trades %v %v, Listed %v disagree", at.Sub(readAt), b, okB, tr, okT, listed)
		}
		return listed
	}

	unlisted := readAt.Add(time.Second)
	s.PutDoc(pairsOf("BTC_USDT"), unlisted)
	if _, ok := s.Pairs().Lookup("ETH_USDT"); ok {
		t.Fatal("ETH_USDT is still in the pair list")
	}
	// A later list without it does not put its end off.
	s.PutDoc(pairsOf("BTC_USDT"), unlisted.Add(2*time.Second))
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {CacheMaxAge - 1, true}, {CacheMaxAge, false}, {time.Hour, false}} {
		if got := answered(unlisted.Add(tc.at)); got != tc.want {
			t.Errorf("%v after it left the list: answered %v, want %v", tc.at, got, tc.want)
		}
	}
	if !s.PutBook(ethBook) {
		t.Error("a book read while the pair was leaving was refused")
	}

	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), unlisted.Add(CacheMaxAge-1))
	if !answered(unlisted.Add(time.Hour)) {
		t.Fatal("a pair listed again is not answered")
	}

	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	s.PutDoc(pairsOf("BTC_USDT"), readAt.Add(CacheMaxAge))
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt.Add(CacheMaxAge))
	if b, ok := s.Book(eth, readAt.Add(CacheMaxAge).UnixNano()); b != nil || !ok {
		t.Errorf("listed again after it stopped being answered: Book = %v, %v; want nil, true", b, ok)
	}

	// The same with no list between: the cell past its end is still in
	// the map, and must not bring its old book back.
	s = NewStore()
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt)
	s.PutBook(ethBook)
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	back := readAt.Add(CacheMaxAge + time.Second)
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), back)
	if b, ok := s.Book(eth, back.UnixNano()); b != nil || !ok {
		t.Errorf("listed again right after it stopped being answered: Book = %v, %v; want nil, true", b, ok)
	}
}

func TestStorePutUnlisted(t *testing.T) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	if s.PutBook(bookFor(t, "ETH_USDT")) {
		t.Error("PutBook accepted an unlisted pair")
	}
	if s.PutTrades(tradesFor(t, "ETH_USDT")) {
		t.Error("PutTrades accepted an unlisted pair")
	}
	if s.Listed([]byte("ETH_USDT"), readAt.UnixNano()) {
		t.Error("a refused put listed the pair")
	}
	if b, ok := s.Book([]byte("BTC_USDT"), readAt.UnixNano()); b != nil || !ok {
		t.Errorf("a put for another pair touched BTC_USDT: %v, %v", b, ok)
	}
}

func TestStorePutDocTickers(t *testing.T) {
	s := NewStore()
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	s.PutDoc(tk, readAt)
	if s.Tickers() != tk {
		t.Error("Tickers() is not the value just put")
	}
}

func TestStoreConcurrent(t *testing.T) {
	// Readers and writers at once, for the race detector: every pair list
	// keeps BTC_USDT, so readers must always find it listed and any book or
	// trades they load must be whole values of that pair.
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	lists := [][]string{{"BTC_USDT", "ETH_USDT"}, {"BTC_USDT", "SOL_USDT"}, {"BTC_USDT"}}
	books := []*Book{bookFor(t, "BTC_USDT"), bookFor(t, "BTC_USDT")}
	trades := []*Trades{tradesFor(t, "BTC_USDT"), tradesFor(t, "BTC_USDT")}
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	id := []byte("BTC_USDT")
	const rounds = 2000

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rounds {
			// A fresh value each time, as the poller builds one per read.
			s.PutDoc(pairsOf(lists[i%len(lists)]...), readAt)
			s.PutDoc(tk, readAt)
		}
	})
	wg.Go(func() {
		for i := range rounds {
			s.PutBook(books[i%len(books)])
			s.PutTrades(trades[i%len(trades)])
		}
	})
	errs := make(chan string, 4*rounds)
	for range 4 {
		wg.Go(func() {
			for range rounds {
				if !s.Listed(id, readAt.UnixNano()) {
					errs <- "BTC_USDT not listed"
				}
				if b, ok := s.Book(id, readAt.UnixNano()); !ok {
					errs <- "no BTC_USDT book cell"
				} else if b != nil {
					head, middle, tail := b.Parts(2)
					if b.TickerID() != "BTC_USDT" || !bytes.HasPrefix(head, []byte(`{"ticker_id":"BTC_USDT"`)) || len(middle) == 0 || len(tail) == 0 {
						errs <- "torn book"
					}
				}
				if tr, ok := s.Trades(id, readAt.UnixNano()); ok && tr != nil {
					if head, _ := tr.Parts(SideAll, 1); len(head) == 0 || head[0] != '[' {
						errs <- "torn trades"
					}
				}
				if p := s.Pairs(); p == nil || len(p.Body()) == 0 {
					errs <- "no pairs"
				}
				_ = s.Tickers()
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestStreamString(t *testing.T) {
	if StreamBook.String() != "book" || StreamTrades.String() != "trades" {
		t.Errorf("streams named %q and %q", StreamBook, StreamTrades)
	}
}

// A confirmed copy is the same answer, read later: same bytes and tag, so an
// If-None-Match revalidation still matches.
func TestConfirmedKeepsBytesAndTagWithALaterReadTime(t *testing.T) {
	b, err := NewBook("BTC_USDT", 1, []Level{{"2", "1"}}, []Level{{"3", "1"}}, time.Unix(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	cb := b.Confirmed(time.Unix(20, 0))
	if string(cb.Body()) != string(b.Body()) || string(cb.Tag()) != string(b.Tag()) || cb.Version() != b.Version() {
		t.Fatal("confirmed book differs from the book it confirms")
	}
	if cb.ReadAt() != time.Unix(20, 0).UnixNano() || b.ReadAt() != time.Unix(10, 0).UnixNano() {
		t.Fatalf("read times: confirmed %d, original %d", cb.ReadAt(), b.ReadAt())
	}
	tr, err := NewTrades("BTC_USDT", []Trade{{ID: 7, Time: 1, Price: "2", Size: "1"}}, time.Unix(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	ct := tr.Confirmed(time.Unix(30, 0))
	if string(ct.Body(SideAll)) != string(tr.Body(SideAll)) || string(ct.Tag()) != string(tr.Tag()) {
		t.Fatal("confirmed trades differ from the trades they confirm")
	}
	if ct.ReadAt() != time.Unix(30, 0).UnixNano() || tr.ReadAt() != time.Unix(10, 0).UnixNano() {
		t.Fatalf("read times: confirmed %d, original %d", ct.ReadAt(), tr.ReadAt())
	}
}

// TestStoreReadAtAndFreshAtByStream: the store answers when a pair's
// snapshot of each stream was read and whether it may be served, by the
// same rule as the snapshot itself: listed without a snapshot is read at 0
// and never fresh; an unlisted pair is neither listed nor fresh.
func TestStoreReadAtAndFreshAtByStream(t *testing.T) {
	const maxStale = 10 * time.Second
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	id, unlisted := []byte("BTC_USDT"), []byte("ETH_USDT")
	put := [NumStreams]func(){
		StreamBook:   func() { s.PutBook(bookFor(t, "BTC_USDT")) },
		StreamTrades: func() { s.PutTrades(tradesFor(t, "BTC_USDT")) },
	}
	for st := range NumStreams {
		if at, listed := s.ReadAt(st, unlisted); at != 0 || listed {
			t.Errorf("%s: ReadAt(unlisted) = %d, %v; want 0, false", st, at, listed)
		}
		if s.FreshAt(st, unlisted, readAt.UnixNano(), maxStale) {
			t.Errorf("%s: an unlisted pair is fresh", st)
		}
		if at, listed := s.ReadAt(st, id); at != 0 || !listed {
			t.Errorf("%s: ReadAt before a read = %d, %v; want 0, true", st, at, listed)
		}
		if s.FreshAt(st, id, readAt.UnixNano(), maxStale) {
			t.Errorf("%s: fresh before any read", st)
		}
		put[st]()
		if at, _ := s.ReadAt(st, id); at != readAt.UnixNano() {
			t.Errorf("%s: ReadAt = %d, want %d", st, at, readAt.UnixNano())
		}
		edge := readAt.Add(maxStale).UnixNano()
		if !s.FreshAt(st, id, edge, maxStale) || s.FreshAt(st, id, edge+1, maxStale) {
			t.Errorf("%s: fresh up to exactly max-stale and not a nanosecond after: got %v, %v",
				st, s.FreshAt(st, id, edge, maxStale), s.FreshAt(st, id, edge+1, maxStale))
		}
	}
	if at, _ := s.ReadAt(StreamBook, id); at == 0 {
		t.Error("the trades' read hid the book's")
	}
}

// A pair held back from /pairs while it is incoming is answered as a listed
// one: its book and trades are taken and served, its ticker_id is not in
// the body; listed by the next list, it keeps them.
func TestIncomingPairIsAnsweredButNotListed(t *testing.T) {
	s := NewStore()
	now := time.Now()
	all := pairsOf("BTC_USDT", "ETH_USDT")
	held := pairsHolding(map[string]bool{"ETH_USDT": true}, "BTC_USDT", "ETH_USDT")
	s.PutDoc(held, now)
	if strings.Contains(string(s.Pairs().Body()), "ETH_USDT") {
		t.Fatalf("/pairs lists the incoming pair: %s", s.Pairs().Body())
	}
	if got := held.Incoming(); len(got) != 1 || got[0].TickerID != "ETH_USDT" {
		t.Fatalf("incoming %v, want ETH_USDT", got)
	}
	if _, ok := s.Pairs().Lookup("ETH_USDT"); ok {
		t.Fatal("the incoming pair is looked up as listed")
	}
	b, err := NewBook("ETH_USDT", 1, []Level{{Price: "1", Size: "1"}}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if !s.PutBook(b) {
		t.Fatal("the incoming pair's book was refused")
	}
	if got, _ := s.Book([]byte("ETH_USDT"), now.UnixNano()); got != b {
		t.Fatal("the incoming pair's book is not answered")
	}
	if got := pairsHolding(map[string]bool{"DOGE_USDT": true}, "BTC_USDT", "ETH_USDT"); string(got.Body()) != string(all.Body()) || len(got.Incoming()) != 0 {
		t.Fatal("holding a pair the rules do not publish changed the list")
	}
	s.PutDoc(all, now.Add(time.Minute))
	if got, _ := s.Book([]byte("ETH_USDT"), now.Add(time.Minute).UnixNano()); got != b {
		t.Fatal("listed, the pair lost the book it held while incoming")
	}
}
