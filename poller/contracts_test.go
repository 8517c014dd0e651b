package poller

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// contractVenue is a fake venue that reads contract data too: a mark
// price, index and funding per market, and an open interest per symbol.
type contractVenue struct {
	*fakeVenue
	cmu      sync.Mutex
	funding  string
	badIndex string // a symbol whose row carries a negative index price
	reads    map[string]int
}

func newContractVenue(n int) *contractVenue {
	v := &contractVenue{fakeVenue: newFakeVenue(n), funding: "0.0001", reads: map[string]int{}}
	v.weights[venue.CallStats], v.weights[venue.CallQuotes] = 40, 5
	v.weights[venue.CallContracts], v.weights[venue.CallOpenInterest] = 10, 1
	v.limit = 2400
	return v
}

func (v *contractVenue) Contracts(context.Context) ([]venue.Contract, int, error) {
	if err := v.record(venue.CallContracts, ""); err != nil {
		return nil, 0, err
	}
	v.cmu.Lock()
	defer v.cmu.Unlock()
	var rows []venue.Contract
	for _, m := range v.markets {
		index := "10.49"
		if m.Symbol == v.badIndex {
			index = "-1"
		}
		rows = append(rows, venue.Contract{Symbol: m.Symbol, MarkPrice: "10.5", IndexPrice: index, SettlePrice: "10.49",
			FundingRate: v.funding, NextFunding: 1767254400000, Time: 1767225600000})
	}
	// The read lists every market the venue has, not only those listed
	// here: a dated contract, say.
	rows = append(rows, venue.Contract{Symbol: "P001USDT_261225", MarkPrice: "10.6", IndexPrice: "10.49",
		FundingRate: "0", NextFunding: 1767254400000, Time: 1767225600000})
	return rows, 0, nil
}

func (v *contractVenue) OpenInterest(_ context.Context, symbol string) (venue.OpenInterest, error) {
	if err := v.record(venue.CallOpenInterest, symbol); err != nil {
		return venue.OpenInterest{}, err
	}
	v.cmu.Lock()
	defer v.cmu.Unlock()
	v.reads[symbol]++
	return venue.OpenInterest{Symbol: symbol, Amount: "1000.5", Time: 1767225590000}, nil
}

func (v *contractVenue) ContractsWeight() int    { return v.weights[venue.CallContracts] }
func (v *contractVenue) OpenInterestWeight() int { return v.weights[venue.CallOpenInterest] }

// contractItems decodes the published contracts, by ticker id.
func contractItems(t *testing.T, store *snapshot.Store) map[string]map[string]any {
	t.Helper()
	c := store.Contracts()
	if c == nil {
		t.Fatal("no contracts published")
	}
	var items []map[string]any
	if err := json.Unmarshal(c.Body(), &items); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, it := range items {
		out[it["ticker_id"].(string)] = it
	}
	return out
}

