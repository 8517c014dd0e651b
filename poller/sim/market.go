package sim

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"marketfeed/poller/venue"
)

// tickMs is the venue's heartbeat: the book changes and one trade bucket
// is drawn every tickMs milliseconds. It is finer than the poller's 350 ms
// book cadence, so every poll sees a book that has moved.
const tickMs = 100

// lookback bounds how far back Trades and Stats search for trades (one day of
// buckets). Every market trades in most minutes, so the bound only guarantees
// termination.
const lookback = 24 * 3600 * 1000 / tickMs

// golden is the splitmix64 increment; adding it walks a hash stream.
const golden = 0x9e3779b97f4a7c15

// Hash domains keep the streams of one market independent of each other.
const (
	domainTop    = 0x746f70
	domainBid    = 0x626964
	domainAsk    = 0x61736b
	domainTrade  = 0x7472616465
	domainVolume = 0x766f6c
	domainOctave = 0x6f6374
	domainStatic = 0x737461
	domainID     = 0x6964
)

// mix is the splitmix64 finaliser: a cheap, well-spread 64-bit hash. Every
// random-looking quantity of the simulation is mix of a key and a counter, so
// it depends on nothing but the seed, the market and the time.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// stream returns the n-th value of the hash stream named by key.
func stream(key uint64, n int64) uint64 { return mix(key + uint64(n)*golden) }

// floorDiv divides rounding toward minus infinity, so a bucket index is right
// for times before the epoch too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// octave is one layer of the price path: a smooth random wave with knots
// every 2^shift ms and the given amplitude (parts per million of the
// reference price, for a market of vol 100). Power-of-two spacing turns the
// knot arithmetic into shifts, which matters because the path is evaluated
// for every book, every trade bucket and 96 times per market per Stats call.
type octave struct {
	shift uint
	ppm   int64
}

// The layers go from the slow drift of a trading session (2^24 ms, about
// 4.7 h) to the wiggle of seconds (2^13 ms, about 8 s); together they stay
// within about ±5.1 % × vol/100 of the reference.
//
// The minutes layer (2^17 ms, about 2 minutes) is held near the venue's
// pace: recorded LTCUSDT aggregate trades range over 0.06 % of the price in
// 164 s, and recorded BTCUSDT trades over 0.047 % in 9 s. At 3,000 ppm the
// simulated LTCUSDT ranged over 0.57 % in 164 s at the median, ten times
// that, and local books ran through their levels far faster than on the
// venue; at 600 ppm it ranges over 0.29 %, still five times the one
// recorded window, erring on the busy side (TestPricePathPace).
var octaves = [...]octave{
	{shift: 24, ppm: 40_000},
	{shift: 21, ppm: 10_000},
	{shift: 17, ppm: 600},
	{shift: 13, ppm: 600},
}

// market is one simulated market. It is immutable after New, which is what
// makes the venue safe for concurrent use without locks. It has many
// fields because it is a market's whole description, each one a parameter
// of the price path or the book's shape.
type market struct {
	info venue.Market

	ref      int64 // reference price, in ticks
	tick     int64 // tick size, in price units (10^-priceDec)
	priceDec int   // decimals of a printed price
	qtyDec   int   // decimals of a printed size; sizes are counted in lots

	levelLots int64  // typical size of a book level
	tradeLots int64  // typical size of a trade
	dayLots   int64  // typical 24 h volume
	idle      uint64 // out of 256: draws below it give no trade
	one, two  uint64 // out of 256: draws below them give one, two trades
	spread    int64  // narrowest spread, in ticks
	vol       int64  // path amplitude, percent
	window    int64  // ticks from the best price within which sizes change

	noBaseVolume bool
	noQuoteQty   bool

	topKey, bidKey, askKey, tradeKey, volumeKey, idKey uint64
	octaveKeys                                         [len(octaves)]uint64

	idBase    int64     // where the market's update ids start
	tradeBase int64     // where the market's aggregate trade ids start
	ids       *tradeIDs // where they stand (see tradeStart); shared by copies of the market
	// fast holds the market's fast moves (see Venue.FastMarket), shared by
	// copies of the market: the one thing about it that is set after New.
	fast *atomic.Pointer[[]fastMove]

	levelBytes int // text bytes one book level needs, to size buffers once
	tradeBytes int // text bytes one trade needs
}

