package snapshot

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Stream names one kind of a pair's per-pair snapshots: the ones a request
// can make hot and the poller refreshes per pair. A kind is a value: the
// table below is the one description of it that the packages which store,
// replicate, route and report per-pair snapshots read, so that none of them
// asks "book or trades?" of its own. docs/adding-a-stream-kind.md says what
// a new kind takes.
type Stream int

// The per-pair streams.
const (
	StreamBook   Stream = iota // the order book
	StreamTrades               // the recent trades
	// NumStreams is the number of streams, for tables indexed by Stream.
	NumStreams
)

// PairValue is a published per-pair snapshot of some stream: *Book or
// *Trades. Like every published value it is never mutated. A PairValue the
// Store returns may hold a nil pointer, for a pair with no snapshot of the
// kind yet: FreshAt reports false of it, so that a reader needs no case of
// its own; its other methods must not be called then.
type PairValue interface {
	Published
	// Stream is the kind of the value.
	Stream() Stream
	// TickerID is the pair's ticker_id.
	TickerID() string
	// ReadAt is when the value was read, or last confirmed current, Unix ns;
	// 0 for a kind's nil value, which the store holds before a first read.
	ReadAt() int64
	// FreshAt reports whether the value may still be served at now (see
	// fresh.go).
	FreshAt(now int64, maxStale time.Duration) bool
	// Serves reports whether the value answers a request for n items a
	// side (a book's levels; a trade list answers any limit with what it
	// holds): false for a book that vouches for fewer levels than n on a
	// side the venue may hold more of (see Book.Serves).
	Serves(n int) bool
}

// Stream returns StreamBook: a book is the order book kind's value.
func (b *Book) Stream() Stream { return StreamBook }

// Stream returns StreamTrades: a trade list is the trades kind's value.
func (t *Trades) Stream() Stream { return StreamTrades }

// Serves reports true: a trade list is the venue's newest trades, and a
// limit is a prefix of them.
func (t *Trades) Serves(int) bool { return true }

// streamRow is everything that differs between the kinds of per-pair
// snapshot: where a pair's cell keeps it, how its wire form is read, how it
// is put, and what venue id it covers. Built by kindRow from typed
// functions, so that a row cannot mix one kind's value with another's.
type streamRow struct {
	kindNames
	// keyPrefix starts the key a replica's bucket keeps a pair's value of
	// the kind under, the ticker_id ending it.
	keyPrefix string
	// deep is set when a value of the kind is served to the depth a
	// request asks (see Deep).
	deep bool
	// get returns the cell's value, holding a nil pointer for none.
	get func(c *cell) PairValue
	// readAt returns when the cell's value was read; ok is false before
	// the first.
	readAt  func(c *cell) (at int64, ok bool)
	decode  func(wire []byte) (PairValue, error)
	put     func(s *Store, v PairValue) bool
	covered func(c *cell, answered bool) int64
}

// kindNames are a kind's names where operators and other processes read
// them: metric label values, log keys' values, replication keys. Each is
// read from here by every package that writes it, so that a kind has one
// label per meaning everywhere; changing one changes what is served.
type kindNames struct {
	// name is the kind's name: its stream metrics label, its load
	// requests' word, its replication key's prefix (see String).
	name string
	// part labels the kind's pairs by part: marketfeed_pairs, the seeds,
	// the snapshot ages and /readyz sources (see Part).
	part string
	// venueStream is the venue's stream that feeds the kind: its label in
	// the stream metrics (events, silences, a relay's gauges; see
	// VenueStream).
	venueStream string
}

var streamRows = [NumStreams]streamRow{
	StreamBook: kindRow(kindNames{name: "book", part: "books", venueStream: "depth"}, true, func(c *cell) *atomic.Pointer[Book] { return &c.book }, DecodeBook, (*Store).PutBook,
		// A book is rebuilt from the deeper value when there is one
		// (see Depth), so the events it needs go on from the depth's.
		func(c *cell, b *Book) int64 {
			if d := c.depth.Load(); d != nil {
				return d.seq
			}
			if b != nil {
				return b.seq
			}
			return 0
		}),
	StreamTrades: kindRow(kindNames{name: "trades", part: "trades", venueStream: "trades"}, false, func(c *cell) *atomic.Pointer[Trades] { return &c.trades }, DecodeTrades, (*Store).PutTrades,
		func(_ *cell, t *Trades) int64 {
			if t != nil {
				return t.NewestVenueID()
			}
			return 0
		}),
}

