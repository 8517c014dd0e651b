package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/wire"
)

// The budget's promises seen from outside: what the venue's weight is
// spent on decides which answers stay current.

// hammer reads a pair's book with clients concurrent clients for d and
// returns the distinct venue times its 200 answers carried (each one a venue
// read that reached the client) and how many answers were not 200.
func hammer(t *testing.T, api, id string, clients int, d time.Duration) (times map[int64]bool, failed int) {
	t.Helper()
	var mu sync.Mutex
	times = make(map[int64]bool)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+id)
				mu.Lock()
				if resp.StatusCode == http.StatusOK {
					var b wire.Book
					apptest.Decode(t, body, &b)
					times[b.Timestamp] = true
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return times, failed
}

// Over REST alone (the venue's stream paths answer 404), a pair that
// clients keep reading is read on its 350 ms schedule while the minute has
// weight, however many other pairs and depths the process answered before:
// the reads that keep a requested pair current are not held back by the
// pacing of the reads that stand in for lost streams. Before, after the
// same process had answered a few dozen other books, a pair hammered by six
// clients for 3 s got no read at all (the stand-ins' pacing, a quarter of
// the limit in any 30 s, spent by the books read before), while a fresh
// process read it every 350 ms. Without streams (-venue-streams off) the
// same: the sweep's pairs, hot for a minute, were read before it.
func TestRESTOnlyRequestedPairIsReadOnItsSchedule(t *testing.T) {
	venue := apptest.StartVenueSim(t, "-streams=false", "-weight-limit", "2400")
	t.Run("streams refused", func(t *testing.T) {
		requestedPairReadOnSchedule(t, streamArgs(venue.URL, 10*time.Second))
	})
	t.Run("streams off", func(t *testing.T) {
		requestedPairReadOnSchedule(t, chaosArgs(venue.URL, 10*time.Second))
	})
}

// requestedPairReadOnSchedule reads every listed pair's book but one, twice,
// then hammers that one and counts its reads.
func requestedPairReadOnSchedule(t *testing.T, args []string) {
	api, a, _ := startLoggedApp(t, args...)
	ids := apptest.ListedIDs(t, api)
	if len(ids) < 20 {
		t.Fatalf("%d pairs listed, want a few dozen", len(ids))
	}
	const id = "BTC_USDT"
	for _, other := range ids {
		if other == id {
			continue
		}
		for _, q := range []string{"", "&depth=5"} {
			if resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+other+q); resp.StatusCode != http.StatusOK {
				t.Fatalf("/orderbook of %s%s: %d %s", other, q, resp.StatusCode, body)
			}
		}
	}
	const d = 4 * time.Second
	times, failed := hammer(t, api, id, 6, d)
	// 350 ms over 4 s is 11 reads. Until a second request marks the pair
	// again (want marks a pair at most once a second) it waits its turn
	// behind the sweep's pairs; half the schedule is ample margin on a
	// loaded machine, and far from the one or two reads it got before.
	//
	// The schedule holds while the minute has weight: the other pairs are
	// requested too and share it, and when the process runs slow (the race
	// detector, a second test suite beside it) their reads may spend the
	// window before the hammering ends. Fewer reads with the window spent
	// are the budget's rule; fewer with weight left are the fault this test
	// is for (the reads held back by the stand-ins' pacing, weight unspent).
	m := opsMetrics(t, a)
	spent, limit := m["marketfeed_venue_weight_spent"], m["marketfeed_venue_weight_budget"]
	if want := int(d/(350*time.Millisecond)) / 2; len(times) < want {
		if spent < 0.9*limit {
			t.Errorf("%s read %d times in %s of requests (%d answers not 200) with %v of the minute's %v weight spent, want at least %d",
				id, len(times), d, failed, spent, limit, want)
		} else {
			t.Logf("%s read %d times in %s: the minute's weight was spent (%v of %v)", id, len(times), d, spent, limit)
		}
	}
	t.Logf("%d pairs read before; %s then served %d venue times in %s, %d answers not 200; weight spent %v of %v",
		len(ids)-1, id, len(times), d, failed, spent, limit)
}

// wholeMarket is one sample of what an aggregator reads: every pair's book
// before and after the whole-market lists, and the lists.
type wholeMarket struct {
	// before and after hold, by pair, whether its /orderbook answered 200
	// with a book its pair rides out with: younger than max-stale less the
	// two builds' time in which a list may have been built before its book
	// aged (see quoteSlack in the poller).
	before, after    map[string]bool
	tickers          map[string]bool
	contracts        map[string]bool
	tickersStatus    int
	contractsStatus  int
	tickersN, itemsN int
}

