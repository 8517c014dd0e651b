package main

import (
	"context"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/internal/promtext"
	"marketfeed/internal/wire"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// /contracts and /contract_specs end to end: marketfeed in process on the
// Binance adapter, its REST calls and market streams on venuesim with
// Binance's weights and weight limit, read as a derivatives aggregator
// reads them. Every value the venue gives is compared with the simulated
// venue's own at the item's time: venuesim runs seed 1 with no extra
// markets, so a sim.Venue of the same seed computes the truth.

const (
	// contractsMaxStale is the run's -max-stale. Half of it is how old a
	// book's quote, or a mark price stream row, may be before its contract
	// waits for the bulk quotes or the marks are read over REST: long
	// enough that the plan reads the bulk quotes within it at the run's
	// budget (5 weight at a tenth of 1,200 a minute: every 2.5 s), and
	// that a stream stalled for a second or two on a loaded machine leaves
	// no contract out.
	contractsMaxStale = 6 * time.Second
	// contractMarkMaxAge is how old an item's marks (its timestamp) are when
	// answered while the mark price stream flows: it brings them once a
	// second. Nine items in ten must be within it; every item within
	// contractMarkBound.
	contractMarkMaxAge = 2 * time.Second
	// contractMarkBound is how old an item's marks may be at all: a stream
	// row older than half max-stale is read again over REST, and the
	// contracts are built once a second.
	contractMarkBound = contractsMaxStale/2 + time.Second
	// contractInterestMaxAge is how old open interest may be when answered:
	// every contract is read once every 5 minutes, plus a round's second.
	contractInterestMaxAge = 5*time.Minute + time.Second
	// answerSlack is an answer's own way back: an age is judged when the
	// answer has arrived.
	answerSlack = 250 * time.Millisecond
)

// dollarQuotes are the quotes whose open interest /contracts values in
// dollars (docs/api.md, open_interest_usd).
var dollarQuotes = []string{"USD", "USDT", "USDC", "FDUSD", "BUSD", "TUSD"}

// contractTruth compares served contracts with the simulated venue's own.
type contractTruth struct {
	t     *testing.T
	store *snapshot.Store
	world *sim.Venue // the venue's marks and funding, at any instant
	// interest is the same world whose clock is interestAt, for its open
	// interest at an instant.
	interest   *sim.Venue
	interestAt int64
	rows       map[int64]map[string]venue.Contract // ContractsAt, by instant and symbol

	items, withInterest int
	recentMarks         int // items whose marks were within contractMarkMaxAge
	oldestMark          time.Duration
	oldestInterest      time.Duration
}

func newContractTruth(t *testing.T, store *snapshot.Store) *contractTruth {
	c := &contractTruth{t: t, store: store, world: sim.New(sim.Config{Seed: 1}), rows: map[int64]map[string]venue.Contract{}}
	c.interest = sim.New(sim.Config{Seed: 1, Now: func() time.Time { return time.UnixMilli(c.interestAt) }})
	return c
}

// at returns the venue's contract rows at the instant ms, by symbol.
func (c *contractTruth) at(ms int64) map[string]venue.Contract {
	if m, ok := c.rows[ms]; ok {
		return m
	}
	m := map[string]venue.Contract{}
	for _, r := range c.world.ContractsAt(ms) {
		m[r.Symbol] = r
	}
	c.rows[ms] = m
	return m
}

// rat parses a plain decimal the API served.
func (c *contractTruth) rat(what, s string) *big.Rat {
	c.t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok || !snapshot.IsPlain(s) {
		c.t.Errorf("%s %q is not a plain decimal", what, s)
		return new(big.Rat)
	}
	return r
}

// check compares one item, answered at answered, with the venue's values
// at its timestamp and at its open interest's.
func (c *contractTruth) check(got wire.Contract, answered time.Time) {
	t := c.t
	t.Helper()
	id := got.TickerID
	pair, ok := c.store.Pairs().Lookup(id)
	if !ok {
		t.Errorf("%s: an item for a pair not listed", id)
		return
	}
	c.items++
	if got.BaseCurrency != pair.Base || got.TargetCurrency != pair.Target || got.IndexName != pair.Base+"-"+pair.Target ||
		got.IndexCurrency != pair.Target || got.ContractPriceCurrency != pair.Target ||
		got.ProductType != snapshot.ProductPerpetual || got.ContractType != snapshot.ContractVanilla || got.EndTimestamp != nil {
		t.Errorf("%s: the pair's fixed fields are wrong: %+v", id, got)
	}
	age := answered.Sub(time.UnixMilli(got.Timestamp))
	c.oldestMark = max(c.oldestMark, age)
	if age <= contractMarkMaxAge+answerSlack {
		c.recentMarks++
	}
	if age > contractMarkBound+answerSlack {
		t.Errorf("%s: marks %s old when answered, past %s", id, age.Round(time.Millisecond), contractMarkBound)
	}
	want, ok := c.at(got.Timestamp)[pair.Symbol]
	if !ok {
		t.Errorf("%s: the venue has no contract %s at %d", id, pair.Symbol, got.Timestamp)
		return
	}
	if got.ContractPrice != want.MarkPrice || got.IndexPrice != want.IndexPrice || got.NextFundingRateTimestamp != want.NextFunding {
		t.Errorf("%s at %d: mark %s index %s next funding %d, the venue's %s %s %d", id, got.Timestamp,
			got.ContractPrice, got.IndexPrice, got.NextFundingRateTimestamp, want.MarkPrice, want.IndexPrice, want.NextFunding)
	}
	// The funding rate is the venue's fraction × 100 exactly, as the
	// shortest plain decimal.
	fraction := c.rat("venue funding rate", want.FundingRate)
	percent, err := snapshot.Percent(want.FundingRate)
	if err != nil {
		t.Fatal(err)
	}
	if c.rat("funding_rate", got.FundingRate).Cmp(new(big.Rat).Mul(fraction, big.NewRat(100, 1))) != 0 ||
		got.FundingRate != percent || got.NextFundingRate != got.FundingRate {
		t.Errorf("%s at %d: funding_rate %s next %s, the venue's fraction %s", id, got.Timestamp, got.FundingRate, got.NextFundingRate, want.FundingRate)
	}
	bid, ask := c.rat("bid", got.Bid), c.rat("ask", got.Ask)
	if bid.Sign() <= 0 || bid.Cmp(ask) >= 0 {
		t.Errorf("%s: bid %s ask %s, want 0 < bid < ask", id, got.Bid, got.Ask)
	}
	c.checkInterest(got, pair, answered)
}

// checkInterest compares an item's open interest with the venue's at its
// timestamp, and its dollar value with open interest × the mark.
func (c *contractTruth) checkInterest(got wire.Contract, pair snapshot.Pair, answered time.Time) {
	t := c.t
	t.Helper()
	id := got.TickerID
	if got.OpenInterest == nil {
		if got.OpenInterestUSD != nil || got.OpenInterestTimestamp != nil {
			t.Errorf("%s: open interest null, but not its dollar value or time", id)
		}
		return
	}
	if got.OpenInterestTimestamp == nil {
		t.Errorf("%s: open interest without its time", id)
		return
	}
	c.withInterest++
	at := *got.OpenInterestTimestamp
	age := answered.Sub(time.UnixMilli(at))
	c.oldestInterest = max(c.oldestInterest, age)
	if age > contractInterestMaxAge+answerSlack {
		t.Errorf("%s: open interest %s old when answered, past %s", id, age.Round(time.Millisecond), contractInterestMaxAge)
	}
	c.interestAt = at
	want, err := c.interest.OpenInterest(context.Background(), pair.Symbol)
	if err != nil {
		t.Fatal(err)
	}
	if *got.OpenInterest != want.Amount || want.Time != at {
		t.Errorf("%s: open interest %s at %d, the venue's %s", id, *got.OpenInterest, at, want.Amount)
	}
	if !slices.Contains(dollarQuotes, pair.Target) {
		if got.OpenInterestUSD != nil {
			t.Errorf("%s: a dollar value %s of open interest in %s", id, *got.OpenInterestUSD, pair.Target)
		}
		return
	}
	usd := new(big.Rat).Mul(c.rat("open_interest", *got.OpenInterest), c.rat("contract_price", got.ContractPrice))
	if got.OpenInterestUSD == nil || c.rat("open_interest_usd", *got.OpenInterestUSD).Cmp(usd) != 0 {
		t.Errorf("%s: open_interest_usd %v, want %s × %s", id, got.OpenInterestUSD, *got.OpenInterest, got.ContractPrice)
	}
}

// TestContractsAreTheVenuesContracts reads /pairs, /contracts and
// /contract_specs every 500 ms as an aggregator does, for 12 s once every
// book is in sequence: every answer is a 200; every listed pair has one
// item, in ticker_id order, and the specifications of one publication list
// the same contracts at the same price; every item's mark, index and
// funding are the venue's at its timestamp, nine in ten at most 2 s old
// when answered and none older than half max-stale and the second of a
// build (a loaded machine stalls the stream now and then); open interest,
// where read, is the venue's at its time and at most 5 minutes old, valued
// in dollars at the mark, and is read within 75 s of the start (it waits
// for weight nothing else wants); the best bid is under the best ask. Then a market the venue
// delists leaves /contracts before it leaves /pairs.
func TestContractsAreTheVenuesContracts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and reads it for about 20 s")
	}
	v := apptest.StartVenueSim(t, "-weight-limit", "2400")
	api, a, _ := startLoggedApp(t, streamArgs(v.URL, contractsMaxStale)...)
	base := api + "/api/public"
	start := time.Now()
	ids := apptest.ListedIDs(t, api)
	apptest.WaitContracts(t, base, ids, 20*time.Second)
	t.Logf("every listed pair in /contracts %s after start", time.Since(start).Round(time.Millisecond))
	const streamBooks = `marketfeed_pairs{part="books",source="stream"}`
	if !apptest.WaitFor(20*time.Second, func() bool {
		_, body := apptest.Get(t, "http://"+a.opsAddr()+"/metrics")
		got, err := promtext.Parse(string(body))
		return err == nil && got[streamBooks] == float64(len(ids))
	}) {
		t.Fatalf("not every book in sequence within 20 s")
	}
	t.Logf("every book in sequence %s after start", time.Since(start).Round(time.Millisecond))

	truth := newContractTruth(t, a.store)
	var reads, samePublication int
	for begin := time.Now(); time.Since(begin) < 12*time.Second; time.Sleep(500 * time.Millisecond) { // an aggregator's pace
		ids := apptest.ListedIDs(t, api)
		var items, again []wire.Contract
		var specs []wire.ContractSpec
		ok, tag := apptest.ReadContracts(t, base+"/contracts", &items)
		answered := time.Now()
		okSpecs, _ := apptest.ReadContracts(t, base+"/contract_specs", &specs)
		okAgain, tagAgain := apptest.ReadContracts(t, base+"/contracts", &again)
		if !ok || !okSpecs || !okAgain {
			continue
		}
		reads++
		if got := apptest.ContractIDs(items); !slices.Equal(got, ids) || !slices.IsSorted(got) {
			t.Errorf("/contracts lists %v, /pairs %v", got, ids)
		}
		for _, it := range items {
			truth.check(it, answered)
		}
		specIDs := make([]string, len(specs))
		for i, s := range specs {
			specIDs[i] = s.TickerID
		}
		if !slices.Equal(specIDs, ids) {
			t.Errorf("/contract_specs lists %v, /pairs %v", specIDs, ids)
			continue
		}
		// The same /contracts before and after: the specifications read
		// between are of that publication.
		if tag == "" || tag != tagAgain {
			continue
		}
		samePublication++
		for i, s := range specs {
			it := items[i]
			if s.ContractPrice != it.ContractPrice || s.ContractType != it.ContractType || s.ContractPriceCurrency != it.ContractPriceCurrency {
				t.Errorf("%s: specification %+v, contract price %s %s %s", s.TickerID, s, it.ContractType, it.ContractPrice, it.ContractPriceCurrency)
			}
		}
	}
	t.Logf("%d reads (%d with /contract_specs of the same publication), %d items checked, %d with open interest; "+
		"%d with marks within %s, the oldest %s (bound %s); oldest open interest %s (bound %s)",
		reads, samePublication, truth.items, truth.withInterest, truth.recentMarks, contractMarkMaxAge,
		truth.oldestMark.Round(time.Millisecond), contractMarkBound, truth.oldestInterest.Round(time.Millisecond), contractInterestMaxAge)
	if truth.recentMarks*10 < truth.items*9 {
		t.Errorf("%d of %d items with marks within %s, want nine in ten: the mark price stream is not what keeps them", truth.recentMarks, truth.items, contractMarkMaxAge)
	}
	// Open interest is read with weight nothing else wants: after a cold
	// start, the trade windows' backfills may hold the minute's window past
	// half until their minute expires, and open interest waits for it (a
	// read or two sometimes fits before them). It is the venue's once read,
	// and every contract's within a minute or so of that.
	waited := truth.withInterest == 0
	for deadline := time.Now().Add(75 * time.Second); truth.withInterest == 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
		var items []wire.Contract
		if ok, _ := apptest.ReadContracts(t, base+"/contracts", &items); ok {
			answered := time.Now()
			for _, it := range items {
				truth.check(it, answered)
			}
		}
	}
	if samePublication == 0 || truth.withInterest == 0 {
		t.Errorf("no /contract_specs compared with its publication (%d), or no open interest read within 75 s (%d)", samePublication, truth.withInterest)
	}
	if waited {
		t.Logf("open interest first answered %s after start", time.Since(start).Round(time.Second))
	}

	delistLeavesContracts(t, v, a, api)
}

