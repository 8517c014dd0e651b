package budget

import (
	"math"
	"testing"
	"time"
)

// A refresh is held to its own share and to the book share it is part of:
// books waiting to sync may use the book share, and refreshes then wait;
// what refreshes spend leaves that much less for other book reads.
func TestRefreshSpendsWithinItsShareAndTheBookShare(t *testing.T) {
	b := newLedger(1000, Plan{Share: [NumClasses]int{ClassBook: 125, ClassRefresh: 50}})
	now := time.Unix(1_000_000, 0)
	// Urgent book reads may use the whole book cap; refreshes are held
	// to their share and to the book cap for background reads (4/5).
	caps := b.Caps()
	const bookCap = 100
	if caps.Of(ClassBook, false) != bookCap || caps.Of(ClassRefresh, false) != 50 {
		t.Fatalf("caps %v: book %d for background reads, refresh %d", caps, caps.Of(ClassBook, false), caps.Of(ClassRefresh, false))
	}
	sync := func(at time.Time, w int) bool { return b.Take(at, Ask{PurposeSnapshot, w, Background}) }
	refresh := func(at time.Time, w int) bool { return b.Take(at, Ask{PurposeRefresh, w, Background}) }
	if !sync(now, 80) {
		t.Fatal("a sync within the book share was refused")
	}
	if !refresh(now, 20) {
		t.Fatal("a refresh within both shares was refused")
	}
	if refresh(now, 20) {
		t.Fatal("a refresh past the book share was taken though its own share had room")
	}
	if sync(now, 10) {
		t.Fatal("a book read did not see what the refresh spent of the book share")
	}
	later := now.Add(time.Minute + time.Second)
	for i := range 2 {
		if !refresh(later, 20) {
			t.Fatalf("refresh %d of a new minute refused", i+1)
		}
	}
	if refresh(later, 20) {
		t.Fatal("a third refresh of 20 fitted a share of 50")
	}
	if !sync(later, 60) || b.Spent(later) != 100 {
		t.Fatalf("the book share's rest went unused: spent %d", b.Spent(later))
	}
}

// One function computes every class's cap: the classes that split share
// what the limit leaves after the reserve, by demand when it does not fit.
func TestCapsOf(t *testing.T) {
	split := [NumClasses]bool{ClassBook: true, ClassTrades: true}
	for _, tc := range []struct {
		name string
		plan Plan
		want Caps
	}{
		{"unlimited", Plan{Demand: [NumClasses]float64{ClassBook: 1e9}, Split: split}, Unlimited},
		{
			"demand fits: each may use what the other does not need",
			Plan{Limit: 1000, Reserve: 200, Demand: [NumClasses]float64{ClassBook: 300, ClassTrades: 100}, Split: split},
			Caps{math.MaxInt, 700, 500, math.MaxInt, math.MaxInt},
		},
		{
			"demand exceeds: split in proportion",
			Plan{Limit: 1000, Reserve: 200, Demand: [NumClasses]float64{ClassBook: 3000, ClassTrades: 1000}, Split: split},
			Caps{math.MaxInt, 600, 200, math.MaxInt, math.MaxInt},
		},
		{
			"no demand: both may use all that is left",
			Plan{Limit: 1000, Reserve: 200, Split: split, Share: [NumClasses]int{ClassRefresh: 48, ClassProbe: 40}},
			Caps{math.MaxInt, 800, 800, 48, 40},
		},
		{
			"reserve above the limit leaves nothing",
			Plan{Limit: 100, Reserve: 200, Demand: [NumClasses]float64{ClassBook: 10}, Split: split},
			Caps{math.MaxInt, 0, 0, math.MaxInt, math.MaxInt},
		},
		{
			"a third class splits like the others",
			Plan{Limit: 900, Demand: [NumClasses]float64{ClassBook: 1000, ClassTrades: 1000, ClassRefresh: 1000},
				Split: [NumClasses]bool{ClassBook: true, ClassTrades: true, ClassRefresh: true}},
			Caps{math.MaxInt, 300, 300, 300, math.MaxInt},
		},
	} {
		if got := CapsOf(tc.plan); got != tc.want {
			t.Errorf("%s: caps %v, want %v", tc.name, got, tc.want)
		}
	}
	caps := Caps{math.MaxInt, 100, 50, 40}
	if caps.Of(ClassBook, true) != 100 || caps.Of(ClassBook, false) != 80 || caps.Of(ClassTrades, false) != 40 {
		t.Error("a background book or trades read does not leave a fifth for requests")
	}
	if caps.Of(ClassRefresh, false) != 40 || caps.Of(ClassBulk, false) != math.MaxInt {
		t.Error("refreshes or bulk calls keep back what no request waits for")
	}
}

