package snapshot

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// MaxTrades is the most trades a response carries, and the limit served when
// a request names none.
const MaxTrades = 100

// Side selects trades by aggressor side.
type Side int

// The trade views a request can ask for.
const (
	SideAll  Side = iota // both sides
	SideBuy              // the aggressor bought
	SideSell             // the aggressor sold
	numSides
)

// Trades is one pair's recent trades, newest first, pre-serialized: both
// sides at once, and buys only and sells only when a request first asks for
// one. A smaller limit is a prefix of one of them plus a closing bracket (see
// Parts). What Trades serves never changes after Store publishes it.
type Trades struct {
	tickerID string
	readAt   int64
	version  uint64
	all      tradeView // both sides
	// sells marks which of all's items are sells, bit j for item j.
	sells [(MaxTrades + 63) / 64]uint64
	// later holds what is built when a request first asks for it; a
	// confirmed copy shares it.
	later *laterForms
	ids   knownIDs
}

// laterForms are the forms of a trade list built by the first request that
// asks for one, once per value (see lazyGzip for why): with its gzip form and
// tag, each side's view. Most requests read
// both sides: every listed pair's trades are rebuilt every second, and
// building each side's view with them doubled what they cost and what they
// held, for every pair.
type laterForms struct {
	lazyForms
	sides [2]atomic.Pointer[tradeView] // buys, sells
}

type tradeView struct {
	body []byte  // `[{...},{...}]`
	ends []int32 // ends[i]: end offset of item i+1 in body
}

// ErrBadTrades reports a trade list that must not be published.
var ErrBadTrades = errors.New("unusable trades")

// closeArray ends a prefix of a trade view.
var closeArray = []byte("]")

// NewTrades checks and serializes trades read from the venue, oldest first as
// venues send them. The MaxTrades newest are kept. Every price and size must be
// a positive plain decimal and a quote quantity, when sent, a plain decimal;
// otherwise the read is unusable and nothing of it is published.
//
// target_volume is the venue's quote quantity when it sends one, otherwise
// price × size computed exactly. trade_id is derived as TradeID describes.
func NewTrades(tickerID string, trades []Trade, readAt time.Time) (*Trades, error) {
	return NewTradesAfter(nil, tickerID, trades, readAt)
}

// NewTradesAfter is NewTrades for the read that follows prev, the pair's
// current value (nil for none). Consecutive reads share most of their
// trades, so their ids are taken from prev instead of hashed again, and
// their items copied from prev's bytes instead of written again; the ids and
// the bytes are the same either way.
//
// This runs for every listed pair every second, and a read that follows
// prev is mostly prev's trades with a few new ones in front and the oldest
// dropped: what it costs is meant to follow the new trades, not the kept.
// The kept trades' items are one run of prev's body, copied at once; the
// scratch of the build is on the stack, and the only allocations are the
// value's own (the value, its body and item ends, the ids for the next).
func NewTradesAfter(prev *Trades, tickerID string, trades []Trade, readAt time.Time) (*Trades, error) {
	trades = trades[max(0, len(trades)-MaxTrades):]
	var known knownIDs
	var shared *tradeView // the view known's items are in
	if prev != nil && prev.tickerID == tickerID {
		known, shared = prev.ids, &prev.all
	}
	var scratch idScratch
	from := scratch.from[:len(trades)]
	known.indexes(trades, from)
	idOf, err := tradeIDs(trades, known, &scratch)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
	}
	value := &struct {
		Trades
		later laterForms
	}{}
	t := &value.Trades
	*t = Trades{tickerID: tickerID, readAt: readAt.UnixNano(), version: nextVersion(), ids: idOf, later: &value.later}
	// Each item is serialized once, newest first, into the view of both
	// sides; a side's view copies them from there. A trade the previous
	// value held is copied as it was there, not written again with its
	// target volume computed again (a product of two decimals where the
	// venue sends no quote quantity, as Binance's aggregate trades do not).
	size := 0
	for i := range trades {
		if j := from[i]; j >= 0 {
			size += shared.itemLen(int(known.byVenue[j].at))
		} else {
			size += 200
		}
	}
	all := &t.all
	all.start(size, len(trades))
	// [first, last] is a run of items of shared, one after the other there
	// as here, not yet copied; first < 0 for none.
	first, last := -1, -1
	for at := range trades {
		i := len(trades) - 1 - at // the view is newest first
		if trades[i].Sell {
			t.sells[at/64] |= 1 << (at % 64)
		}
		if j := from[i]; j >= 0 {
			if k := int(known.byVenue[j].at); first >= 0 && k == last+1 {
				last = k
			} else {
				if first >= 0 {
					all.addItems(shared, first, last)
				}
				first, last = k, k
			}
			continue
		}
		if first >= 0 {
			all.addItems(shared, first, last)
			first = -1
		}
		if len(all.ends) > 0 {
			all.body = append(all.body, ',')
		}
		if all.body, err = appendTrade(all.body, scratch.ids[i][:], trades[i]); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
		}
		all.ends = append(all.ends, int32(len(all.body)))
	}
	if first >= 0 {
		all.addItems(shared, first, last)
	}
	if spare := cap(all.body) - len(all.body); spare > 1<<10 {
		// Every trade new: the estimate of their size is held by every
		// listed pair until its next trade.
		all.body = append(make([]byte, 0, len(all.body)+1), all.body...)
	}
	all.body = append(all.body, ']')
	// A venue sends its trades in id order, so this is almost never needed.
	if !slices.IsSortedFunc(idOf.byVenue, byVenueID) {
		slices.SortStableFunc(idOf.byVenue, byVenueID)
	}
	return t, nil
}