// Over REST alone, every pair's contract is published from one premiumIndex
// read, the bulk statistics and the bulk quotes (the contracts ask the
// tickers' round for them, as no pair has a local book), and the open
// interest is read a few contracts a round, the never read first, until
// every contract has one.
func TestContractsOverRESTCoverEveryPair(t *testing.T) {
	v := newContractVenue(3)
	p, store := newTestPoller(v, Config{})
	ctx := t.Context()
	for range 2 {
		if err := p.docs.refreshTickers(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.docs.refreshContracts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	items := contractItems(t, store)
	if len(items) != 3 {
		t.Fatalf("%d contracts, want every one of the 3 pairs'", len(items))
	}
	for id, it := range items {
		if it["bid"] != "10.4" || it["ask"] != "10.6" || it["funding_rate"] != "0.01" || it["contract_price"] != "10.5" {
			t.Errorf("%s: %v", id, it)
		}
	}
	if n := v.count(venue.CallQuotes, ""); n != 1 {
		t.Errorf("%d bulk quote reads, want 1: asked for by the contracts once no pair had a local quote", n)
	}
	if n := v.count(venue.CallContracts, ""); n != 1 {
		t.Errorf("%d premiumIndex reads in two rounds, want 1: it is read again after half max-stale", n)
	}
	// One contract's open interest a round at 3 contracts: the two rounds
	// read two, never the same twice.
	if got := v.symbolsOf(venue.CallOpenInterest, 0); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("open interest read for %v, want two different contracts", got)
	}
	for range 2 {
		if err := p.docs.refreshContracts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read := v.symbolsOf(venue.CallOpenInterest, 0)
	if first3 := slices.Sorted(slices.Values(read[:3])); !slices.Equal(first3, []string{"P001USDT", "P002USDT", "P003USDT"}) {
		t.Errorf("open interest read for %v, want each contract once before any again", read)
	}
	for id, it := range contractItems(t, store) {
		if it["open_interest"] == nil || it["open_interest_timestamp"] == nil || it["open_interest_usd"] == nil {
			t.Errorf("%s has no open interest after every contract was read: %v", id, it)
		}
	}
}

// A build that changes nothing is not published again; a changed funding
// rate is, and so is a pair list without a pair, whose contract is gone.
func TestContractsPublishedOnlyWhenChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newContractVenue(2)
		p, store := newTestPoller(v, Config{})
		ctx := t.Context()
		_ = p.docs.refreshContracts(ctx) // asks for the bulk quotes, reads one open interest
		_ = p.docs.refreshTickers(ctx)
		_ = p.docs.refreshContracts(ctx) // reads the other
		_ = p.docs.refreshContracts(ctx) // publishes both
		first := store.Contracts()
		if first == nil || first.Len() != 2 {
			t.Fatalf("contracts %v, want both pairs'", first)
		}
		_ = p.docs.refreshContracts(ctx)
		if store.Contracts() != first {
			t.Fatal("the same contracts were published again")
		}
		v.cmu.Lock()
		v.funding = "-0.0002"
		v.cmu.Unlock()
		time.Sleep(p.cfg.fresher()) // the premiumIndex is read again, and the tickers' bulk reads
		_ = p.docs.refreshTickers(ctx)
		_ = p.docs.refreshContracts(ctx)
		if c := store.Contracts(); c == first || contractItems(t, store)[pairID(1)]["funding_rate"] != "-0.02" {
			t.Fatalf("the new funding rate was not published: %s", c.Body())
		}
		v.mu.Lock()
		v.markets = v.markets[1:]
		v.mu.Unlock()
		if err := p.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		// In the same step as the pair list, before it is served.
		items := contractItems(t, store)
		if _, ok := items[pairID(1)]; ok || len(items) != 1 {
			t.Fatalf("contracts %v after %s left the pair list, want %s's alone", items, pairID(1), pairID(2))
		}
	})
}

// Contracts built from the pair list as it was before a catalog read that
// dropped a pair are not published after that read's: the dropped pair's
// contract never comes back beside a /pairs without it.
func TestContractsOfAnOlderPairListAreNotPublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newContractVenue(2)
		p, store := newTestPoller(v, Config{})
		ctx := t.Context()
		_ = p.docs.refreshContracts(ctx)
		_ = p.docs.refreshTickers(ctx)
		_ = p.docs.refreshContracts(ctx)
		_ = p.docs.refreshContracts(ctx)
		if len(contractItems(t, store)) != 2 {
			t.Fatal("contracts not published for both pairs")
		}
		before := store.Pairs() // what a refreshContracts under way holds
		p.docs.ct.mu.Lock()
		in := *p.docs.ct.last
		p.docs.ct.mu.Unlock()
		v.mu.Lock()
		v.markets = v.markets[1:]
		v.mu.Unlock()
		if err := p.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		p.docs.publishContracts(before, in) // that refresh publishes now
		if items := contractItems(t, store); len(items) != 1 {
			t.Fatalf("contracts %v after %s left the pair list, want %s's alone", items, pairID(1), pairID(2))
		}
	})
}

