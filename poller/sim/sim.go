// Package sim is the embedded default venue: a simulated perpetual-futures
// exchange that implements venue.Venue without a network, so the service
// runs, demonstrates and load-tests with no external dependency.
//
// The simulation is stateless. Every answer is a pure function of the seed,
// the market and the venue clock: prices follow a smooth seeded path of time,
// the book changes a little around it every 100 ms heartbeat, and each
// heartbeat's trades are drawn from a hash of (seed, market, heartbeat). The
// venue numbers its book updates and trades as a Binance-compatible venue
// does, and serves the diff stream between any two heartbeats exactly, so
// in-process market streams (Streams) and a websocket front end can be built
// on it with no state of their own beyond where they are. Two reads at the
// same instant agree whatever order they are made in, later reads extend the
// trade history instead of rewriting it, and concurrent calls need no locks.
// The one thing set at run time is a fast market (FastMarket), a move of
// the price from then on, which leaves every answer about the past as it
// was.
//
// All arithmetic is integer: prices are counted in ticks and sizes in lots,
// and decimals are printed with strconv, never through a float, so every
// decimal string is plain (no exponent) and positive.
package sim

import (
	"context"
	"fmt"
	"sort"
	"time"

	"marketfeed/poller/venue"
)

// Book and trade limits, as a Binance-compatible venue applies them.
const (
	defaultDepth = 500  // levels per side when depth is not positive
	maxDepth     = 1000 // the most levels per side the venue holds
	defaultLimit = 500  // trades when limit is not positive
	maxLimit     = 1000 // the most trades one call returns
)

// Config sets up a simulated venue.
type Config struct {
	// Seed selects the simulated world; equal seeds give equal answers.
	Seed int64
	// Now is the venue clock; nil means time.Now. Tests inject a fixed or
	// stepped clock instead of sleeping.
	Now func() time.Time
	// Extra adds synthetic perpetuals SIM001USDT, SIM002USDT, ... (base
	// "SIM001", ...) after the built-in markets, for load tests with hundreds
	// of hot pairs. Zero or negative adds none.
	Extra int
	// DepthWindow is how many ticks from the best price a level's size
	// may change in (see DefaultDepthWindow); zero or negative means the
	// default. It sets how many levels a diff event carries and how deep
	// in the book they lie: 50 gives events the shape of the venue's
	// recorded diffs, about four levels a side within a few dozen of the
	// top, where the default's carry about 14 a side reaching some 300
	// levels down (TestDepthWindowShapesTheDiffs).
	DepthWindow int
}

// DefaultDepthWindow is the depth window of a Config that sets none: diffs
// of about 14 levels a side, spread over the book's top 340 levels, heavier
// than most of the venue's pairs send, so that what keeps books current is
// exercised at its busiest.
const DefaultDepthWindow = 400

// Venue is the simulated venue. Its answers depend only on the seed, the
// clock and the fast markets set (it keeps nothing else but a memory of
// where trade ids stand, which saves counting them again), and it is safe
// for concurrent use.
type Venue struct {
	now      func() time.Time
	markets  []market
	bySymbol map[string]*market
}

// New returns a simulated venue with the built-in markets plus cfg.Extra
// synthetic ones.
func New(cfg Config) *Venue {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	extra := max(cfg.Extra, 0)
	v := &Venue{
		now:      now,
		markets:  make([]market, 0, len(builtin)+extra),
		bySymbol: make(map[string]*market, len(builtin)+extra),
	}
	for _, s := range builtin {
		v.markets = append(v.markets, newMarket(s, cfg.Seed))
	}
	for i := 1; i <= extra; i++ {
		v.markets = append(v.markets, newMarket(extraSpec(i), cfg.Seed))
	}
	for i := range v.markets {
		if cfg.DepthWindow > 0 {
			v.markets[i].window = int64(cfg.DepthWindow)
		}
		v.bySymbol[v.markets[i].info.Symbol] = &v.markets[i]
	}
	return v
}

// Name returns "sim", the venue name used in price_source.
func (v *Venue) Name() string { return "sim" }