// start sizes a view for n items within size bytes of items and opens it.
func (v *tradeView) start(size, n int) {
	v.body = append(make([]byte, 0, size+n+2), '[')
	v.ends = make([]int32, 0, n)
}

// itemStart is where the view's item j begins.
func (v *tradeView) itemStart(j int) int {
	if j == 0 {
		return 1 // after '['
	}
	return int(v.ends[j-1]) + 1 // after ','
}

// itemLen is the length of the view's item j.
func (v *tradeView) itemLen(j int) int { return int(v.ends[j]) - v.itemStart(j) }

// item returns the view's item j, capped so that appending to it cannot
// write over the next.
func (v *tradeView) item(j int) []byte {
	start, end := v.itemStart(j), int(v.ends[j])
	return v.body[start:end:end]
}

// addItems appends the items first to last of src, with the commas between
// them, in one copy: their ends are src's moved by where they land.
func (v *tradeView) addItems(src *tradeView, first, last int) {
	if len(v.ends) > 0 {
		v.body = append(v.body, ',')
	}
	start := src.itemStart(first)
	shift := int32(len(v.body) - start)
	v.body = append(v.body, src.body[start:src.ends[last]]...)
	for _, end := range src.ends[first : last+1] {
		v.ends = append(v.ends, end+shift)
	}
}

func sideName(sell bool) string {
	if sell {
		return "sell"
	}
	return "buy"
}

// appendTrade appends a trade's item: target_volume is the venue's quote
// quantity when it sends one, otherwise price × size, written in place.
func appendTrade(dst, id []byte, tr Trade) ([]byte, error) {
	dst = append(dst, '{')
	dst = appendKey(dst, "trade_id", true)
	dst = append(append(append(dst, '"'), id...), '"')
	dst = appendStringField(dst, "price", tr.Price, false)
	dst = appendStringField(dst, "base_volume", tr.Size, false)
	dst = append(appendKey(dst, "target_volume", false), '"')
	if tr.QuoteQty != "" {
		dst = append(dst, tr.QuoteQty...)
	} else {
		var err error
		if dst, err = appendProduct(dst, tr.Price, tr.Size); err != nil {
			return nil, err
		}
	}
	dst = append(dst, '"')
	dst = appendIntField(dst, "trade_timestamp", tr.Time, false)
	dst = appendStringField(dst, "type", sideName(tr.Sell), false)
	return append(dst, '}'), nil
}

