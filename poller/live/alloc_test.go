//go:build !race

package live

import (
	"testing"

	"marketfeed/poller/venue"
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
