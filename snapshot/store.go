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
	// docs holds each whole-market document by kind, a *Pairs, *Tickers
	// or *Contracts as the kind's row says (see document.go).
	docs      [NumDocs]atomic.Value
	mu        sync.Mutex // serialises putPairs, which carries cells over
	published func(Published)
}

// Published is a value a Store publishes: *Book, *Trades, *Pairs,
// *Tickers, *Contracts or *Depth, each with a wire form another process can serve it from.
type Published interface {
	AppendWire(dst []byte) []byte
}

// OnPublish has f receive every value the store publishes, after it is in
// place: a replica's leader hands them on to the others. f runs on the
// publisher's goroutine and must not block. Call it before the first Put.
func (s *Store) OnPublish(f func(Published)) { s.published = f }

func (s *Store) notify(v Published) {
	if s.published != nil {
		s.published(v)
	}
}

// NewStore returns an empty store: no pairs, no tickers.
func NewStore() *Store { return new(Store) }

// CacheMaxAge is how long a cache may keep a 2xx answer, the max-age of its
// Cache-Control: a pair list a CDN serves may be this old.
const CacheMaxAge = 5 * time.Second

// putPairs publishes a new pair list at now (see PutDoc). Pairs that stay
// listed, or incoming (see Pairs.Incoming), keep their current book and trades; an
// incoming pair is answered as a listed one, /pairs aside. A pair the list no longer has leaves
// /pairs at once and is answered from what it holds for CacheMaxAge more,
// then not at all: a cache may serve a /pairs that old which still lists
// it, and every ticker_id /pairs returned must be answerable. A pair listed
// again within that time keeps its book and trades; the cells of pairs past
// it go with the next list.
func (s *Store) putPairs(p *Pairs, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old map[string]*cell
	if prev := s.Pairs(); prev != nil {
		old = prev.cells
	}
	cells := make(map[string]*cell, len(p.list)+len(p.incoming))
	for _, list := range [][]Pair{p.list, p.incoming} {
		for _, pair := range list {
			c := old[pair.TickerID]
			if until := c.untilOrZero(); c == nil || until != 0 && until <= now.UnixNano() {
				// New, or back after it stopped being answered: what
				// it held then is not what the venue has now.
				c = new(cell)
			}
			c.until.Store(0)
			cells[pair.TickerID] = c
		}
	}
	leaves := now.Add(CacheMaxAge).UnixNano()
	for id, c := range old {
		if cells[id] != nil {
			continue
		}
		// A pair unlisted by an earlier list keeps the end it was given.
		until := c.until.Load()
		if until == 0 {
			until = leaves
			c.until.Store(until)
		}
		if until > now.UnixNano() {
			cells[id] = c
		}
	}
	p.cells = cells
	s.keepDoc(p)
}

// untilOrZero is c.until, 0 for no cell.
func (c *cell) untilOrZero() int64 {
	if c == nil {
		return 0
	}
	return c.until.Load()
}

// cell returns the cell of a pair listed, or unlisted less than
// CacheMaxAge ago (see putPairs), for the poller's writes and questions.
func (s *Store) cell(id []byte) *cell {
	p := s.Pairs()
	if p == nil {
		return nil
	}
	return p.cells[string(id)] // the conversion in a map index does not allocate
}

// answered returns the cell of a pair that is answered at now (Unix ns):
// listed, or unlisted less than CacheMaxAge before.
func (s *Store) answered(id []byte, now int64) *cell {
	c := s.cell(id)
	if c == nil {
		return nil
	}
	if until := c.until.Load(); until != 0 && now >= until {
		return nil
	}
	return c
}

// Listed reports whether ticker_id id is answered at now (Unix ns): in the
// current pair list, or unlisted less than CacheMaxAge before.
func (s *Store) Listed(id []byte, now int64) bool { return s.answered(id, now) != nil }

// Book returns the current book of a pair and whether the pair is answered
// at now (see Listed). The book is nil when no read has succeeded yet.
func (s *Store) Book(id []byte, now int64) (*Book, bool) {
	c := s.answered(id, now)
	if c == nil {
		return nil, false
	}
	return c.book.Load(), true
}

// Trades returns the current trades of a pair and whether the pair is
// answered at now (see Listed).
func (s *Store) Trades(id []byte, now int64) (*Trades, bool) {
	c := s.answered(id, now)
	if c == nil {
		return nil, false
	}
	return c.trades.Load(), true
}

// PutBook publishes a pair's book. It reports false, and publishes nothing,
// when the pair is neither listed nor leaving (it left the catalog while
// being read).
func (s *Store) PutBook(b *Book) bool {
	c := s.cell([]byte(b.tickerID))
	if c == nil {
		return false
	}
	c.book.Store(b)
	s.notify(b)
	return true
}

// PutTrades publishes a pair's trades; like PutBook, only for a listed pair.
func (s *Store) PutTrades(t *Trades) bool {
	c := s.cell([]byte(t.tickerID))
	if c == nil {
		return false
	}
	c.trades.Store(t)
	s.notify(t)
	return true
}

// PutDepth keeps a pair's deep book (see Depth) and hands it on, unless
// the pair is neither listed nor leaving, or the store holds one at a later
// update id: a member that read the venue alone while NATS was away holds
// newer depths than the bucket it finds again. It reports whether d is
// kept.
func (s *Store) PutDepth(d *Depth) bool {
	c := s.cell([]byte(d.tickerID))
	if c == nil {
		return false
	}
	for {
		held := c.depth.Load()
		if held != nil && held.seq > d.seq {
			return false
		}
		if c.depth.CompareAndSwap(held, d) {
			break
		}
	}
	s.notify(d)
	return true
}

// Depth returns the deep book kept of a pair, nil for none or for a pair
// neither listed nor leaving.
func (s *Store) Depth(id []byte) *Depth {
	c := s.cell(id)
	if c == nil {
		return nil
	}
	return c.depth.Load()
}

// ReadAt returns when the pair's snapshot of st was read (Unix ns; 0 while
// none was) and whether the pair is listed.
func (s *Store) ReadAt(st Stream, id []byte) (at int64, listed bool) {
	c := s.cell(id)
	if c == nil {
		return 0, false
	}
	at, _ = st.row().readAt(c)
	return at, true
}

// Holds reports whether a pair answered at now (see Listed) holds a value
// of st: a read of it has been published.
func (s *Store) Holds(st Stream, id []byte, now int64) bool {
	c := s.answered(id, now)
	if c == nil {
		return false
	}
	_, ok := st.row().readAt(c)
	return ok
}

// FreshAt reports whether the pair's snapshot of st may still be served at
// now, by the freshness rule (see fresh.go); no snapshot is never fresh.
func (s *Store) FreshAt(st Stream, id []byte, now int64, maxStale time.Duration) bool {
	c := s.cell(id)
	if c == nil {
		return false
	}
	at, ok := st.row().readAt(c)
	return ok && freshAt(at, now, maxStale)
}
