package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// fakeVenue is a venue whose answers and failures a test controls, and which
// logs every call it receives with the time and weight.
type fakeVenue struct {
	weights [venue.NumCalls]int
	limit   int
	markets []venue.Market

	mu    sync.Mutex
	calls []fakeCall
	// fail, when set, decides each call's error before it is counted as a
	// success; a StatusError models the venue's HTTP answers.
	fail func(c venue.Call, symbol string) error
	// gate, when set, blocks Book until it is closed or ctx ends.
	gate chan struct{}
	// hang, when set, makes Book of that symbol wait until ctx ends.
	hang string
	// depth, when it holds a symbol, answers Book from that market model,
	// as the snapshot of a stream-fed local book.
	depth map[string]*depthModel
	// tape, when it holds a symbol, answers Trades and TradesFrom from
	// that tape.
	tape map[string][]venue.Trade
}

type fakeCall struct {
	at     time.Time
	call   venue.Call
	symbol string
	weight int
	// from and limit are a TradesFrom read's, limit a Book read's depth;
	// from is 0 for every other call.
	from  int64
	limit int
}

// newFakeVenue lists n tradable perpetual markets P001USDT... (ticker ids
// P001_USDT...).
func newFakeVenue(n int) *fakeVenue {
	v := &fakeVenue{}
	for i := 1; i <= n; i++ {
		base := fmt.Sprintf("P%03d", i)
		v.markets = append(v.markets, venue.Market{Symbol: base + "USDT", Base: base, Quote: "USDT", Perpetual: true, Trading: true})
	}
	return v
}

func pairID(i int) string { return fmt.Sprintf("P%03d_USDT", i) }

func (v *fakeVenue) Name() string { return "fake" }

// Weight reads the weights under the lock: a test may change them while
// the poller's rounds run.
func (v *fakeVenue) Weight(c venue.Call) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.weights[c]
}

func (v *fakeVenue) record(c venue.Call, symbol string) error {
	return v.recordCall(fakeCall{call: c, symbol: symbol})
}

// recordCall logs call, timed and weighed now, and returns the error the
// test's fail makes of it.
func (v *fakeVenue) recordCall(call fakeCall) error {
	v.mu.Lock()
	call.at, call.weight = time.Now(), v.weights[call.call]
	v.calls = append(v.calls, call)
	fail := v.fail
	v.mu.Unlock()
	if fail != nil {
		return fail(call.call, call.symbol)
	}
	return nil
}

// count returns how many calls of kind c (for symbol, unless "") were made.
func (v *fakeVenue) count(c venue.Call, symbol string) int {
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

// probes returns how many book reads of symbol had a probe's depth.
func (v *fakeVenue) probes(symbol string) int { return v.bookReads(symbol, live.ProbeDepth) }

// syncs returns how many book reads of symbol (every one, if "") had the
// depth a book is synced from by default; the refreshes that deepen it
// after are read deeper.
func (v *fakeVenue) syncs(symbol string) int { return v.bookReads(symbol, DefaultSyncDepth) }

// bookReads returns how many book reads of symbol (every one, if "") were
// made at depth.
func (v *fakeVenue) bookReads(symbol string, depth int) int {
	n := 0
	for _, call := range v.log() {
		if call.call == venue.CallBook && (symbol == "" || call.symbol == symbol) && call.limit == depth {
			n++
		}
	}
	return n
}

// setTape answers symbol's trade reads from tape.
func (v *fakeVenue) setTape(symbol string, tape []venue.Trade) {
	v.mu.Lock()
	v.tape = map[string][]venue.Trade{symbol: tape}
	v.mu.Unlock()
}

// failTrades makes every trade read fail, or none.
func (v *fakeVenue) failTrades(fail bool) {
	if !fail {
		v.setFail(nil)
		return
	}
	v.setFail(func(c venue.Call, _ string) error {
		if c == venue.CallTrades {
			return errors.New("trades unavailable")
		}
		return nil
	})
}

// fromReads returns the TradesFrom reads of symbol, oldest first.
func (v *fakeVenue) fromReads(symbol string) []fakeCall {
	var out []fakeCall
	for _, c := range v.log() {
		if c.symbol == symbol && c.from != 0 {
			out = append(out, c)
		}
	}
	return out
}

// symbolsOf returns the symbols of the calls of kind c from the from-th
// call on, in the order they were made.
func (v *fakeVenue) symbolsOf(c venue.Call, from int) []string {
	var out []string
	for _, call := range v.log()[from:] {
		if call.call == c {
			out = append(out, call.symbol)
		}
	}
	return out
}

func (v *fakeVenue) log() []fakeCall {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]fakeCall(nil), v.calls...)
}