// delistLeavesContracts delists DOGEUSDT at the venue and has the catalog
// read at once (rather than on the minute): once /pairs no longer lists
// DOGE_USDT, neither does any /contracts or /contract_specs answer; the
// contracts without it are published before the pair list is.
func delistLeavesContracts(t *testing.T, v *apptest.VenueSim, a *app, api string) {
	const id, symbol = "DOGE_USDT", "DOGEUSDT"
	if !slices.Contains(apptest.ListedIDs(t, api), id) {
		t.Fatalf("%s is not listed to begin with", id)
	}
	if _, body := apptest.Get(t, api+"/api/public/contracts"); !strings.Contains(string(body), `"ticker_id":"`+id+`"`) {
		t.Fatalf("/contracts does not list %s to begin with", id)
	}
	clearOfCatalogRead(3 * time.Second)
	v.List(symbol, false)
	if err := a.poller().RefreshCatalog(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(apptest.ListedIDs(t, api), id) {
		t.Fatalf("/pairs still lists %s after a catalog read without it", id)
	}
	for _, route := range []string{"/contracts", "/contract_specs"} {
		resp, body := apptest.Get(t, api+"/api/public"+route)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", route, resp.StatusCode, body)
		}
		if strings.Contains(string(body), `"ticker_id":"`+id+`"`) {
			t.Errorf("%s lists %s after /pairs dropped it", route, id)
		}
	}
}