// wave is smooth value noise: seeded knots every 2^shift ms, joined by a
// smoothstep so the path has no corners. It returns a value in
// [-32768, 32767].
func wave(key uint64, shift uint, t int64) int64 {
	j := t >> shift                        // arithmetic shift: floor, before the epoch too
	f := t & (1<<shift - 1) << 16 >> shift // position between the knots, 0..65535
	s := (f * f >> 16) * (3<<16 - 2*f) >> 16
	a := int64(int16(stream(key, j) >> 48))
	b := int64(int16(stream(key, j+1) >> 48))
	return a + (b-a)*s>>16
}

// path is the market's fair price in ticks at time t (ms), moved by the
// fast moves that began before t.
func (m *market) path(t int64) int64 {
	var dev int64 // ppm × 32768
	for o := range octaves {
		dev += octaves[o].ppm * wave(m.octaveKeys[o], octaves[o].shift, t)
	}
	dev = dev * m.vol / 100 >> 15
	p := m.ref + m.ref*dev/1_000_000
	if moves := m.fast.Load(); moves != nil {
		for _, f := range *moves {
			p += f.shift(t)
		}
	}
	return p
}

// fastMove is a fast market: from From until Until (ms), the price moves by
// TicksPerSecond (negative: down) at an even pace, as a liquidation cascade
// takes the levels of one side one after the other, and stays where it
// took it.
type fastMove struct {
	from, until    int64
	ticksPerSecond int64
}

// shift is how far the move has taken the price by t, in ticks.
func (f fastMove) shift(t int64) int64 {
	if t <= f.from {
		return 0
	}
	return f.ticksPerSecond * (min(t, f.until) - f.from) / 1000
}

// spreadExtra widens the narrowest spread now and then, so most ticks show
// the tightest spread and a few show a thinner top of book.
var spreadExtra = [8]int64{0, 0, 0, 0, 1, 1, 2, 3}

// jitter moves the top of book around the path by a tick, as queue
// depletion does on a real venue.
var jitter = [4]int64{-1, 0, 0, 1}

// top returns the best bid and ask, in ticks, during heartbeat k.
func (m *market) top(k int64) (bid, ask int64) {
	h := stream(m.topKey, k)
	spread := m.spread + spreadExtra[h&7]
	bid = m.path(k*tickMs) - spread/2 + jitter[h>>3&3]
	bid = max(bid, 1)
	return bid, bid + spread
}

// The book model. Levels sit at fixed price ticks: whether a tick holds a
// level on a side is a stable draw of the tick, which gives the book its
// gaps, and the best tick of each side always holds one. A level's size is a
// draw of (tick, epoch), where the tick's epoch advances every period
// heartbeats at a phase of its own, so that each heartbeat a few percent of
// the levels near the top change while the rest stand still; beyond the
// market's window of ticks from the best price (DefaultDepthWindow unless
// Config.DepthWindow says otherwise) a size never changes. The top follows
// the price path, so levels appear and disappear at the inside as it moves.
// A diff between two heartbeats therefore lists the levels that changed
// within the window, tens of them by default, and can be computed exactly
// by looking only at the ticks within window of either heartbeat's best
// price.
const (
	presentBelow = 218 // out of 256: the share of ticks that hold a level
	minShift     = 4   // a tick's size changes every 2^minShift heartbeats at most,
	shifts       = 3   // and every 2^(minShift+shifts-1) at least
)

// epoch returns which of its sizes the tick with draw h shows in heartbeat
// k. Periods are powers of two so that the diff, which asks this of hundreds
// of ticks per event, needs no division.
func epoch(h uint64, k int64) int64 {
	shift := minShift + uint(h>>8%shifts)
	phase := int64(h>>16) & (1<<shift - 1)
	return (k + phase) >> shift
}

