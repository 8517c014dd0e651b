package poller

import (
	"context"
	"errors"
	"time"

	"marketfeed/poller/budget"
	"marketfeed/poller/live"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// source is what the poller asks of where pairs' data comes from besides
// its own REST rounds: the stream-fed live.Source, or restOnly when the
// venue's streams are not read, so that neither path asks which it has.
// What the whole-market documents ask of it is docSource.
type source interface {
	// Streaming reports whether the pair's stream of s delivers, so that
	// the stream, not REST rounds, keeps it.
	Streaming(id string, s snapshot.Stream) bool
	// Load makes the pair's snapshot of s current for a waiting request,
	// and a book deep enough to serve depth levels a side; handled is
	// false when the caller must read REST instead.
	Load(ctx context.Context, id string, s snapshot.Stream, depth int) (handled bool, err error)
	// Sources counts the pairs of each stream kind by where they come
	// from; ok is false without streams.
	Sources() (pairs [snapshot.NumStreams]map[string]int, ok bool)
	// SyncProgress reports how the books out of sequence come back; zero
	// without streams.
	SyncProgress() live.SyncProgress
	// KeepsTickers reports whether the source rebuilds the tickers from a
	// stream, so that Run rebuilds them as often as books are published.
	KeepsTickers() bool
	// Schedule starts the source's own work under the poller's lifetime.
	Schedule(sch live.Scheduler)
	// PollPurpose is what a REST round's read of a pair's stream s spends
	// on: a poll without streams, a stand-in for a lost stream with them.
	PollPurpose(s snapshot.Stream) budget.Purpose
}

// docSource is what the whole-market documents ask of the same source:
// each whole-market stream's rows by its kind (see venue.Doc), and the
// quotes of the local books.
type docSource interface {
	// SetPairs follows the pair list the documents publish.
	SetPairs(pairs *snapshot.Pairs)
	// Flowing reports whether the whole-market stream doc delivers
	// recently enough that its REST read need not stand in.
	Flowing(doc venue.Doc, now time.Time) bool
	// StreamRows returns the rows the stream doc has brought and when they
	// were current; ok is false while there is none.
	StreamRows(doc venue.Doc) (rows venue.Rows, at time.Time, ok bool)
	// SeedRows gives a stream's rows a REST read's as a base.
	SeedRows(rows venue.Rows)
	// Quotes returns the spot pairs' quotes from their local books, when
	// each was current, and whether all are recent enough that the bulk
	// quotes need not stand in.
	Quotes(spot []snapshot.Pair, now time.Time) (quotes []venue.Quote, at []time.Time, all bool)
	// Settled is source.Settled: open interest is read only then.
	Settled(now time.Time) bool
}

var (
	_ source    = (*live.Source)(nil)
	_ docSource = (*live.Source)(nil)
	_ source    = restOnly{}
	_ docSource = restOnly{}
)

// restOnly is the source of a poller that reads no streams: nothing is
// stream-fed, so every question has the REST answer.
type restOnly struct{}

func (restOnly) SetPairs(*snapshot.Pairs)               {}
func (restOnly) Streaming(string, snapshot.Stream) bool { return false }
func (restOnly) Load(context.Context, string, snapshot.Stream, int) (bool, error) {
	return false, nil
}
func (restOnly) Flowing(venue.Doc, time.Time) bool { return false }
func (restOnly) StreamRows(venue.Doc) (venue.Rows, time.Time, bool) {
	return venue.Rows{}, time.Time{}, false
}
func (restOnly) SeedRows(venue.Rows) {}
func (restOnly) Quotes([]snapshot.Pair, time.Time) ([]venue.Quote, []time.Time, bool) {
	return nil, nil, false
}
func (restOnly) Sources() ([snapshot.NumStreams]map[string]int, bool) {
	return [snapshot.NumStreams]map[string]int{}, false
}
func (restOnly) KeepsTickers() bool              { return false }
func (restOnly) SyncProgress() live.SyncProgress { return live.SyncProgress{} }
func (restOnly) Settled(time.Time) bool          { return true }
func (restOnly) Schedule(live.Scheduler)         {}

// PollPurpose: without streams, a REST round is how every pair is read.
func (restOnly) PollPurpose(s snapshot.Stream) budget.Purpose { return streamRows[s].purpose }

// liveREST is the poller as the stream-fed source sees it: its call path,
// budget, read slots and lifetime, and what requests ask for.
type liveREST struct{ p *Poller }

var (
	_ live.REST   = liveREST{}
	_ live.Demand = liveREST{}
)

// Start runs read if a read slot is free, calls are not paused and the
// budget grants the ask, under the poller's lifetime.
func (r liveREST) Start(ask budget.Ask, read func(ctx context.Context)) bool {
	p := r.p
	if p.blocked() {
		return false
	}
	select {
	case p.liveSlots <- struct{}{}:
	default:
		return false
	}
	if !p.ledger.Take(time.Now(), ask) {
		<-p.liveSlots
		return false
	}
	if !p.spawn(func(ctx context.Context) {
		defer func() { <-p.liveSlots }()
		read(ctx)
	}) {
		<-p.liveSlots
		return false
	}
	p.metrics.weight[ask.Purpose].Add(ask.Weight)
	return true
}

// heldBackFresh is how long a read the budget held back says its pair
// waits for weight: a few rounds, so that a pair no longer due (it cooled,
// its stream came back) is not reported as waiting.
const heldBackFresh = 5 * time.Second

// HeldBack reports whether a REST round found the hot pair's read due and
// the budget held it back within the last heldBackFresh, with no read
// reaching it since.
func (r liveREST) HeldBack(s snapshot.Stream, id string, now time.Time) bool {
	hp := r.p.hot[s].get(id)
	return hp != nil && hp.deferred.Load() >= now.Add(-heldBackFresh).UnixNano()
}

// Book reads a snapshot through the poller's call path.
func (r liveREST) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	return callFor(ctx, r.p, venue.CallBook, func(ctx context.Context) (venue.Book, error) {
		return r.p.venue.Book(ctx, symbol, depth)
	})
}

