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
// trades, so their ids are taken from prev instead of hashed again; the ids
// are the same either way.
func NewTradesAfter(prev *Trades, tickerID string, trades []Trade, readAt time.Time) (*Trades, error) {
	trades = trades[max(0, len(trades)-MaxTrades):]
	var known knownIDs
	if prev != nil && prev.tickerID == tickerID {
		known = prev.ids
	}
	from := known.indexes(trades)
	ids, idOf, err := tradeIDs(trades, known, from)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
	}
	// A trade the previous value held is serialized as it was there: its
	// item is copied, not written again with its target volume computed
	// again (a product of two decimals where the venue sends no quote
	// quantity, as Binance's aggregate trades do not).
	cached := func(i int) []byte {
		if j := from[i]; j >= 0 {
			return known.byVenue[j].item
		}
		return nil
	}
	targets := make([]string, len(trades))
	for i, tr := range trades {
		switch {
		case from[i] >= 0:
		case tr.QuoteQty == "":
			if targets[i], err = Product(tr.Price, tr.Size); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadTrades, tickerID, err)
			}
		case IsPlain(tr.QuoteQty) && tr.QuoteQty[0] != '-':
			targets[i] = tr.QuoteQty
		default:
			return nil, fmt.Errorf("%w: %s: quote quantity %q is not a plain decimal", ErrBadTrades, tickerID, tr.QuoteQty)
		}
	}
	t := &Trades{tickerID: tickerID, readAt: readAt.UnixNano(), version: nextVersion(), ids: idOf, later: new(laterForms)}
	// Each item is serialized once, newest first, into the view of both
	// sides; a side's view copies them from there.
	size := 0
	for i := range trades {
		if item := cached(i); item != nil {
			size += len(item)
		} else {
			size += 200
		}
	}
	all := &t.all
	all.start(size, len(trades))
	for i := len(trades) - 1; i >= 0; i-- {
		if trades[i].Sell {
			j := len(all.ends)
			t.sells[j/64] |= 1 << (j % 64)
		}
		if len(all.ends) > 0 {
			all.body = append(all.body, ',')
		}
		if item := cached(i); item != nil {
			all.body = append(all.body, item...)
		} else {
			all.body = appendTrade(all.body, ids[i], trades[i], targets[i])
		}
		all.ends = append(all.ends, int32(len(all.body)))
	}
	if spare := cap(all.body) - len(all.body); spare > 1<<10 {
		// Every trade new: the estimate of their size is held by every
		// listed pair until its next trade.
		all.body = append(make([]byte, 0, len(all.body)+1), all.body...)
	}
	all.body = append(all.body, ']')
	// The next value copies the items of the trades it shares with this
	// one out of this one's view of both sides.
	k := 0 // idOf.byVenue holds the trades with a venue id in the read's order
	for i, tr := range trades {
		if tr.ID != 0 {
			at := len(trades) - 1 - i // the view is newest first
			idOf.byVenue[k].item, idOf.byVenue[k].at = all.item(at), int32(at)
			k++
		}
	}
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

// item returns the view's item j, capped so that appending to it cannot
// write over the next.
func (v *tradeView) item(j int) []byte {
	start := 1 // after '['
	if j > 0 {
		start = int(v.ends[j-1]) + 1 // after ','
	}
	end := int(v.ends[j])
	return v.body[start:end:end]
}

// add appends one serialized item to the view.
func (v *tradeView) add(item []byte) {
	if len(v.ends) > 0 {
		v.body = append(v.body, ',')
	}
	v.body = append(v.body, item...)
	v.ends = append(v.ends, int32(len(v.body)))
}

func sideName(sell bool) string {
	if sell {
		return "sell"
	}
	return "buy"
}

func appendTrade(dst []byte, id string, tr Trade, target string) []byte {
	dst = append(dst, '{')
	dst = appendStringField(dst, "trade_id", id, true)
	dst = appendStringField(dst, "price", tr.Price, false)
	dst = appendStringField(dst, "base_volume", tr.Size, false)
	dst = appendStringField(dst, "target_volume", target, false)
	dst = appendIntField(dst, "trade_timestamp", tr.Time, false)
	dst = appendStringField(dst, "type", sideName(tr.Sell), false)
	return append(dst, '}')
}

