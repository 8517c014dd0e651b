package poller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/robfig/cron/v3"

	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

func TestEveryNextIsTheNextMultipleOfThePeriod(t *testing.T) {
	e := Every(350 * time.Millisecond)
	base := time.UnixMilli(1_700_000_000_050) // 1_700_000_000_050 = 350 × 4_857_142_857 + 100
	for _, tc := range []struct{ at, want int64 }{
		{0, 250}, {249, 250}, {250, 600}, {251, 600}, {599, 600},
	} {
		got := e.Next(base.Add(time.Duration(tc.at) * time.Millisecond)).Sub(base).Milliseconds()
		if got != tc.want {
			t.Errorf("Next(base+%dms) = base+%dms, want base+%dms", tc.at, got, tc.want)
		}
	}
}

func TestEveryFiresEvery350msUnderCron(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var fired []time.Time
		c := cron.New()
		c.Schedule(Every(350*time.Millisecond), cron.FuncJob(func() {
			mu.Lock()
			fired = append(fired, time.Now())
			mu.Unlock()
		}))
		c.Start()
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		<-c.Stop().Done()
		mu.Lock()
		defer mu.Unlock()
		if len(fired) != 10 {
			t.Fatalf("fired %d times in 3.5 s, want 10 (cron's @every would fire 3 times)", len(fired))
		}
		for i := 1; i < len(fired); i++ {
			if d := fired[i].Sub(fired[i-1]); d != 350*time.Millisecond {
				t.Errorf("interval %d = %s, want 350ms", i, d)
			}
		}
	})
}

func TestRoundReadsOnlyHotPairs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(5)
		p, store := newTestPoller(v, Config{})
		p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
		p.Refresh(t.Context(), snapshot.StreamBook)
		p.Refresh(t.Context(), snapshot.StreamTrades)
		if n := v.count(venue.CallBook, ""); n != 1 {
			t.Fatalf("book calls = %d, want 1 (only the wanted pair)", n)
		}
		if n := v.count(venue.CallTrades, ""); n != 0 {
			t.Fatalf("trade calls = %d, want 0 (nobody asked for trades)", n)
		}
		if b, _ := store.Book([]byte(pairID(1)), time.Now().UnixNano()); b == nil {
			t.Fatal("wanted pair has no book after a round")
		}
		if b, _ := store.Book([]byte(pairID(2)), time.Now().UnixNano()); b != nil {
			t.Fatal("unwanted pair has a book")
		}
	})
}

func TestHotPairCoolsAfterQuietPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(2)
		p, _ := newTestPoller(v, Config{HotTTL: time.Minute})
		p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
		p.Refresh(t.Context(), snapshot.StreamBook)
		time.Sleep(61 * time.Second)
		p.Refresh(t.Context(), snapshot.StreamBook)
		if n := v.count(venue.CallBook, ""); n != 1 {
			t.Fatalf("book calls = %d, want 1: a pair nobody asked for in 61 s must not be read", n)
		}
		if hot := p.Status().Hot[snapshot.StreamBook]; hot != 0 {
			t.Fatalf("hot books = %d after the quiet period, want 0", hot)
		}
	})
}

// TestRunReadsAHotPairAtMostOncePerPeriod runs the real schedules for three
// simulated seconds while the pair is asked for continuously.
func TestRunReadsAHotPairAtMostOncePerPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(3)
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		synctest.Wait() // the first catalog and tickers reads
		id := []byte(pairID(1))
		start := time.Now()
		for time.Since(start) < 3*time.Second {
			p.Want(id, snapshot.StreamBook, time.Now().UnixNano())
			p.Want(id, snapshot.StreamTrades, time.Now().UnixNano())
			if b, _ := store.Book(id, time.Now().UnixNano()); b == nil {
				_ = p.Load(ctx, pairID(1), snapshot.StreamBook, snapshot.MaxDepth)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		books, trades := v.count(venue.CallBook, "P001USDT"), v.count(venue.CallTrades, "P001USDT")
		if books > 3000/350+1 || books < 3000/350-1 {
			t.Errorf("book reads in 3 s = %d, want about 3000/350 and at most %d", books, 3000/350+1)
		}
		if trades > 3+1 || trades < 2 {
			t.Errorf("trade reads in 3 s = %d, want about 3 and at most 4", trades)
		}
		for _, c := range v.log() {
			if c.call == venue.CallBook && c.symbol != "P001USDT" {
				t.Errorf("read %s, which nobody asked for", c.symbol)
			}
		}
	})
}

func TestFailedReadKeepsLastGoodSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(1)
		p, store := newTestPoller(v, Config{})
		id := []byte(pairID(1))
		p.Want(id, snapshot.StreamBook, time.Now().UnixNano())
		p.Refresh(t.Context(), snapshot.StreamBook)
		good, _ := store.Book(id, time.Now().UnixNano())
		if good == nil {
			t.Fatal("no book after the first read")
		}
		for _, fail := range []error{
			&venue.StatusError{Status: 400},
			errors.Join(venue.ErrBadData, errors.New("price is 1e3")),
		} {
			v.setFail(func(venue.Call, string) error { return fail })
			time.Sleep(350 * time.Millisecond)
			before := v.count(venue.CallBook, "")
			p.Refresh(t.Context(), snapshot.StreamBook)
			if v.count(venue.CallBook, "") != before+1 {
				t.Fatalf("%v: no read was attempted", fail)
			}
			if b, _ := store.Book(id, time.Now().UnixNano()); b != good {
				t.Fatalf("%v: the failed read replaced the last good book", fail)
			}
		}
	})
}

func TestRateLimitAnswerPausesEveryCallForRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   *venue.StatusError
		pause time.Duration
	}{
		{"429 with Retry-After", &venue.StatusError{Status: 429, RetryAfter: 30 * time.Second}, 30 * time.Second},
		{"429 without Retry-After", &venue.StatusError{Status: 429}, 60 * time.Second},
		{"418 with Retry-After", &venue.StatusError{Status: 418, RetryAfter: 120 * time.Second}, 120 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newFakeVenue(2)
				p, store := newTestPoller(v, Config{})
				id := []byte(pairID(1))
				p.Want(id, snapshot.StreamBook, time.Now().UnixNano())
				p.Want(id, snapshot.StreamTrades, time.Now().UnixNano())
				p.Refresh(t.Context(), snapshot.StreamBook)
				good, _ := store.Book(id, time.Now().UnixNano())

				time.Sleep(350 * time.Millisecond)
				var once sync.Once
				v.setFail(func(venue.Call, string) error {
					var err error
					once.Do(func() { err = tc.err })
					return err
				})
				p.Refresh(t.Context(), snapshot.StreamBook) // answered with the rate-limit status
				pausedAt := time.Now()
				calls := len(v.log())
				for time.Since(pausedAt) < tc.pause-time.Millisecond {
					p.Want(id, snapshot.StreamBook, time.Now().UnixNano())
					p.Refresh(t.Context(), snapshot.StreamBook)
					p.Refresh(t.Context(), snapshot.StreamTrades)
					_ = p.docs.refreshTickers(t.Context())
					_ = p.RefreshCatalog(t.Context())
					if err := p.Load(t.Context(), pairID(2), snapshot.StreamBook, snapshot.MaxDepth); !errors.Is(err, venue.ErrPaused) {
						t.Fatalf("Load during the pause = %v, want ErrPaused", err)
					}
					time.Sleep(350 * time.Millisecond)
				}
				if n := len(v.log()) - calls; n != 0 {
					t.Fatalf("%d venue calls during the %s pause, want 0", n, tc.pause)
				}
				if b, _ := store.Book(id, time.Now().UnixNano()); b != good {
					t.Fatal("the pause dropped or replaced the last good book")
				}
				time.Sleep(tc.pause - time.Since(pausedAt) + 350*time.Millisecond)
				p.Refresh(t.Context(), snapshot.StreamBook)
				if n := len(v.log()) - calls; n == 0 {
					t.Fatal("no venue call after the pause ended")
				}
			})
		})
	}
}

func TestRegionRefusalMakesThePollerNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(1)
		p, _ := newTestPoller(v, Config{Spot: []string{pairID(1)}})
		if err := p.docs.refreshTickers(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := p.Status(); !st.Ready {
			t.Fatalf("not ready with pairs and tickers loaded: %s", st.Reason)
		}
		v.setFail(func(venue.Call, string) error { return &venue.StatusError{Status: 451} })
		time.Sleep(time.Minute)
		_ = p.RefreshCatalog(t.Context())
		if st := p.Status(); st.Ready || st.Reason == "" {
			t.Fatalf("ready after a 451: %+v", st)
		}
	})
}

