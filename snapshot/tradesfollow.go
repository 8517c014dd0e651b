package snapshot

import (
	"fmt"
	"strings"
	"time"
	"unsafe"
)

// follow builds the value of a read that continues t, the usual read of a
// pair kept current from the venue's trade stream: t's trades with the
// oldest of them dropped and, after them, trades newer than any of t's.
// One pass over the read's venue ids, compared in order with t's,
// recognises it; then nothing is looked up, the kept trades are one run of
// t's items, copied at once, and only the new trades are written. ok is
// false when the read is not such a read (or t's items are not in venue
// id order, see knownIDs.inOrder): nothing was built, and buildTrades
// builds it. The value is the one buildTrades would build, byte for byte
// and id for id.
func (t *Trades) follow(trades []Trade, readAt time.Time) (v *Trades, ok bool, err error) {
	known := t.ids.byVenue
	if !t.ids.inOrder || len(trades) == 0 || len(known) == 0 {
		return nil, false, nil
	}
	// The venue numbers a pair's trades one by one, so the first kept
	// trade is usually where that count puts it.
	d, found := int(trades[0].ID-known[0].venueID), true
	if d < 0 || d >= len(known) || known[d].venueID != trades[0].ID {
		d, found = t.ids.find(trades[0].ID)
	}
	// The read's first m trades are t's newest m, and its others new.
	m := len(known) - d
	if !found || m > len(trades) {
		return nil, false, nil
	}
	// ordered: no trade's time is before the one's before it, so a new
	// trade's lookalikes (see number) are the trades just before it.
	ordered := true
	for i, k := range known[d:] {
		if trades[i].ID != k.venueID {
			return nil, false, nil
		}
		ordered = ordered && (i == 0 || trades[i].Time >= trades[i-1].Time)
	}
	for i := m; i < len(trades); i++ {
		if tr := &trades[i]; tr.ID == 0 || tr.ID <= trades[i-1].ID {
			return nil, false, nil
		}
		ordered = ordered && trades[i].Time >= trades[i-1].Time
	}
	size := 0 // of the new items
	for i := m; i < len(trades); i++ {
		if err := checkTrade(&trades[i]); err != nil {
			return nil, true, fmt.Errorf("%w: %s: %w", ErrBadTrades, t.tickerID, err)
		}
		size += itemBound(&trades[i]) + 1 // and its comma
	}
	n, added := len(trades), len(trades)-m
	value := newTradesValue(t.tickerID, readAt)
	v = &value.Trades
	// The ids, by venue id: the kept trades' as t numbered them, each
	// item added places further from the newest, then the new trades'.
	ids := value.ids[:n:n]
	for i, k := range known[d:] {
		ids[i] = numberedID{venueID: k.venueID, n: k.n, at: int32(n - 1 - i)}
	}
	for i := m; i < n; i++ {
		ids[i] = numberedID{venueID: trades[i].ID, n: repeatOf(trades, ids, i, m, ordered), at: int32(n - 1 - i)}
	}
	v.ids = knownIDs{byVenue: ids, inOrder: true}
	// The new items, newest first, then the kept ones, copied at once.
	kept := t.all.body[1:t.all.ends[m-1]]
	body := openBody(size + len(kept) + 2)
	ends := value.ends[:n:n]
	for i := n - 1; i >= m; i-- {
		tr := &trades[i]
		id := tradeID(*tr, int(ids[i].n))
		if body, err = appendTrade(body, id[:], *tr); err != nil {
			return nil, true, fmt.Errorf("%w: %s: %w", ErrBadTrades, t.tickerID, err)
		}
		ends[n-1-i] = int32(len(body))
		body = append(body, ',')
		if tr.Sell {
			at := n - 1 - i
			v.sells[at/64] |= 1 << (at % 64)
		}
	}
	shift := int32(len(body) - 1) // t's first item is at 1
	body = append(body, kept...)
	for j, end := range t.all.ends[:m] {
		ends[added+j] = end + shift
	}
	v.all = tradeView{body: closeBody(body), ends: ends}
	orSells(&v.sells, &t.sells, m, added)
	v.version = nextVersion()
	return v, true, nil
}

// repeatOf is the repeat number of trades[i], new to the window (see
// number), given ids of the trades before it: those before m held by the
// value before, the others new. With ordered, times never fall in the
// read, and only the trades just before i can be its lookalikes.
func repeatOf(trades []Trade, ids []numberedID, i, m int, ordered bool) int32 {
	tr := &trades[i]
	n := int32(0)
	for j := i - 1; j >= 0; j-- {
		o := &trades[j]
		if ordered && o.Time != tr.Time {
			break
		}
		if lookalike(o, tr) {
			n = max(n, ids[j].n+1)
		}
	}
	return n
}

// lookalike reports whether two trades with venue ids have the same four
// published fields.
func lookalike(a, b *Trade) bool {
	return a.Time == b.Time && a.ID != 0 && b.ID != 0 && a.Sell == b.Sell && a.Price == b.Price && a.Size == b.Size
}

// openBody returns a body opened with '[' and room for size bytes, which
// are not cleared first, unlike make's: a body's bytes are all written at
// once, and clearing ~20 KB for every pair every second cost as much as
// writing its new trades. Only the bytes appended are ever read; the
// string the array is allocated for holds the '[' alone and is dropped.
// Its capacity is size, as make's would be.
func openBody(size int) []byte {
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('[')
	s := b.String()
	return unsafe.Slice(unsafe.StringData(s), b.Cap())[:1:max(size, 1)]
}

// orSells adds to dst the marks of src's m newest items, each moved by
// added items: src's bits below m, shifted up by added, a word at a time.
func orSells(dst, src *[(MaxTrades + 63) / 64]uint64, m, added int) {
	kept := *src
	for k := range kept {
		switch lo := k * 64; {
		case m <= lo:
			kept[k] = 0
		case m < lo+64:
			kept[k] &= 1<<(m-lo) - 1
		}
	}
	words, bits := added/64, added%64
	for k := len(dst) - 1; k >= words; k-- {
		v := kept[k-words] << bits
		if bits > 0 && k-words > 0 {
			v |= kept[k-words-1] >> (64 - bits)
		}
		dst[k] |= v
	}
}
