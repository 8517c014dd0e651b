package snapshot

import (
	"sync"
	"sync/atomic"
	"time"
)

// Store hands the current snapshots to readers. Readers never lock: every
// method that reads is one or two atomic loads and, for a pair, one map lookup
// that does not allocate. Writers build a new value and swap it in.
type Store struct {
	pairs   atomic.Pointer[Pairs]
	tickers atomic.Pointer[Tickers]
	mu      sync.Mutex // serialises PutPairs, which carries cells over
}

// NewStore returns an empty store: no pairs, no tickers.
func NewStore() *Store { return new(Store) }

// Pairs returns the current pair list, or nil before the first catalog read.
func (s *Store) Pairs() *Pairs { return s.pairs.Load() }

// Tickers returns the current tickers, or nil before the first read.
func (s *Store) Tickers() *Tickers { return s.tickers.Load() }

// PutPairs publishes a new pair list. Pairs that stay listed keep their
// current book and trades; pairs that are no longer listed lose them, so that
// /orderbook and /trades answer exactly for the pairs /pairs lists.
func (s *Store) PutPairs(p *Pairs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old map[string]*cell
	if prev := s.pairs.Load(); prev != nil {
		old = prev.cells
	}
	cells := make(map[string]*cell, len(p.list))
	for _, pair := range p.list {
		c := old[pair.TickerID]
		if c == nil {
			c = new(cell)
		}
		cells[pair.TickerID] = c
	}
	p.cells = cells
	s.pairs.Store(p)
}

// PutTickers publishes new tickers.
func (s *Store) PutTickers(t *Tickers) { s.tickers.Store(t) }

func (s *Store) cell(id []byte) *cell {
	p := s.pairs.Load()
	if p == nil {
		return nil
	}
	return p.cells[string(id)] // the conversion in a map index does not allocate
}

// Listed reports whether ticker_id id is in the current pair list.
func (s *Store) Listed(id []byte) bool { return s.cell(id) != nil }

// Book returns the current book of a pair and whether the pair is listed. The
// book is nil when the pair is listed but no read has succeeded yet.
func (s *Store) Book(id []byte) (*Book, bool) {
	c := s.cell(id)
	if c == nil {
		return nil, false
	}
	return c.book.Load(), true
}

// Trades returns the current trades of a pair and whether the pair is listed.
func (s *Store) Trades(id []byte) (*Trades, bool) {
	c := s.cell(id)
	if c == nil {
		return nil, false
	}
	return c.trades.Load(), true
}

// PutBook publishes a pair's book. It reports false, and publishes nothing,
// when the pair is not listed (it left the catalog while being read).
func (s *Store) PutBook(b *Book) bool {
	c := s.cell([]byte(b.tickerID))
	if c == nil {
		return false
	}
	c.book.Store(b)
	return true
}

// PutTrades publishes a pair's trades; like PutBook, only for a listed pair.
func (s *Store) PutTrades(t *Trades) bool {
	c := s.cell([]byte(t.tickerID))
	if c == nil {
		return false
	}
	c.trades.Store(t)
	return true
}

// Stream names one of a pair's per-pair snapshots: the ones a request can make
// hot and the poller refreshes per pair.
type Stream int

// The per-pair streams.
const (
	StreamBook   Stream = iota // the order book
	StreamTrades               // the recent trades
	// NumStreams is the number of streams, for tables indexed by Stream.
	NumStreams
)

// streamRows is what differs between the streams' snapshot values in a
// pair's cell: one row each, so that the questions every stream answers
// alike (when was it read, may it still be served) are asked by Stream.
var streamRows = [NumStreams]struct {
	name string
	// readAt returns when the cell's snapshot was read; ok is false
	// before the first.
	readAt func(c *cell) (at int64, ok bool)
}{
	StreamBook: {"book", func(c *cell) (int64, bool) {
		return ptrReadAt(c.book.Load(), (*Book).ReadAt)
	}},
	StreamTrades: {"trades", func(c *cell) (int64, bool) {
		return ptrReadAt(c.trades.Load(), (*Trades).ReadAt)
	}},
}

func ptrReadAt[V any](v *V, readAt func(*V) int64) (int64, bool) {
	if v == nil {
		return 0, false
	}
	return readAt(v), true
}

// ReadAt returns when the pair's snapshot of st was read (Unix ns; 0 while
// none was) and whether the pair is listed.
func (s *Store) ReadAt(st Stream, id []byte) (at int64, listed bool) {
	c := s.cell(id)
	if c == nil {
		return 0, false
	}
	at, _ = streamRows[st].readAt(c)
	return at, true
}

// FreshAt reports whether the pair's snapshot of st may still be served at
// now, by the freshness rule (see fresh.go); no snapshot is never fresh.
func (s *Store) FreshAt(st Stream, id []byte, now int64, maxStale time.Duration) bool {
	c := s.cell(id)
	if c == nil {
		return false
	}
	at, ok := streamRows[st].readAt(c)
	return ok && freshAt(at, now, maxStale)
}

func (s Stream) String() string {
	if s < 0 || s >= NumStreams {
		return "stream(?)"
	}
	return streamRows[s].name
}