// tradeIDs checks the trades new to the window and derives every trade's
// id, oldest first, numbering trades that share time, side, price and size
// so that ids stay unique within one read.
//
// known holds the ids of an earlier read of the pair, and scratch.from[i]
// the index in known.byVenue of trades[i], or -1. The ids of the trades
// not in known.byVenue are written to scratch.ids; every trade's are
// returned the same way as known, for the next read, by venue id in the
// read's order, not yet sorted.
//
// A trade with a venue id keeps the id it was first published with: a
// repeat's number is fixed when the trade first appears (one more than the
// highest number its lookalikes hold), so it does not shift when an older
// copy leaves the window. For a process that sees the trades for the first
// time this is the same numbering as counting repeats oldest first. A trade
// without a venue id is numbered by its repeats within the read.
//
// A read shares most of its trades with the one before, and this runs for
// every pair every second: a trade known by its venue id was checked when it
// was first published and is neither checked nor looked at again, and only
// the trades at the time of a new one, its only possible lookalikes, are
// compared for its number.
func tradeIDs(trades []Trade, known knownIDs, scratch *idScratch) (knownIDs, error) {
	from := scratch.from[:len(trades)]
	withID := 0
	for i, tr := range trades {
		if tr.ID != 0 {
			withID++
		}
		if from[i] >= 0 {
			continue
		}
		if !isPositive(tr.Price) {
			return knownIDs{}, fmt.Errorf("trade price %q is not a positive plain decimal", tr.Price)
		}
		if !isPositive(tr.Size) {
			return knownIDs{}, fmt.Errorf("trade size %q is not a positive plain decimal", tr.Size)
		}
		if tr.QuoteQty != "" && (!IsPlain(tr.QuoteQty) || tr.QuoteQty[0] == '-') {
			return knownIDs{}, fmt.Errorf("quote quantity %q is not a plain decimal", tr.QuoteQty)
		}
	}
	var next knownIDs
	if withID > 0 {
		next.byVenue = make([]numberedID, 0, withID)
	}
	for i, tr := range trades {
		if tr.ID != 0 {
			k := numberedID{venueID: tr.ID, at: int32(len(trades) - 1 - i)} // the view is newest first
			if j := from[i]; j >= 0 {
				k.n = known.byVenue[j].n
			} else {
				k.n = repeatNumber(trades, i, known, scratch)
				scratch.n[i], scratch.ids[i] = k.n, tradeID(tr, int(k.n))
			}
			next.byVenue = append(next.byVenue, k)
			continue
		}
		if next.byIdent == nil {
			next.byIdent = make(map[tradeIdent][16]byte, len(trades))
		}
		ident := tradeIdent{tr.Time, tr.Sell, tr.Price, tr.Size, 0}
		for {
			if _, dup := next.byIdent[ident]; !dup {
				break
			}
			ident.n++
		}
		id, ok := known.byIdent[ident]
		if !ok {
			id = tradeID(tr, ident.n)
		}
		scratch.ids[i] = id
		next.byIdent[ident] = id
	}
	return next, nil
}

// repeatNumber is the repeat number of trades[i], a trade with a venue id
// new to the window: one more than the highest its lookalikes with a venue
// id hold, those carried over from the earlier read and the new ones before
// it (numbered already in scratch.n), 0 for none.
func repeatNumber(trades []Trade, i int, known knownIDs, scratch *idScratch) int32 {
	tr := trades[i]
	n := int32(0)
	for j, o := range trades {
		if o.Time != tr.Time || o.ID == 0 || o.Sell != tr.Sell || o.Price != tr.Price || o.Size != tr.Size {
			continue
		}
		switch {
		case scratch.from[j] >= 0:
			n = max(n, known.byVenue[scratch.from[j]].n+1)
		case j < i:
			n = max(n, scratch.n[j]+1)
		}
	}
	return n
}

// idScratch is what deriving a read's ids needs for each of its trades, on
// the stack of the build.
type idScratch struct {
	from [MaxTrades]int32    // the index in the earlier read's byVenue, or -1
	n    [MaxTrades]int32    // the repeat number of a trade with a venue id new to the window
	ids  [MaxTrades][16]byte // the id of a trade not carried by venue id
}

// knownIDs are the published ids of one value's trades, for the next read of
// the pair to reuse: by venue id where the venue gives one, otherwise by the
// four published fields and the repeat number within the read.
type knownIDs struct {
	byVenue []numberedID // sorted by venue id
	byIdent map[tradeIdent][16]byte
}

// find returns the index in byVenue of the trade with venue id id; 0, a
// trade without one, is never found.
func (k knownIDs) find(id int64) (int, bool) {
	if id == 0 {
		return 0, false
	}
	return slices.BinarySearchFunc(k.byVenue, id, func(e numberedID, id int64) int { return cmp.Compare(e.venueID, id) })
}

