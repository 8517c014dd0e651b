package live

import (
	"sync"
	"time"

	"marketfeed/poller/venue"
)

// docs is a row per whole-market stream (venue.Doc): how its rows are held,
// and what else a delivery tells the source. A new whole-market stream takes
// a row here and nothing else in the package.
var docs = [venue.NumDocs]struct {
	// hold makes the stream's holder.
	hold func() holder
	// heard, if set, is told of each delivery once it is held.
	heard func(s *Source, rows venue.Rows, pairs map[string]*pair, now time.Time)
}{
	// The ticker stream sends only the markets that changed: every row
	// held is current as of its last delivery.
	venue.DocTickers: {
		hold: func() holder {
			return &latest[venue.Stat]{of: venue.Rows.Stats, rowsOf: venue.TickerRows,
				symbol: func(r venue.Stat) string { return r.Symbol }}
		},
		heard: (*Source).traded,
	},
	// The mark price stream sends every perpetual once a second, on two
	// lines: a row older than the one held is a late copy from the other
	// line, and a symbol not sent again within Config.Fresh has gone
	// silent while the others flow.
	venue.DocMarks: {
		hold: func() holder {
			return &latest[venue.Contract]{of: venue.Rows.Contracts, rowsOf: venue.MarkRows,
				symbol:  func(r venue.Contract) string { return r.Symbol },
				older:   func(r, held venue.Contract) bool { return held.Time > r.Time },
				expires: true}
		},
	},
}

// holder is what the source keeps of one whole-market stream, whatever its
// row type.
type holder interface {
	// take keeps a delivery's rows of the listed symbols.
	take(rows venue.Rows, listed map[string]*pair, now time.Time)
	// seed keeps the rows of the listed symbols the stream has not sent:
	// the REST read's, as the base the stream's rows update.
	seed(rows venue.Rows, listed map[string]*pair)
	// flowing reports whether the stream delivered within fresh.
	flowing(now time.Time, fresh time.Duration) bool
	// current returns the rows held and when they were current; ok is false
	// while there is none to use.
	current(now time.Time, fresh time.Duration) (rows venue.Rows, at time.Time, ok bool)
}

// latest holds the latest rows of a whole-market stream of rows T, the
// newest per catalog symbol, and when the stream last delivered; rows for
// symbols outside the catalog are dropped.
type latest[T any] struct {
	// of and rowsOf read a delivery's rows and make one of held rows.
	of     func(venue.Rows) []T
	rowsOf func([]T) venue.Rows
	symbol func(T) string
	// older, if set, reports whether a row is older than the one held, and
	// is then dropped; nil: every row replaces the one held.
	older func(row, held T) bool
	// expires drops a row not sent again within fresh, and dates the rows
	// as the oldest kept; otherwise every row kept is current as of the
	// stream's last delivery (it sends only what changed).
	expires bool

	mu   sync.Mutex
	rows map[string]arrived[T]
	at   time.Time // when the stream last delivered; zero: never
}

// arrived is a row and when it arrived.
type arrived[T any] struct {
	row T
	at  time.Time
}

func (h *latest[T]) take(rows venue.Rows, listed map[string]*pair, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at = now
	for _, r := range h.of(rows) {
		sym := h.symbol(r)
		if _, ok := listed[sym]; !ok {
			continue
		}
		if old, ok := h.rows[sym]; ok && h.older != nil && h.older(r, old.row) {
			continue
		}
		h.put(sym, arrived[T]{r, now})
	}
}

// seed holds rows a bulk read gave for the symbols the stream has sent
// nothing of yet. A seeded row has no arrival time: a holder whose rows
// expire (expires) drops it at its next read, so a stream whose rows
// expire is not seeded (only the ticker stream is, by SeedRows).
func (h *latest[T]) seed(rows venue.Rows, listed map[string]*pair) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.of(rows) {
		sym := h.symbol(r)
		if _, ok := listed[sym]; !ok {
			continue
		}
		if _, have := h.rows[sym]; !have {
			h.put(sym, arrived[T]{row: r})
		}
	}
}

// put keeps a row, with h.mu held.
func (h *latest[T]) put(sym string, r arrived[T]) {
	if h.rows == nil {
		h.rows = make(map[string]arrived[T])
	}
	h.rows[sym] = r
}

func (h *latest[T]) flowing(now time.Time, fresh time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.at.IsZero() && now.Sub(h.at) <= fresh
}

func (h *latest[T]) current(now time.Time, fresh time.Duration) (venue.Rows, time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.expires && h.at.IsZero() {
		return h.rowsOf(nil), time.Time{}, false
	}
	rows := make([]T, 0, len(h.rows))
	at := h.at
	if h.expires {
		at = now
	}
	for sym, r := range h.rows {
		if h.expires && now.Sub(r.at) > fresh {
			delete(h.rows, sym)
			continue
		}
		rows = append(rows, r.row)
		if h.expires && r.at.Before(at) {
			at = r.at
		}
	}
	return h.rowsOf(rows), at, !h.expires || len(rows) > 0
}

// Rows keeps a whole-market stream's rows, the newest per catalog symbol
// (see docs).
func (s *Source) Rows(rows venue.Rows) {
	now := time.Now()
	pairs := *s.pairs.Load()
	s.docs[rows.Doc()].take(rows, pairs, now)
	if heard := docs[rows.Doc()].heard; heard != nil {
		heard(s, rows, pairs, now)
	}
}

// Flowing reports whether the whole-market stream doc has delivered
// recently enough (see Config.Fresh) that its REST read need not stand in.
func (s *Source) Flowing(doc venue.Doc, now time.Time) bool {
	return s.docs[doc].flowing(now, s.cfg.Fresh)
}

// StreamRows returns the rows the whole-market stream doc has brought, and
// when they were current; ok is false while there is none. The ticker
// stream's rows lie over the REST rows seeded under them and are all
// current as of its last delivery; the mark price stream's are those that
// arrived within Config.Fresh, as old as the oldest, so that a symbol the
// stream stopped sending is left out, for a REST read to stand in, long
// before its row would be too old to serve.
func (s *Source) StreamRows(doc venue.Doc) (rows venue.Rows, at time.Time, ok bool) {
	return s.docs[doc].current(time.Now(), s.cfg.Fresh)
}

// SeedRows keeps a REST read's rows as the base its stream's rows update,
// for the listed symbols the stream has not sent.
func (s *Source) SeedRows(rows venue.Rows) {
	s.docs[rows.Doc()].seed(rows, *s.pairs.Load())
}
