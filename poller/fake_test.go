package poller

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"marketfeed/snapshot"
)

// fakeVenue is a venue whose answers and failures a test controls, and which
// logs every call it receives with the time and weight.
type fakeVenue struct {
	weights [numCalls]int
	limit   int
	markets []Market

	mu    sync.Mutex
	calls []fakeCall
	// fail, when set, decides each call's error before it is counted as a
	// success; a StatusError models the venue's HTTP answers.
	fail func(c Call, symbol string) error
	// gate, when set, blocks Book until it is closed or ctx ends.
	gate chan struct{}
	// hang, when set, makes Book of that symbol wait until ctx ends.
	hang string
}

type fakeCall struct {
	at     time.Time
	call   Call
	symbol string
	weight int
}

// newFakeVenue lists n tradable perpetual markets P001USDT... (ticker ids
// P001_USDT...).
func newFakeVenue(n int) *fakeVenue {
	v := &fakeVenue{}
	for i := 1; i <= n; i++ {
		base := fmt.Sprintf("P%03d", i)
		v.markets = append(v.markets, Market{Symbol: base + "USDT", Base: base, Quote: "USDT", Perpetual: true, Trading: true})
	}
	return v
}

func pairID(i int) string { return fmt.Sprintf("P%03d_USDT", i) }

func (v *fakeVenue) Name() string      { return "fake" }
func (v *fakeVenue) Weight(c Call) int { return v.weights[c] }

func (v *fakeVenue) record(c Call, symbol string) error {
	v.mu.Lock()
	v.calls = append(v.calls, fakeCall{time.Now(), c, symbol, v.weights[c]})
	fail := v.fail
	v.mu.Unlock()
	if fail != nil {
		return fail(c, symbol)
	}
	return nil
}

// count returns how many calls of kind c (for symbol, unless "") were made.
func (v *fakeVenue) count(c Call, symbol string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, call := range v.calls {
		if call.call == c && (symbol == "" || call.symbol == symbol) {
			n++
		}
	}
	return n
}

func (v *fakeVenue) log() []fakeCall {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]fakeCall(nil), v.calls...)
}

func (v *fakeVenue) setFail(f func(c Call, symbol string) error) {
	v.mu.Lock()
	v.fail = f
	v.mu.Unlock()
}

func (v *fakeVenue) Catalog(ctx context.Context) (Catalog, error) {
	if err := v.record(CallCatalog, ""); err != nil {
		return Catalog{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return Catalog{Markets: append([]Market(nil), v.markets...), WeightLimit: v.limit}, nil
}

func (v *fakeVenue) Stats(ctx context.Context) ([]Stat, error) {
	if err := v.record(CallStats, ""); err != nil {
		return nil, err
	}
	var out []Stat
	for _, m := range v.markets {
		out = append(out, Stat{Symbol: m.Symbol, LastPrice: "10.5", High: "11", Low: "10", BaseVolume: "100", QuoteVolume: "1050"})
	}
	return out, nil
}

func (v *fakeVenue) Quotes(ctx context.Context) ([]Quote, error) {
	if err := v.record(CallQuotes, ""); err != nil {
		return nil, err
	}
	var out []Quote
	for _, m := range v.markets {
		out = append(out, Quote{Symbol: m.Symbol, Bid: "10.4", Ask: "10.6"})
	}
	return out, nil
}

func (v *fakeVenue) Book(ctx context.Context, symbol string, depth int) (Book, error) {
	if err := v.record(CallBook, symbol); err != nil {
		return Book{}, err
	}
	v.mu.Lock()
	gate, hang := v.gate, v.hang
	v.mu.Unlock()
	if symbol == hang {
		<-ctx.Done()
		return Book{}, ctx.Err()
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Book{}, ctx.Err()
		}
	}
	ms := time.Now().UnixMilli()
	return Book{
		Time: ms,
		Bids: []Level{{Price: "10.4", Size: strconv.FormatInt(ms%1000+1, 10)}},
		Asks: []Level{{Price: "10.6", Size: "1"}},
	}, nil
}

func (v *fakeVenue) Trades(ctx context.Context, symbol string, limit int) ([]Trade, error) {
	if err := v.record(CallTrades, symbol); err != nil {
		return nil, err
	}
	return []Trade{{Time: time.Now().UnixMilli(), Price: "10.5", Size: "2", Sell: true}}, nil
}

// newTestPoller returns a poller over v with its catalog already read.
func newTestPoller(v *fakeVenue, cfg Config) (*Poller, *snapshot.Store) {
	store := snapshot.NewStore()
	cfg.Venue, cfg.Store = v, store
	p := New(cfg)
	if err := p.RefreshCatalog(context.Background()); err != nil {
		panic(err)
	}
	return p, store
}
