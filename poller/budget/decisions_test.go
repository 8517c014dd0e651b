package budget

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"marketfeed/internal/golden"
)

// The ledger's decisions over a grid of states, recorded in
// testdata/decisions.golden: for every purpose at every priority, the most
// weight Take lets through, and when FreeAt says a read a request waits for
// fits. How the rules are written may change; what they decide changes
// only with the golden file, in the same commit as the rule that changes it.
func TestDecisionsOverAGridOfStates(t *testing.T) {
	var out strings.Builder
	out.WriteString("# plan serving ages | bulk book trades refresh probe spent | most weight taken by purpose, at ")
	for prio := range NumPriorities {
		fmt.Fprintf(&out, "%s/", priorityNames[prio])
	}
	out.WriteString(" | FreeAt of 50 and 300\n#")
	for pu := range NumPurposes {
		fmt.Fprintf(&out, " %s", purposeNames[pu])
	}
	out.WriteString("\n")
	for _, st := range decisionGrid() {
		fmt.Fprintf(&out, "%s %s %s |", st.plan, map[bool]string{false: "-", true: "serving"}[st.serving], st.ages)
		for c := range NumClasses {
			fmt.Fprintf(&out, " %d", st.spent[c])
		}
		out.WriteString(" |")
		for pu := range NumPurposes {
			out.WriteString(" ")
			for prio := range NumPriorities {
				if prio > 0 {
					out.WriteString("/")
				}
				fmt.Fprintf(&out, "%d", mostTaken(st, pu, prio))
			}
		}
		out.WriteString(" |")
		for _, w := range []int{50, 300} {
			fmt.Fprintf(&out, " %s", st.freeAt(w))
		}
		out.WriteString("\n")
	}
	checkLines(t, "decisions", out.String())
}

// checkLines is golden.Check for a long file: it names the lines that
// differ rather than printing both files whole.
func checkLines(t *testing.T, name, got string) {
	t.Helper()
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		golden.Check(t, name, []byte(got))
		return
	}
	want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%s: %d lines, want %d", name, len(gotLines), len(wantLines))
	}
	bad := 0
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			if bad++; bad <= 10 {
				t.Errorf("line %d:\n got: %s\nwant: %s", i+1, gotLines[i], wantLines[i])
			}
		}
	}
	if bad > 10 {
		t.Errorf("and %d lines more", bad-10)
	}
}

var priorityNames = [NumPriorities]string{"background", "sync", "waiting", "requested", "serving"}

var purposeNames = [NumPurposes]string{"catalog", "tickers", "snapshot", "depleted", "deepen", "refresh",
	"probe", "backfill", "poll_book", "poll_trades", "contracts", "open_interest", "standin_book", "standin_trades"}

// gridState is one state of the grid: a ledger of gridLimit whose caps come
// from one of gridPlans, with spent weight of each class, spent 50 s ago
// (old: the whole class's spend frees in 10 s) or half of it 5 s ago
// (mixed).
type gridState struct {
	plan    string
	serving bool
	ages    string
	spent   [NumClasses]int
}

// gridT0 is the grid's now.
var gridT0 = time.Unix(1_000_000, 0)

const gridLimit = 1000

// gridPlans are the plans the grid's caps come from: split classes whose
// demand fits, or does not, with the fixed shares of refreshes and probes,
// or without them; and no limit at all.
var gridPlans = map[string]Plan{
	"fits": {Limit: gridLimit, Reserve: 100, Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Demand: [NumClasses]float64{ClassBook: 300, ClassTrades: 200},
		Share:  [NumClasses]int{ClassRefresh: 40, ClassProbe: 40}},
	"short": {Limit: gridLimit, Reserve: 100, Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Demand: [NumClasses]float64{ClassBook: 1200, ClassTrades: 600},
		Share:  [NumClasses]int{ClassRefresh: 40, ClassProbe: 40}},
	"unshared": {Limit: gridLimit, Reserve: 200, Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Demand: [NumClasses]float64{ClassBook: 900, ClassTrades: 100}},
	"unlimited": {},
}

// decisionGrid lists the states: each class's spend at a few points of its
// cap (of the limit where it has none), around the fractions the rules
// hold reads to.
func decisionGrid() []gridState {
	var grid []gridState
	levels := [NumClasses][]float64{
		ClassBulk:    {0, 0.45, 0.8},
		ClassBook:    {0, 0.5, 0.8, 0.97},
		ClassTrades:  {0, 0.8, 1},
		ClassRefresh: {0, 1},
		ClassProbe:   {0, 1},
	}
	grid = append(grid, gridState{plan: "unlimited", ages: "old"})
	for _, name := range []string{"fits", "short", "unshared"} {
		caps := CapsOf(gridPlans[name])
		base := func(c Class) float64 {
			if caps[c] == math.MaxInt {
				return gridLimit / 10
			}
			return float64(caps[c])
		}
		for _, serving := range []bool{false, true} {
			for _, ages := range []string{"old", "mixed"} {
				for _, bulk := range levels[ClassBulk] {
					for _, book := range levels[ClassBook] {
						for _, trades := range levels[ClassTrades] {
							for _, refresh := range levels[ClassRefresh] {
								for _, probe := range levels[ClassProbe] {
									st := gridState{plan: name, serving: serving, ages: ages}
									st.spent[ClassBulk] = int(bulk * gridLimit)
									st.spent[ClassBook] = int(book * base(ClassBook))
									st.spent[ClassTrades] = int(trades * base(ClassTrades))
									st.spent[ClassRefresh] = int(refresh * base(ClassRefresh))
									st.spent[ClassProbe] = int(probe * base(ClassProbe))
									grid = append(grid, st)
								}
							}
						}
					}
				}
			}
		}
	}
	return grid
}

// ledger returns a ledger in the state.
func (st gridState) ledger() *Ledger {
	plan := gridPlans[st.plan]
	b := NewLedger(func() Plan { return plan })
	if st.plan != "unlimited" {
		b.SetLimit(gridLimit)
	}
	b.SetServingReserve(st.serving)
	old := st.spent
	if st.ages == "mixed" {
		for c := range NumClasses {
			old[c] /= 2
		}
	}
	for c := range NumClasses {
		if old[c] > 0 {
			b.add(gridT0.Add(-50*time.Second), old[c], c)
		}
	}
	for c := range NumClasses {
		if rest := st.spent[c] - old[c]; rest > 0 {
			b.add(gridT0.Add(-5*time.Second), rest, c)
		}
	}
	return b
}

// take is Take in the state.
func (st gridState) take(purpose Purpose, prio Priority, weight int) bool {
	return st.ledger().Take(gridT0, Ask{purpose, weight, prio})
}

// freeAt is FreeAt in the state, as a wait.
func (st gridState) freeAt(weight int) string {
	at := st.ledger().FreeAt(gridT0, weight)
	if at.IsZero() {
		return "never"
	}
	return at.Sub(gridT0).String()
}

// mostTaken is the most weight Take lets through in the state, up to one
// past the limit. Take refuses more weight wherever it refuses less, so a
// binary search finds it.
func mostTaken(st gridState, purpose Purpose, prio Priority) int {
	lo, hi := 0, gridLimit+2 // lo is taken, hi is not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if st.take(purpose, prio, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
