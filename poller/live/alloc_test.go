//go:build !race

package live

import (
	"testing"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// A whole-market stream's delivery allocates nothing once its symbols are
// held: its rows replace those held in place, as the ticker and mark price
// frames do every second.
func TestWholeMarketRowsAllocateNothing(t *testing.T) {
	s, _, _ := newSourceOf(t, Config{}, perpetual("AAAUSDT", "AAA"), perpetual("BBBUSDT", "BBB"))
	for _, rows := range []venue.Rows{
		venue.TickerRows([]venue.Stat{{Symbol: "AAAUSDT", BaseVolume: "1"}, {Symbol: "BBBUSDT", BaseVolume: "2"}, {Symbol: "ZZZUSDT"}}),
		venue.MarkRows([]venue.Contract{{Symbol: "AAAUSDT", Time: 1}, {Symbol: "BBBUSDT", Time: 1}, {Symbol: "ZZZUSDT"}}),
	} {
		s.Rows(rows)
		if n := testing.AllocsPerRun(100, func() { s.Rows(rows) }); n != 0 {
			t.Errorf("%s: %v allocations a delivery, want 0", rows.Doc(), n)
		}
	}
}

// A trade from the stream allocates nothing once its pair's window is
// full: the window keeps the lent decimals in its own text, whose
// compaction, once every couple of hundred trades, is the only allocation
// (AllocsPerRun counts whole allocations a run).
func TestStreamTradeAllocatesNothing(t *testing.T) {
	s, _, _ := newListedSource(t, nil)
	s.Live(snapshot.StreamTrades, []string{testSymbol})
	var l lender
	id := int64(0)
	trade := func() { id++; s.Trade(testSymbol, l.trade(id)) }
	for range 3 * snapshot.MaxTrades {
		trade()
	}
	if n := testing.AllocsPerRun(1000, trade); n != 0 {
		t.Errorf("%v allocations a trade, want 0", n)
	}
}