// Weight returns 0: the simulator has no request-weight limit, so the poller
// never stretches its cadence for it.
func (v *Venue) Weight(venue.Call) int { return 0 }

// Catalog lists every market, tradable or not, with no weight limit. The
// slice is the caller's to keep.
func (v *Venue) Catalog(ctx context.Context) (venue.Catalog, error) {
	if err := ctx.Err(); err != nil {
		return venue.Catalog{}, err
	}
	markets := make([]venue.Market, len(v.markets))
	for i := range v.markets {
		markets[i] = v.markets[i].info
	}
	return venue.Catalog{Markets: markets}, nil
}

// Book returns up to depth levels per side of symbol at the current instant,
// best first. A depth that is not positive means 500 and a larger one is
// capped at 1000, as on Binance. The book changes every 100 ms heartbeat;
// Time is the venue clock in ms and LastUpdateID the update id of the
// heartbeat, as DepthUpdate and BookAt number them. An unknown symbol is a 400 StatusError, as
// Binance answers an invalid symbol.
func (v *Venue) Book(ctx context.Context, symbol string, depth int) (venue.Book, error) {
	if err := ctx.Err(); err != nil {
		return venue.Book{}, err
	}
	m, err := v.market("book", symbol)
	if err != nil {
		return venue.Book{}, err
	}
	n := depth
	if n <= 0 {
		n = defaultDepth
	}
	n = min(n, maxDepth)

	now := v.now().UnixMilli()
	return m.book(floorDiv(now, tickMs), now, n), nil
}

// Trades returns the last limit trades of symbol at or before the current
// instant, oldest first, as Binance does. A limit that is not positive means
// 500 and a larger one is capped at 1000. Trades of the past never change:
// a later call returns the same trades plus newer ones. IDs are the
// aggregate trade ids, consecutive in trade order (see tradeStart) and the
// same as the streams deliver. QuoteQty is price ×
// size exactly, except on DOGEUSDT, whose trades leave it "" as a venue
// without quote quantities would. Now and then two consecutive trades agree
// in time, side, price and size.
func (v *Venue) Trades(ctx context.Context, symbol string, limit int) ([]venue.Trade, error) {
	m, n, err := v.tradesRead(ctx, symbol, limit)
	if err != nil {
		return nil, err
	}

	now := v.now().UnixMilli()
	out := make([]venue.Trade, n)
	w := text{buf: make([]byte, 0, n*m.tradeBytes)}
	// Walk back from the newest heartbeat, filling out from its end, so the
	// result comes out oldest first without a second buffer.
	i := n
	var bt [maxBucketTrades]rawTrade
	first := floorDiv(now, tickMs)
	// A bucket's first id is the next one's less its trades; only where an
	// era begins are the ids counted again (see tradeStart).
	start := m.tradeStart(first + 1)
	for b := first; i > 0 && b > first-lookback; b-- {
		count := m.bucket(b, &bt)
		if floorMod(b+1, eraBuckets) == 0 {
			start = m.tradeStart(b)
		} else {
			start -= int64(count)
		}
		for j := count - 1; j >= 0 && i > 0; j-- {
			t := &bt[j]
			if t.time > now {
				continue // later in the current heartbeat: not happened yet
			}
			i--
			out[i].ID = start + int64(j)
			out[i].LastID = out[i].ID // each aggregate trade is one single trade
			out[i].Time = t.time
			out[i].Sell = t.sell
			m.writeTrade(&w, t)
		}
	}
	out = out[i:]
	c := cutter{string(w.buf)}
	for j := len(out) - 1; j >= 0; j-- {
		out[j].Price = c.next()
		out[j].Size = c.next()
		out[j].QuoteQty = c.next()
	}
	return out, nil
}

