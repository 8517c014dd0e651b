package snapshot

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// Ids taken from the previous read must be exactly the ids a fresh
// derivation gives, repeats included, as the window of trades slides.
func TestNewTradesAfterGivesTheSameIDsAsAFreshRead(t *testing.T) {
	tape := tradeTape(300)
	// Repeats: trades identical in time, side, price and size.
	for i := 10; i < len(tape); i += 17 {
		tape[i] = tape[i-1]
	}
	var prev *Trades
	for start := 0; start+100 <= len(tape); start += 7 {
		window := tape[start : start+100]
		fresh := mustTrades(t, window)
		after, err := NewTradesAfter(prev, "BTC_USDT", window, readAt)
		if err != nil {
			t.Fatal(err)
		}
		if string(after.Body(SideAll)) != string(fresh.Body(SideAll)) {
			t.Fatalf("window at %d: ids taken from the previous read differ from a fresh read", start)
		}
		prev = after
	}
}

func TestNewTradesAfterIgnoresAnotherPairsValue(t *testing.T) {
	other, err := NewTrades("ETH_USDT", tradeTape(5), readAt)
	if err != nil {
		t.Fatal(err)
	}
	// Poison the other pair's ids: they must not be used for BTC_USDT.
	for k := range other.ids.byIdent {
		other.ids.byIdent[k] = [16]byte([]byte("poisonedpoisoned"))
	}
	got, err := NewTradesAfter(other, "BTC_USDT", tradeTape(5), readAt)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got.Body(SideAll)), "poisoned") {
		t.Fatal("ids of another pair's trades were reused")
	}
}

// venueTradeID is the published id of the trade of v with venue id id,
// read from its item.
func venueTradeID(t *testing.T, v *Trades, id int64) string {
	t.Helper()
	j, ok := v.ids.find(id)
	if !ok {
		t.Fatalf("venue id %d is not in the value", id)
	}
	tid, ok := itemID(v.all.item(int(v.ids.byVenue[j].at)))
	if !ok {
		t.Fatalf("venue id %d: its item has no id", id)
	}
	return tid
}

// isPositive checks the plain form and the sign in one pass; it must agree
// with the definition by parts.
func TestIsPositiveAgreesWithItsDefinition(t *testing.T) {
	byParts := func(s string) bool { return IsPlain(s) && s[0] != '-' && strings.ContainsAny(s, "123456789") }
	cases := []string{"", "0", "00", "0.0", "0.001", "1", "-1", "1.", ".1", "1.2.3", "01.50", "1e3", " 1", "+1", "0.", "10", "-0.5"}
	const alphabet = "0123456789.-+e "
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(7))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	slices.Sort(cases)
	for _, s := range slices.Compact(cases) {
		if got, want := isPositive(s), byParts(s); got != want {
			t.Errorf("isPositive(%q) = %v, want %v", s, got, want)
		}
	}
}

