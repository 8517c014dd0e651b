// Package venuetest holds what the tests of several packages need of
// package venue: a Sink that records what it is given, so that the tests of
// an adapter (binance, sim) and of what relays a Sink (standby) read the
// same fake.
package venuetest

import (
	"slices"
	"sync"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Method names what a Call recorded: a Sink method (Depth, Trade, Live,
// Lost), or a delivery of a whole-market stream through Rows, recorded by
// its venue.Doc (Tickers, Contracts; see docMethods).
type Method int

// The Sink methods, and the whole-market streams Rows delivers.
const (
	Depth Method = iota
	Trade
	Tickers
	Contracts
	Live
	Lost
)

// Call is one call a Recorder got: its method and its arguments, the
// others zero. Slices are the Recorder's copies; a depth event is kept as
// it was lent unless the Recorder clones it (see Recorder.Clone).
type Call struct {
	Method    Method
	Depth     venue.DepthUpdate // Depth; lent as the adapter lent it (see venue.DepthUpdate)
	Symbol    string            // Trade
	Trade     venue.Trade       // Trade
	Stats     []venue.Stat      // Tickers: the ticker stream's rows
	Contracts []venue.Contract  // Contracts: the mark price stream's rows
	Kind      snapshot.Stream   // Live, Lost
	Symbols   []string          // Live, Lost
}

// Recorder is a venue.Sink that records every call, in order. It is safe
// for the concurrent calls a Sink gets. The zero Recorder is ready.
type Recorder struct {
	// Clone, set, keeps a Clone of each depth event rather than the event
	// as it was lent: for an adapter or relay that reuses its memory once
	// the call returns, whose events a test reads afterwards.
	Clone bool

	mu    sync.Mutex
	calls []Call
	taken int // calls before it were returned by Take
}

var _ venue.Sink = (*Recorder)(nil)

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// Depth records a depth event: as it was lent, or a Clone of it (see
// Recorder.Clone).
func (r *Recorder) Depth(u venue.DepthUpdate) {
	if r.Clone {
		u = u.Clone()
	}
	r.add(Call{Method: Depth, Depth: u})
}

// Trade records a copy of a trade of symbol, whose strings were lent.
func (r *Recorder) Trade(symbol string, tr venue.Trade) {
	r.add(Call{Method: Trade, Symbol: symbol, Trade: venue.CloneTrade(tr)})
}

// Rows records a delivery of a whole-market stream's rows, as a call of
// its method (see docMethods).
func (r *Recorder) Rows(rows venue.Rows) {
	r.add(Call{Method: docMethods[rows.Doc()], Stats: slices.Clone(rows.Stats()), Contracts: slices.Clone(rows.Contracts())})
}

// docMethods is the Method a delivery of each whole-market stream is
// recorded as.
var docMethods = [venue.NumDocs]Method{venue.DocTickers: Tickers, venue.DocMarks: Contracts}

// Live records symbols' streams of kind reported live.
func (r *Recorder) Live(kind snapshot.Stream, symbols []string) {
	r.add(Call{Method: Live, Kind: kind, Symbols: slices.Clone(symbols)})
}

// Lost records symbols' streams of kind reported lost.
func (r *Recorder) Lost(kind snapshot.Stream, symbols []string) {
	r.add(Call{Method: Lost, Kind: kind, Symbols: slices.Clone(symbols)})
}

// Take returns the calls recorded since the last Take, in order.
func (r *Recorder) Take() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[r.taken:len(r.calls):len(r.calls)]
	r.taken = len(r.calls)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Calls returns every call recorded, in order, Take or not.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[:len(r.calls):len(r.calls)]
}

// DepthEvents returns the depth events of symbol recorded, in order; "":
// of every symbol.
func (r *Recorder) DepthEvents(symbol string) []venue.DepthUpdate {
	return collect(r, func(c Call) (venue.DepthUpdate, bool) {
		return c.Depth, c.Method == Depth && (symbol == "" || c.Depth.Symbol == symbol)
	})
}

// Trades returns the trades of symbol recorded, in order; "": of every
// symbol.
func (r *Recorder) Trades(symbol string) []venue.Trade {
	return collect(r, func(c Call) (venue.Trade, bool) {
		return c.Trade, c.Method == Trade && (symbol == "" || c.Symbol == symbol)
	})
}

// TickerRows returns every delivery of ticker rows recorded, in order.
func (r *Recorder) TickerRows() [][]venue.Stat {
	return collect(r, func(c Call) ([]venue.Stat, bool) { return c.Stats, c.Method == Tickers })
}

// ContractRows returns every delivery of mark price rows recorded, in
// order.
func (r *Recorder) ContractRows() [][]venue.Contract {
	return collect(r, func(c Call) ([]venue.Contract, bool) { return c.Contracts, c.Method == Contracts })
}

// Reported returns the symbols whose streams of kind were reported by
// method (Live or Lost), in the order reported, a symbol once a report.
func (r *Recorder) Reported(method Method, kind snapshot.Stream) []string {
	var out []string
	for _, syms := range collect(r, func(c Call) ([]string, bool) { return c.Symbols, c.Method == method && c.Kind == kind }) {
		out = append(out, syms...)
	}
	return out
}

// collect returns what pick takes of every call recorded, in order: nil
// when it takes nothing.
func collect[T any](r *Recorder, pick func(Call) (T, bool)) []T {
	var out []T
	for _, c := range r.Calls() {
		if v, ok := pick(c); ok {
			out = append(out, v)
		}
	}
	return out
}
