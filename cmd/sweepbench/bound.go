package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"marketfeed/poller/binance"
)

// The venue's bound on a recovery: the venue counts weight over any sliding
// minute, and marketfeed spends at most its budget (its share of the
// venue's limit) in any minute, so a recovery that must read a least
// weight cannot end before the window lets that weight through, given what
// the minute before the fault already held. The recovery run judges each
// venue-wide fault's time against that bound and its weight against the
// least, rather than against a fixed time: the bound moves with the
// snapshot depth books are synced at, the budget and the minute before.

// Targets against the bound (decision 5 of the recovery issue).
const (
	// boundSlack is how much longer than the bound a cold start or an
	// outage's recovery may take: the streams' reconnection, the
	// publication, the reads' own time.
	boundSlack = 15 * time.Second
	// leastSlack is how much more than the least weight a recovery may
	// spend: books that run dry while they wait, trade windows a request
	// waits for.
	leastSlack = 1.15
)

// minuteUS is the venue's window, in the call log's unit.
const minuteUS = int64(time.Minute / time.Microsecond)

// recoveryBound returns how long after the fault at least weight can have
// been read at the earliest, within budget weight in any sliding 60 s
// window, counting the calls of the venue's log in the minute before the
// fault as already spent. It spends greedily: all the window has room for
// at once, then each part as the spend holding it expires. 0 when nothing
// must be read or the budget is unlimited (0).
func recoveryBound(calls []venueCall, fault time.Time, budget, least int) time.Duration {
	if least <= 0 || budget <= 0 {
		return 0
	}
	f := fault.UnixMicro()
	type spend struct {
		at     int64 // µs
		weight int
	}
	var window []spend // oldest first
	for _, c := range calls {
		if c.At < f && c.At > f-minuteUS && c.Weight > 0 {
			window = append(window, spend{c.At, c.Weight})
		}
	}
	slices.SortFunc(window, func(a, b spend) int { return int(a.at - b.at) })
	used := 0
	for _, s := range window {
		used += s.weight
	}
	now, left := f, least
	for {
		// A spend at s is in every window (t-60 s, t] with t < s + 60 s.
		for len(window) > 0 && window[0].at <= now-minuteUS {
			used -= window[0].weight
			window = window[1:]
		}
		if room := budget - used; room > 0 {
			take := min(room, left)
			left -= take
			used += take
			window = append(window, spend{now, take})
			if left == 0 {
				return time.Duration(now-f) * time.Microsecond
			}
		}
		// The window is full: the next room comes as its oldest spend
		// expires.
		now = window[0].at + minuteUS
	}
}

// bulkPaths are the venue's all-market reads: what a recovery reads once
// beside its books (the pair list, the tickers' statistics, the quotes, the
// marks and funding), each at its weight whatever the market count.
var bulkPaths = []string{"/fapi/v1/exchangeInfo", "/fapi/v1/ticker/24hr", "/fapi/v1/ticker/bookTicker", "/fapi/v1/premiumIndex"}

// least is the least weight a recovery must read.
type least struct {
	Books, BookWeight int // books to sync, and the weight of one snapshot at the sync depth
	Bulk              int // one read of each all-market path the recovery read
	BulkPaths         []string
}

// Total is the least weight.
func (l least) Total() int { return l.Books*l.BookWeight + l.Bulk }

func (l least) String() string {
	s := fmt.Sprintf("%d = %d books × %d", l.Total(), l.Books, l.BookWeight)
	if l.Bulk > 0 {
		s += fmt.Sprintf(" + %d bulk (%s)", l.Bulk, strings.Join(l.BulkPaths, ", "))
	}
	return s
}

// leastWeight is the least weight a recovery of books books must read:
// each book's snapshot at the sync depth, plus one read of each
// all-market path the process needed (those the calls of the recovery
// hold: which of them a process reads depends on its streams).
func leastWeight(books, bookWeight int, calls []venueCall, from, to time.Time) least {
	l := least{Books: books, BookWeight: bookWeight}
	seen := map[string]int{}
	for _, c := range calls {
		if c.At >= from.UnixMicro() && c.At < to.UnixMicro() && slices.Contains(bulkPaths, c.Path) {
			seen[c.Path] = max(seen[c.Path], c.Weight)
		}
	}
	for _, p := range bulkPaths {
		if w, ok := seen[p]; ok {
			l.Bulk += w
			l.BulkPaths = append(l.BulkPaths, strings.TrimPrefix(p, "/fapi/v1/"))
		}
	}
	return l
}

// commonWeight is the weight the calls of path in [from, to) had most
// often (the smaller of two as common), 0 without any.
func commonWeight(calls []venueCall, path string, from, to time.Time) int {
	n := map[int]int{}
	for _, c := range calls {
		if c.Path == path && c.At >= from.UnixMicro() && c.At < to.UnixMicro() {
			n[c.Weight]++
		}
	}
	best := 0
	for w, k := range n {
		if k > n[best] || (k == n[best] && w < best) {
			best = w
		}
	}
	return best
}

// snapshotWeightAt is Binance's weight of one book snapshot of depth
// levels, as venuesim charges it.
func snapshotWeightAt(depth int) int {
	return binance.New(binance.Binance, binance.Options{}).BookWeight(depth)
}