// indexes sets out[i] to the index in byVenue of the trade with the venue id
// of trades[i], or -1. The trades a read shares with the one before come in
// the same order, so each is first looked for right after the last found.
func (k knownIDs) indexes(trades []Trade, out []int32) {
	next := 0
	for i, tr := range trades {
		out[i] = -1
		if next < len(k.byVenue) && tr.ID != 0 && k.byVenue[next].venueID == tr.ID {
			out[i], next = int32(next), next+1
		} else if j, ok := k.find(tr.ID); ok {
			out[i], next = int32(j), j+1
		}
	}
}

// numberedID is a trade with a venue id in a value: the repeat number its
// published id was hashed with, and where its item is in the value's view
// of both sides. The id itself is in the item; nothing here points, so a
// value's index costs the collector nothing to scan.
type numberedID struct {
	venueID int64
	n       int32
	at      int32 // the index of the trade's item in the value's view of both sides
}

func byVenueID(a, b numberedID) int { return cmp.Compare(a.venueID, b.venueID) }

// tradeIdent is what a trade's id derives from: its four published fields
// and its repeat number within the read.
type tradeIdent struct {
	time  int64
	sell  bool
	price string
	size  string
	n     int
}

// appendTradeKey appends what a trade's id hashes: its four published
// fields, "trade_timestamp|type|price|base_volume".
func appendTradeKey(dst []byte, tr Trade) []byte {
	dst = strconv.AppendInt(dst, tr.Time, 10)
	dst = append(append(append(dst, '|'), sideName(tr.Sell)...), '|')
	return append(append(append(dst, tr.Price...), '|'), tr.Size...)
}

// TradeID is the published id of a trade: the lowercase hex of the first 8
// bytes of SHA-256 over "trade_timestamp|type|price|base_volume" (the
// published strings). The n-th repeat (n ≥ 1, counted oldest first within one
// read) of a trade with the same four fields hashes that text with "#n"
// appended, so ids are unique within a response and stable across reads.
func TradeID(tr Trade, n int) string {
	id := tradeID(tr, n)
	return string(id[:])
}

// tradeID is TradeID written in buffers of its own, without allocating:
// every new trade of every pair takes one.
func tradeID(tr Trade, n int) [16]byte {
	var buf [128]byte
	key := appendTradeKey(buf[:0], tr)
	if n > 0 {
		key = strconv.AppendInt(append(key, '#'), int64(n), 10)
	}
	sum := sha256.Sum256(key)
	var id [16]byte
	hex.Encode(id[:], sum[:8])
	return id
}

// TickerID is the pair these trades belong to.
func (t *Trades) TickerID() string { return t.tickerID }

// ReadAt is when the service read these trades, in Unix nanoseconds.
func (t *Trades) ReadAt() int64 { return t.readAt }

// Version identifies this value among every value the process has built.
func (t *Trades) Version() uint64 { return t.version }

// Len returns how many trades of a side the value holds.
func (t *Trades) Len(side Side) int { return len(t.view(side).ends) }

// Body is the response for a side at the full limit.
func (t *Trades) Body(side Side) []byte { return t.view(side).body }

// Gzip is Body(SideAll), the default response, compressed with gzip: by the
// first call for this value (or a confirmed copy of it), then kept (see
// lazyGzip).
func (t *Trades) Gzip() []byte { return t.later.gz.of(t.all.body) }

// view returns the view of a side, building a one-sided view the first time
// it is asked for. Concurrent first calls may each build it; one is kept.
func (t *Trades) view(side Side) *tradeView {
	if side != SideBuy && side != SideSell {
		return &t.all
	}
	p := &t.later.sides[side-SideBuy]
	if v := p.Load(); v != nil {
		return v
	}
	p.CompareAndSwap(nil, t.sideView(side == SideSell))
	return p.Load()
}