// The snapshots that sync books take four fifths of the book share at once
// and the fifth kept for requests only when it would otherwise go unused:
// a request that comes meanwhile is read at once, and one that comes after
// waits at most SyncRelease. Neither takes the serving reserve, which a
// book being served finds all along.
func TestSyncsTakeTheRequestsFifthOnlyWhenItWouldGoUnused(t *testing.T) {
	b := newLedger(1000, Plan{Share: [NumClasses]int{ClassBook: 125, ClassTrades: 100}}) // a serving reserve of 5
	b.SetServingReserve(true)
	t0 := time.Unix(1_000_000, 0)
	take := func(at time.Duration, prio Priority) bool {
		return b.Take(t0.Add(at), Ask{PurposeSnapshot, 10, prio})
	}
	for i := range 10 {
		if !take(0, Sync) {
			t.Fatalf("sync %d of a cold start refused within four fifths of the share", i+1)
		}
	}
	if take(time.Second, Sync) {
		t.Fatal("a sync took the requests' fifth 59 s before the share frees")
	}
	if !take(time.Second, Waiting) {
		t.Fatal("a request during the cold start did not find the fifth kept for it")
	}
	if take(44*time.Second, Sync) {
		t.Fatal("a sync took the requests' fifth 16 s before the share frees")
	}
	if !take(45*time.Second, Sync) {
		t.Fatal("the requests' fifth went unused 15 s before the share frees")
	}
	if take(45*time.Second, Sync) || take(45*time.Second, Waiting) {
		t.Fatal("a read went past the book share less its serving reserve")
	}
	if !b.Take(t0.Add(45*time.Second), Ask{PurposeDepleted, 5, Serving}) {
		t.Fatal("a refresh of a book being served did not find the serving reserve")
	}
	if b.Take(t0.Add(45*time.Second), Ask{PurposeDepleted, 1, Waiting}) {
		t.Fatal("a read a request does not wait for went past the whole book share")
	}
	// A request waiting for its read is held to the limit, not to the
	// share the last rounds' demand gave its class.
	if at := b.FreeAt(t0.Add(45*time.Second), 10); !at.Equal(t0.Add(45 * time.Second)) {
		t.Fatalf("a request after the syncs took the share waits %v, with the limit's room unspent", at.Sub(t0.Add(45*time.Second)))
	}
	if !b.Take(t0.Add(45*time.Second), Ask{PurposeSnapshot, 10, Requested}) {
		t.Fatal("a request's read was refused by its class's cap with the limit's room unspent")
	}
}

// Requested and Serving reads are held to the window's limit: a request's
// read to the limit less the serving reserve, a book being served to all of
// it; FreeAt says when the limit has room again.
func TestRequestedReadsAreHeldToTheLimit(t *testing.T) {
	b := newLedger(100, Plan{Share: [NumClasses]int{ClassBook: 125, ClassTrades: 10}}) // a serving reserve of 5
	b.SetServingReserve(true)
	t0 := time.Unix(1_000_000, 0)
	for i := range 19 {
		if !b.Take(t0, Ask{PurposeBackfill, 5, Requested}) {
			t.Fatalf("requested read %d refused within the limit less the reserve", i+1)
		}
	}
	if b.Take(t0, Ask{PurposeBackfill, 5, Requested}) {
		t.Fatal("a requested read took the serving reserve")
	}
	if at := b.FreeAt(t0.Add(time.Second), 5); !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("room for a request at %v, want when the minute's spending expires", at.Sub(t0))
	}
	if !b.Take(t0, Ask{PurposeDepleted, 5, Serving}) {
		t.Fatal("a book being served did not find the serving reserve")
	}
	if b.Take(t0, Ask{PurposeDepleted, 1, Serving}) {
		t.Fatal("a read went past the limit")
	}
	if at := b.FreeAt(t0, 101); !at.IsZero() {
		t.Fatalf("a read heavier than the limit fits at %v", at)
	}
}

