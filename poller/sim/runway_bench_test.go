package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The runway of a local book: how long a book synced from a snapshot of
// some depth keeps vouching for the 100 levels a side that are served, as
// the top moves towards the snapshot's edge, and what keeping every book
// deep costs in refreshes. It is what the sync and refresh depths are
// chosen by (docs/venues.md); run it with
//
//	go test -run XXX -bench BookRunway -benchtime 1x -v ./poller/sim
//
// over the 446 markets of a sweep (46 built in, 400 synthetic) at the
// venue's pace, from four start instants a day apart, for 30 minutes
// each.
//
// A side's levels sit at fixed ticks (see levelSize): a tick holds a level
// by a stable draw, and the best tick always holds one, so the levels a
// book vouches for on a side are the ticks holding one between the best
// price and the snapshot's edge, counted without building the book.

// runway follows one market's bids and asks over the heartbeats whose tops
// it holds, counting levels with prefix sums of the ticks that hold one.
type runway struct {
	m          *market
	bids, asks []int64 // the best bid and ask of each heartbeat
	lo         int64   // the tick pre[0] counts up to
	bidPre     []int32 // bidPre[i]: ticks lo..lo+i-1 that hold a bid level
	askPre     []int32
	served     int // levels a side that are published
}

// margin is how far past the tops' range a snapshot's edge can lie: more
// ticks than 1,000 levels take.
const margin = 2000

func newRunway(m *market, k0, n int64, served int) runway {
	r := runway{m: m, served: served, bids: make([]int64, n), asks: make([]int64, n)}
	lo, hi := int64(1<<62), int64(0)
	for i := range n {
		r.bids[i], r.asks[i] = m.top(k0 + i)
		lo, hi = min(lo, r.bids[i]), max(hi, r.asks[i])
	}
	r.lo = max(lo-margin, 1)
	span := hi + margin - r.lo + 1
	r.bidPre, r.askPre = make([]int32, span+1), make([]int32, span+1)
	for i := range span {
		p := r.lo + i
		r.bidPre[i+1] = r.bidPre[i] + b2i(stream(m.bidKey, p)&0xff < presentBelow)
		r.askPre[i+1] = r.askPre[i] + b2i(stream(m.askKey, p)&0xff < presentBelow)
	}
	return r
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// present counts the ticks in [a, b] that hold a level by pre.
func (r runway) present(pre []int32, a, b int64) int {
	if a > b {
		return 0
	}
	return int(pre[b-r.lo+1] - pre[a-r.lo])
}

// vouched counts the levels of each side between its best price and its
// edge: the best tick always holds one.
func (r runway) vouched(i int, bidEdge, askEdge int64) (bids, asks int) {
	bid, ask := r.bids[i], r.asks[i]
	if bid >= bidEdge {
		bids = 1 + r.present(r.bidPre, bidEdge, bid-1)
	}
	if ask <= askEdge {
		asks = 1 + r.present(r.askPre, ask+1, askEdge)
	}
	return bids, asks
}

// edges are the prices of the depth-th level of each side at heartbeat i.
func (r runway) edges(i, depth int) (bidEdge, askEdge int64) {
	walk := func(key uint64, best, dir int64) int64 {
		n, p := 0, best
		for ; p > r.lo && p < r.lo+int64(len(r.bidPre))-2; p += dir {
			if p == best || stream(key, p)&0xff < presentBelow {
				if n++; n == depth {
					break
				}
			}
		}
		return p
	}
	return walk(r.m.bidKey, r.bids[i], -1), walk(r.m.askKey, r.asks[i], +1)
}

// follow syncs the book from syncDepth at the first heartbeat, lays a
// snapshot of refreshDepth under it whenever a side vouches for fewer than
// below levels (keeping the farther edge, as orderbook.Refresh does), and
// returns the heartbeats after the first at which the book first ran
// short of the served levels (-1: never) and the refreshes made.
func (r runway) follow(syncDepth, refreshDepth, below int) (short int64, refreshes int) {
	bidEdge, askEdge := r.edges(0, syncDepth)
	short = -1
	for i := 1; i < len(r.bids); i++ {
		vb, va := r.vouched(i, bidEdge, askEdge)
		if short < 0 && min(vb, va) < r.served {
			short = int64(i)
			if refreshDepth == 0 {
				return short, 0
			}
		}
		if refreshDepth > 0 && min(vb, va) < below {
			refreshes++
			b, a := r.edges(i, refreshDepth)
			bidEdge, askEdge = min(bidEdge, b), max(askEdge, a)
		}
	}
	return short, refreshes
}

func BenchmarkBookRunway(b *testing.B) {
	const (
		starts  = 4
		horizon = 30 * time.Minute
		served  = 100
	)
	v := New(Config{Seed: 1, Extra: 400})
	n := int64(horizon / (tickMs * time.Millisecond))
	type plan struct{ sync, refresh, below int }
	plans := []plan{{100, 1000, 150}, {500, 1000, 150}, {500, 500, 150}, {1000, 1000, 150}}
	for range b.N {
		runways := make([][]time.Duration, len(plans)) // per market and start; past the horizon when never short
		refreshes := make([]int, len(plans))
		for i := range v.markets {
			for s := range starts {
				k0 := Heartbeat(t0.Add(time.Duration(s) * 24 * time.Hour))
				r := newRunway(&v.markets[i], k0, n, served)
				for j, pl := range plans {
					short, _ := r.follow(pl.sync, 0, 0)
					d := horizon + time.Second
					if short >= 0 {
						d = time.Duration(short) * tickMs * time.Millisecond
					}
					runways[j] = append(runways[j], d)
					_, refs := r.follow(pl.sync, pl.refresh, pl.below)
					refreshes[j] += refs
				}
			}
		}
		for j, pl := range plans {
			rw := runways[j]
			slices.Sort(rw)
			within := func(d time.Duration) float64 {
				i, _ := slices.BinarySearch(rw, d+1)
				return 100 * float64(i) / float64(len(rw))
			}
			weight := map[int]int{100: 5, 500: 10, 1000: 20}[pl.refresh]
			perMin := float64(refreshes[j]) / starts / horizon.Minutes()
			name := fmt.Sprintf("sync%d_refresh%d", pl.sync, pl.refresh)
			b.Logf("%s: books short of %d levels within 1 min %.1f %%, 5 min %.1f %%, 15 min %.1f %%, 30 min %.1f %%; "+
				"fastest %v, median %v; with refreshes below %d: %.1f a minute over %d markets, %.0f weight a minute",
				name, served, within(time.Minute), within(5*time.Minute), within(15*time.Minute), within(horizon),
				rw[0], rw[len(rw)/2], pl.below, perMin, len(v.markets), perMin*float64(weight))
			b.ReportMetric(within(time.Minute), name+"_short_1m_%")
			b.ReportMetric(perMin*float64(weight), name+"_refresh_weight/min")
		}
	}
}