// TestBudgetHolds200HotPairsWithinTheLimit keeps 200 pairs hot on a budget
// of 1,200 weight per minute for three simulated minutes: the venue must
// never count more than 1,200 in any minute, and every pair must still be
// refreshed, the oldest first.
func TestBudgetHolds200HotPairsWithinTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(200)
		v.limit = 2400
		v.weights = [venue.NumCalls]int{venue.CallCatalog: 1, venue.CallStats: 40, venue.CallQuotes: 2, venue.CallBook: 2, venue.CallTrades: 1}
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store, Budget: 0.5, Spot: []string{pairID(1)}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		start := time.Now()
		for time.Since(start) < 3*time.Minute {
			for i := 1; i <= 200; i++ {
				p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
				p.Want([]byte(pairID(i)), snapshot.StreamTrades, time.Now().UnixNano())
			}
			time.Sleep(10 * time.Second)
		}
		cancel()
		<-done

		calls := v.log()
		const budget = 1200
		maxWindow := 0
		for i, c := range calls {
			sum := 0
			for _, prev := range calls[:i+1] {
				if c.at.Sub(prev.at) < time.Minute {
					sum += prev.weight
				}
			}
			maxWindow = max(maxWindow, sum)
		}
		if maxWindow > budget {
			t.Fatalf("the venue counted %d weight in one minute, budget %d", maxWindow, budget)
		}
		if maxWindow < budget*8/10 {
			t.Errorf("spent at most %d of %d per minute: the budget is not used", maxWindow, budget)
		}
		for i := 1; i <= 200; i++ {
			sym := pairID(i)[:4] + "USDT"
			if v.count(venue.CallBook, sym) == 0 || v.count(venue.CallTrades, sym) == 0 {
				t.Fatalf("%s was never refreshed in 3 minutes (books %d, trades %d)",
					sym, v.count(venue.CallBook, sym), v.count(venue.CallTrades, sym))
			}
		}
		if p.Status().Stretched == 0 {
			t.Error("the stretch was not counted")
		}
		if tk := store.Tickers(); tk == nil || time.Since(time.Unix(0, tk.ReadAt())) > 10*time.Second {
			t.Error("tickers went stale: bulk reads were starved by per-pair reads")
		}
	})
}

// usedWeightVenue reports a weight the venue counted that the poller did not.
type usedWeightVenue struct {
	*fakeVenue
	used int
}

func (u usedWeightVenue) UsedWeight() (int, bool) { return u.used, true }

func TestBudgetReconcilesWithTheVenuesCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(3)
		v.limit = 2400
		v.weights = [venue.NumCalls]int{venue.CallCatalog: 1, venue.CallBook: 5}
		store := snapshot.NewStore()
		// 1193 of 1200: room for one weight-5 read beside the pair list's
		// reserve of 2 (a read a minute of weight 1, and one more).
		p := New(Config{Venue: usedWeightVenue{v, 1193}, Store: store})
		if err := p.RefreshCatalog(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
		}
		p.Refresh(t.Context(), snapshot.StreamBook)
		if n := v.count(venue.CallBook, ""); n != 1 {
			t.Fatalf("book calls = %d, want 1: the venue already counted 1193 of our 1200, room for one weight-5 read and the pair list's reserve", n)
		}
	})
}

func TestSetSpotRepublishesPairsWithoutCallingTheVenue(t *testing.T) {
	v := newFakeVenue(2)
	p, store := newTestPoller(v, Config{})
	if pair, _ := store.Pairs().Lookup(pairID(1)); pair.Kind != snapshot.KindPerp {
		t.Fatalf("kind = %q before the spot list, want perp", pair.Kind)
	}
	calls := len(v.log())
	p.SetSpot([]string{pairID(1)})
	if pair, _ := store.Pairs().Lookup(pairID(1)); pair.Kind != snapshot.KindSpot {
		t.Fatalf("kind = %q after the spot list, want spot", pair.Kind)
	}
	if len(v.log()) != calls {
		t.Fatal("SetSpot called the venue")
	}
}

func TestPairThatLeavesTheCatalogIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(2)
		p, store := newTestPoller(v, Config{})
		p.Want([]byte(pairID(2)), snapshot.StreamBook, time.Now().UnixNano())
		p.Refresh(t.Context(), snapshot.StreamBook)
		v.mu.Lock()
		v.markets = v.markets[:1]
		v.mu.Unlock()
		if err := p.RefreshCatalog(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := store.Pairs().Lookup(pairID(2)); ok {
			t.Fatal("a pair that left the catalog is still in /pairs")
		}
		// Caches may hold a /pairs that lists it for their max-age.
		if !store.Listed([]byte(pairID(2)), time.Now().UnixNano()) {
			t.Fatal("a pair that left the catalog is not answered at once")
		}
		time.Sleep(time.Second)
		before := v.count(venue.CallBook, "")
		p.Refresh(t.Context(), snapshot.StreamBook)
		if v.count(venue.CallBook, "") != before {
			t.Fatal("a pair that left the catalog is still read")
		}
		if p.Status().Hot[snapshot.StreamBook] != 0 {
			t.Fatal("a pair that left the catalog is still hot")
		}
		time.Sleep(snapshot.CacheMaxAge - time.Second)
		if store.Listed([]byte(pairID(2)), time.Now().UnixNano()) {
			t.Fatal("a pair that left the catalog is still answered after the caches' max-age")
		}
	})
}

func TestTickersPublishedForSpotPairs(t *testing.T) {
	v := newFakeVenue(3)
	p, store := newTestPoller(v, Config{Spot: []string{pairID(2)}})
	if err := p.docs.refreshTickers(t.Context()); err != nil {
		t.Fatal(err)
	}
	tk := store.Tickers()
	if tk == nil || tk.Len() != 1 {
		t.Fatalf("tickers = %v, want one for the one spot pair", tk)
	}
}

// A read that hangs until the call timeout holds only its own pair: the
// other hot pairs are still read every period meanwhile.
func TestAHangingReadDoesNotHoldOtherPairs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(3)
		v.hang = "P001USDT"
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store, CallTimeout: 5 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		synctest.Wait()
		for i := 1; i <= 2; i++ {
			p.Want([]byte(pairID(i)), snapshot.StreamBook, time.Now().UnixNano())
		}
		time.Sleep(3 * time.Second)
		cancel()
		<-done
		if n := v.count(venue.CallBook, "P001USDT"); n != 1 {
			t.Errorf("the hanging pair was read %d times while its read was in flight, want 1", n)
		}
		if n := v.count(venue.CallBook, "P002USDT"); n < 3000/350-1 {
			t.Errorf("the other pair was read %d times in 3 s while one read hung, want about %d", n, 3000/350)
		}
	})
}

// After a long outage the feed recovers within a probe interval and a
// refresh cycle of the venue healing, not at the end of a 30 s back-off, and
// the outage cost the venue about a call a second.
func TestRecoveryAfterALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newFakeVenue(1)
		store := snapshot.NewStore()
		p := New(Config{Venue: v, Store: store})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		synctest.Wait()
		id := []byte(pairID(1))
		p.Want(id, snapshot.StreamBook, time.Now().UnixNano())

		v.setFail(func(venue.Call, string) error { return &venue.StatusError{Status: 503} })
		outage := time.Now()
		calls := len(v.log())
		for time.Since(outage) < time.Minute {
			p.Want(id, snapshot.StreamBook, time.Now().UnixNano())
			time.Sleep(time.Second)
		}
		duringOutage := len(v.log()) - calls
		v.setFail(nil)
		healed := time.Now()
		var recovered time.Duration
		for recovered == 0 {
			time.Sleep(10 * time.Millisecond)
			if b, _ := store.Book(id, time.Now().UnixNano()); b != nil && b.ReadAt() >= healed.UnixNano() {
				recovered = time.Since(healed)
			}
			if time.Since(healed) > time.Minute {
				t.Fatal("no fresh book a minute after the venue healed")
			}
		}
		cancel()
		<-done
		t.Logf("a minute of 503s cost %d venue calls; a fresh book %s after the venue healed", duringOutage, recovered)
		if recovered > budget.ProbeEvery+350*time.Millisecond+50*time.Millisecond {
			t.Errorf("fresh book %s after healing, want within a probe interval and a refresh cycle", recovered)
		}
		if duringOutage > 70 { // one probe a second, whichever job takes it
			t.Errorf("%d venue calls in a minute of outage: the back-off does not hold", duringOutage)
		}
	})
}