// levelSize returns the size in lots of the level at tick p during heartbeat
// k, or 0 when the tick holds none. h is the tick's draw (stream(key, p) for
// the side's key) and dist its distance in ticks from the side's best price,
// which must not be negative: nothing rests inside the spread.
func (m *market) levelSize(h uint64, dist, k int64) int64 {
	if dist > 0 && h&0xff >= presentBelow {
		return 0
	}
	var z uint64
	if dist < m.window {
		z = stream(h, epoch(h, k))
	} else {
		z = mix(h ^ domainStatic)
	}
	// Sizes spread from a tenth to twice the typical, and one level in 64
	// is a wall.
	size := m.levelLots * int64(24+(z&0xffff)%464) / 256
	if z>>24&63 == 0 {
		size *= 6
	}
	return max(size, 1)
}

// side writes up to n levels of one side of the book of heartbeat k, best
// first, walking away from best by dir (-1 for bids, +1 for asks). It returns
// the number of levels written: fewer than n only if a bid would reach zero.
func (m *market) side(w *text, key uint64, k, best, dir int64, n int) int {
	i := 0
	for p := best; i < n && p > 0; p += dir {
		size := m.levelSize(stream(key, p), (p-best)*dir, k)
		if size == 0 {
			continue
		}
		w.decimal(p*m.tick, m.priceDec)
		w.decimal(size, m.qtyDec)
		i++
	}
	return i
}

// diff writes every level of one side whose size differs between heartbeats
// k0 and k1, whose best prices are best0 and best1, best first, with its size
// at k1 ("0" when the level is gone), and returns how many it wrote. Only
// ticks within window of either best price can differ: beyond both, a tick
// is static and on the same side of both tops.
func (m *market) diff(w *text, key uint64, k0, k1, best0, best1, dir int64) int {
	// from is the candidate nearest the inside, to the farthest, counted as
	// a distance from best0 along dir so one loop serves both sides.
	from := min((best1-best0)*dir, 0)
	to := max((best1-best0)*dir, 0) + m.window - 1
	n := 0
	for d := from; d <= to; d++ {
		p := best0 + d*dir
		if p <= 0 {
			break
		}
		h := stream(key, p)
		d1 := (p - best1) * dir
		// Most candidates are behind both tops, where a tick without a
		// level stays without one and a level keeps its size until its
		// epoch turns: decide those without drawing a size.
		if d > 0 && d1 > 0 && (h&0xff >= presentBelow ||
			d < m.window && d1 < m.window && epoch(h, k0) == epoch(h, k1)) {
			continue
		}
		var s0, s1 int64
		if d >= 0 {
			s0 = m.levelSize(h, d, k0)
		}
		if d1 >= 0 {
			s1 = m.levelSize(h, d1, k1)
		}
		if s0 == s1 {
			continue
		}
		w.decimal(p*m.tick, m.priceDec)
		if s1 == 0 {
			w.zero()
		} else {
			w.decimal(s1, m.qtyDec)
		}
		n++
	}
	return n
}

// updateID is the venue's order book update id after heartbeat k: strictly
// increasing, in steps of 1 to 127 as a venue's counter of book events is,
// and per market.
func (m *market) updateID(k int64) int64 {
	return m.idBase + k*64 + int64(stream(m.idKey, k)&63)
}

// heartbeatOf returns the heartbeat whose book is current at update id id:
// the last k with updateID(k) <= id.
func (m *market) heartbeatOf(id int64) int64 {
	k := floorDiv(id-m.idBase, 64)
	if m.updateID(k) > id {
		k--
	}
	return k
}

// maxBucketTrades is the most trades one heartbeat bucket holds.
const maxBucketTrades = 3

// rawTrade is a trade before formatting: price in ticks, size in lots.
type rawTrade struct {
	time  int64
	price int64
	lots  int64
	sell  bool
}