// Trades reads the newest trades through the poller's call path.
func (r liveREST) Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error) {
	return callFor(ctx, r.p, venue.CallTrades, func(ctx context.Context) ([]venue.Trade, error) {
		return r.p.venue.Trades(ctx, symbol, limit)
	})
}

// TradesFrom reads the trades from an id on through the poller's call
// path.
func (r liveREST) TradesFrom(ctx context.Context, symbol string, fromID int64, limit int) ([]venue.Trade, error) {
	return callFor(ctx, r.p, venue.CallTrades, func(ctx context.Context) ([]venue.Trade, error) {
		return r.p.venue.TradesFrom(ctx, symbol, fromID, limit)
	})
}

// NewestTradeID reads a market's newest single trade id through the
// poller's call path, from a venue that reads it (venue.TradeIDReader).
func (r liveREST) NewestTradeID(ctx context.Context, symbol string) (int64, error) {
	v, ok := r.p.venue.(venue.TradeIDReader)
	if !ok {
		return 0, errors.New("the venue reads no trade id")
	}
	return callFor(ctx, r.p, venue.CallTradeID, func(ctx context.Context) (int64, error) {
		return v.NewestTradeID(ctx, symbol)
	})
}

// TradeIDWeight is the weight of NewestTradeID, and whether the venue reads
// it (a venue without a weight limit, the simulator, weighs it 0).
func (r liveREST) TradeIDWeight() (int, bool) {
	if _, ok := r.p.venue.(venue.TradeIDReader); !ok {
		return 0, false
	}
	return r.p.venue.Weight(venue.CallTradeID), true
}

func (r liveREST) BookWeight(depth int) int          { return r.p.bookWeight(depth) }
func (r liveREST) TradesWeight() int                 { return r.p.venue.Weight(venue.CallTrades) }
func (r liveREST) Deferred(s snapshot.Stream, n int) { r.p.deferred(s, n) }

// Wanted reports whether a request asked for the pair's stream within the
// hot period.
func (r liveREST) Wanted(s snapshot.Stream, id string, now time.Time) bool {
	hp := r.p.hot[s].get(id)
	return hp != nil && hp.wanted.Load() >= now.Add(-r.p.cfg.HotTTL).UnixNano()
}
