package live

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// BenchmarkPublishBooks is the book publication of a period for 846
// stream-fed pairs whose local books hold 300 levels a side: each pair's
// book takes one event (350 ms later by the venue's clock than the one
// before, with the clock stopped), then every book is published as the
// schedule's steps do over a period. One op is one period; ns/book is
// per pair. top: the event changes the best bid, so every book is built
// again; below: it changes the 201st bid, below the published levels,
// so a book is confirmed, and built again only once its venue time would
// lag by confirmSlack (every third period).
func BenchmarkPublishBooks(b *testing.B) {
	for _, at := range []int{0, 200} {
		name := "top"
		if at >= snapshot.MaxDepth {
			name = "below"
		}
		b.Run(name, func(b *testing.B) { benchPublishBooks(b, 846, 300, at) })
	}
	// A period of three events of the venue's shape (venuesim
	// -depth-window 50): four sizes a side within the best 43 levels
	// each; and of venuesim's default: 14 a side within the best 300.
	// In both, half the events bring a level inside the best or take it
	// away again, which moves every level below it.
	b.Run("venue", func(b *testing.B) { benchPublishShaped(b, 846, 300, 43, 4) })
	b.Run("default", func(b *testing.B) { benchPublishShaped(b, 846, 300, 300, 14) })
}

// benchPublishShaped is BenchmarkPublishBooks with a period of three
// events of perSide size changes a side each, at random depths within
// window, half of them with a level brought inside the best or taken
// away.
func benchPublishShaped(b *testing.B, pairs, levels, window, perSide int) {
	s, symbols, bids, asks := benchBookSource(b, pairs, levels)
	books := func(lp *pair, now time.Time) func() { return lp.bookState.publish(s, lp, now) }
	r := rand.New(rand.NewPCG(44, 1))
	sizes := []string{"1.250", "2.500", "3.750", "0.125", "12.000"}
	inside := [2]venue.Level{{Price: "100000.9"}, {Price: "100001.1"}}
	side := func(held []venue.Level, in venue.Level, bids bool) []venue.Level {
		var out []venue.Level
		for _, d := range r.Perm(window)[:perSide] {
			out = append(out, venue.Level{Price: held[d].Price, Size: sizes[r.IntN(len(sizes))]})
		}
		slices.SortFunc(out, func(x, y venue.Level) int {
			c := cmpDecimal(x.Price, y.Price)
			if bids {
				return -c
			}
			return c
		})
		if r.IntN(2) == 0 {
			in.Size = [2]string{"0", "1.250"}[r.IntN(2)]
			out = append([]venue.Level{in}, out...)
		}
		return out
	}
	id, venueTime := int64(102), int64(1000)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for range 3 {
			venueTime += 350 / 3
			for _, sym := range symbols {
				s.Depth(venue.DepthUpdate{Symbol: sym, First: id + 1, Last: id + 1, Prev: id, Time: venueTime,
					Bids: side(bids, inside[0], true), Asks: side(asks, inside[1], false)})
			}
			id++
		}
		b.StartTimer()
		s.publish(time.Now(), 0, 1, books)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pairs), "ns/book")
}

// cmpDecimal orders the benchmark's prices, whole numbers and a digit.
func cmpDecimal(x, y string) int {
	if len(x) != len(y) {
		return len(x) - len(y)
	}
	return strings.Compare(x, y)
}

// benchMarkets is pairs perpetuals and their symbols.
func benchMarkets(pairs int) (markets []venue.Market, symbols []string) {
	for i := range pairs {
		base := fmt.Sprintf("P%03d", i)
		markets = append(markets, perpetual(base+"USDT", base))
		symbols = append(symbols, base+"USDT")
	}
	return markets, symbols
}

// benchBookSource is a source of pairs stream-fed perpetuals whose books
// are synced from levels levels a side at update id 102: bids falling
// from 100000.5, asks rising from 100001.5, a unit apart.
func benchBookSource(b *testing.B, pairs, levels int) (s *Source, symbols []string, bids, asks []venue.Level) {
	markets, symbols := benchMarkets(pairs)
	s, rest, _ := newSourceOf(b, Config{SyncDepth: 500, RefreshDepth: 1000}, markets...)
	for i := range levels {
		bids = append(bids, venue.Level{Price: strconv.Itoa(100000-i) + ".5", Size: "1.250"})
		asks = append(asks, venue.Level{Price: strconv.Itoa(100001+i) + ".5", Size: "1.250"})
	}
	rest.book = venue.Book{LastUpdateID: 101, Time: 1000, Bids: bids, Asks: asks}
	s.Live(snapshot.StreamBook, symbols)
	for _, sym := range symbols {
		s.Depth(venue.DepthUpdate{Symbol: sym, First: 100, Last: 102, Prev: 99, Time: 1000})
	}
	s.Sync()
	rest.wait()
	return s, symbols, bids, asks
}

func benchPublishBooks(b *testing.B, pairs, levels, at int) {
	s, symbols, bids, _ := benchBookSource(b, pairs, levels)
	books := func(lp *pair, now time.Time) func() { return lp.bookState.publish(s, lp, now) }
	id, venueTime := int64(102), int64(1000)
	sizes := [2]string{"2.500", "3.750"}
	event := make([]venue.Level, 1)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		venueTime += 350
		event[0] = venue.Level{Price: bids[at].Price, Size: sizes[id%2]}
		for _, sym := range symbols {
			s.Depth(venue.DepthUpdate{Symbol: sym, First: id + 1, Last: id + 1, Prev: id, Time: venueTime, Bids: event})
		}
		id++
		b.StartTimer()
		s.publish(time.Now(), 0, 1, books)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pairs), "ns/book")
}

// BenchmarkPublishTrades is the trades publication of a period for 846
// stream-fed pairs whose windows are full: each pair's window takes one
// trade, then every window is published. One op is one period; ns/pair is
// per pair.
func BenchmarkPublishTrades(b *testing.B) {
	const pairs = 846
	markets, symbols := benchMarkets(pairs)
	s, _, _ := newSourceOf(b, Config{}, markets...)
	s.Live(snapshot.StreamTrades, symbols)
	id := int64(1_000_000_000_000)
	trade := func() {
		id++
		for _, sym := range symbols {
			s.Trade(sym, venue.Trade{ID: id, Time: id, Price: "60000.10", Size: "0.005"})
		}
	}
	trades := func(lp *pair, now time.Time) func() { return lp.tradesState.publish(s, lp, now) }
	for range snapshot.MaxTrades {
		trade()
	}
	s.publish(time.Now(), 0, 1, trades)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		trade()
		b.StartTimer()
		s.publish(time.Now(), 0, 1, trades)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pairs), "ns/pair")
}