// bucket draws the trades of heartbeat b into out, oldest first, and returns
// how many there are. Buyers lift the ask and sellers hit the bid of that
// heartbeat's book, sometimes one tick through it.
func (m *market) bucket(b int64, out *[maxBucketTrades]rawTrade) int {
	h := stream(m.tradeKey, b)
	n := m.countOf(h)
	if n == 0 {
		return 0
	}
	bid, ask := m.top(b)
	for i := range n {
		z := mix(h + uint64(i+1)*golden)
		t := &out[i]
		t.time = b*tickMs + int64(z%tickMs)
		t.sell = z>>8&1 == 1
		var through int64
		if z>>9&15 == 0 {
			through = 1
		}
		if t.sell {
			t.price = max(bid-through, 1)
		} else {
			t.price = ask + through
		}
		// Mostly small trades with a long tail; one in 64 is a block.
		x := int64(z >> 16 & 0x3ff)
		t.lots = m.tradeLots * (16 + x*x>>10) / 256
		if z>>26&63 == 0 {
			t.lots *= 12
		}
		t.lots = max(t.lots, 1)
	}
	// Insertion sort: at most three trades.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && out[j].time < out[j-1].time; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	// A taker filling two resting orders at one price can print two trades
	// that agree in every published field.
	if n >= 2 && h>>8&15 == 0 {
		out[1] = out[0]
	}
	return n
}

// lastTrade returns the newest trade at or before now, and false if the
// market has not traded within the lookback.
func (m *market) lastTrade(now int64) (rawTrade, bool) {
	var bt [maxBucketTrades]rawTrade
	first := floorDiv(now, tickMs)
	for b := first; b > first-lookback; b-- {
		for j := m.bucket(b, &bt) - 1; j >= 0; j-- {
			if bt[j].time <= now {
				return bt[j], true
			}
		}
	}
	return rawTrade{}, false
}

// text collects many short values in one buffer, each followed by a space,
// so that a whole answer costs a single string conversion; cutter then slices
// the values back out in the order they were written.
type text struct{ buf []byte }

func (w *text) decimal(v int64, decimals int) {
	w.buf = appendDecimal(w.buf, v, decimals)
	w.buf = append(w.buf, ' ')
}

// zero writes a removed level's size.
func (w *text) zero() { w.buf = append(w.buf, '0', ' ') }

// empty writes an absent value, cut back out as "".
func (w *text) empty() { w.buf = append(w.buf, ' ') }

type cutter struct{ s string }

func (c *cutter) next() string {
	// Values are a few bytes long: a plain loop beats a call to IndexByte.
	i := 0
	for c.s[i] != ' ' {
		i++
	}
	v := c.s[:i]
	c.s = c.s[i+1:]
	return v
}

// appendDecimal appends v × 10^-decimals in plain notation: integer digits,
// then exactly decimals digits after the point. It never prints an exponent,
// which float formatting could. Digits are written in place, right to left
// and two at a time, because this runs for every level of every book.
func appendDecimal(b []byte, v int64, decimals int) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	u := uint64(v)
	width := max(digits(v)-decimals, 1) // integer digits, at least "0"
	if decimals > 0 {
		width += 1 + decimals
	}
	start := len(b)
	b = slices.Grow(b, width)[:start+width]
	i := start + width
	for f := decimals; f > 0; {
		if f >= 2 {
			p := u % 100 * 2
			u /= 100
			i -= 2
			b[i], b[i+1] = digitPairs[p], digitPairs[p+1]
			f -= 2
		} else {
			i--
			b[i] = byte('0' + u%10)
			u /= 10
			f--
		}
	}
	if decimals > 0 {
		i--
		b[i] = '.'
	}
	for i-start >= 2 {
		p := u % 100 * 2
		u /= 100
		i -= 2
		b[i], b[i+1] = digitPairs[p], digitPairs[p+1]
	}
	if i > start {
		b[start] = byte('0' + u)
	}
	return b
}

const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// mulDiv returns a×b/d for non-negative operands without overflowing the
// intermediate product, saturating at the largest int64 so a result is never
// negative.
func mulDiv(a, b, d int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(min(q, math.MaxInt64))
}