// A contract whose venue row is unusable is left out and counted; the
// others are published.
func TestContractWithABadRowIsLeftOutAndCounted(t *testing.T) {
	v := newContractVenue(3)
	v.badIndex = "P002USDT"
	p, store := newTestPoller(v, Config{})
	_ = p.docs.refreshContracts(t.Context())
	_ = p.docs.refreshTickers(t.Context())
	_ = p.docs.refreshContracts(t.Context())
	items := contractItems(t, store)
	if _, ok := items[pairID(2)]; ok || len(items) != 2 {
		t.Fatalf("contracts %v, want P002_USDT's left out", items)
	}
	if n := p.docs.contractsOmitted.Load(); n != 1 {
		t.Errorf("marketfeed_contracts_omitted = %d, want 1", n)
	}
}

// A venue that reads no contract data publishes none, and reads nothing
// for it.
func TestNoContractsFromAVenueWithoutContractData(t *testing.T) {
	v := newFakeVenue(2)
	p, store := newTestPoller(v, Config{})
	if err := p.docs.refreshContracts(t.Context()); err != nil {
		t.Fatal(err)
	}
	if store.Contracts() != nil || len(v.log()) != 1 { // the catalog read
		t.Fatalf("contracts %v, calls %v", store.Contracts(), v.log())
	}
}

// With the mark price stream flowing for every listed symbol, the marks
// are the stream's and no premiumIndex is read; a symbol the stream stops
// sending has its marks from a premiumIndex read once its last row is half
// max-stale old, the others still the stream's.
func TestContractsFromTheMarkStreamNeedNoRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newContractVenue(3)
		store := snapshot.NewStore()
		// The pairs are spot, so that the tickers read the bulk quotes
		// while no book is in sequence: with streams, the contracts ask
		// for none of their own.
		p := New(Config{Venue: v, Store: store, Streams: newFakeStreams(), Spot: []string{pairID(1), pairID(2), pairID(3)}})
		ctx := t.Context()
		if err := p.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		src := p.src.(*live.Source)
		stream := func(symbols ...string) {
			var rows []venue.Contract
			for _, s := range symbols {
				rows = append(rows, venue.Contract{Symbol: s, MarkPrice: "10.7", IndexPrice: "10.69", SettlePrice: "10.68",
					FundingRate: "0.0003", NextFunding: 1767254400000, Time: time.Now().UnixMilli()})
			}
			src.Rows(venue.MarkRows(rows))
		}
		stream("P001USDT", "P002USDT", "P003USDT")
		_ = p.docs.refreshTickers(ctx)
		_ = p.docs.refreshContracts(ctx)
		if n := v.count(venue.CallContracts, ""); n != 0 {
			t.Fatalf("%d premiumIndex reads while the stream brought every symbol", n)
		}
		for id, it := range contractItems(t, store) {
			if it["contract_price"] != "10.7" || it["funding_rate"] != "0.03" || it["timestamp"] != float64(time.Now().UnixMilli()) {
				t.Errorf("%s: %v, want the stream's row", id, it)
			}
		}
		// P003USDT's stream goes silent while the others' flow.
		for range p.cfg.fresher()/time.Second + 1 {
			time.Sleep(time.Second)
			stream("P001USDT", "P002USDT")
			_ = p.docs.refreshTickers(ctx)
			_ = p.docs.refreshContracts(ctx)
		}
		if n := v.count(venue.CallContracts, ""); n != 1 {
			t.Fatalf("%d premiumIndex reads once the stream left P003USDT out for %s, want 1", n, p.cfg.fresher())
		}
		items := contractItems(t, store)
		if items[pairID(3)]["contract_price"] != "10.5" || items[pairID(1)]["contract_price"] != "10.7" {
			t.Errorf("P003_USDT %v and P001_USDT %v: want the read's marks for the one the stream left out, the stream's for the other",
				items[pairID(3)], items[pairID(1)])
		}
		if c := store.Contracts(); !c.FreshAt(time.Now().UnixNano(), p.cfg.MaxStale) {
			t.Error("the contracts went stale while one symbol's stream was silent")
		}
	})
}