// With venue ids, a repeat keeps the number it was first published with when
// an older copy leaves the window, and a process that starts later numbers
// the trades it sees first as a fresh count.
func TestTradeIDsWithVenueIDsStayStableAsTheWindowSlides(t *testing.T) {
	twin := Trade{Time: 1700000000000, Price: "100.5", Size: "2", Sell: true}
	other := Trade{Time: 1700000000001, Price: "100.6", Size: "1"}
	with := func(id int64, tr Trade) Trade { tr.ID = id; return tr }
	first, err := NewTradesAfter(nil, "BTC_USDT", []Trade{with(1, twin), with(2, twin), with(3, other)}, readAt)
	if err != nil {
		t.Fatal(err)
	}
	idOf := func(v *Trades, id int64) string { return venueTradeID(t, v, id) }
	if want := TradeID(twin, 0); idOf(first, 1) != want {
		t.Fatalf("first copy: id %s, want %s", idOf(first, 1), want)
	}
	if want := TradeID(twin, 1); idOf(first, 2) != want {
		t.Fatalf("second copy: id %s, want %s (#1)", idOf(first, 2), want)
	}
	// The oldest copy leaves the window and a third copy arrives.
	second, err := NewTradesAfter(first, "BTC_USDT", []Trade{with(2, twin), with(3, other), with(4, twin)}, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if idOf(second, 2) != TradeID(twin, 1) {
		t.Fatal("the second copy's id changed when the first left the window")
	}
	if want := TradeID(twin, 2); idOf(second, 4) != want {
		t.Fatalf("third copy: id %s, want %s (#2)", idOf(second, 4), want)
	}
	body := string(second.Body(SideAll))
	for _, id := range []string{TradeID(twin, 1), TradeID(twin, 2), TradeID(other, 0)} {
		if strings.Count(body, id) != 1 {
			t.Fatalf("id %s appears %d times in %s", id, strings.Count(body, id), body)
		}
	}
	// An older trade that a backfill brings in later takes a free number
	// instead of one a published trade holds.
	third, err := NewTradesAfter(second, "BTC_USDT", []Trade{with(1, twin), with(2, twin), with(4, twin)}, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if idOf(third, 2) != TradeID(twin, 1) || idOf(third, 4) != TradeID(twin, 2) || idOf(third, 1) != TradeID(twin, 3) {
		t.Fatalf("backfilled copy renumbered published ids: %v", third.ids.byVenue)
	}
}

// Each side's view holds only its own trades' bytes.
func TestTradeViewsAreSizedForTheirSide(t *testing.T) {
	tape := tradeTape(100)
	tr := mustTrades(t, tape)
	all := len(tr.Body(SideAll))
	if got := cap(tr.view(SideBuy).body) + cap(tr.view(SideSell).body); got > all+8 {
		t.Fatalf("buy and sell views hold %d bytes of capacity for %d bytes of trades", got, all)
	}
	if string(tr.Body(SideBuy)) == "[]" || string(tr.Body(SideSell)) == "[]" {
		t.Fatal("the tape should hold both sides")
	}
}

// venueTape is n distinct trades with venue ids 1..n, half of them without
// a quote quantity (target volume computed), both sides.
func venueTape(n int) []Trade {
	tape := tradeTape(n)
	for i := range tape {
		tape[i].ID = int64(i + 1)
		if i%4 == 1 {
			tape[i].QuoteQty = ""
		}
	}
	return tape
}

// A trade the previous value held is copied from it, not serialized again:
// every view is byte for byte what a fresh read of the window gives, as the
// window slides, and when it jumps past every trade the previous value held.
func TestNewTradesAfterCopiesSharedTradesExactly(t *testing.T) {
	tape := venueTape(400)
	var prev *Trades
	for _, start := range []int{0, 1, 2, 9, 50, 99, 250, 251, 300} {
		window := tape[start : start+100]
		fresh := mustTrades(t, window)
		var served string // what prev serves, which must not change
		if prev != nil {
			served = string(prev.Body(SideAll))
		}
		after, err := NewTradesAfter(prev, "BTC_USDT", window, readAt)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && string(prev.Body(SideAll)) != served {
			t.Fatalf("window at %d: building the next value changed the previous one", start)
		}
		for side := range numSides {
			if got, want := string(after.Body(side)), string(fresh.Body(side)); got != want {
				t.Fatalf("window at %d, side %d:\n%s\nwant\n%s", start, side, got, want)
			}
		}
		prev = after
	}
}

// Trades a read brings in between trades the previous value held, as when
// a window's missing trades are filled in, or a trade it leaves out, split
// what is copied from that value into runs: the bytes are still those of
// a fresh read.
func TestNewTradesAfterFillsTradesInBetween(t *testing.T) {
	tape := venueTape(110)
	holed := slices.Concat(tape[:30], tape[40:41], tape[60:100])
	prev := mustTrades(t, holed)
	for _, window := range [][]Trade{
		tape[:100], tape[10:110], slices.Concat(tape[:30], tape[35:100]),
		slices.Concat(tape[:30], tape[60:100]), // the trade at 40 left out
	} {
		after, err := NewTradesAfter(prev, "BTC_USDT", window, readAt)
		if err != nil {
			t.Fatal(err)
		}
		fresh := mustTrades(t, window)
		for side := range numSides {
			if got, want := string(after.Body(side)), string(fresh.Body(side)); got != want {
				t.Fatalf("trades %d to %d, side %d:\n%s\nwant\n%s", window[0].ID, window[len(window)-1].ID, side, got, want)
			}
		}
		// Every trade kept: the body is sized for exactly its items, as
		// every listed pair holds it until its next trade.
		if body := after.Body(SideAll); len(window) == 70 && cap(body)-len(body) > 8 {
			t.Fatalf("a list of kept trades holds %d spare bytes", cap(body)-len(body))
		}
		for n := range MaxTrades + 1 {
			head, tail := after.Parts(SideAll, n)
			fh, ft := fresh.Parts(SideAll, n)
			if string(head)+string(tail) != string(fh)+string(ft) {
				t.Fatalf("limit %d: the prefix differs from a fresh read's", n)
			}
		}
	}
}

// The cost of the value that follows the previous one by one new trade, as
// the stream-fed window publishes it each second: trades from a venue that
// sends no quote quantity, as Binance's aggregate trades.
func BenchmarkNewTradesAfterOneNewTrade(b *testing.B) { benchmarkNewTradesAfter(b, 1) }

// The same with five new trades, about what each of venuesim's 846 pairs
// gains in a second (4,630 trades a second).
func BenchmarkNewTradesAfterFiveNewTrades(b *testing.B) { benchmarkNewTradesAfter(b, 5) }

func benchmarkNewTradesAfter(b *testing.B, added int) {
	tape := venueTape(MaxTrades + added)
	for i := range tape {
		tape[i].QuoteQty = ""
	}
	prev, err := NewTrades("BTC_USDT", tape[:MaxTrades], readAt)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewTradesAfter(prev, "BTC_USDT", tape[added:], readAt); err != nil {
			b.Fatal(err)
		}
	}
}

// A read whose venue ids are out of order gets the ids a fresh read of it
// gives, and a read that follows it in order finds every trade it shares.
func TestNewTradesAfterTradesOutOfIDOrder(t *testing.T) {
	tape := venueTape(120)
	// A repeat: its number must be the one it was first published with,
	// also once its twin has left the window.
	tape[30] = tape[10]
	tape[30].ID = 31
	shuffled := slices.Clone(tape[:100])
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	first, err := NewTradesAfter(nil, "BTC_USDT", shuffled, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Body(SideAll)) != string(mustTrades(t, shuffled).Body(SideAll)) {
		t.Fatal("a shuffled read's body differs from a fresh read of it")
	}
	next, err := NewTradesAfter(first, "BTC_USDT", tape[20:120], readAt)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range tape[20:100] {
		if venueTradeID(t, next, tr.ID) != venueTradeID(t, first, tr.ID) {
			t.Fatalf("venue id %d changed its id", tr.ID)
		}
	}
}

// A trade carried over from the previous value is not checked again, but
// one new to the window is, whatever the previous value held.
func TestNewTradesAfterChecksNewTrades(t *testing.T) {
	tape := venueTape(101)
	prev := mustTrades(t, tape[:100])
	bad := slices.Clone(tape[1:])
	bad[99].Price = "0"
	if _, err := NewTradesAfter(prev, "BTC_USDT", bad, readAt); err == nil {
		t.Fatal("a new trade priced 0 was published")
	}
}

// A side's view is built once per value, by the first caller, and a
// confirmed copy shares it; every item of the side, and only those, in
// the order of the view of both sides.
func TestSideViewsAreBuiltOncePerValue(t *testing.T) {
	tr := mustTrades(t, tradeTape(100))
	sells := tr.Body(SideSell)
	if c := tr.Confirmed(readAt.Add(time.Second)); &c.Body(SideSell)[0] != &sells[0] {
		t.Fatal("a confirmed copy built the sells' view again")
	}
	var want []string
	for j := range tr.Len(SideAll) {
		if item := string(tr.all.item(j)); strings.Contains(item, `"type":"sell"`) {
			want = append(want, item)
		}
	}
	if got := string(sells); got != "["+strings.Join(want, ",")+"]" {
		t.Fatalf("sells' view:\n%s\nwant the %d sells of the view of both sides", got, len(want))
	}
}