// Backfills, which only complete windows that already answer, leave the
// refresh share of the window unspent, so that a book whose side runs dry
// is refreshed within seconds however much backfilling is left to do; a
// backfill a request waits for may spend it but for the serving reserve,
// and the refresh itself all of it.
func TestBackfillsLeaveTheRefreshShare(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	// Streams keep every pair: no demand, so each split class may use all
	// of what the reserve leaves.
	b := newLedger(1000, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Share: [NumClasses]int{ClassRefresh: 80}}) // a serving reserve of 40
	b.SetServingReserve(true)
	// A cold start's snapshots took part of the minute.
	if !b.Take(now, Ask{PurposeSnapshot, 300, Sync}) {
		t.Fatal("the cold start's snapshots were refused")
	}
	backfills := 0
	for b.Take(now, Ask{PurposeBackfill, 20, Background}) {
		backfills++
	}
	if spent := b.Spent(now); spent > 1000-80 || spent < 1000-80-20 {
		t.Fatalf("snapshots and backfills spent %d of 1000, want all but the refresh share of 80", spent)
	}
	if b.Take(now, Ask{PurposeBackfill, 10, Background}) {
		t.Fatal("a background backfill spent into the refresh share")
	}
	for b.Take(now, Ask{PurposeBackfill, 10, Waiting}) {
	}
	if spent := b.Spent(now); spent != 1000-40 {
		t.Fatalf("backfills requests wait for spent the window to %d, want all but the serving reserve of 40", spent)
	}
	for i := range 2 {
		if !b.Take(now, Ask{PurposeDepleted, 20, Serving}) {
			t.Fatalf("the refresh of dry book %d found the window spent by backfills", i+1)
		}
	}
	t.Logf("%d backfills of 20 before the headroom", backfills)
}

// Deepening leaves half the window unspent, whatever else the book class
// could spend, and spreads its half over the minute: a quarter of the limit
// in any 30 s. A book whose side ran dry, or one out of sequence, finds
// weight within the minute however many books are still to deepen, and a
// recovery that follows finds the window's last seconds mostly free.
func TestDeepeningLeavesHalfTheWindow(t *testing.T) {
	b := newLedger(2400, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Share: [NumClasses]int{ClassRefresh: 96}})
	now := time.Unix(1_000_000, 0)
	caps := b.Caps()
	if caps.Of(ClassBook, false) <= 1200 {
		t.Fatalf("the book class's cap for background reads is %d, want more than half the window for the test to tell", caps.Of(ClassBook, false))
	}
	deepen := func(at time.Time) int {
		n := 0
		for b.Take(at, Ask{PurposeDeepen, 20, Background}) {
			n += 20
		}
		return n
	}
	for _, step := range []struct {
		after time.Duration
		want  int
	}{
		{0, 600},                // a quarter at once
		{10 * time.Second, 0},   // nothing more within the same 30 s
		{31 * time.Second, 600}, // another quarter: the window at half
		{45 * time.Second, 0},   // the window at half
		{62 * time.Second, 600}, // the first quarter expired
		{75 * time.Second, 0},   // the second quarter is recent
	} {
		if got := deepen(now.Add(step.after)); got < step.want-20 || got > step.want {
			t.Fatalf("deepening %v in spent %d, want %d (window %d of 2,400)", step.after, got, step.want, b.Spent(now.Add(step.after)))
		}
	}
	at := now.Add(75 * time.Second)
	dry := 0
	for b.Take(at, Ask{PurposeDepleted, 20, Background}) {
		dry++
	}
	if dry < 10 {
		t.Fatalf("%d refreshes of dry books of 20 fit after the deepening, want at least 10", dry)
	}
	if !b.Take(at, Ask{PurposeSnapshot, 20, Waiting}) {
		t.Fatal("a sync a request waits for found no room after the deepening and the dry books")
	}
}

