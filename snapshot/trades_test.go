package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"marketfeed/internal/golden"
)

const tradeTime = 1767225600000

// tradeTape returns n distinct trades, oldest first as venues send them, every
// third one a sell, each with its own time, price and size.
func tradeTape(n int) []Trade {
	out := make([]Trade, n)
	for i := range out {
		out[i] = Trade{
			Time:  tradeTime + int64(i)*10,
			Price: fmt.Sprintf("65%03d.%d", i%1000, i%10),
			Size:  fmt.Sprintf("0.%03d", i%1000+1),
			Sell:  i%3 == 2,
		}
		if i%2 == 0 {
			out[i].QuoteQty = fmt.Sprintf("%d.25", 1000+i)
		}
	}
	return out
}

func mustTrades(t *testing.T, trades []Trade) *Trades {
	t.Helper()
	tr, err := NewTrades("BTC_USDT", trades, readAt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// wantID derives a trade_id with crypto/sha256 directly, as the contract
// completion defines it, without the package's own helpers.
func wantID(ts int64, typ, price, size string, n int) string {
	text := strconv.FormatInt(ts, 10) + "|" + typ + "|" + price + "|" + size
	if n > 0 {
		text += "#" + strconv.Itoa(n)
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

func typeOf(tr Trade) string {
	if tr.Sell {
		return "sell"
	}
	return "buy"
}

// view is what a side's body should hold: the trades of that side, newest
// first.
func view(trades []Trade, side Side) []Trade {
	var out []Trade
	for _, tr := range slices.Backward(trades) {
		if side == SideAll || (side == SideSell) == tr.Sell {
			out = append(out, tr)
		}
	}
	return out
}

// checkTradeItems compares decoded items with the trades they should show,
// field by field; ids are checked separately.
func checkTradeItems(t *testing.T, got []tradeJSON, want []Trade) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d trades, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.TradeTimestamp != w.Time || string(g.Price) != w.Price || string(g.BaseVolume) != w.Size || g.Type != typeOf(w) {
			t.Fatalf("item %d is %+v, want %+v", i, g, w)
		}
	}
}

func TestTradesNewestFirst(t *testing.T) {
	tape := tradeTape(20)
	tr := mustTrades(t, tape)
	got := checkItems[tradeJSON](t, tr.Body(SideAll), tradeKeys)
	checkTradeItems(t, got, view(tape, SideAll))
	for i := 1; i < len(got); i++ {
		if got[i-1].TradeTimestamp < got[i].TradeTimestamp {
			t.Fatalf("item %d is newer than item %d", i, i-1)
		}
	}
}

func TestTradesSides(t *testing.T) {
	tape := tradeTape(30)
	tr := mustTrades(t, tape)
	for _, side := range []Side{SideAll, SideBuy, SideSell} {
		want := view(tape, side)
		got := checkItems[tradeJSON](t, tr.Body(side), tradeKeys)
		checkTradeItems(t, got, want)
		if tr.Len(side) != len(want) {
			t.Errorf("side %d: Len %d, want %d", side, tr.Len(side), len(want))
		}
	}
	if tr.Len(SideBuy)+tr.Len(SideSell) != tr.Len(SideAll) || tr.Len(SideSell) != 10 {
		t.Errorf("Len buy %d sell %d all %d", tr.Len(SideBuy), tr.Len(SideSell), tr.Len(SideAll))
	}
}

func TestTradesParts(t *testing.T) {
	tape := tradeTape(150) // the 100 newest are kept
	kept := tape[50:]
	tr := mustTrades(t, tape)
	for _, side := range []Side{SideAll, SideBuy, SideSell} {
		full := view(kept, side)
		for _, limit := range []int{1, 10, 33, 67, 100, 0, -1, 101, 1 << 40} {
			want := limit
			if limit <= 0 || limit > MaxTrades {
				want = MaxTrades
			}
			want = min(want, len(full))
			head, tail := tr.Parts(side, limit)
			got := checkItems[tradeJSON](t, concat(head, tail), tradeKeys)
			checkTradeItems(t, got, full[:want])
		}
	}
}

func TestTradesPartsFullLimitIsBody(t *testing.T) {
	tr := mustTrades(t, tradeTape(40))
	for _, side := range []Side{SideAll, SideBuy, SideSell} {
		for _, limit := range []int{0, MaxTrades, tr.Len(side)} {
			head, tail := tr.Parts(side, limit)
			if got := concat(head, tail); !bytes.Equal(got, tr.Body(side)) {
				t.Errorf("side %d limit %d: parts differ from body", side, limit)
			}
		}
	}
}

func TestTradesEmptyView(t *testing.T) {
	buys := []Trade{{Time: tradeTime, Price: "1", Size: "1"}, {Time: tradeTime + 1, Price: "2", Size: "1"}}
	for _, c := range []struct {
		name   string
		trades []Trade
		side   Side
	}{
		{"no sells", buys, SideSell},
		{"no trades", nil, SideAll},
		{"no trades, buys", nil, SideBuy},
	} {
		tr := mustTrades(t, c.trades)
		for _, limit := range []int{0, 1, 10} {
			head, tail := tr.Parts(c.side, limit)
			if got := concat(head, tail); string(got) != "[]" {
				t.Errorf("%s limit %d: %s, want []", c.name, limit, got)
			}
		}
		if tr.Len(c.side) != 0 || string(tr.Body(c.side)) != "[]" {
			t.Errorf("%s: Len %d body %s", c.name, tr.Len(c.side), tr.Body(c.side))
		}
	}
}

func TestTradesTargetVolume(t *testing.T) {
	tape := []Trade{
		{Time: tradeTime, Price: "65432.1", Size: "0.12345678"},                            // no quote quantity: exact product
		{Time: tradeTime + 1, Price: "65432.10", Size: "1.23456789", Sell: true},           // 17 significant digits
		{Time: tradeTime + 2, Price: "100", Size: "2", QuoteQty: "200.0000"},               // the venue's, byte for byte
		{Time: tradeTime + 3, Price: "100", Size: "2", QuoteQty: "199.99", Sell: true},     // even if it disagrees
		{Time: tradeTime + 4, Price: "0.00000001", Size: "0.00000002", QuoteQty: "0"},      // zero is a valid quantity
		{Time: tradeTime + 5, Price: "99999999999999999999", Size: "99999999999999999999"}, // 40-digit product
	}
	want := []dec{"8078.036374638", "80780.369635269", "200.0000", "199.99", "0", "9999999999999999999800000000000000000001"}
	got := checkItems[tradeJSON](t, mustTrades(t, tape).Body(SideAll), tradeKeys)
	for i, w := range want {
		if g := got[len(got)-1-i].TargetVolume; g != w {
			t.Errorf("trade %d target_volume %s, want %s", i, g, w)
		}
	}
}

func TestTradeID(t *testing.T) {
	tape := []Trade{
		{Time: 1767225600001, Price: "65000.1", Size: "0.5"},
		{Time: 1767225600002, Price: "65000.10", Size: "0.5", Sell: true},
	}
	got := checkItems[tradeJSON](t, mustTrades(t, tape).Body(SideAll), tradeKeys)
	// Newest first; the published strings are hashed as sent, so "65000.10"
	// and "65000.1" give different ids.
	want := []string{
		wantID(1767225600002, "sell", "65000.10", "0.5", 0),
		wantID(1767225600001, "buy", "65000.1", "0.5", 0),
	}
	for i, w := range want {
		if got[i].TradeID != w || len(w) != 16 {
			t.Errorf("item %d trade_id %s, want %s", i, got[i].TradeID, w)
		}
	}
	if id := TradeID(tape[0], 0); id != want[1] {
		t.Errorf("TradeID = %s, want %s", id, want[1])
	}
	if id := TradeID(tape[0], 2); id != wantID(1767225600001, "buy", "65000.1", "0.5", 2) {
		t.Errorf("TradeID(n=2) = %s", id)
	}
}

func TestTradeIDDuplicates(t *testing.T) {
	// Three fills of one order at the same millisecond, price and size, with
	// a different trade in between: numbered #1, #2 oldest first.
	same := Trade{Time: tradeTime, Price: "100", Size: "1"}
	other := Trade{Time: tradeTime, Price: "100", Size: "1", Sell: true}
	tape := []Trade{same, same, other, same}
	got := checkItems[tradeJSON](t, mustTrades(t, tape).Body(SideAll), tradeKeys)
	key := func(typ string) (int64, string, string, string) { return tradeTime, typ, "100", "1" }
	want := []string{ // newest first
		wantIDn(key("buy"))(2),
		wantIDn(key("sell"))(0),
		wantIDn(key("buy"))(1),
		wantIDn(key("buy"))(0),
	}
	seen := map[string]bool{}
	for i, w := range want {
		if got[i].TradeID != w {
			t.Errorf("item %d trade_id %s, want %s", i, got[i].TradeID, w)
		}
		if seen[got[i].TradeID] {
			t.Errorf("trade_id %s repeats", got[i].TradeID)
		}
		seen[got[i].TradeID] = true
	}
	// A side view keeps the ids of the full list: a buy is the same trade
	// whether it is read among all trades or among buys.
	buys := checkItems[tradeJSON](t, mustTrades(t, tape).Body(SideBuy), tradeKeys)
	if len(buys) != 3 || buys[0].TradeID != want[0] || buys[1].TradeID != want[2] || buys[2].TradeID != want[3] {
		t.Errorf("buy view ids %+v", buys)
	}
}

func wantIDn(ts int64, typ, price, size string) func(n int) string {
	return func(n int) string { return wantID(ts, typ, price, size, n) }
}

func TestTradeIDStableAcrossReads(t *testing.T) {
	tape := tradeTape(60)
	tape = append(tape, tape[59], tape[59]) // duplicates too
	first := mustTrades(t, tape)
	second, err := NewTrades("BTC_USDT", slices.Clone(tape), readAt.Add(1e9))
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []Side{SideAll, SideBuy, SideSell} {
		if !bytes.Equal(first.Body(side), second.Body(side)) {
			t.Errorf("side %d: two reads of the same trades differ", side)
		}
	}
}

func TestTradeIDSlidingWindow(t *testing.T) {
	// The venue returns the 100 newest trades; five new trades push the five
	// oldest out. A trade still in the window keeps its id, duplicates
	// included.
	tape := tradeTape(105)
	tape[60], tape[61] = tape[59], tape[59]
	idsOf := func(trades []Trade) map[int64][]string {
		out := map[int64][]string{}
		for _, it := range checkItems[tradeJSON](t, mustTrades(t, trades).Body(SideAll), tradeKeys) {
			out[it.TradeTimestamp] = append(out[it.TradeTimestamp], it.TradeID)
		}
		return out
	}
	before, after := idsOf(tape[:100]), idsOf(tape[5:])
	for _, tr := range tape[5:100] {
		if !slices.Equal(before[tr.Time], after[tr.Time]) {
			t.Errorf("trade at %d: ids %v before newer trades arrived, %v after", tr.Time, before[tr.Time], after[tr.Time])
		}
	}
	if len(after[tape[59].Time]) != 3 {
		t.Fatalf("the duplicated trade has ids %v, want three", after[tape[59].Time])
	}
}

func TestTradesKeepsNewest(t *testing.T) {
	tape := tradeTape(130)
	tr := mustTrades(t, tape)
	got := checkItems[tradeJSON](t, tr.Body(SideAll), tradeKeys)
	checkTradeItems(t, got, view(tape[30:], SideAll))
	if tr.Len(SideAll) != MaxTrades {
		t.Errorf("Len %d, want %d", tr.Len(SideAll), MaxTrades)
	}
}

func TestTradesRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		bad  Trade
	}{
		{"zero price", Trade{Price: "0", Size: "1"}},
		{"negative price", Trade{Price: "-1", Size: "1"}},
		{"exponent price", Trade{Price: "1e3", Size: "1"}},
		{"empty price", Trade{Price: "", Size: "1"}},
		{"zero size", Trade{Price: "1", Size: "0.00"}},
		{"garbage size", Trade{Price: "1", Size: "abc"}},
		{"NaN size", Trade{Price: "1", Size: "NaN"}},
		{"exponent quote quantity", Trade{Price: "1", Size: "1", QuoteQty: "1e3"}},
		{"negative quote quantity", Trade{Price: "1", Size: "1", QuoteQty: "-5"}},
		{"padded quote quantity", Trade{Price: "1", Size: "1", QuoteQty: " 1"}},
		{"quoted quote quantity", Trade{Price: "1", Size: "1", QuoteQty: `"1"`}},
	} {
		tape := append(tradeTape(5), c.bad)
		tr, err := NewTrades("BTC_USDT", tape, readAt)
		if !errors.Is(err, ErrBadTrades) || tr != nil {
			t.Errorf("%s: NewTrades = %v, %v; want ErrBadTrades", c.name, tr, err)
		}
	}
}

func TestTradesAccessors(t *testing.T) {
	tr := mustTrades(t, tradeTape(3))
	if tr.TickerID() != "BTC_USDT" || tr.ReadAt() != readAt.UnixNano() {
		t.Errorf("TickerID %s ReadAt %d", tr.TickerID(), tr.ReadAt())
	}
}

func TestTradesGolden(t *testing.T) {
	tape := []Trade{
		{Time: 1767225600001, Price: "65000.1", Size: "0.5", QuoteQty: "32500.05"},
		{Time: 1767225600002, Price: "65000.2", Size: "0.25", Sell: true},
		{Time: 1767225600002, Price: "65000.2", Size: "0.25", Sell: true},
	}
	tr := mustTrades(t, tape)
	golden.Check(t, "trades", tr.Body(SideAll))
	golden.Check(t, "trades_sell", tr.Body(SideSell))
}
