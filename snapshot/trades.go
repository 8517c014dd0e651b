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
// Such a read is recognised by comparing its venue ids with prev's in
// order, and its kept items copied from prev's body in one run (see
// follow); any other read has each trade looked up in prev once, and the
// items of those found copied a run at a time (see buildTrades). The
// scratch of the build is on the stack, and the only allocations are the
// value's own: the value, with its items' ends and its venue ids for the
// next read, and its body.
func NewTradesAfter(prev *Trades, tickerID string, trades []Trade, readAt time.Time) (*Trades, error) {
	trades = trades[max(0, len(trades)-MaxTrades):]
	if prev != nil && prev.tickerID == tickerID {
		if t, ok, err := prev.follow(trades, readAt); ok {
			return t, err
		}
	}
	return buildTrades(prev, tickerID, trades, readAt)
}

// tradesValue is a value with what only it holds, in one allocation: its
// forms built later, its items' ends and its venue ids.
type tradesValue struct {
	Trades
	later laterForms
	ends  [MaxTrades]int32
	ids   [MaxTrades]numberedID
}

// newTradesValue starts a value of tickerID's trades read at readAt.
func newTradesValue(tickerID string, readAt time.Time) *tradesValue {
	value := new(tradesValue)
	value.Trades = Trades{tickerID: tickerID, readAt: readAt.UnixNano(), later: &value.later}
	return value
}

// buildTrades is NewTradesAfter for any read, at most MaxTrades trades:
// each trade is looked for in prev, and the items of those found there
// copied from it a run at a time.
func buildTrades(prev *Trades, tickerID string, trades []Trade, readAt time.Time) (*Trades, error) {
	value := newTradesValue(tickerID, readAt)
	b := tradeBuild{trades: trades, ids: &value.ids}
	if prev != nil && prev.tickerID == tickerID {
		b.known, b.shared = prev.ids, &prev.all
	}
	if err := b.scan(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
	}
	b.number()
	t := &value.Trades
	t.version, t.sells, t.ids = nextVersion(), b.sells, b.next
	t.all.ends = value.ends[:0:len(trades)]
	if err := b.write(&t.all); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
	}
	// A venue sends its trades in id order, so this is almost never needed.
	if !slices.IsSortedFunc(t.ids.byVenue, byVenueID) {
		slices.SortStableFunc(t.ids.byVenue, byVenueID)
	}
	t.ids.inOrder = t.ids.orderOf(len(t.all.ends))
	return t, nil
}

// tradeBuild is the work of buildTrades on one read: what it knows of
// the value before and, for each trade of the read, what it found.
type tradeBuild struct {
	trades []Trade          // the read, oldest first
	known  knownIDs         // the ids of the value before, if of the same pair
	shared *tradeView       // the view known's items are in
	from   [MaxTrades]int32 // the index in known.byVenue of each trade, or -1
	n      [MaxTrades]int32 // the repeat number of each trade not in known.byVenue
	fresh  [MaxTrades]uint8 // next.byVenue's entries for trades new to the window
	nFresh int
	size   int // the bytes of the items, exactly for the kept, at most for the new (see itemBound)
	sells  [(MaxTrades + 63) / 64]uint64
	next   knownIDs               // the ids of this read, by venue id in the read's order
	ids    *[MaxTrades]numberedID // where next.byVenue is kept
}

