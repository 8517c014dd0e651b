package snapshot

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// The kinds of a published pair.
const (
	KindSpot = "spot" // a platform spot market priced from the perpetual's mid
	KindPerp = "perp" // a perpetual contract of the venue
)

// Side lengths of a ticker_id: BASE_TARGET, each side 2 to 15 characters.
const (
	minSide = 2
	maxSide = 15
)

// ValidTickerID reports whether id has the exact form BASE_TARGET, each side
// 2 to 15 uppercase ASCII letters or digits.
func ValidTickerID[T string | []byte](id T) bool {
	sep := -1
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c == '_' {
			if sep >= 0 {
				return false
			}
			sep = i
			continue
		}
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return sep >= minSide && sep <= maxSide && len(id)-sep-1 >= minSide && len(id)-sep-1 <= maxSide
}

// validAsset reports whether one side of a ticker_id fits the form.
func validAsset(s string) bool {
	return len(s) >= minSide && len(s) <= maxSide && ValidTickerID(s+"_XX")
}

// Pair is one published pair.
type Pair struct {
	TickerID string
	Base     string
	Target   string
	Kind     string // KindSpot or KindPerp
	Symbol   string // the venue symbol of the perpetual that prices it
}

// PairsConfig is what decides publication besides the venue's markets.
type PairsConfig struct {
	// Venue is the lowercase venue name; price_source is Venue + "-perp".
	Venue string
	// Spot lists the platform's spot pairs (its custodied coins) as ticker ids.
	Spot []string
	// Quotes, when not empty, is the allow-list of quote assets for perp
	// items. Spot items are configured one by one and are not filtered.
	Quotes []string
	// Incoming holds ticker ids the rules publish that are not listed yet:
	// they are followed and answered, but left out of /pairs (see
	// Pairs.Incoming).
	Incoming map[string]bool
}

// Pairs is the published pair list: the /pairs body and the index behind the
// /pairs gate of the other routes. It is never mutated after Store publishes
// it; the cells its index points to hold the pair's current book and trades.
type Pairs struct {
	list []Pair
	// incoming are pairs new to the catalog that are not listed yet: the
	// store answers their book and trades (and a replica takes them) but
	// /pairs does not show them until they hold both (see
	// PairsConfig.Incoming), so that no ticker_id /pairs returns, from any
	// replica or any cache of it, answers 404 or 502 for want of data.
	incoming []Pair
	body     []byte
	gzipped  []byte
	tag      []byte
	readAt   int64
	version  uint64
	// cells are the pairs listed, those incoming and those leaving (see
	// Store.PutDoc); set once by Store.putPairs, before publication.
	cells map[string]*cell
}

// cell holds the current book and trades of one listed pair. It outlives a
// Pairs value: a new pair list keeps the cells of the pairs it still lists,
// and for a while of those it no longer does.
type cell struct {
	book   atomic.Pointer[Book]
	trades atomic.Pointer[Trades]
	depth  atomic.Pointer[Depth] // what a cluster's leader published last; never served
	// until is when a pair no longer listed stops being answered, Unix ns;
	// 0 while it is listed.
	until atomic.Int64
}

// NewPairs applies the publication rules to the venue's markets:
//  1. only tradable perpetual markets whose base and quote fit the ticker_id
//     form are published (rule 1 and the form);
//  2. a configured spot id is published, as spot, only when a tradable
//     perpetual has exactly that base and quote: no multiplier arithmetic, so
//     PEPE_USDT is not published against 1000PEPEUSDT (rules 1 and 2);
//  3. perps are published under the venue's base asset, multiplier included
//     (rule 3);
//  4. when a name is both spot and perp, the single entry is spot (rule 4).
//
// The list is sorted by ticker_id. readAt is when the catalog was read.
func NewPairs(markets []Market, cfg PairsConfig, readAt time.Time) *Pairs {
	perps := make(map[string]Market)
	for _, m := range markets {
		if !m.Perpetual || !m.Trading || !validAsset(m.Base) || !validAsset(m.Quote) {
			continue
		}
		id := m.Base + "_" + m.Quote
		if prev, ok := perps[id]; ok && prev.Symbol <= m.Symbol {
			continue // two symbols for one pair: keep the first by symbol, deterministically
		}
		perps[id] = m
	}
	byID := make(map[string]Pair)
	for id, m := range perps {
		if len(cfg.Quotes) > 0 && !slices.Contains(cfg.Quotes, m.Quote) {
			continue
		}
		byID[id] = Pair{TickerID: id, Base: m.Base, Target: m.Quote, Kind: KindPerp, Symbol: m.Symbol}
	}
	for _, id := range cfg.Spot {
		m, ok := perps[id]
		if !ok {
			continue
		}
		byID[id] = Pair{TickerID: id, Base: m.Base, Target: m.Quote, Kind: KindSpot, Symbol: m.Symbol}
	}
	list := make([]Pair, 0, len(byID))
	for _, p := range byID {
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b Pair) int { return strings.Compare(a.TickerID, b.TickerID) })
	var incoming []Pair
	if len(cfg.Incoming) > 0 {
		listed := list[:0:0]
		for _, p := range list {
			if cfg.Incoming[p.TickerID] {
				incoming = append(incoming, p)
			} else {
				listed = append(listed, p)
			}
		}
		list = listed
	}

	source := cfg.Venue + "-perp"
	body := make([]byte, 0, 128*len(list)+2)
	body = append(body, '[')
	for i, p := range list {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, '{')
		body = appendStringField(body, "ticker_id", p.TickerID, true)
		body = appendStringField(body, "base", p.Base, false)
		body = appendStringField(body, "target", p.Target, false)
		body = appendStringField(body, "kind", p.Kind, false)
		body = appendStringField(body, "price_source", source, false)
		body = append(body, '}')
	}
	body = append(body, ']')
	return &Pairs{list: list, incoming: incoming, body: body, gzipped: compress(body), tag: appendTag(nil, body),
		readAt: readAt.UnixNano(), version: nextVersion()}
}

// Incoming returns the pairs followed and answered but not listed yet (see
// PairsConfig.Incoming), sorted by ticker_id. Callers must not modify it.
func (p *Pairs) Incoming() []Pair { return p.incoming }

// Body is the /pairs response.
func (p *Pairs) Body() []byte { return p.body }

// Gzip is Body compressed with gzip.
func (p *Pairs) Gzip() []byte { return p.gzipped }

// Tag is the entity tag of Body, unquoted. It changes only when the bytes do:
// the catalog is read every minute and rarely changes, and an unchanged list
// keeps being revalidated with 304.
func (p *Pairs) Tag() []byte { return p.tag }

// List is the published pairs, sorted by ticker_id. Callers must not modify it.
func (p *Pairs) List() []Pair { return p.list }

// ReadAt is when the venue's catalog was read, in Unix nanoseconds.
func (p *Pairs) ReadAt() int64 { return p.readAt }

// Version identifies this value among every value the process has built.
func (p *Pairs) Version() uint64 { return p.version }

// Lookup returns the published pair with this ticker_id.
func (p *Pairs) Lookup(id string) (Pair, bool) {
	i, ok := slices.BinarySearchFunc(p.list, id, func(p Pair, id string) int { return strings.Compare(p.TickerID, id) })
	if !ok {
		return Pair{}, false
	}
	return p.list[i], true
}

// Spot returns the published spot pairs, sorted by ticker_id.
func (p *Pairs) Spot() []Pair {
	var spot []Pair
	for _, pair := range p.list {
		if pair.Kind == KindSpot {
			spot = append(spot, pair)
		}
	}
	return spot
}