// Open interest waits while the minute's weight is more than half spent,
// and a contract passed over for want of weight is first once weight is
// idle again: passing it over does not count as reading it.
func TestOpenInterestWaitsForIdleWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newContractVenue(2)
		v.limit = 200 // a budget of 100 a minute: the statistics (40) and a premiumIndex (10) spend half
		p, store := newTestPoller(v, Config{})
		ctx := t.Context()
		_ = p.docs.refreshTickers(ctx)
		for range 3 {
			_ = p.docs.refreshContracts(ctx)
			time.Sleep(time.Second)
		}
		if n := v.count(venue.CallOpenInterest, ""); n != 0 {
			t.Fatalf("%d open-interest reads with the minute more than half spent", n)
		}
		time.Sleep(time.Minute) // the minute's reads age out; nothing else is due
		_ = p.docs.refreshContracts(ctx)
		if got := v.symbolsOf(venue.CallOpenInterest, 0); !slices.Equal(got, []string{"P001USDT"}) {
			t.Fatalf("open interest read for %v once weight was idle, want P001USDT, never read", got)
		}
		_ = p.docs.refreshTickers(ctx) // the quotes of a minute ago are too old to publish with
		_ = p.docs.refreshContracts(ctx)
		if it := contractItems(t, store)[pairID(1)]; it["open_interest"] != "1000.5" {
			t.Errorf("P001_USDT after its read: %v", it)
		}
	})
}

// A member that takes over starts from the open interest the last leader
// published: /contracts keeps it, and the contracts it has none for are
// read first.
func TestOpenInterestStartsFromThePublishedContracts(t *testing.T) {
	v := newContractVenue(2)
	p, store := newTestPoller(v, Config{})
	last, _ := snapshot.NewContracts(store.Pairs(), snapshot.ContractsInput{
		Stats:    []snapshot.Stat{{Symbol: "P001USDT", LastPrice: "10", High: "11", Low: "9", QuoteVolume: "100"}},
		Books:    []snapshot.Quote{{Symbol: "P001USDT", Bid: "9.9", Ask: "10.1"}},
		Marks:    []snapshot.Contract{{Symbol: "P001USDT", MarkPrice: "10", IndexPrice: "10", FundingRate: "0", NextFunding: 1, Time: 1}},
		Interest: []snapshot.OpenInterest{{Symbol: "P001USDT", Amount: "77.7", Time: time.Now().UnixMilli()}},
		ReadAt:   time.Now(),
	})
	store.PutDoc(last, time.Now())
	ctx := t.Context()
	_ = p.docs.refreshContracts(ctx)
	_ = p.docs.refreshTickers(ctx)
	_ = p.docs.refreshContracts(ctx)
	if got := v.symbolsOf(venue.CallOpenInterest, 0); !slices.Equal(got, []string{"P002USDT"}) {
		t.Fatalf("open interest read for %v, want P002USDT's, which the last leader had not published", got)
	}
	if it := contractItems(t, store)[pairID(1)]; it["open_interest"] != "77.7" {
		t.Errorf("P001_USDT %v: want the last leader's open interest", it)
	}
}