func (v *fakeVenue) setFail(f func(c venue.Call, symbol string) error) {
	v.mu.Lock()
	v.fail = f
	v.mu.Unlock()
}

func (v *fakeVenue) Catalog(ctx context.Context) (venue.Catalog, error) {
	if err := v.record(venue.CallCatalog, ""); err != nil {
		return venue.Catalog{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return venue.Catalog{Markets: append([]venue.Market(nil), v.markets...), WeightLimit: v.limit}, nil
}

func (v *fakeVenue) Stats(ctx context.Context) ([]venue.Stat, error) {
	if err := v.record(venue.CallStats, ""); err != nil {
		return nil, err
	}
	var out []venue.Stat
	for _, m := range v.markets {
		out = append(out, venue.Stat{Symbol: m.Symbol, LastPrice: "10.5", High: "11", Low: "10", BaseVolume: "100", QuoteVolume: "1050"})
	}
	return out, nil
}

func (v *fakeVenue) Quotes(ctx context.Context) ([]venue.Quote, error) {
	if err := v.record(venue.CallQuotes, ""); err != nil {
		return nil, err
	}
	var out []venue.Quote
	for _, m := range v.markets {
		out = append(out, venue.Quote{Symbol: m.Symbol, Bid: "10.4", Ask: "10.6"})
	}
	return out, nil
}

func (v *fakeVenue) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	if err := v.recordCall(fakeCall{call: venue.CallBook, symbol: symbol, limit: depth}); err != nil {
		return venue.Book{}, err
	}
	v.mu.Lock()
	gate, hang, model := v.gate, v.hang, v.depth[symbol]
	v.mu.Unlock()
	if symbol == hang {
		<-ctx.Done()
		return venue.Book{}, ctx.Err()
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return venue.Book{}, ctx.Err()
		}
	}
	if model != nil {
		return model.snapshot(depth), nil
	}
	ms := time.Now().UnixMilli()
	return venue.Book{
		Time: ms,
		Bids: []venue.Level{{Price: "10.4", Size: strconv.FormatInt(ms%1000+1, 10)}},
		Asks: []venue.Level{{Price: "10.6", Size: "1"}},
	}, nil
}

func (v *fakeVenue) Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error) {
	if err := v.record(venue.CallTrades, symbol); err != nil {
		return nil, err
	}
	v.mu.Lock()
	tape, taped := v.tape[symbol]
	v.mu.Unlock()
	if taped {
		return slices.Clone(tape[max(0, len(tape)-limit):]), nil
	}
	return []venue.Trade{{Time: time.Now().UnixMilli(), Price: "10.5", Size: "2", Sell: true}}, nil
}

// TradesFrom answers from the tape the trades from id from on; without a
// tape, none.
func (v *fakeVenue) TradesFrom(ctx context.Context, symbol string, from int64, limit int) ([]venue.Trade, error) {
	if err := v.recordCall(fakeCall{call: venue.CallTrades, symbol: symbol, from: from, limit: limit}); err != nil {
		return nil, err
	}
	v.mu.Lock()
	tape := v.tape[symbol]
	v.mu.Unlock()
	at := slices.IndexFunc(tape, func(tr venue.Trade) bool { return tr.ID >= from })
	if at < 0 {
		return nil, nil
	}
	return slices.Clone(tape[at:min(len(tape), at+limit)]), nil
}

// NewestTradeID answers the newest single trade id of the tape: its newest
// trade's LastID; 0 without a tape.
func (v *fakeVenue) NewestTradeID(ctx context.Context, symbol string) (int64, error) {
	if err := v.record(venue.CallTradeID, symbol); err != nil {
		return 0, err
	}
	v.mu.Lock()
	tape := v.tape[symbol]
	v.mu.Unlock()
	if len(tape) == 0 {
		return 0, nil
	}
	return tape[len(tape)-1].LastID, nil
}

// newTestPoller returns a poller over v with its catalog already read.
func newTestPoller(v venue.Venue, cfg Config) (*Poller, *snapshot.Store) {
	store := snapshot.NewStore()
	cfg.Venue, cfg.Store = v, store
	p := New(cfg)
	if err := p.RefreshCatalog(context.Background()); err != nil {
		panic(err)
	}
	return p, store
}

// depthModel is one market's true order book, moved one diff event at a
// time by the test: the venue behind a depth stream.
type depthModel struct {
	mu     sync.Mutex
	symbol string
	step   int64
	last   int64             // the update id the book is at
	bids   map[string]string // price → size
	asks   map[string]string
}