// tradeIDs derives every trade's id, oldest first, numbering trades that share
// time, side, price and size so that ids stay unique within one read.
//
// known holds the ids of an earlier read of the pair; the ids of this read
// are returned the same way, for the next, but in the read's order, not yet
// sorted. from[i] is the index in known.byVenue of trades[i], or -1.
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
// counted for its number.
func tradeIDs(trades []Trade, known knownIDs, from []int32) ([]string, knownIDs, error) {
	ids := make([]string, len(trades))
	var newTimes []int64 // the times of trades with a venue id new to the window
	for i, tr := range trades {
		if from[i] >= 0 {
			continue
		}
		if !isPositive(tr.Price) {
			return nil, knownIDs{}, fmt.Errorf("trade price %q is not a positive plain decimal", tr.Price)
		}
		if !isPositive(tr.Size) {
			return nil, knownIDs{}, fmt.Errorf("trade size %q is not a positive plain decimal", tr.Size)
		}
		if tr.ID != 0 && !slices.Contains(newTimes, tr.Time) {
			newTimes = append(newTimes, tr.Time)
		}
	}
	// highest[base] is the highest repeat number held by a trade with the
	// base's four fields, counting the ids carried over first so that a
	// trade new to the window never takes a number one of them holds.
	var highest map[tradeIdent]int
	if len(newTimes) > 0 {
		highest = make(map[tradeIdent]int)
		for i, tr := range trades {
			if from[i] < 0 || !slices.Contains(newTimes, tr.Time) {
				continue
			}
			{
				base, n := tradeIdent{tr.Time, tr.Sell, tr.Price, tr.Size, 0}, known.byVenue[from[i]].n
				if h, seen := highest[base]; !seen || n > h {
					highest[base] = n
				}
			}
		}
	}
	var next knownIDs
	for i, tr := range trades {
		ident := tradeIdent{tr.Time, tr.Sell, tr.Price, tr.Size, 0}
		if tr.ID != 0 {
			k := numberedID{venueID: tr.ID}
			if j := from[i]; j >= 0 {
				k.n, k.id = known.byVenue[j].n, known.byVenue[j].id
			} else {
				if h, seen := highest[ident]; seen {
					k.n = h + 1
				}
				highest[ident] = k.n
				k.id = TradeID(tr, k.n)
			}
			ids[i] = k.id
			if next.byVenue == nil {
				next.byVenue = make([]numberedID, 0, len(trades))
			}
			next.byVenue = append(next.byVenue, k)
			continue
		}
		if next.byIdent == nil {
			next.byIdent = make(map[tradeIdent]string, len(trades))
		}
		for {
			if _, dup := next.byIdent[ident]; !dup {
				break
			}
			ident.n++
		}
		id, ok := known.byIdent[ident]
		if !ok {
			id = TradeID(tr, ident.n)
		}
		ids[i] = id
		next.byIdent[ident] = id
	}
	return ids, next, nil
}

// knownIDs are the published ids of one value's trades, for the next read of
// the pair to reuse: by venue id where the venue gives one, otherwise by the
// four published fields and the repeat number within the read.
type knownIDs struct {
	byVenue []numberedID // sorted by venue id
	byIdent map[tradeIdent]string
}

// find returns the index in byVenue of the trade with venue id id; 0, a
// trade without one, is never found.
func (k knownIDs) find(id int64) (int, bool) {
	if id == 0 {
		return 0, false
	}
	return slices.BinarySearchFunc(k.byVenue, id, func(e numberedID, id int64) int { return cmp.Compare(e.venueID, id) })
}

// indexes returns, for each trade, the index in byVenue of the trade with
// its venue id, or -1. The trades a read shares with the one before come in
// the same order, so each is first looked for right after the last found.
func (k knownIDs) indexes(trades []Trade) []int32 {
	out := make([]int32, len(trades))
	next := 0
	for i, tr := range trades {
		out[i] = -1
		if next < len(k.byVenue) && tr.ID != 0 && k.byVenue[next].venueID == tr.ID {
			out[i], next = int32(next), next+1
		} else if j, ok := k.find(tr.ID); ok {
			out[i], next = int32(j), j+1
		}
	}
	return out
}

// numberedID is a published trade id with its venue id, the repeat number
// it was hashed with, and the trade's serialized item in the value that
// holds it.
type numberedID struct {
	venueID int64
	n       int
	id      string
	item    []byte
	at      int32 // the index of item in the value's view of both sides
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
// It is written in buffers of its own, so that the id string is the one
// allocation: every new trade of every pair takes one.
func TradeID(tr Trade, n int) string {
	var buf [128]byte
	key := appendTradeKey(buf[:0], tr)
	if n > 0 {
		key = strconv.AppendInt(append(key, '#'), int64(n), 10)
	}
	sum := sha256.Sum256(key)
	var id [16]byte
	hex.Encode(id[:], sum[:8])
	return string(id[:])
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
// both sides, sized for its own items.
func (t *Trades) sideView(sells bool) *tradeView {
	sell := func(j int) bool { return t.sells[j/64]&(1<<(j%64)) != 0 }
	n, size := 0, 0
	for j := range t.all.ends {
		if sell(j) == sells {
			n++
			size += len(t.all.item(j))
		}
	}
	v := new(tradeView)
	v.start(size, n)
	for j := range t.all.ends {
		if sell(j) == sells {
			v.add(t.all.item(j))
		}
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
		tr, err := parseItem(string(k.item))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: trade %d: %w", ErrBadTrades, t.tickerID, k.at+1, err)
		}
		tr.ID = k.venueID
		tr.Sell = t.sells[k.at/64]&(1<<(k.at%64)) != 0
		out = append(out, tr)
	}
	return out, nil
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
