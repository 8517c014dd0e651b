package orderbook

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"marketfeed/poller/venue"
)

// maxSideLevels bounds the levels a side keeps: twice the deepest snapshot
// the venue gives. A side grows as the price moves away from it and as a
// refresh keeps what the book vouched for beyond the snapshot; past this,
// its worst levels are dropped and its edge drawn in, which costs nothing
// served (100 levels are published) and bounds the memory of hundreds of
// books. A side may grow an eighth past its bound before it is trimmed, so
// that trimming, which moves every level, is rare.
const maxSideLevels = 2000

// bookSide is one side of a Book. Levels are stored worst first, so
// that the changes a moving top brings (levels appearing and vanishing at the
// best prices) append and truncate at the end instead of moving every level.
//
// A level's price and size are kept as spans of the side's text, not as
// strings of their own: a new size, what most events bring, is then copied
// into bytes the side already holds instead of allocated, and the levels
// hold no pointers, so the collector never scans them (hundreds of books of
// a thousand levels a side). The text is only ever appended to, never
// written over, so that the strings Top hands out of it stay as they were
// whatever the side does next; once the levels use two thirds of it or
// less, it is copied, what they use only, into a new one (see room), and
// the old one lives on as long as a published book holds strings of it.
type bookSide struct {
	bids   bool
	max    int         // levels kept at most (see maxSideLevels)
	levels []bookLevel // worst first
	text   []byte      // the levels' prices and sizes, and what they no longer use
	used   int         // bytes of text the levels use
	// bounded is set when the snapshot's side was full: the venue may hold
	// levels beyond edge, the worst price it sent, which the book ignores.
	bounded bool
	edge    priceKey
	// shown is how many of the best levels are published (see
	// Book.Publishes); 0: all of them.
	shown int
}

type bookLevel struct {
	key   priceKey
	price span
	size  span
}

// span is a string kept in a side's text: the bytes [off, off+n).
type span struct{ off, n uint32 }

// minText is the smallest text a side starts or is compacted into.
const minText = 1 << 10

// room makes room for n more bytes of text: when the text would have to
// grow while the levels use two thirds of it or less, it is compacted
// instead. A compacted text has room for half as much again as the levels
// use, so a side holds at most half again its text, which over hundreds of
// books is most of what the book sides hold besides their levels, at the
// cost of copying what the levels use each time they have written half as
// much again (a size is a few bytes, so every few seconds for a busy book).
// Spans not yet in a level do not survive a compaction, so a level's price
// and size are made room for at once, before either is added.
func (s *bookSide) room(n int) {
	if len(s.text)+n > cap(s.text) && 3*s.used <= 2*len(s.text) {
		s.compact(n)
	}
}

// add appends v to the side's text and returns where it is.
func (s *bookSide) add(v string) span {
	sp := span{uint32(len(s.text)), uint32(len(v))}
	s.text = append(s.text, v...)
	s.used += len(v)
	return sp
}

// level makes the level of price and size, their text added to the side's.
func (s *bookSide) level(key priceKey, price, size string) bookLevel {
	s.room(len(price) + len(size))
	return bookLevel{key, s.add(price), s.add(size)}
}

// str returns the string sp holds. It shares the text's bytes, which are
// never written again.
func (s *bookSide) str(sp span) string {
	if sp.n == 0 {
		return ""
	}
	return unsafe.String(&s.text[sp.off], sp.n)
}

// release forgets a level's text: the bytes stay until the next compaction.
func (s *bookSide) release(l bookLevel) { s.used -= int(l.price.n + l.size.n) }

// compact copies the text the levels use into a new text with room for
// extra more bytes; the old text is left as it was for the strings that
// share it.
func (s *bookSide) compact(extra int) {
	old := s.text
	text := make([]byte, 0, max((s.used+extra)*3/2, minText))
	move := func(sp span) span {
		out := span{uint32(len(text)), sp.n}
		text = append(text, old[sp.off:sp.off+sp.n]...)
		return out
	}
	for i := range s.levels {
		s.levels[i].price = move(s.levels[i].price)
		s.levels[i].size = move(s.levels[i].size)
	}
	s.text = text
}

// reset empties the side: its levels, and its text, which strings may
// still share, so a new one is started (with room for capacity bytes, or
// none) rather than the old one reused.
func (s *bookSide) reset(capacity int) {
	s.levels = s.levels[:0]
	s.text, s.used = nil, 0
	if capacity > 0 {
		s.text = make([]byte, 0, max(capacity, minText))
	}
}