// The window holds what the venue counted beyond this ledger's own spend
// too: a member that takes a cluster's ingest over finds the previous
// leader's minute in the venue's count (Observe), which no class's spend
// holds, and deepening every book on top of it filled the window when the
// deepening was held to the class's spend; the dry books and probes of
// the books being served then found only the serving reserve.
func TestDeepeningLeavesTheWindowRoomAfterAnotherMinute(t *testing.T) {
	b := newLedger(1200, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Share: [NumClasses]int{ClassRefresh: 48, ClassProbe: 48}})
	now := time.Unix(1_000_000, 0)
	b.Observe(now.Add(-40*time.Second), 450) // the previous leader's minute
	for _, at := range []time.Time{now, now.Add(15 * time.Second)} {
		for b.Take(at, Ask{PurposeDeepen, 10, Background}) {
		}
	}
	at := now.Add(15 * time.Second)
	if spent := b.Spent(at); spent > 600 || spent < 600-10 {
		t.Fatalf("deepening after another minute of 450 left the window at %d of 1,200, want half of it", spent)
	}
	reads := 0
	for reads < 40 && b.Take(at, Ask{PurposeDepleted, 10, Serving}) {
		reads++
	}
	if reads < 40 {
		t.Fatalf("%d refreshes of dry books of 10 fit after the deepening, want 40", reads)
	}
}

// What the venue counts for the address beyond this ledger's own spend is
// taken as spent here, but for the others' parts of a budget several
// processes share: three cluster members reading alone with a third each
// must not each be held to their third less what the other two spent.
func TestObservedWeightCountsPastTheOthersParts(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	plan := Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true}}
	spendable := func(b *Ledger) int {
		n := 0
		for b.Take(now, Ask{PurposeSnapshot, 10, Waiting}) {
			n += 10
		}
		return n
	}

	alone := newLedger(400, plan)
	if got := spendable(alone); got != 400 {
		t.Fatalf("a fresh ledger of 400 spent %d", got)
	}
	// A process alone on its address: whatever else the venue counts was
	// spent here.
	single := newLedger(400, plan)
	single.Observe(now, 300)
	if got := spendable(single); got != 100 {
		t.Fatalf("after the venue counted 300 more, a ledger of 400 spent %d, want 100", got)
	}
	// One of three members with a third each (400 of 1,200): the others
	// spent 700 of their 800, which is theirs; then 900, 100 past their
	// parts, which counts here.
	member := newLedger(400, plan)
	member.SetOthers(800)
	member.Observe(now, 700)
	if got := spendable(member); got != 400 {
		t.Fatalf("with the others within their parts, a member's ledger of 400 spent %d", got)
	}
	member = newLedger(400, plan)
	member.SetOthers(800)
	member.Observe(now, 900)
	if got := spendable(member); got != 300 {
		t.Fatalf("with the others 100 past their parts, a member's ledger of 400 spent %d, want 300", got)
	}
}

// Without market streams nothing reads at Serving: the ledger keeps no
// serving reserve, and a read a request waits for may spend the whole book
// share; with it kept, such a read leaves the reserve.
func TestServingReserveOnlyWhenKept(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, kept := range []bool{false, true} {
		b := newLedger(1000, Plan{Share: [NumClasses]int{ClassBook: 125, ClassTrades: 100}}) // a serving reserve of 5
		b.SetServingReserve(kept)
		spent := 0
		for b.Take(now, Ask{PurposePollBook, 5, Waiting}) {
			spent += 5
		}
		if want := map[bool]int{false: 125, true: 120}[kept]; spent != want {
			t.Errorf("reserve kept %v: requests spent %d of the book share of 125, want %d", kept, spent, want)
		}
	}
}