// newDepthModel holds 300 bid levels below 1000 and 300 asks above it.
func newDepthModel(symbol string) *depthModel {
	m := &depthModel{symbol: symbol, last: 1000, bids: map[string]string{}, asks: map[string]string{}}
	for i := 1; i <= 300; i++ {
		m.bids[strconv.Itoa(1000-i)] = "1"
		m.asks[strconv.Itoa(1000+i)] = "1"
	}
	return m
}

// next moves the book by one event and returns it: a few sizes change, a
// level at the top of each side comes or goes.
func (m *depthModel) next() venue.DepthUpdate {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.step++
	k := m.step
	u := venue.DepthUpdate{Symbol: m.symbol, Prev: m.last, First: m.last + 1, Last: m.last + 3}
	set := func(side map[string]string, out *[]venue.Level, price int64, size string) {
		p := strconv.FormatInt(price, 10)
		if size == "0" {
			delete(side, p)
		} else {
			side[p] = size
		}
		*out = append(*out, venue.Level{Price: p, Size: size})
	}
	set(m.bids, &u.Bids, 1000-1-k%40, strconv.FormatInt(k+1, 10))
	set(m.asks, &u.Asks, 1000+1+k%25, strconv.FormatInt(k+2, 10))
	if k%2 == 0 {
		set(m.bids, &u.Bids, 999, "0") // the best bid is taken...
	} else {
		set(m.bids, &u.Bids, 999, "5") // ...and put back
	}
	m.last = u.Last
	u.Time = 1_700_000_000_000 + k
	return u
}

// takeAsks is an event in which a buyer takes the n best asks: the top
// moves up through them.
func (m *depthModel) takeAsks(n int) venue.DepthUpdate {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.step++
	u := venue.DepthUpdate{Symbol: m.symbol, Prev: m.last, First: m.last + 1, Last: m.last + 3, Time: 1_700_000_000_000 + m.step}
	for _, l := range m.side(m.asks, false, n) {
		delete(m.asks, l.Price)
		u.Asks = append(u.Asks, venue.Level{Price: l.Price, Size: "0"})
	}
	m.last = u.Last
	return u
}

// giveAsks is an event in which sellers put n asks back just below the
// best ask, one price apart.
func (m *depthModel) giveAsks(n int) venue.DepthUpdate {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.step++
	u := venue.DepthUpdate{Symbol: m.symbol, Prev: m.last, First: m.last + 1, Last: m.last + 3, Time: 1_700_000_000_000 + m.step}
	best, _ := strconv.Atoi(m.side(m.asks, false, 1)[0].Price)
	for i := 1; i <= n; i++ {
		p := strconv.Itoa(best - i)
		m.asks[p] = "1"
		u.Asks = append(u.Asks, venue.Level{Price: p, Size: "1"})
	}
	m.last = u.Last
	return u
}

// snapshot is the venue's depth answer: up to depth levels a side, best
// first, at the current update id.
func (m *depthModel) snapshot(depth int) venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	return venue.Book{LastUpdateID: m.last, Time: 1_700_000_000_000 + m.step, Bids: m.side(m.bids, true, depth), Asks: m.side(m.asks, false, depth)}
}

func (m *depthModel) side(side map[string]string, bids bool, depth int) []venue.Level {
	prices := make([]int, 0, len(side))
	for p := range side {
		n, _ := strconv.Atoi(p)
		prices = append(prices, n)
	}
	slices.Sort(prices)
	if bids {
		slices.Reverse(prices)
	}
	prices = prices[:min(depth, len(prices))]
	out := make([]venue.Level, len(prices))
	for i, n := range prices {
		p := strconv.Itoa(n)
		out[i] = venue.Level{Price: p, Size: side[p]}
	}
	return out
}

// body is the response a book built from the model now must have.
func (m *depthModel) body(tickerID string) string {
	b := m.snapshot(snapshot.MaxDepth)
	v, err := snapshot.NewBook(tickerID, b.Time, b.Bids, b.Asks, time.Now())
	if err != nil {
		panic(err)
	}
	return string(v.Body())
}

// fakeStreams records what the poller asks of the venue's streams; the test
// delivers the events itself through the poller's Sink.
type fakeStreams struct {
	mu       sync.Mutex
	watched  []string
	resubbed []string
	running  chan struct{}
}

func newFakeStreams() *fakeStreams { return &fakeStreams{running: make(chan struct{})} }

func (f *fakeStreams) Run(ctx context.Context, sink venue.Sink) error {
	close(f.running)
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeStreams) Watch(symbols []string) {
	f.mu.Lock()
	f.watched = slices.Clone(symbols)
	f.mu.Unlock()
}

func (f *fakeStreams) Resubscribe(kind snapshot.Stream, symbol string) {
	f.mu.Lock()
	f.resubbed = append(f.resubbed, kind.String()+" "+symbol)
	f.mu.Unlock()
}