// sampleWholeMarket reads every pair's book, /tickers and /contracts, then
// every pair's book again.
func sampleWholeMarket(t *testing.T, api string, ids []string, ridesOut time.Duration) wholeMarket {
	t.Helper()
	// The books are read at once, as an aggregator's workers do: one at a
	// time, a sweep waiting on books being loaded would take seconds.
	books := func() map[string]bool {
		ok := make(map[string]bool, len(ids))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				resp, body := apptest.Get(t, api+"/api/public/orderbook?ticker_id="+id+"&depth=1")
				if resp.StatusCode != http.StatusOK {
					return
				}
				var b wire.Book
				apptest.Decode(t, body, &b)
				mu.Lock()
				ok[id] = time.Since(time.UnixMilli(b.Timestamp)) <= ridesOut
				mu.Unlock()
			})
		}
		wg.Wait()
		return ok
	}
	s := wholeMarket{before: books(), tickers: map[string]bool{}, contracts: map[string]bool{}}
	resp, body := apptest.Get(t, api+"/api/public/tickers")
	if s.tickersStatus = resp.StatusCode; resp.StatusCode == http.StatusOK {
		var items []wire.Ticker
		apptest.Decode(t, body, &items)
		for _, it := range items {
			s.tickers[it.TickerID] = true
		}
		s.tickersN = len(items)
	}
	resp, body = apptest.Get(t, api+"/api/public/contracts")
	if s.contractsStatus = resp.StatusCode; resp.StatusCode == http.StatusOK {
		var items []wire.Contract
		apptest.Decode(t, body, &items)
		for _, it := range items {
			s.contracts[it.TickerID] = true
		}
		s.itemsN = len(items)
	}
	s.after = books()
	return s
}

// Every stream dropped for 10 s early in a run, the minute's weight nearly
// spent by the cold start's syncs: every pair whose /orderbook has answered
// 200 for two seconds, before and after /tickers and /contracts are read,
// is listed in both (its ticker where it is a spot pair; neither list
// answers 502 while one does). Before, the marks,
// statistics and bulk quotes that stand in for the streams were refused
// for the syncs' sake: /tickers and /contracts aged to 502 while books
// answered, and /contracts held 6 of 46 items while every book answered
// ("no best bid and ask": the local quotes of books waiting for their
// streams had aged past half max-stale).
func TestWholeMarketListsStayWholeThroughAStreamDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and reads it for about a minute")
	}
	const maxStale = 10 * time.Second
	venue := apptest.StartVenueSim(t, "-weight-limit", "2400")
	api, a, _ := startLoggedApp(t, streamArgs(venue.URL, maxStale)...)
	began := time.Now()
	pairs := apptest.ListedPairs(t, api)
	ids := make([]string, len(pairs))
	spot := map[string]bool{}
	for i, p := range pairs {
		ids[i] = p.TickerID
		spot[p.TickerID] = p.Kind == "spot"
	}
	budget := opsMetrics(t, a)["marketfeed_venue_weight_budget"]
	if !apptest.WaitFor(20*time.Second, func() bool { return opsMetrics(t, a)["marketfeed_venue_weight_spent"] >= budget*3/4 }) {
		t.Fatalf("the cold start never spent three quarters of the minute's %v", budget)
	}
	if wait := 15*time.Second - time.Since(began); wait > 0 {
		time.Sleep(wait) // a point in the run, not a wait for anything
	}
	t.Logf("dropping every stream for 10 s with %v of %v spent", opsMetrics(t, a)["marketfeed_venue_weight_spent"], budget)
	venue.Control(http.MethodPost, "/_control/drop?for=10s")
	start := time.Now()
	var samples, listsDown, missing, ridden int
	var logged time.Duration
	answeringSince := map[string]time.Time{}
	for time.Since(start) < 60*time.Second {
		began := time.Now()
		s := sampleWholeMarket(t, api, ids, maxStale-2*time.Second)
		samples++
		at := time.Since(start).Round(100 * time.Millisecond)
		var answering, lost []string
		for _, id := range ids {
			if !s.before[id] || !s.after[id] {
				delete(answeringSince, id)
				continue
			}
			answering = append(answering, id)
			if _, ok := answeringSince[id]; !ok {
				answeringSince[id] = began
			}
			if began.Sub(answeringSince[id]) < 2*time.Second {
				continue // a list is built every second: it may not show the book yet
			}
			inTickers := s.tickersStatus == http.StatusOK && (s.tickers[id] || !spot[id])
			if s.contractsStatus != http.StatusOK || !s.contracts[id] || !inTickers {
				lost = append(lost, id)
			}
		}
		if len(answering) == len(ids) {
			ridden++
		}
		if at >= logged {
			logged = at + 2*time.Second
			t.Logf("%5s: %2d books answering; /contracts %d, %d items; /tickers %d, %d items",
				at, len(answering), s.contractsStatus, s.itemsN, s.tickersStatus, s.tickersN)
		}
		if s.tickersStatus != http.StatusOK || s.contractsStatus != http.StatusOK {
			listsDown++
		}
		if len(lost) > 0 {
			if missing++; missing <= 3 {
				t.Errorf("%s after the drop: %d of the %d pairs answering /orderbook 200 are missing from a list "+
					"(/contracts %d with %d of %d, /tickers %d with %d): %v",
					at, len(lost), len(answering), s.contractsStatus, s.itemsN, len(ids), s.tickersStatus, s.tickersN, lost[:min(len(lost), 5)])
			}
		}
	}
	t.Logf("%d samples over 60 s from the drop: every book answering in %d; a list not 200 in %d; "+
		"a pair answering 200 missing from a list in %d", samples, ridden, listsDown, missing)
}
