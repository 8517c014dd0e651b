package orderbook

import (
	"fmt"
	"math"
	"slices"
	"strings"

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

// bookSide is one side of an Book. Levels are stored worst first, so
// that the changes a moving top brings (levels appearing and vanishing at the
// best prices) append and truncate at the end instead of moving every level.
type bookSide struct {
	bids   bool
	max    int         // levels kept at most (see maxSideLevels)
	levels []bookLevel // worst first
	// bounded is set when the snapshot's side was full: the venue may hold
	// levels beyond edge, the worst price it sent, which the book ignores.
	bounded bool
	edge    priceKey
}

type bookLevel struct {
	key   priceKey
	price string
	size  string
}

// better reports whether price a is better than b on this side.
func (s *bookSide) better(a, b priceKey) bool {
	if s.bids {
		return b.less(a)
	}
	return a.less(b)
}

// search returns the index of key in the worst-first levels, or where it
// would go, and whether it is there. It runs for every level of every
// event, so each side has its own loop: bids are stored in ascending
// price order, asks in descending, and neither loop asks which side it is
// on or calls a comparison function.
func (s *bookSide) search(key priceKey) (int, bool) {
	lv := s.levels
	lo, hi := 0, len(lv)
	if s.bids {
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if lv[m].key.less(key) {
				lo = m + 1
			} else {
				hi = m
			}
		}
	} else {
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if key.less(lv[m].key) {
				lo = m + 1
			} else {
				hi = m
			}
		}
	}
	return lo, lo < len(lv) && lv[lo].key == key
}

func (s *bookSide) load(levels []venue.Level, limit int) error {
	s.levels = slices.Grow(s.levels[:0], len(levels))
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
		s.levels = append(s.levels, bookLevel{key, l.Price, l.Size})
	}
	s.bounded = limit > 0 && len(levels) >= limit
	if s.bounded {
		s.edge, _ = parsePrice(levels[len(levels)-1].Price)
	}
	return nil
}

func (s *bookSide) update(levels []venue.Level) error {
	for i, l := range levels {
		key, ok := parsePrice(l.Price)
		if !ok {
			return fmt.Errorf("%w: update level %d", ErrBadLevel, i+1)
		}
		if s.bounded && s.better(s.edge, key) {
			continue // beyond what the snapshot vouched for
		}
		at, found := s.search(key)
		switch {
		case venue.IsZeroDecimal(l.Size):
			if found {
				s.levels = slices.Delete(s.levels, at, at+1)
			}
		case found:
			s.levels[at].size = strings.Clone(l.Size) // see venue.DepthUpdate
		default:
			s.levels = slices.Insert(s.levels, at, bookLevel{key, strings.Clone(l.Price), strings.Clone(l.Size)})
		}
	}
	if len(s.levels) > s.max+s.max/8 {
		s.trim()
	}
	return nil
}

// keepBeyond puts under a side just loaded from a snapshot the levels old,
// the same side before the snapshot, held beyond the snapshot's edge, and
// takes old's edge if it was farther: old was current, so its levels there
// are the venue's.
func (s *bookSide) keepBeyond(old bookSide) {
	if !s.bounded || (old.bounded && !s.better(s.edge, old.edge)) {
		return // the snapshot reaches at least as far as the old book did
	}
	// old's levels worse than the new edge are a prefix of its worst-first
	// levels.
	n, _ := slices.BinarySearchFunc(old.levels, s.edge, func(l bookLevel, k priceKey) int {
		if s.better(k, l.key) {
			return -1
		}
		return 1
	})
	s.levels = append(old.levels[:n:n], s.levels...)
	s.bounded, s.edge = old.bounded, old.edge
	if len(s.levels) > s.max {
		s.trim()
	}
}

// trim drops a side's worst levels down to s.max and draws its edge
// in to the worst level kept.
func (s *bookSide) trim() {
	drop := len(s.levels) - s.max
	if drop <= 0 {
		return
	}
	s.levels = slices.Delete(s.levels, 0, drop)
	s.bounded, s.edge = true, s.levels[0].key
}

func (s *bookSide) short(n int) bool { return s.bounded && len(s.levels) < n }

func (s *bookSide) vouched() int {
	if !s.bounded {
		return math.MaxInt
	}
	return len(s.levels)
}

func (s *bookSide) top(n int) []venue.Level {
	n = min(n, len(s.levels))
	out := make([]venue.Level, n)
	for i := range n {
		l := s.levels[len(s.levels)-1-i]
		out[i] = venue.Level{Price: l.price, Size: l.size}
	}
	return out
}

// priceKey orders plain decimal prices exactly without parsing them into
// floats: the integer part, then the fraction scaled to 18 digits.
type priceKey struct{ whole, frac uint64 }

func (a priceKey) less(b priceKey) bool {
	return a.whole < b.whole || (a.whole == b.whole && a.frac < b.frac)
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
