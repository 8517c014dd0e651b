package venue

import (
	"context"
	"strings"

	"marketfeed/snapshot"
)

// DepthUpdate is one event of a market's diff depth stream: every level that
// changed between two update ids, with its new absolute size ("0" removes
// the level). Levels are plain decimals, checked by the adapter.
//
// An event handed to Sink.Depth is lent: its strings and slices may be the
// adapter's buffers, reused once the call returns (a stream connection
// decodes every frame into the same memory). A consumer that keeps any of
// it past the call keeps a Clone.
type DepthUpdate struct {
	Symbol string // the venue's symbol, upper case as in the catalog
	First  int64  // U: the first update id in the event
	Last   int64  // u: the last update id in the event
	Prev   int64  // pu: the last update id of the previous event
	Time   int64  // T: the venue's engine time, ms; published as the book's timestamp
	Bids   []Level
	Asks   []Level
}

// Clone returns a copy of u that shares no memory with it: its symbol and
// decimals in one new string, its levels in one new slice.
func (u DepthUpdate) Clone() DepthUpdate {
	levels := append(append(make([]Level, 0, len(u.Bids)+len(u.Asks)), u.Bids...), u.Asks...)
	n := len(u.Symbol)
	for _, l := range levels {
		n += len(l.Price) + len(l.Size)
	}
	var text strings.Builder
	text.Grow(n)
	text.WriteString(u.Symbol)
	for _, l := range levels {
		text.WriteString(l.Price)
		text.WriteString(l.Size)
	}
	all := text.String()
	c := u
	c.Symbol, all = all[:len(u.Symbol)], all[len(u.Symbol):]
	for i := range levels {
		l := &levels[i]
		l.Price, all = all[:len(l.Price)], all[len(l.Price):]
		l.Size, all = all[:len(l.Size)], all[len(l.Size):]
	}
	c.Bids, c.Asks = levels[:len(u.Bids):len(u.Bids)], levels[len(u.Bids):]
	return c
}

// CloneTrade returns a copy of tr that shares no memory with it: its
// decimals in one new string.
func CloneTrade(tr Trade) Trade {
	var text strings.Builder
	text.Grow(len(tr.Price) + len(tr.Size) + len(tr.QuoteQty))
	text.WriteString(tr.Price)
	text.WriteString(tr.Size)
	text.WriteString(tr.QuoteQty)
	all := text.String()
	p, q := len(tr.Price), len(tr.Price)+len(tr.Size)
	tr.Price, tr.Size, tr.QuoteQty = all[:p], all[p:q], all[q:]
	return tr
}

// Sink receives what a venue's market streams deliver. Its methods are called
// from the streams' reading goroutines, possibly from several at once and, for
// one symbol, from two connections at a time while one replaces the other or
// while two lines carry it: implementations lock what they share, tolerate a
// duplicate or late event (an adapter drops the copies it can tell, not
// necessarily all), and never block for long.
type Sink interface {
	// Depth delivers one diff event of a market's depth stream.
	Depth(u DepthUpdate)
	// Trade delivers one aggregate trade; tr.ID is the venue's aggregate
	// trade id. Its strings are lent, as a depth event's are: a consumer
	// that keeps them past the call keeps a copy (see CloneTrade).
	Trade(symbol string, tr Trade)
	// Rows delivers rows of a whole-market stream (see Doc): the ticker
	// stream's only the symbols that changed, the mark price stream's
	// every perpetual's mark, index and funding once a second; either
	// possibly symbols outside the catalog.
	Rows(rows Rows)
	// Live reports that the streams of kind for symbols (snapshot.StreamBook:
	// the depth stream; snapshot.StreamTrades: the aggregate trade stream) are subscribed and
	// acknowledged on a connection that is reading.
	Live(kind snapshot.Stream, symbols []string)
	// Lost reports that the streams of kind for symbols stopped delivering
	// in sequence: their connection closed, the venue refused the
	// subscription, or an event could not be used. A depth stream that was
	// lost must be synced again from a snapshot once it is live again.
	Lost(kind snapshot.Stream, symbols []string)
}

// SpoiledSink is a Sink that can be told why a stream is about to be
// reported Lost: one of its events arrived and could not be used (an
// unusable value, a symbol that is not its stream's). Spoiled comes first,
// from the connection that read the event, whether or not another
// connection still carries the stream; a book whose chain then breaks is
// resynced for bad data rather than for a lost connection.
type SpoiledSink interface {
	Spoiled(kind snapshot.Stream, symbols []string)
}

// Streams is a venue's market streams: the per-pair depth and aggregate
// trade streams and the all-market ticker stream. Implementations own their
// connections, subscriptions, pacing, reconnection and replacement.
type Streams interface {
	// Run keeps the streams of the watched symbols, and the all-market
	// ticker stream, flowing into sink until ctx is done. It returns ctx's
	// error, or another error only when the streams cannot be used at all.
	Run(ctx context.Context, sink Sink) error
	// Watch sets the symbols whose depth and trade streams are kept: new
	// symbols are subscribed, symbols no longer listed are dropped.
	Watch(symbols []string)
	// Resubscribe subscribes a symbol's stream again: the poller's answer
	// to a subscription that was acknowledged and then stayed silent.
	Resubscribe(kind snapshot.Stream, symbol string)
}