// sideView builds the view of the sells, or of the buys, from the view of
// both sides, sized for its own items: each run of the side's items there is
// copied at once.
func (t *Trades) sideView(sells bool) *tradeView {
	sell := func(j int) bool { return t.sells[j/64]&(1<<(j%64)) != 0 }
	n, size := 0, 0
	for j := range t.all.ends {
		if sell(j) == sells {
			n++
			size += t.all.itemLen(j)
		}
	}
	v := new(tradeView)
	v.start(size, n)
	for j := 0; j < len(t.all.ends); j++ {
		if sell(j) != sells {
			continue
		}
		first := j
		for j+1 < len(t.all.ends) && sell(j+1) == sells {
			j++
		}
		v.addItems(&t.all, first, j)
	}
	v.body = append(v.body, ']')
	return v
}

// Tag is the entity tag of this value, unquoted; responses for one side or a
// smaller limit add those to it.
func (t *Trades) Tag() []byte { return t.later.tag.of(t.all.body) }

// Parts returns the response for up to limit trades of a side as two slices
// to be written in order: a prefix of the pre-built array and its closing
// bracket. limit outside 1..MaxTrades means MaxTrades. Nothing is copied.
func (t *Trades) Parts(side Side, limit int) (head, tail []byte) {
	if limit <= 0 || limit > MaxTrades {
		limit = MaxTrades
	}
	v := t.view(side)
	if limit >= len(v.ends) {
		return v.body, nil
	}
	return v.body[:v.ends[limit-1]], closeArray
}

// Confirmed returns a copy of t read at at: the same bytes, version and tag,
// with a later read time. Trades kept current from the venue's trade stream
// are republished this way when no trade happened, so that a quiet market
// stays fresh without being serialized again.
func (t *Trades) Confirmed(at time.Time) *Trades {
	c := *t
	c.readAt = at.UnixNano()
	return &c
}

// NewestVenueID is the venue id of the newest trade that carries one, 0 for
// none.
func (t *Trades) NewestVenueID() int64 {
	if n := len(t.ids.byVenue); n > 0 {
		return t.ids.byVenue[n-1].venueID
	}
	return 0
}

// VenueTrades returns the trades that carry a venue id, oldest first, read
// back from the value's items: what a process that takes over reading the
// venue starts the pair's trade window from. Their target volumes come
// back as QuoteQty, so that serializing them again writes the same items.
// It is not for requests: it parses every item.
func (t *Trades) VenueTrades() ([]Trade, error) {
	out := make([]Trade, 0, len(t.ids.byVenue))
	for _, k := range t.ids.byVenue {
		tr, err := parseItem(string(t.all.item(int(k.at))))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: trade %d: %w", ErrBadTrades, t.tickerID, k.at+1, err)
		}
		tr.ID = k.venueID
		tr.Sell = t.sells[k.at/64]&(1<<(k.at%64)) != 0
		out = append(out, tr)
	}
	return out, nil
}

// itemID returns the trade_id of an item appendTrade wrote; ok is false
// when it has none.
func itemID(item []byte) (id string, ok bool) {
	rest, opened := strings.CutPrefix(string(item), `{"trade_id":"`)
	id, _, closed := strings.Cut(rest, `"`)
	return id, opened && closed
}

// parseItem reads the fields of one item appendTrade wrote.
func parseItem(item string) (Trade, error) {
	var tr Trade
	field := func(key string, quoted bool) (string, error) {
		_, rest, ok := strings.Cut(item, `"`+key+`":`)
		if !ok {
			return "", fmt.Errorf("no %s", key)
		}
		if quoted {
			v, _, ok := strings.Cut(strings.TrimPrefix(rest, `"`), `"`)
			if !ok || !strings.HasPrefix(rest, `"`) {
				return "", fmt.Errorf("%s is not a string", key)
			}
			return v, nil
		}
		end := strings.IndexAny(rest, ",}")
		if end < 0 {
			return "", fmt.Errorf("%s does not end", key)
		}
		return rest[:end], nil
	}
	var err error
	var at string
	for _, f := range []struct {
		key    string
		quoted bool
		to     *string
	}{{"price", true, &tr.Price}, {"base_volume", true, &tr.Size}, {"target_volume", true, &tr.QuoteQty}, {"trade_timestamp", false, &at}} {
		if *f.to, err = field(f.key, f.quoted); err != nil {
			return tr, err
		}
	}
	if tr.Time, err = strconv.ParseInt(at, 10, 64); err != nil {
		return tr, fmt.Errorf("trade_timestamp: %w", err)
	}
	return tr, nil
}