// kindRow builds a kind's row from its value type's functions: deep says
// whether its values are served to a depth (see Deep); in is the cell's
// pointer to the kind's value; covered is given the value, nil for none or
// for a pair no longer answered.
func kindRow[T any, V interface {
	*T
	PairValue
}](names kindNames, deep bool, in func(c *cell) *atomic.Pointer[T], decode func([]byte) (V, error), put func(*Store, V) bool, covered func(c *cell, v V) int64) streamRow {
	return streamRow{
		kindNames: names,
		keyPrefix: names.name + ".",
		deep:      deep,
		get:       func(c *cell) PairValue { return V(in(c).Load()) },
		readAt: func(c *cell) (int64, bool) {
			v := V(in(c).Load())
			if v == nil {
				return 0, false
			}
			return v.ReadAt(), true
		},
		decode: func(wire []byte) (PairValue, error) {
			v, err := decode(wire)
			if err != nil {
				return nil, err
			}
			return v, nil
		},
		// A value of another kind is a programming error, not data: the
		// assertion panics.
		put: func(s *Store, v PairValue) bool { return put(s, v.(V)) },
		covered: func(c *cell, answered bool) int64 {
			var v V
			if answered {
				v = in(c).Load()
			}
			return covered(c, v)
		},
	}
}

// row returns the kind's row; a Stream that names no kind panics: it can
// only come from a programming error, and a guess would serve one kind's
// snapshot for another's.
func (s Stream) row() *streamRow {
	if s < 0 || s >= NumStreams {
		panic(fmt.Sprintf("snapshot: stream kind %d is not one of the %d kinds", int(s), NumStreams))
	}
	return &streamRows[s]
}

func (s Stream) String() string {
	if s < 0 || s >= NumStreams {
		return "stream(?)"
	}
	return streamRows[s].name
}

// Part is the kind's label by part ("books", "trades"): of the per-pair
// metrics by part and of /readyz sources.
func (s Stream) Part() string { return s.row().part }

// VenueStream is the name of the venue's stream that feeds the kind
// ("depth", "trades"), as the stream metrics label it.
func (s Stream) VenueStream() string { return s.row().venueStream }

// Deep reports whether a value of s is served to the depth a request
// asks, as a book's levels are: a request for more than a value vouches
// for (see PairValue's Serves) has it read deeper, once for the request,
// and a pair's state of s remembers the depth asked.
func (s Stream) Deep() bool { return s.row().deep }

// KeyPrefix is what the key a replica keeps a pair's value of s under
// starts with; the ticker_id follows.
func (s Stream) KeyPrefix() string { return s.row().keyPrefix }

// Decode decodes the wire form of a value of s (see wire.go).
func (s Stream) Decode(wire []byte) (PairValue, error) { return s.row().decode(wire) }

// Pair returns a pair's current value of st and whether the pair is
// answered at now (see Listed). The value holds a nil pointer when no read
// has succeeded yet (see PairValue). It allocates nothing.
func (s *Store) Pair(st Stream, id []byte, now int64) (PairValue, bool) {
	row := st.row()
	c := s.answered(id, now)
	if c == nil {
		return nil, false
	}
	return row.get(c), true
}

// Put publishes a pair's value of its kind, as PutBook and PutTrades do.
func (s *Store) Put(v PairValue) bool { return v.Stream().row().put(s, v) }

// Covered returns the venue id up to which what the store holds of a
// pair's stream st goes, 0 for nothing: for the book, its depth's update id
// when it holds one (a book is rebuilt from the deeper value), else its
// book's; for the trades, the id of its newest trade. What a venue's stream
// delivers up to it adds nothing to what the store holds.
func (s *Store) Covered(st Stream, id []byte, now int64) int64 {
	row := st.row()
	c := s.cell(id)
	if c == nil {
		return 0
	}
	until := c.until.Load()
	return row.covered(c, until == 0 || now < until)
}
