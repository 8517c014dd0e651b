package snapshot

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
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
	for k := range other.ids {
		other.ids[k] = "poisoned"
	}
	got, err := NewTradesAfter(other, "BTC_USDT", tradeTape(5), readAt)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got.Body(SideAll)), "poisoned") {
		t.Fatal("ids of another pair's trades were reused")
	}
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
