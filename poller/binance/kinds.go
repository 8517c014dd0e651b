package binance

import (
	"fmt"
	"strings"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// This file holds the tables of the streams Streams carries: a row per
// per-pair stream kind (kinds) and a row per whole-market stream
// (wholeMarket). The rest of the package reads them: a stream is placed,
// named, classified, read, checked, deduplicated, counted and delivered by
// its row, and nothing else asks which stream a frame came on. A new kind
// or whole-market stream is a row here and the reader its row names.

// Stream name suffixes and the all-market ticker name, as the venue spells
// them. An explicit "@250ms" is not a valid spelling; "@100ms" is.
const (
	depthSuffix = "@depth@100ms"
	tradeSuffix = "@aggTrade"
	tickerName  = "!ticker@arr"
)

// kinds is what differs between a symbol's streams, one row per stream
// kind. A kind without a row is refused (see kindOf), never taken for
// another: a guess would subscribe, or resubscribe, a stream of the wrong
// kind. Each kind's events are told from the other line's copies by the
// ring of the kind in the symbol's marks (see dedup.deliver), and counted
// in marketfeed_stream_events_total under the kind's VenueStream.
var kinds = [snapshot.NumStreams]streamKind{
	snapshot.StreamBook: {
		suffix: depthSuffix, group: groupDepth, frame: frameDepth,
		read: func(s scanner, name string, known knownFunc, lend *lender) (scanner, frame, error) {
			u, err := readDepth(&s, snapshot.StreamBook, name, known, lend)
			return s, frame{depth: u}, err
		},
		event: func(f *frame) (string, int64, int64) { return f.depth.Symbol, f.depth.Last, f.depth.Time },
		deliver: func(sink venue.Sink, symbol string, f *frame) {
			f.depth.Symbol = symbol
			sink.Depth(f.depth)
		},
	},
	snapshot.StreamTrades: {
		suffix: tradeSuffix, group: groupMarket, frame: frameTrade,
		read: func(s scanner, _ string, _ knownFunc, _ *lender) (scanner, frame, error) {
			sym, tr, err := readTrade(&s)
			return s, frame{symbol: sym, trade: tr}, err
		},
		event:   func(f *frame) (string, int64, int64) { return f.symbol, f.trade.ID, f.trade.Time },
		deliver: func(sink venue.Sink, symbol string, f *frame) { sink.Trade(symbol, f.trade) },
	},
}

// streamKind is a row of kinds.
type streamKind struct {
	// suffix ends the name of a symbol's stream of the kind, after the
	// lower-case symbol.
	suffix string
	// group is the path the kind's connections go to.
	group group
	// frame is what classify makes of the stream's frames, and read reads
	// the data of one.
	frame frameKind
	read  eventReader
	// event returns what an event read says of itself: its symbol, checked
	// against its stream's, and the venue id and time (Unix ms) by which
	// the other line's copy of it is told.
	event func(f *frame) (symbol string, id, time int64)
	// deliver hands the event, of symbol's stream, to the sink, as the
	// event of symbol: the string Watch was given, which the event's own
	// equals, so that a sink keyed by the strings it gave Watch finds the
	// symbol by its address, without reading its bytes (a map's keys are
	// cold at hundreds of pairs).
	deliver func(sink venue.Sink, symbol string, f *frame)
}

// eventReader reads the data of a frame of one stream, named name, at s,
// as readEvent describes, and returns the scanner past it. A reader may ask
// known about an event of its kind before it reads the bulk of it; a
// whole-market stream's reader ignores name, known and lend. The scanner goes by value: a
// pointer given to a function called through a row escapes, and would cost
// every frame an allocation.
type eventReader func(s scanner, name string, known knownFunc, lend *lender) (scanner, frame, error)

// wholeMarket is what differs between the streams of every market at once,
// one row each. Each line carries them all, on connections of the row's
// group; their frames are told from the other line's copy by their newest
// event time (see dedup.newer), and counted in
// marketfeed_stream_events_total under the name of its venue.Doc.
var wholeMarket = [...]wholeStream{
	{
		name: tickerName, group: groupMarket, frame: frameTickers, doc: venue.DocTickers, what: "all-market ticker",
		read: func(s scanner, _ string, _ knownFunc, _ *lender) (scanner, frame, error) {
			rows, t, err := readTickers(&s)
			return s, frame{tickers: rows, tickersTime: t}, err
		},
		newest: func(f *frame) int64 { return f.tickersTime },
		deliver: func(sink venue.Sink, f *frame) {
			if len(f.tickers) > 0 {
				sink.Rows(venue.TickerRows(f.tickers))
			}
		},
	},
	{
		// Binance's 2026 split of the stream paths serves the mark prices
		// on the market path, with the aggregate trades (see markPricePath).
		name: MarkPriceStream, group: groupMarket, frame: frameMarkPrices, doc: venue.DocMarks, what: "all-market mark price",
		read:   readMarkPriceFrame,
		newest: func(f *frame) int64 { return f.marksTime },
		deliver: func(sink venue.Sink, f *frame) {
			if len(f.marks) > 0 {
				sink.Rows(venue.MarkRows(f.marks))
			}
		},
	},
}

// wholeStream is a row of wholeMarket.
type wholeStream struct {
	// name is the stream's name, as the venue spells it.
	name string
	// group is the path of the connections that carry it.
	group group
	// frame is what classify makes of its frames, and read reads the data
	// of one.
	frame frameKind
	read  eventReader
	// doc is the stream's kind: its name labels the stream in its metrics
	// and log keys (venue.Doc's String).
	doc venue.Doc
	// what says what its frames are in log messages.
	what string
	// newest returns the newest event time (Unix ms) of the frame's rows,
	// 0 when none had one.
	newest func(f *frame) int64
	// deliver hands the frame's rows to the sink.
	deliver func(sink venue.Sink, f *frame)
}

// readers is the reader of each kind of frame, from the rows of kinds and
// wholeMarket: what readEvent calls. A frame kind with no row (a reply, a
// stream this client does not use) has its data skipped.
var readers = func() (r [numFrameKinds]eventReader) {
	for i := range r {
		r[i] = skipEvent
	}
	for _, row := range kinds {
		if row.read != nil { // a kind without its row: see kindOf
			r[row.frame] = row.read
		}
	}
	for _, w := range wholeMarket {
		r[w.frame] = w.read
	}
	return r
}()

// classify returns the kind of event a stream name carries.
func classify(name string) frameKind {
	for _, w := range wholeMarket {
		if name == w.name {
			return w.frame
		}
	}
	for _, k := range kinds {
		if k.suffix != "" && strings.HasSuffix(name, k.suffix) {
			return k.frame
		}
	}
	return frameUnknown
}

// allKinds is every stream kind, in the order a symbol's streams are
// placed.
var allKinds = func() []snapshot.Stream {
	all := make([]snapshot.Stream, snapshot.NumStreams)
	for k := range all {
		all[k] = snapshot.Stream(k)
	}
	return all
}()

// kindOf returns kind's row. A kind with no row panics: it is a
// programming error, caught by the package's tests.
func kindOf(kind snapshot.Stream) *streamKind {
	if kind < 0 || kind >= snapshot.NumStreams || kinds[kind].suffix == "" {
		panic(fmt.Sprintf("binance: no stream of kind %v", kind))
	}
	return &kinds[kind]
}

// streamName returns the name of a symbol's stream of kind, lower case as
// the venue requires.
func streamName(kind snapshot.Stream, symbol string) string {
	return strings.ToLower(symbol) + kindOf(kind).suffix
}

func groupOf(kind snapshot.Stream) group { return kindOf(kind).group }