// better reports whether price a is better than b on this side.
func (s *bookSide) better(a, b priceKey) bool {
	if s.bids {
		return b.less(a)
	}
	return a.less(b)
}

// scanLevels is how many levels search reads one after the other from its
// hint before it gallops.
const scanLevels = 32

// search returns the index of key in the worst-first levels, or where it
// would go, and whether it is there. It runs for every level of every
// event, so it starts where the level is expected, at hint: an event's
// levels are sorted, best first, so each lies some levels from the one
// before. It reads on from there level by level, then gallops in steps of
// 1, 2, 4... and halves what remains. Reading on costs a few more
// comparisons than halving, but reads memory in order, which the processor
// fetches ahead; halving a side of a thousand levels at once waits for a
// cache miss at every probe, and with hundreds of books none of them stays
// in the cache from one event to the next. Any hint gives the right answer.
func (s *bookSide) search(key priceKey, hint int) (int, bool) {
	lv := s.levels
	n := len(lv)
	hint = min(max(hint, 0), n)
	// Bound the answer, the first level not worse than key, to [lo, hi].
	var lo, hi int
	if hint < n && s.better(key, lv[hint].key) {
		// Every level in [hint, lo) is worse than key.
		lo, hi = hint+1, n
		for end := min(n, lo+scanLevels); lo < end; lo++ {
			if !s.better(key, lv[lo].key) {
				return lo, lv[lo].key == key
			}
		}
		for base, step := lo-1, 1; base+step < n; step *= 2 {
			if i := base + step; !s.better(key, lv[i].key) {
				hi = i
				break
			} else {
				lo = i + 1
			}
		}
	} else {
		// No level in [hi, hint) is worse than key.
		lo, hi = 0, hint
		for end := max(0, hi-scanLevels); hi > end; hi-- {
			if s.better(key, lv[hi-1].key) {
				return hi, hi < n && lv[hi].key == key
			}
		}
		for base, step := hi, 1; base-step >= 0; step *= 2 {
			if i := base - step; s.better(key, lv[i].key) {
				lo = i + 1
				break
			} else {
				hi = i
			}
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.better(key, lv[m].key) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < n && lv[lo].key == key
}

func (s *bookSide) load(levels []venue.Level, limit int) error {
	n := 0
	for _, l := range levels {
		n += len(l.Price) + len(l.Size)
	}
	s.reset(n)
	s.levels = slices.Grow(s.levels, len(levels))
	for i := len(levels) - 1; i >= 0; i-- {
		l := levels[i]
		key, ok := parsePrice(l.Price)
		if !ok {
			return fmt.Errorf("%w: snapshot level %d", ErrBadLevel, i+1)
		}
		if n := len(s.levels); n > 0 && !s.better(key, s.levels[n-1].key) {
			return fmt.Errorf("%w: snapshot level %d is out of order", ErrBadLevel, i+1)
		}
		if venue.IsZeroDecimal(l.Size) {
			continue
		}
		s.levels = append(s.levels, s.level(key, l.Price, l.Size))
	}
	s.bounded = limit > 0 && len(levels) >= limit
	if s.bounded {
		s.edge, _ = parsePrice(levels[len(levels)-1].Price)
	}
	return nil
}

// update applies an event's levels to the side and reports whether it
// changed its shown levels (see Book.Publishes) or opened the side.
func (s *bookSide) update(levels []venue.Level) (shownChanged bool, err error) {
	// An event's levels are sorted, so each is searched for from where the
	// one before was, the first from the top. venuesim sends both sides
	// best first; Binance sends both by rising price (the recorded frames
	// in poller/binance/testdata/recorded), its bids worst first, so that
	// after the first bid, searched for back from the top, each lies ahead
	// of the one before: search reads forward then. Either way an event's
	// search reads the side from the top to its deepest level once.
	at := len(s.levels)
	for i, l := range levels {
		key, ok := parsePrice(l.Price)
		if !ok {
			return shownChanged, fmt.Errorf("%w: update level %d", ErrBadLevel, i+1)
		}
		if s.bounded && s.better(s.edge, key) {
			continue // beyond what the snapshot vouched for
		}
		var found bool
		at, found = s.search(key, at)
		// The shown levels are the last shown of the worst-first levels:
		// a level there changes them, and so does one added just below
		// them, which pushes the worst shown one out.
		n := len(s.levels)
		switch {
		case venue.IsZeroDecimal(l.Size):
			if found {
				shownChanged = shownChanged || s.shows(at, n)
				s.release(s.levels[at])
				s.levels = slices.Delete(s.levels, at, at+1)
			}
		case found:
			shownChanged = shownChanged || s.shows(at, n)
			// The size is copied into the side's text (see
			// venue.DepthUpdate: the event's strings share its frame).
			s.used -= int(s.levels[at].size.n)
			s.room(len(l.Size))
			s.levels[at].size = s.add(l.Size)
		default:
			shownChanged = shownChanged || s.shows(at, n+1)
			s.levels = slices.Insert(s.levels, at, s.level(key, l.Price, l.Size))
		}
	}
	if len(s.levels) > s.max+s.max/8 {
		// Trimming drops the worst levels, not shown ones, but it opens
		// the side.
		shownChanged = shownChanged || !s.bounded
		s.trim()
	}
	return shownChanged, nil
}

// shows reports whether level at of n worst-first levels is a shown one.
func (s *bookSide) shows(at, n int) bool { return s.shown <= 0 || at >= n-s.shown }

// keepBeyond puts under a side just loaded from a snapshot the levels old,
// the same side before the snapshot, held beyond the snapshot's edge, and
// takes old's edge if it was farther: old was current, so its levels there
// are the venue's.
func (s *bookSide) keepBeyond(old bookSide) {
	if !s.bounded || (old.bounded && !s.better(s.edge, old.edge)) {
		return // the snapshot reaches at least as far as the old book did
	}
	// old's levels worse than the new edge are a prefix of its worst-first
	// levels; their text is old's, and is copied into this side's.
	n, _ := old.search(s.edge, 0)
	// Room for all their text first: a compaction while they are added
	// would not move the spans of levels not yet in s.levels.
	text := 0
	for _, l := range old.levels[:n] {
		text += int(l.price.n + l.size.n)
	}
	s.room(text)
	kept := make([]bookLevel, 0, n+len(s.levels))
	for _, l := range old.levels[:n] {
		kept = append(kept, bookLevel{l.key, s.add(old.str(l.price)), s.add(old.str(l.size))})
	}
	s.levels = append(kept, s.levels...)
	s.bounded, s.edge = old.bounded, old.edge
	s.trim()
}

// trim drops a side's worst levels down to s.max, if it has more, and draws
// its edge in to the worst level kept.
func (s *bookSide) trim() {
	drop := len(s.levels) - s.max
	if drop <= 0 {
		return
	}
	for _, l := range s.levels[:drop] {
		s.release(l)
	}
	s.levels = slices.Delete(s.levels, 0, drop)
	s.bounded, s.edge = true, s.levels[0].key
}

func (s *bookSide) vouched() int {
	if !s.bounded {
		return math.MaxInt
	}
	return len(s.levels)
}

// appendTop appends the side's n best levels, best first, to dst.
func (s *bookSide) appendTop(dst []venue.Level, n int) []venue.Level {
	n = min(n, len(s.levels))
	for i := range n {
		l := s.levels[len(s.levels)-1-i]
		dst = append(dst, venue.Level{Price: s.str(l.price), Size: s.str(l.size)})
	}
	return dst
}

// priceKey orders plain decimal prices exactly without parsing them into
// floats: the integer part, then the fraction scaled to 18 digits.
type priceKey struct{ whole, frac uint64 }

// less reports whether a is the lower price. It is the borrow of the
// 128-bit a-b, which takes no branch: the scan of search compares levels
// one after the other, and a branch on a price's digits, which the
// processor cannot predict, would stop it from reading the levels after
// the compared one until it knows.
func (a priceKey) less(b priceKey) bool {
	_, borrow := bits.Sub64(a.frac, b.frac, 0)
	_, borrow = bits.Sub64(a.whole, b.whole, borrow)
	return borrow != 0
}

// parsePrice reads a non-negative plain decimal (digits, optionally a point
// and digits) with at most 19 integer digits and 18 decimals.
func parsePrice(s string) (priceKey, bool) {
	var k priceKey
	i := 0
	for ; i < len(s) && s[i] != '.'; i++ {
		c := s[i]
		if c < '0' || c > '9' || i >= 19 {
			return priceKey{}, false
		}
		k.whole = k.whole*10 + uint64(c-'0')
	}
	if i == 0 {
		return priceKey{}, false
	}
	if i == len(s) {
		return k, true
	}
	frac := s[i+1:]
	if len(frac) == 0 || len(frac) > 18 {
		return priceKey{}, false
	}
	scale := uint64(1e18)
	for j := 0; j < len(frac); j++ {
		c := frac[j]
		if c < '0' || c > '9' {
			return priceKey{}, false
		}
		scale /= 10
		k.frac += uint64(c-'0') * scale
	}
	return k, true
}