// TradesFrom returns up to limit trades of symbol from id fromID on, at or
// before the current instant, oldest first, as Binance's
// aggTrades?fromId= does: the same trades, with the same ids, as Trades
// and the streams deliver. Limits are as Trades'. An id older than the
// lookback starts at its first trade; one past the newest trade returns
// none.
func (v *Venue) TradesFrom(ctx context.Context, symbol string, fromID int64, limit int) ([]venue.Trade, error) {
	m, n, err := v.tradesRead(ctx, symbol, limit)
	if err != nil {
		return nil, err
	}

	now := v.now().UnixMilli()
	last := floorDiv(now, tickMs)
	// The heartbeat holding fromID is the last whose first id is at most
	// fromID: first ids only grow with the heartbeat, so halve, within
	// the era the id's number falls in (see tradeStart), and the
	// lookback.
	era := floorDiv(fromID-m.tradeBase, eraBuckets*maxBucketTrades)
	lo := min(max(last-lookback+1, era*eraBuckets), last)
	hi := max(min(last, (era+1)*eraBuckets-1), lo)
	b := lo + int64(sort.Search(int(hi-lo+1), func(i int) bool {
		return m.tradeStart(lo+int64(i)) > fromID
	})) - 1
	b = max(b, lo)
	out := make([]venue.Trade, 0, min(n, 64))
	var raw []rawTrade
	var bt [maxBucketTrades]rawTrade
	for ; b <= last && len(out) < n; b++ {
		start, count := m.tradeStart(b), m.bucket(b, &bt)
		for j := 0; j < count && len(out) < n; j++ {
			if id := start + int64(j); id >= fromID && bt[j].time <= now {
				out = append(out, venue.Trade{ID: id, LastID: id, Time: bt[j].time, Sell: bt[j].sell})
				raw = append(raw, bt[j])
			}
		}
	}
	w := text{buf: make([]byte, 0, len(out)*m.tradeBytes)}
	for i := range raw {
		m.writeTrade(&w, &raw[i])
	}
	c := cutter{string(w.buf)}
	for i := range out {
		out[i].Price = c.next()
		out[i].Size = c.next()
		out[i].QuoteQty = c.next()
	}
	return out, nil
}

// NewestTradeID returns the id of symbol's newest trade at or before the
// current instant, 0 when it has none: each simulated aggregate trade is
// one single trade, numbered with the aggregate id (see Trades), so it is
// the LastID of the newest trade Trades returns (see venue.TradeIDReader).
func (v *Venue) NewestTradeID(ctx context.Context, symbol string) (int64, error) {
	trades, err := v.Trades(ctx, symbol, 1)
	if err != nil || len(trades) == 0 {
		return 0, err
	}
	return trades[len(trades)-1].LastID, nil
}

// tradesRead checks a trades read: the market of symbol, and how many
// trades limit asks for as the venue counts them.
func (v *Venue) tradesRead(ctx context.Context, symbol string, limit int) (*market, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	m, err := v.market("trades", symbol)
	if err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		return m, defaultLimit, nil
	}
	return m, min(limit, maxLimit), nil
}

// Stats returns the rolling 24 h statistics of every market. LastPrice is
// the price of the market's newest trade; High and Low cover the price path
// sampled every 15 minutes over the day, and the last price. ADAUSDT's base
// volume is absent ("") as a venue sometimes omits it.
func (v *Venue) Stats(ctx context.Context) ([]venue.Stat, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return v.stats(v.now().UnixMilli()), nil
}

// stats returns the 24 h statistics of every market at now (ms).
func (v *Venue) stats(now int64) []venue.Stat {
	out := make([]venue.Stat, len(v.markets))
	w := text{buf: make([]byte, 0, len(v.markets)*96)}
	for i := range v.markets {
		m := &v.markets[i]
		s := m.stat(now)
		w.decimal(s.last*m.tick, m.priceDec)
		w.decimal(s.high*m.tick, m.priceDec)
		w.decimal(s.low*m.tick, m.priceDec)
		if m.noBaseVolume {
			w.empty()
		} else {
			w.decimal(s.baseLots, m.qtyDec)
		}
		w.decimal(s.quoteCents, 2)
	}
	c := cutter{string(w.buf)}
	for i := range out {
		out[i] = venue.Stat{
			Symbol:      v.markets[i].info.Symbol,
			LastPrice:   c.next(),
			High:        c.next(),
			Low:         c.next(),
			BaseVolume:  c.next(),
			QuoteVolume: c.next(),
		}
	}
	return out
}

