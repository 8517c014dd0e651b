package snapshot

import (
	"testing"
	"time"
)

// TestFreshAt holds every snapshot kind to the one rule: fresh while its age
// is at most maxStale, including exactly maxStale; stale one nanosecond later;
// never fresh when there is no snapshot.
func TestFreshAt(t *testing.T) {
	const maxStale = 10 * time.Second
	pairs := pairsOf("BTC_USDT")
	tickers, _ := NewTickers(pairs, nil, nil, readAt)
	kinds := []struct {
		name  string
		fresh func(now int64) bool
		none  func() bool
	}{
		{"book", func(now int64) bool { return bookFor(t, "BTC_USDT").FreshAt(now, maxStale) },
			func() bool { return (*Book)(nil).FreshAt(readAt.UnixNano(), maxStale) }},
		{"trades", func(now int64) bool { return tradesFor(t, "BTC_USDT").FreshAt(now, maxStale) },
			func() bool { return (*Trades)(nil).FreshAt(readAt.UnixNano(), maxStale) }},
		{"tickers", func(now int64) bool { return tickers.FreshAt(now, maxStale) },
			func() bool { return (*Tickers)(nil).FreshAt(readAt.UnixNano(), maxStale) }},
		{"pairs", func(now int64) bool { return pairs.FreshAt(now, maxStale) },
			func() bool { return (*Pairs)(nil).FreshAt(readAt.UnixNano(), maxStale) }},
	}
	read := readAt.UnixNano()
	for _, k := range kinds {
		for _, c := range []struct {
			age  time.Duration
			want bool
		}{
			{-time.Second, true}, // read after now by a clock step: not stale
			{0, true},
			{maxStale, true},
			{maxStale + 1, false},
			{time.Hour, false},
		} {
			if got := k.fresh(read + int64(c.age)); got != c.want {
				t.Errorf("%s %v old: fresh %v, want %v", k.name, c.age, got, c.want)
			}
		}
		if k.none() {
			t.Errorf("no %s: fresh, want stale", k.name)
		}
	}
}