// scan finds each trade of the read in the value before, checks the trades
// it does not hold, and sizes the body. A trade found there by its venue id
// was checked when it was first published and is not checked again; its
// item will be copied from there, so only its place is looked up.
func (b *tradeBuild) scan() error {
	trades, known := b.trades, b.known
	// [first, last] is the run of known's items that the trades since the
	// last new one are: a read oldest first goes through the view newest
	// first backwards.
	first, last := -1, -1
	endRun := func() {
		if first >= 0 {
			// The run's bytes less the commas between its items, which
			// the view's start counts for every item.
			b.size += int(b.shared.ends[last]) - b.shared.itemStart(first) - (last - first)
			first = -1
		}
	}
	look := 0 // where in known the next trade is looked for first
	for i, tr := range trades {
		at := len(trades) - 1 - i // the view is newest first
		if tr.Sell {
			b.sells[at/64] |= 1 << (at % 64)
		}
		j := -1
		if tr.ID != 0 {
			if b.next.byVenue == nil {
				b.next.byVenue = b.ids[:0:len(trades)]
			}
			// The trades a read shares with the one before come in the
			// same order, so each is first looked for right after the
			// last found.
			if look < len(known.byVenue) && known.byVenue[look].venueID == tr.ID {
				j = look
			} else if k, ok := known.find(tr.ID); ok {
				j = k
			}
		}
		b.from[i] = int32(j)
		if j >= 0 {
			look = j + 1
			k := known.byVenue[j]
			b.next.byVenue = append(b.next.byVenue, numberedID{venueID: tr.ID, n: k.n, at: int32(at)})
			if first >= 0 && int(k.at) == first-1 {
				first = int(k.at)
			} else {
				endRun()
				first, last = int(k.at), int(k.at)
			}
			continue
		}
		endRun()
		b.size += itemBound(&tr)
		if err := checkTrade(&tr); err != nil {
			return err
		}
		if tr.ID != 0 {
			// Its number waits for every trade to be found (see number).
			b.fresh[b.nFresh] = uint8(len(b.next.byVenue))
			b.nFresh++
			b.next.byVenue = append(b.next.byVenue, numberedID{venueID: tr.ID, at: int32(at)})
			continue
		}
		// Without a venue id, a trade is numbered by its repeats within
		// the read.
		if b.next.byIdent == nil {
			b.next.byIdent = make(map[tradeIdent][16]byte, len(trades))
		}
		ident := tradeIdent{tr.Time, tr.Sell, tr.Price, tr.Size, 0}
		for {
			if _, dup := b.next.byIdent[ident]; !dup {
				break
			}
			ident.n++
		}
		id, ok := known.byIdent[ident]
		if !ok {
			id = tradeID(tr, ident.n)
		}
		b.n[i] = int32(ident.n)
		b.next.byIdent[ident] = id
	}
	endRun()
	return nil
}

// checkTrade checks the fields of a trade new to the window.
func checkTrade(tr *Trade) error {
	if !isPositive(tr.Price) {
		return fmt.Errorf("trade price %q is not a positive plain decimal", tr.Price)
	}
	if !isPositive(tr.Size) {
		return fmt.Errorf("trade size %q is not a positive plain decimal", tr.Size)
	}
	if tr.QuoteQty != "" && (!IsPlain(tr.QuoteQty) || tr.QuoteQty[0] == '-') {
		return fmt.Errorf("quote quantity %q is not a plain decimal", tr.QuoteQty)
	}
	return nil
}

// number gives each trade with a venue id new to the window its repeat
// number, oldest first.
//
// A trade with a venue id keeps the id it was first published with: a
// repeat's number is fixed when the trade first appears, one more than the
// highest number its lookalikes (same time, side, price and size) hold, so
// it does not shift when an older copy leaves the window. For a process
// that sees the trades for the first time this is the same numbering as
// counting repeats oldest first. Only the trades at the time of a new one,
// its only possible lookalikes, are compared.
func (b *tradeBuild) number() {
	trades := b.trades
	for _, e := range b.fresh[:b.nFresh] {
		k := &b.next.byVenue[e]
		i := len(trades) - 1 - int(k.at)
		tr := trades[i]
		n := int32(0)
		for j := range trades {
			if !lookalike(&trades[j], &tr) {
				continue
			}
			switch {
			case b.from[j] >= 0:
				n = max(n, b.known.byVenue[b.from[j]].n+1)
			case j < i: // numbered already
				n = max(n, b.n[j]+1)
			}
		}
		k.n, b.n[i] = n, n
	}
}

