package snapshot

import "time"

// The freshness rule, in one place for everything that serves or refreshes a
// snapshot: a value read (or, for a stream-fed pair, last confirmed current)
// at most maxStale before now may be served; an older one may not. now is in
// Unix nanoseconds, the unit of ReadAt. A nil value is never fresh, so a
// caller holding "no snapshot yet" needs no case of its own.

// FreshAt reports whether b may still be served at now.
func (b *Book) FreshAt(now int64, maxStale time.Duration) bool {
	return b != nil && freshAt(b.readAt, now, maxStale)
}

// FreshAt reports whether t may still be served at now.
func (t *Trades) FreshAt(now int64, maxStale time.Duration) bool {
	return t != nil && freshAt(t.readAt, now, maxStale)
}

// FreshAt reports whether t may still be served at now.
func (t *Tickers) FreshAt(now int64, maxStale time.Duration) bool {
	return t != nil && freshAt(t.readAt, now, maxStale)
}

// FreshAt reports whether c may still be served at now.
func (c *Contracts) FreshAt(now int64, maxStale time.Duration) bool {
	return c != nil && freshAt(c.readAt, now, maxStale)
}

// FreshAt reports whether s may still be served at now.
func (s *ContractSpecs) FreshAt(now int64, maxStale time.Duration) bool {
	return s != nil && freshAt(s.readAt, now, maxStale)
}

// FreshAt reports whether p may still be served at now.
func (p *Pairs) FreshAt(now int64, maxStale time.Duration) bool {
	return p != nil && freshAt(p.readAt, now, maxStale)
}

// freshAt is the rule itself: an age of exactly maxStale is still fresh.
func freshAt(readAt, now int64, maxStale time.Duration) bool {
	return now-readAt <= int64(maxStale)
}