// With streams, a contract whose book has not synced yet keeps its place
// in /contracts from the bulk quotes, read at the planned interval rather
// than every round; once every book is in sequence each contract's bid and
// ask are its book's, and the bulk quotes are not read again. A contract
// that came and went with its book's sync would be delisted and listed again
// by an aggregator reading every minute.
func TestContractsTakeBulkQuotesOnlyWhileABookSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cv := newContractVenue(3)
		w := newStreamWorldOf(t, cv.fakeVenue, Config{Venue: cv})
		defer w.stop()
		time.Sleep(5 * time.Second) // no book stream delivers yet
		synctest.Wait()
		items := contractItems(t, w.store)
		if len(items) != 3 {
			t.Fatalf("%d contracts with no book in sequence, want all 3 from the bulk quotes", len(items))
		}
		for id, it := range items {
			if it["bid"] != "10.4" || it["ask"] != "10.6" {
				t.Errorf("%s: bid %v ask %v, want the bulk quotes' 10.4 and 10.6", id, it["bid"], it["ask"])
			}
		}
		cv.mu.Lock()
		quotesEvery := time.Minute * time.Duration(cv.weights[venue.CallQuotes]) / time.Duration(cv.limit/2) * 10
		cv.mu.Unlock()
		if n, most := cv.count(venue.CallQuotes, ""), int(5*time.Second/quotesEvery)+1; n == 0 || n > most {
			t.Errorf("%d bulk quote reads in 5 s, want 1 to %d: one each %v, the plan's tenth of the budget", n, most, quotesEvery)
		}

		w.goLive(cv.limit, 1)
		for range 30 {
			w.tick()
		}
		before := cv.count(venue.CallQuotes, "")
		for range 100 {
			w.tick()
		}
		time.Sleep(1500 * time.Millisecond) // the contracts' round after the last event
		synctest.Wait()
		if n := cv.count(venue.CallQuotes, "") - before; n != 0 {
			t.Errorf("%d bulk quote reads in 10 s with every book in sequence, want none", n)
		}
		items = contractItems(t, w.store)
		for i, m := range w.models {
			top := m.snapshot(1)
			it := items[pairID(i+1)]
			if it["bid"] != top.Bids[0].Price || it["ask"] != top.Asks[0].Price {
				t.Errorf("%s: bid %v ask %v, want its book's %s and %s", pairID(i+1), it["bid"], it["ask"], top.Bids[0].Price, top.Asks[0].Price)
			}
		}
	})
}

// A quote of what is served older than half max-stale (its book waiting
// for its stream, served from its last snapshot) leaves its contract to the
// bulk quotes while those are fresh, and otherwise keeps it listed, the
// publication as old as that quote: an item leaves only with its book.
// Before, it was left out, and with the bulk quotes refused /contracts held
// 6 of 46 contracts while every book answered 200.
func TestContractQuotesKeepAnOlderQuoteOfWhatIsServed(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	fresh := 5 * time.Second
	local := []venue.Quote{{Symbol: "A", Bid: "1", Ask: "2"}, {Symbol: "B", Bid: "3", Ask: "4"}}
	localAt := []time.Time{now.Add(-time.Second), now.Add(-8 * time.Second)}
	quotes, at, all := contractQuotes(local, localAt, true, nil, time.Time{}, now, fresh)
	if !slices.Equal(quotes, local) || !at.Equal(localAt[1]) || all {
		t.Fatalf("quotes %v at %v (all %v): want A's and B's, 8 s old", quotes, now.Sub(at), all)
	}
	bulk := []venue.Quote{{Symbol: "A", Bid: "0.9", Ask: "2.1"}, {Symbol: "B", Bid: "2.9", Ask: "4.1"}}
	quotes, at, _ = contractQuotes(local, localAt, true, bulk, now.Add(-2*time.Second), now, fresh)
	if want := []venue.Quote{bulk[1], local[0]}; !slices.Equal(quotes, want) || !at.Equal(now.Add(-2*time.Second)) {
		t.Fatalf("quotes %v at %v: want B's from the bulk quotes, A's its book's, 2 s old", quotes, now.Sub(at))
	}
}