// write serializes the read into all, newest first: the items of the
// trades the value before holds are copied from it, a run at a time, and
// the others written. A trade the value before held is not written again
// with its target volume computed again (a product of two decimals where
// the venue sends no quote quantity, as Binance's aggregate trades do not).
func (b *tradeBuild) write(all *tradeView) error {
	trades := b.trades
	all.body = openBody(b.size + len(trades) + 2)
	// [first, last] is a run of the items of shared, one after the other
	// there as here, not yet copied.
	first, last := -1, -1
	for at := range trades {
		i := len(trades) - 1 - at
		if j := b.from[i]; j >= 0 {
			if k := int(b.known.byVenue[j].at); first >= 0 && k == last+1 {
				last = k
			} else {
				if first >= 0 {
					all.addItems(b.shared, first, last)
				}
				first, last = k, k
			}
			continue
		}
		if first >= 0 {
			all.addItems(b.shared, first, last)
			first = -1
		}
		tr := trades[i]
		var id [16]byte
		if tr.ID != 0 {
			id = tradeID(tr, int(b.n[i]))
		} else {
			id = b.next.byIdent[tradeIdent{tr.Time, tr.Sell, tr.Price, tr.Size, int(b.n[i])}]
		}
		if len(all.ends) > 0 {
			all.body = append(all.body, ',')
		}
		var err error
		if all.body, err = appendTrade(all.body, id[:], tr); err != nil {
			return err
		}
		all.ends = append(all.ends, int32(len(all.body)))
	}
	if first >= 0 {
		all.addItems(b.shared, first, last)
	}
	all.body = closeBody(all.body)
	return nil
}

// itemFrame is the text of an item but its values (see appendTrade).
const itemFrame = `{"trade_id":"","price":"","base_volume":"","target_volume":"","trade_timestamp":,"type":""}`

// itemBound is at least the bytes of tr's item: what a body is sized for
// before its new items are written. It is exact but for the time's digits
// (13 of at most 20), the type's ("buy" of "sell") and a computed target
// volume, whose text is at most that of the price and the size together
// (plus two bytes of margin): a body sized by it is seldom more than about
// 10 bytes a new trade too large.
func itemBound(tr *Trade) int {
	target := len(tr.QuoteQty)
	if target == 0 {
		target = len(tr.Price) + len(tr.Size) + 2
	}
	return len(itemFrame) + 16 + len(tr.Price) + len(tr.Size) + target + 20 + len("sell")
}

// closeBody closes a body that openBody opened. The estimate of the new
// items' size is held by every listed pair until its next trade: a body
// left with much more room than it uses, as when many trades are new, is
// copied to one of its size.
func closeBody(body []byte) []byte {
	if spare := cap(body) - len(body); spare > 1<<10 {
		body = append(openBody(len(body)+1), body[1:]...)
	}
	return append(body, ']')
}

// start sizes a view for n items within size bytes of items and opens it.
func (v *tradeView) start(size, n int) {
	v.body = openBody(size + n + 2)
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

// knownIDs are the published ids of one value's trades, for the next read of
// the pair to reuse: by venue id where the venue gives one, otherwise by the
// four published fields and the repeat number within the read.
type knownIDs struct {
	byVenue []numberedID // sorted by venue id
	byIdent map[tradeIdent][16]byte
	// inOrder is set when every item has a venue id and the items are in
	// venue id order, newest first: byVenue[j] is item len(byVenue)-1-j.
	// A value built from the stream's window is so, and the next value
	// is then built by follow.
	inOrder bool
}

// orderOf reports whether the ids are those of n items in order (see
// inOrder).
func (k knownIDs) orderOf(n int) bool {
	if len(k.byIdent) > 0 || len(k.byVenue) != n {
		return false
	}
	for j, e := range k.byVenue {
		if int(e.at) != n-1-j {
			return false
		}
	}
	return true
}

// find returns the index in byVenue of the trade with venue id id; 0, a
// trade without one, is never found.
func (k knownIDs) find(id int64) (int, bool) {
	if id == 0 {
		return 0, false
	}
	if n := len(k.byVenue); n == 0 || id > k.byVenue[n-1].venueID {
		return n, false // a trade newer than every known, as new trades are
	}
	return slices.BinarySearchFunc(k.byVenue, id, func(e numberedID, id int64) int { return cmp.Compare(e.venueID, id) })
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
func (t *Trades) ReadAt() int64 {
	if t == nil {
		return 0 // no read yet, as FreshAt says
	}
	return t.readAt
}

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