// Probes, which keep books being served answering, find the serving
// reserve when the rest of the minute is spent, and are held to their own
// share at any priority.
func TestProbesKeepToTheirOwnShare(t *testing.T) {
	b := newLedger(1000, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Share: [NumClasses]int{ClassRefresh: 40, ClassProbe: 10}})
	b.SetServingReserve(true)
	t0 := time.Unix(1_000_000, 0)
	for b.Take(t0, Ask{PurposeSnapshot, 10, Requested}) {
	}
	for i := range 5 {
		if !b.Take(t0, Ask{PurposeProbe, 2, Serving}) {
			t.Fatalf("probe %d refused within its share, the minute spent but the serving reserve", i+1)
		}
	}
	if b.Take(t0, Ask{PurposeProbe, 2, Serving}) || b.Take(t0, Ask{PurposeProbe, 2, Requested}) {
		t.Fatal("a probe went past its share")
	}
	if !b.Take(t0.Add(time.Minute+time.Second), Ask{PurposeProbe, 2, Serving}) {
		t.Fatal("the probe share did not free with the minute")
	}
}

// Open interest spends only idle weight: reads stop once the window is half
// spent, whatever the class caps would allow, and everything else still
// finds the other half.
func TestOpenInterestSpendsOnlyIdleWeight(t *testing.T) {
	b := newLedger(1000, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Share: [NumClasses]int{ClassRefresh: 80}})
	now := time.Unix(1_000_000, 0)
	if !b.Take(now, Ask{PurposeTickers, 100, Waiting}) {
		t.Fatal("the bulk statistics were refused")
	}
	reads := 0
	for b.Take(now, Ask{PurposeOpenInterest, 1, Background}) {
		reads++
	}
	if spent := b.Spent(now); spent != 500 || reads != 400 {
		t.Fatalf("%d open-interest reads took the window to %d, want 400 to half of 1000", reads, spent)
	}
	if !b.Take(now, Ask{PurposeSnapshot, 400, Requested}) {
		t.Fatal("a sync found the window's other half taken")
	}
	if b.Take(now.Add(30*time.Second), Ask{PurposeOpenInterest, 1, Background}) {
		t.Fatal("open interest read with the window 900 of 1000 spent")
	}
}

// newLedger returns a ledger of limit whose caps come from plan.
func newLedger(limit int, plan Plan) *Ledger {
	b := NewLedger(func() Plan { return plan })
	b.SetLimit(limit)
	return b
}

// A REST round's reads standing in for lost streams leave half the window
// to the syncs the books need once their streams are back, as open
// interest and the deepening do, whichever class they spend, and spread
// it as the deepening does; a request that waits for one of those pairs
// asks above them and is read.
func TestStandInsLeaveHalfTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		demand [NumClasses]float64
	}{
		{"books and trades", [NumClasses]float64{ClassBook: 10_000, ClassTrades: 10_000}},
		{"books alone", [NumClasses]float64{ClassBook: 10_000}},
	} {
		b := newLedger(1200, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true}, Demand: tc.demand})
		now := time.Unix(1_000_000, 0)
		standIn := func(at time.Time) {
			for b.Take(at, Ask{PurposeStandInTrades, 20, Waiting}) {
			}
			for b.Take(at, Ask{PurposeStandInBook, 5, Waiting}) {
			}
		}
		standIn(now)
		if spent := b.Spent(now); spent > 300 || spent < 300-20 {
			t.Fatalf("%s: stand-ins spent %d at once, want a quarter of 1,200", tc.name, spent)
		}
		at := now.Add(31 * time.Second)
		standIn(at)
		if spent := b.Spent(at); spent > 600 || spent < 600-20 {
			t.Fatalf("%s: stand-ins left the window at %d of 1,200, want half of it", tc.name, spent)
		}
		if !b.Take(at, Ask{PurposeStandInBook, 5, Requested}) || !b.Take(at, Ask{PurposePollBook, 5, Requested}) {
			t.Fatalf("%s: a read a request waits for found no room after the stand-ins", tc.name)
		}
	}
}