// Quotes returns the best bid and ask of every market, the same as the top
// level of Book at the same instant.
func (v *Venue) Quotes(ctx context.Context) ([]venue.Quote, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := floorDiv(v.now().UnixMilli(), tickMs)
	out := make([]venue.Quote, len(v.markets))
	w := text{buf: make([]byte, 0, len(v.markets)*32)}
	for i := range v.markets {
		m := &v.markets[i]
		bid, ask := m.top(k)
		w.decimal(bid*m.tick, m.priceDec)
		w.decimal(ask*m.tick, m.priceDec)
	}
	c := cutter{string(w.buf)}
	for i := range out {
		out[i] = venue.Quote{Symbol: v.markets[i].info.Symbol, Bid: c.next(), Ask: c.next()}
	}
	return out, nil
}

// FastMarket makes symbol a fast market from now on for d: its price moves
// levels price levels a second (negative: down) at an even pace, as a
// liquidation cascade takes one side's levels one after the other, then
// stays where the move took it. Every answer (books, the diff stream, trades,
// marks, BookAt) follows, the same for every reader: the books of the past
// are as they were, since a move starts no earlier than now. Levels are
// counted as the ticks that hold one on average (presentBelow of 256).
func (v *Venue) FastMarket(symbol string, levels int, d time.Duration) error {
	m, err := v.market("fast market", symbol)
	if err != nil {
		return err
	}
	from := v.now().UnixMilli()
	move := fastMove{from: from, until: from + d.Milliseconds(), ticksPerSecond: int64(levels) * 256 / presentBelow}
	for {
		old := m.fast.Load()
		var moves []fastMove
		if old != nil {
			moves = append(moves, *old...)
		}
		moves = append(moves, move)
		if m.fast.CompareAndSwap(old, &moves) {
			return nil
		}
	}
}

func (v *Venue) market(call, symbol string) (*market, error) {
	m, ok := v.bySymbol[symbol]
	if !ok {
		return nil, fmt.Errorf("%s %s: invalid symbol: %w", call, symbol, &venue.StatusError{Status: 400})
	}
	return m, nil
}

// stat is one market's 24 h statistics before formatting.
type stat struct {
	last, high, low int64 // ticks
	baseLots        int64
	quoteCents      int64 // quote volume in hundredths
}

// statSamples is how many points of the path the 24 h high, low and average
// price are taken from: one every 15 minutes, aligned to the clock so the
// figures are a pure function of the instant and cheap for a bulk call.
const (
	statSamples = 96
	statStep    = 24 * 3600 * 1000 / statSamples
)

func (m *market) stat(now int64) stat {
	var s stat
	if t, ok := m.lastTrade(now); ok {
		s.last = t.price
	} else {
		s.last = m.path(now)
	}
	s.high, s.low = s.last, s.last
	var sum int64
	at := floorDiv(now, statStep) * statStep
	for j := range statSamples {
		p := m.path(at - int64(j)*statStep)
		s.high = max(s.high, p)
		s.low = min(s.low, p)
		sum += p
	}
	// The day's volume swings ±35 % around the market's typical volume,
	// slowly, as activity follows the sessions.
	s.baseLots = max(m.dayLots*(10_000+3_500*wave(m.volumeKey, 24, now)>>15)/10_000, 1)
	// Quote volume at the day's average price, in hundredths of the quote.
	avg := sum / statSamples * m.tick    // in price units of 10^-priceDec
	lotsByPrice := m.qtyDec + m.priceDec // decimals of lots × price units
	if lotsByPrice >= 2 {
		s.quoteCents = mulDiv(s.baseLots, avg, pow10(lotsByPrice-2))
	} else {
		s.quoteCents = mulDiv(s.baseLots*pow10(2-lotsByPrice), avg, 1)
	}
	return s
}
