//go:build !race

package standby

import (
	"testing"

	"marketfeed/poller/venue"
)

// A leader's and a follower's depth event allocates nothing once the pairs'
// held memory has grown to its use: the event is passed on as lent, and its
// copy held in memory reused.
func TestDepthEventAllocatesNothing(t *testing.T) {
	for _, leader := range []bool{true, false} {
		m := newBenchMarket(t)
		if leader {
			m.lead(t, &sinkFunc{})
		}
		i := 0
		send := func() { m.send(i % benchPairs); i++ }
		for range benchPairs * benchEvery * 2 {
			send()
		}
		if n := testing.AllocsPerRun(1000, send); n != 0 {
			t.Errorf("leader %v: %v allocations an event, want 0", leader, n)
		}
	}
}

// A leader's whole-market delivery allocates nothing: its rows are passed
// on by value, as the adapter lent them.
func TestWholeMarketRowsAllocateNothing(t *testing.T) {
	m := newBenchMarket(t)
	m.lead(t, &sinkFunc{})
	rows := []venue.Stat{{Symbol: "C001USDT"}, {Symbol: "C002USDT"}}
	if n := testing.AllocsPerRun(1000, func() { m.r.Rows(venue.TickerRows(rows)) }); n != 0 {
		t.Errorf("%v allocations a delivery, want 0", n)
	}
}