// The pair list's read has a reserve of its own: a window that every other
// read, at every priority, has spent as far as it may (the serving reserve
// too) still takes it, twice in a minute, and no other read spends that
// reserve. Before, the syncs of a cold start and the requests waiting on
// them spent the window to its limit, and the pair list's read, a bulk
// call at Waiting, was refused: the list could not drop a delisted pair.
func TestPairListKeepsAReserveOfItsOwn(t *testing.T) {
	b := newLedger(1000, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Demand: [NumClasses]float64{ClassBook: 10_000, ClassTrades: 10_000},
		Share:  [NumClasses]int{ClassRefresh: 40, ClassProbe: 40}, Own: [NumPurposes]int{PurposeCatalog: 2}})
	b.SetServingReserve(true)
	now := time.Unix(1_000_000, 0)
	for prio := range NumPriorities {
		for pu := range NumPurposes {
			if pu == PurposeCatalog {
				continue
			}
			for b.Take(now, Ask{pu, 1, prio}) {
			}
		}
	}
	if spent := b.Spent(now); spent != 998 {
		t.Fatalf("every other read spent the window to %d of 1000, want all but the pair list's 2", spent)
	}
	for i := range 2 {
		if !b.Take(now, Ask{PurposeCatalog, 1, Waiting}) {
			t.Fatalf("pair list read %d refused with its reserve free", i+1)
		}
	}
	if b.Take(now, Ask{PurposeCatalog, 1, Waiting}) {
		t.Fatal("the pair list's read went past the limit")
	}
	if at := b.FreeAt(now.Add(time.Second), 1); !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("FreeAt %v, want once the window's weight expires, %v", at.Sub(now), time.Minute)
	}
}

// The bulk reads that stand in for lost streams (statistics and quotes,
// every contract's marks) keep a reserve each, as the pair list does: the
// minute spent by every other read at every priority, each still takes
// its own reserve and no more, and none takes another's; reads that fitted
// without it (a cold start's, before the streams flowed) spend none of it.
// Before, a cold start's syncs left them nothing, and /tickers and
// /contracts aged out.
func TestStandInBulkReadsKeepReservesOfTheirOwn(t *testing.T) {
	own := [NumPurposes]int{PurposeCatalog: 2, PurposeTickers: 45, PurposeContracts: 10}
	b := newLedger(1000, Plan{Split: [NumClasses]bool{ClassBook: true, ClassTrades: true},
		Demand: [NumClasses]float64{ClassBook: 10_000, ClassTrades: 10_000},
		Share:  [NumClasses]int{ClassRefresh: 40, ClassProbe: 40}, Own: own})
	b.SetServingReserve(true)
	now := time.Unix(1_000_000, 0)
	if !b.Take(now.Add(-30*time.Second), Ask{PurposeContracts, 10, Waiting}) {
		t.Fatal("the marks were refused in an empty window")
	}
	for prio := range NumPriorities {
		for pu := range NumPurposes {
			if own[pu] > 0 {
				continue
			}
			for b.Take(now, Ask{pu, 1, prio}) {
			}
		}
	}
	if spent := b.Spent(now); spent != 1000-57 {
		t.Fatalf("every other read spent the window to %d of 1000, want all but the reserves' 57", spent)
	}
	if b.Take(now, Ask{PurposeTickers, 46, Waiting}) {
		t.Fatal("the statistics and quotes took more than their reserve")
	}
	if !b.Take(now, Ask{PurposeTickers, 40, Waiting}) || !b.Take(now, Ask{PurposeTickers, 5, Waiting}) {
		t.Fatal("the statistics and quotes were refused their reserve")
	}
	if b.Take(now, Ask{PurposeTickers, 1, Waiting}) {
		t.Fatal("the statistics and quotes took the marks' reserve")
	}
	if !b.Take(now, Ask{PurposeContracts, 10, Waiting}) {
		t.Fatal("the marks were refused their reserve")
	}
	if !b.Take(now, Ask{PurposeCatalog, 2, Waiting}) || b.Spent(now) != 1000 {
		t.Fatalf("the pair list was refused its reserve, or the window holds %d", b.Spent(now))
	}
}