// A premiumIndex read that stood in before the mark price stream flowed
// does not age the contracts once the stream brings every symbol: they are
// no older than what they are built from besides, not as old as the read.
func TestAReadTheStreamCoversDoesNotAgeTheContracts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newContractVenue(2)
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store, Streams: newFakeStreams(), Spot: []string{pairID(1), pairID(2)}})
		ctx := t.Context()
		if err := p.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		_ = p.docs.refreshTickers(ctx)
		_ = p.docs.refreshContracts(ctx) // the stream has said nothing: a read stands in
		if n := v.count(venue.CallContracts, ""); n != 1 {
			t.Fatalf("%d premiumIndex reads before the stream flowed, want 1", n)
		}
		src := p.src.(*live.Source)
		for range 7 { // past half max-stale, short of max-stale

			time.Sleep(time.Second)
			var rows []venue.Contract
			for _, s := range []string{"P001USDT", "P002USDT"} {
				rows = append(rows, venue.Contract{Symbol: s, MarkPrice: "10.7", IndexPrice: "10.69", FundingRate: "0",
					NextFunding: 1767254400000, Time: time.Now().UnixMilli()})
			}
			src.Rows(venue.MarkRows(rows))
			src.Rows(venue.TickerRows([]venue.Stat{{Symbol: "P001USDT", LastPrice: "10.5", High: "11", Low: "10", QuoteVolume: "1050"}}))
			_ = p.docs.refreshTickers(ctx)
			_ = p.docs.refreshContracts(ctx)
		}
		// The quotes are the bulk read's, of every period of the plan.
		if c := store.Contracts(); time.Now().UnixNano()-c.ReadAt() > int64(p.cfg.fresher()) {
			t.Errorf("the contracts are %s old with the stream bringing every symbol each second",
				time.Duration(time.Now().UnixNano()-c.ReadAt()))
		}
	})
}

// Open interest may be up to five minutes old: every contract is read once
// in five minutes, a few a second, and not again before its five minutes
// are up. At a minute, a round of 446 contracts cost 446 weight a minute,
// a third of the default budget.
func TestOpenInterestIsReadEveryFiveMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		v := newContractVenue(n)
		p, _ := newTestPoller(v, Config{})
		ctx := t.Context()
		readAt := map[string][]time.Duration{}
		start := time.Now()
		for range 11 * 60 {
			_ = p.docs.refreshTickers(ctx)
			from := len(v.log())
			_ = p.docs.refreshContracts(ctx)
			for _, s := range v.symbolsOf(venue.CallOpenInterest, from) {
				readAt[s] = append(readAt[s], time.Since(start))
			}
			time.Sleep(time.Second)
		}
		if len(readAt) != n {
			t.Fatalf("open interest read for %d of %d contracts", len(readAt), n)
		}
		for s, at := range readAt {
			if at[0] > 30*time.Second {
				t.Errorf("%s first read %s after start, want within the first round", s, at[0])
			}
			for i := 1; i < len(at); i++ {
				if gap := at[i] - at[i-1]; gap < 5*time.Minute-time.Second || gap > 5*time.Minute+time.Minute {
					t.Errorf("%s read at %v: %s between reads, want five minutes", s, at, gap)
					break
				}
			}
			if len(at) != 3 {
				t.Errorf("%s read %d times in 11 minutes, want 3: %v", s, len(at), at)
			}
		}
	})
}

// A contract is priced from what is served: over REST alone, with the bulk
// quotes refused, a pair whose /orderbook the store serves is listed at its
// book's best bid and ask, the others left out (counted) until theirs are
// read. Before, only the bulk quotes priced contracts over REST alone, and
// without them nothing was published at all while books were answered.
func TestContractsArePricedFromTheServedBook(t *testing.T) {
	v := newContractVenue(3)
	v.fail = func(c venue.Call, _ string) error {
		if c == venue.CallQuotes {
			return &venue.StatusError{Status: http.StatusBadRequest}
		}
		return nil
	}
	p, store := newTestPoller(v, Config{})
	ctx := t.Context()
	if err := p.Load(ctx, pairID(1), snapshot.StreamBook, snapshot.MaxDepth); err != nil {
		t.Fatal(err)
	}
	_ = p.docs.refreshTickers(ctx)
	_ = p.docs.refreshContracts(ctx)
	items := contractItems(t, store)
	if it := items[pairID(1)]; len(items) != 1 || it == nil || it["bid"] != "10.4" || it["ask"] != "10.6" {
		t.Fatalf("contracts %v: want %s's alone, at its served book's 10.4 and 10.6", items, pairID(1))
	}
	if n := p.docs.contractsOmitted.Load(); n != 2 {
		t.Errorf("%d contracts counted as left out, want the 2 whose books are not served", n)
	}
}
