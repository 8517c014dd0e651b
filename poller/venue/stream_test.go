package venue

import (
	"reflect"
	"testing"
	"unsafe"
)

// A lent event's strings live in the adapter's reused buffer: its clone
// must hold the same values in memory of its own, so that the buffer's
// next frame changes nothing the clone's keeper reads.
func TestDepthUpdateCloneSharesNoMemory(t *testing.T) {
	buf := []byte("BTCUSDT" + "100.5" + "1.25" + "100.4" + "0" + "101" + "3")
	str := func(from, to int) string { return unsafe.String(&buf[from], to-from) }
	u := DepthUpdate{
		Symbol: str(0, 7), First: 5, Last: 9, Prev: 4, Time: 1700000000000,
		Bids: []Level{{Price: str(7, 12), Size: str(12, 16)}, {Price: str(16, 21), Size: str(21, 22)}},
		Asks: []Level{{Price: str(22, 25), Size: str(25, 26)}},
	}
	want := DepthUpdate{
		Symbol: "BTCUSDT", First: 5, Last: 9, Prev: 4, Time: 1700000000000,
		Bids: []Level{{Price: "100.5", Size: "1.25"}, {Price: "100.4", Size: "0"}},
		Asks: []Level{{Price: "101", Size: "3"}},
	}
	c := u.Clone()
	for i := range buf {
		buf[i] = 'x' // the adapter decodes its next frame into the same buffer
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("clone = %+v, want %+v", c, want)
	}
	// Appending to the clone's bids must not overwrite its asks.
	_ = append(c.Bids, Level{Price: "1", Size: "1"})
	if c.Asks[0].Price != "101" {
		t.Fatalf("bids and asks share a backing array: asks = %+v", c.Asks)
	}
	empty := DepthUpdate{Symbol: "ETHUSDT"}.Clone()
	if empty.Symbol != "ETHUSDT" || len(empty.Bids) != 0 || len(empty.Asks) != 0 {
		t.Fatalf("empty clone = %+v", empty)
	}
}
