package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"marketfeed/apptest"
	"marketfeed/internal/natstest"
	"marketfeed/internal/promtext"
	"marketfeed/poller"
	"marketfeed/poller/sim"
	"marketfeed/poller/standby"
	"marketfeed/poller/venue"
	"marketfeed/role"
	"marketfeed/snapshot"
)

// member is one replica under test.
type member struct {
	name     string
	venue    *countingVenue // the member's own venue: only a leader reads it
	a        *app
	api, ops string
	stop     func() // ends the process as a kill would, leaving its lease to expire
}

// startMember runs the program as a member of the cluster on natsURL, on
// the embedded simulated venue, with no rate limit (the test is one
// client).
func startMember(t *testing.T, natsURL, name string, args ...string) *member {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-rate-limit", "0",
		"-cluster", natsURL, "-cluster-member", name}, args...)
	cfg, err := parseConfig(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	v, err := newVenue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := &countingVenue{Venue: v}
	a, err := newApp(cfg, slog.New(slog.DiscardHandler), streamingVenue{src, v.(*sim.Venue)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, make(chan os.Signal)) }()
	m := &member{name: name, venue: src, a: a, api: "http://" + a.api.Addr().String(), ops: "http://" + a.ops.Addr().String()}
	m.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: run: %v", name, err)
		}
	})
	t.Cleanup(m.stop)
	return m
}

// relay returns a member's market streams.
func (a *app) relay() *standby.Relay { return a.role.(*role.Cluster).Relay() }

// streamingVenue is a counted simulator that passes the simulator's
// market streams on: the members keep their books from the streams, as
// they do in production.
type streamingVenue struct {
	*countingVenue
	sim *sim.Venue
}

func (v streamingVenue) Streams() *sim.Streams { return v.sim.Streams() }

// streamingVenue reads the simulator's contract data too, each read
// counted, so that a member publishes /contracts as on the embedded venue.
var _ venue.ContractReader = streamingVenue{}

func (v streamingVenue) Contracts(ctx context.Context) ([]venue.Contract, int, error) {
	v.contracts.Add(1)
	return v.sim.Contracts(ctx)
}

func (v streamingVenue) OpenInterest(ctx context.Context, symbol string) (venue.OpenInterest, error) {
	v.contracts.Add(1)
	return v.sim.OpenInterest(ctx, symbol)
}

func (v streamingVenue) ContractsWeight() int    { return v.sim.ContractsWeight() }
func (v streamingVenue) OpenInterestWeight() int { return v.sim.OpenInterestWeight() }

// scrapeMetrics reads a member's /metrics.
func scrapeMetrics(t *testing.T, m *member) map[string]float64 {
	t.Helper()
	_, body := apptest.Get(t, m.ops+"/metrics")
	return promtext.Must(t, string(body))
}

// waitMetrics polls a member's /metrics until every series has its value.
func waitMetrics(t *testing.T, m *member, limit time.Duration, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := scrapeMetrics(t, m)
		missing := ""
		for series, v := range want {
			if got[series] != v {
				missing = fmt.Sprintf("%s is %v, want %v", series, got[series], v)
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s: %s", m.name, limit, missing)
		}
		time.Sleep(50 * time.Millisecond) // polling real processes, not synchronising test logic
	}
}

// role reads a member's part from its /readyz.
func (m *member) role(t *testing.T) (ready bool, role clusterRole) {
	t.Helper()
	resp, body := apptest.Get(t, m.ops+"/readyz")
	var r readiness
	if err := json.Unmarshal(body, &r); err != nil || r.Cluster == nil {
		t.Fatalf("%s /readyz %d: %s", m.name, resp.StatusCode, body)
	}
	return r.Ready, *r.Cluster
}

// waitLeader polls the members' /readyz until every one is ready and one
// leads, and returns the leader.
func waitLeader(t *testing.T, members []*member, limit time.Duration) *member {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var leader *member
		all := true
		for _, m := range members {
			ready, role := m.role(t)
			all = all && ready
			if role.Role == "leader" {
				leader = m
			}
		}
		if all && leader != nil {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready cluster with a leader within %s", limit)
		}
		time.Sleep(20 * time.Millisecond) // polling real processes, not synchronising test logic
	}
}

// warm waits until every member answers every route 200: the leader has
// read every book and trade list those ask for, and published them.
func warm(t *testing.T, members []*member) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range members {
		for _, uri := range clusterURIs {
			for ask(t, m.api, uri, "").status != 200 {
				if time.Now().After(deadline) {
					t.Fatalf("%s %s: not answered within 20s", m.name, uri)
				}
				time.Sleep(20 * time.Millisecond) // polling real processes, not synchronising test logic
			}
		}
	}
}

// clusterURIs are a request of every route and variant.
var clusterURIs = []string{
	"/api/public/pairs", "/api/public/tickers", "/api/public/contracts", "/api/public/contract_specs",
	"/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/orderbook?ticker_id=ETH_USDT&depth=5",
	"/api/public/trades?ticker_id=BTC_USDT", "/api/public/trades?ticker_id=SOL_USDT&type=sell&limit=10",
	"/api/public/historical_trades?ticker_id=ETH_USDT&limit=3",
}

// answer is what one member answered.
type answer struct {
	status int
	etag   string
	body   string
}

func ask(t *testing.T, base, uri, ifNoneMatch string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, body := apptest.Do(t, req)
	return answer{resp.StatusCode, resp.Header.Get("ETag"), string(body)}
}

// Three members on one NATS server: one leads and alone reads the venue,
// and every member answers every route, and every page, with the same bytes
// and the same ETag, so a tag from one is a 304 on another. Books and trades change a
// few times a second, so each route is asked of the three at once until
// one round catches them on the same value.
func TestClusterMembersAnswerAsOne(t *testing.T) {
	s := natstest.Start(t)
	members := []*member{startMember(t, s.ClientURL(), "a"), startMember(t, s.ClientURL(), "b"), startMember(t, s.ClientURL(), "c")}
	leader := waitLeader(t, members, 20*time.Second)
	warm(t, members)
	for _, m := range members {
		catalogs, perPair := m.venue.catalogs.Load(), m.venue.perPair()
		if m == leader && catalogs == 0 {
			t.Errorf("the leader %s never read the catalog", m.name)
		}
		if m != leader && catalogs+perPair != 0 {
			t.Errorf("follower %s read the venue: %d catalogs, %d per-pair and contract reads", m.name, catalogs, perPair)
		}
	}
	for _, uri := range clusterURIs {
		same := false
		for try := 0; try < 50 && !same; try++ {
			first := ask(t, members[0].api, uri, "")
			same = first.status == 200 && first.etag != ""
			for _, m := range members[1:] {
				if got := ask(t, m.api, uri, ""); got != first {
					same = false
				}
			}
			for _, m := range members {
				if same && ask(t, m.api, uri, first.etag).status != http.StatusNotModified {
					same = false
				}
			}
		}
		if !same {
			t.Errorf("%s: the members never answered alike, with a 304 to one another's tag, in 50 rounds", uri)
		}
	}
	// Any member serves the same pages under the same tags.
	for _, uri := range []string{"/", "/docs", "/assets/market.js"} {
		first := ask(t, members[0].api, uri, "")
		for _, m := range members {
			if got := ask(t, m.api, uri, ""); got.status != http.StatusOK || got != first {
				t.Errorf("%s from %s: %d, ETag %q; from %s: %d, ETag %q", uri, m.name, got.status, got.etag, members[0].name, first.status, first.etag)
			}
			if got := ask(t, m.api, uri, first.etag); got.status != http.StatusNotModified {
				t.Errorf("%s from %s with %s's tag: %d, want 304", uri, m.name, members[0].name, got.status)
			}
		}
	}
}

// Every member's /readyz gives the cluster's term, the one its
// marketfeed_cluster_term shows: a follower's is its leader's, not 0, so
// that an operator comparing members sees one term.
func TestClusterReadyzTermIsTheClustersTerm(t *testing.T) {
	s := natstest.Start(t)
	members := []*member{startMember(t, s.ClientURL(), "a"), startMember(t, s.ClientURL(), "b")}
	leader := waitLeader(t, members, 20*time.Second)
	_, lead := leader.role(t)
	if lead.Term == 0 {
		t.Fatalf("the leader %s says term 0", leader.name)
	}
	for _, m := range members {
		_, role := m.role(t)
		if role.Term != lead.Term {
			t.Errorf("%s (%s) /readyz says term %d, the leader %d", m.name, role.Role, role.Term, lead.Term)
		}
		if gauge := scrapeMetrics(t, m)["marketfeed_cluster_term"]; gauge != float64(role.Term) {
			t.Errorf("%s (%s): /readyz term %d, marketfeed_cluster_term %v", m.name, role.Role, role.Term, gauge)
		}
	}
}

// Killing the leader: another member leads within a few pings, well before
// the lease's TTL runs out, and a client asking the others every route
// meanwhile gets no 5xx (a book older than -max-stale would be a 502).
func TestClusterLeaderKilledNoAnswerFails(t *testing.T) {
	s := natstest.Start(t)
	members := warmCluster(t, s.ClientURL())
	leader, rest := members[0], members[1:]
	listed := float64(len(leader.a.store.Pairs().List()))
	// A trade list is a seed once it holds a trade, and a market that has
	// not traded since it was listed has none: what each follower holds
	// now is what it must seed at least, as a list never empties.
	held := map[*member]float64{}
	for _, m := range rest {
		held[m] = tradeListsHeld(m)
	}
	// Each follower holds the depth of every book and the events since it:
	// the leader publishes them every few seconds, and the next one starts
	// its books there. (The first depth of a pair may find the events up
	// to a later book gone; the next one will not.) The leader's books
	// start from 100 levels and deepen once all are in sequence: the
	// depths a new leader starts from are those of books deepened, as a
	// leader that has run a while holds.
	deep := func(d *snapshot.Depth) bool {
		bids, asks := d.Sides()
		return min(len(bids), len(asks)) > snapshot.MaxDepth
	}
	deadline := time.Now().Add(6 * role.DepthEvery)
	for _, m := range rest {
		for _, p := range leader.a.store.Pairs().List() {
			for d := m.a.store.Depth([]byte(p.TickerID)); d == nil || !deep(d) || !m.a.relay().Continues(p.TickerID, d.Seq()); d = m.a.store.Depth([]byte(p.TickerID)) {
				if time.Now().After(deadline) {
					t.Fatalf("%s holds no deepened depth of %s that its events go on from after %s", m.name, p.TickerID, 6*role.DepthEvery)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	// What the leader last put of BTC_USDT's book, to put again once
	// another leads: what a paused ex-leader that wakes would send.
	bucket := snapshotBucket(t, s.ClientURL())
	stale, err := bucket.Get(t.Context(), "book.BTC_USDT")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	answers := askAll(t, rest, stop)
	killed := time.Now()
	leader.stop()
	next := waitLeader(t, rest, 10*time.Second)
	took := time.Since(killed)
	time.Sleep(2 * time.Second) // keep asking across the new leader's first seconds
	close(stop)
	statuses := answers()
	books, trades := next.venue.reads()
	syncs := next.venue.bookReads(poller.DefaultSyncDepth)
	got := scrapeMetrics(t, next)
	t.Logf("leader %s killed; %s leads after %s; answers across the takeover: %v; the new leader started %v books and %v trade lists of %v from the last leader's (it held %v with a trade), and read %d books (%d to sync one) and %d trade lists",
		leader.name, next.name, took.Round(time.Millisecond), statuses,
		got[`marketfeed_seeded_total{part="books"}`], got[`marketfeed_seeded_total{part="trades"}`], listed, held[next], books, syncs, trades)
	// A warm takeover: the new leader goes on from the last leader's books
	// and its own streams, with no snapshot to sync them.
	if got[`marketfeed_seeded_total{part="books"}`] != listed || got[`marketfeed_seeded_total{part="trades"}`] < held[next] {
		t.Errorf("the new leader started %v books and %v trade lists of %v from the last leader's values; it held %v lists with a trade before the kill",
			got[`marketfeed_seeded_total{part="books"}`], got[`marketfeed_seeded_total{part="trades"}`], listed, held[next])
	}
	if held[next] == 0 {
		t.Errorf("the new leader held no trade list with a trade before the kill")
	}
	if resynced := got[`marketfeed_book_resyncs_total{cause="lost"}`] + got[`marketfeed_book_resyncs_total{cause="gap"}`]; resynced != 0 {
		t.Errorf("%v seeded books did not go on from their seed", resynced)
	}
	// A book whose depth the events held no longer continue (one the last
	// leader was resyncing as it died) syncs; every one of them is a cold
	// start.
	if syncs > int64(listed)/10 {
		t.Errorf("the new leader read %d snapshots to sync books of %v: a cold start, not a warm one", syncs, listed)
	}
	// Started from depths of hundreds of levels, the books need no read to
	// deepen them either (seeded from the published 100 levels, every
	// book read one): what is left is the odd book whose side ran short.
	if books > int64(listed)/10 {
		t.Errorf("the new leader read %d book snapshots for %v books; seeded from depths, it needs none to deepen them", books, listed)
	}
	if took > 2*time.Second {
		t.Errorf("a new leader took %s, want within a few pings of the gone leader, well inside its 5s lease", took)
	}
	for status, n := range statuses {
		if status != 200 {
			t.Errorf("%d answers with status %d across the takeover", n, status)
		}
	}

	// The killed leader's value, put again under the new term: every
	// follower drops it as stale, the new leader does not watch the bucket
	// while it leads (its store has what it puts), and no book goes back.
	const staleDrops = `marketfeed_cluster_values_dropped_total{reason="stale_term"}`
	seqs := map[*member]int64{}
	for _, m := range rest {
		seqs[m] = bookSeq(t, m, "BTC_USDT")
		if n := scrapeMetrics(t, m)[staleDrops]; n != 0 {
			t.Fatalf("%s dropped %v stale values before one was put", m.name, n)
		}
	}
	if _, err := bucket.Put(t.Context(), "book.BTC_USDT", stale.Value()); err != nil {
		t.Fatal(err)
	}
	for _, m := range rest {
		if m != next {
			waitMetrics(t, m, 10*time.Second, map[string]float64{staleDrops: 1})
		}
		if now := bookSeq(t, m, "BTC_USDT"); now < seqs[m] {
			t.Errorf("%s serves BTC_USDT's book at update id %d after the stale value, %d before it", m.name, now, seqs[m])
		}
	}
	if n := scrapeMetrics(t, next)[staleDrops]; n != 0 {
		t.Errorf("%s, leading, dropped %v stale values: it watches the bucket while it leads", next.name, n)
	}
}

// snapshotBucket opens the cluster's snapshot bucket as a client of its own.
func snapshotBucket(t *testing.T, natsURL string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), "marketfeed_snapshots")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// bookSeq is the venue update id of the book m's store holds for id.
func bookSeq(t *testing.T, m *member, id string) int64 {
	t.Helper()
	b, _ := m.a.store.Book([]byte(id), time.Now().UnixNano())
	if b == nil {
		t.Fatalf("%s holds no book of %s", m.name, id)
	}
	return b.Seq()
}

// warmCluster starts three members, waits for a leader whose books and
// trades are all stream-fed and for followers whose streams are all live,
// and returns the members, the leader first.
func warmCluster(t *testing.T, natsURL string, args ...string) []*member {
	t.Helper()
	members := []*member{startMember(t, natsURL, "a", args...), startMember(t, natsURL, "b", args...), startMember(t, natsURL, "c", args...)}
	leader := waitLeader(t, members, 20*time.Second)
	listed := float64(len(leader.a.store.Pairs().List()))
	waitMetrics(t, leader, 30*time.Second, map[string]float64{
		`marketfeed_pairs{part="books",source="stream"}`: listed, `marketfeed_pairs{part="trades",source="stream"}`: listed,
	})
	out := []*member{leader}
	for _, m := range members {
		if m != leader {
			waitMetrics(t, m, 30*time.Second, map[string]float64{
				`marketfeed_standby_streams_live{stream="depth"}`: listed, `marketfeed_standby_streams_live{stream="trades"}`: listed,
				// A follower runs no poller, yet says it is ready as its
				// /readyz does.
				`marketfeed_ready`: 1,
			})
			out = append(out, m)
		}
	}
	return out
}

// tradeListsHeld counts the pairs whose trade list m's store holds with at
// least one trade.
func tradeListsHeld(m *member) float64 {
	n, now := 0.0, time.Now().UnixNano()
	for _, p := range m.a.store.Pairs().List() {
		if tr, _ := m.a.store.Trades([]byte(p.TickerID), now); tr != nil && tr.NewestVenueID() > 0 {
			n++
		}
	}
	return n
}

// askAll asks every member every route until stop is closed, and returns
// the answers by status.
func askAll(t *testing.T, members []*member, stop <-chan struct{}) (statuses func() map[int]int) {
	var mu sync.Mutex
	counts := map[int]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, m := range members {
				for _, uri := range clusterURIs {
					a := ask(t, m.api, uri, "")
					mu.Lock()
					if a.status != 200 && counts[a.status] == 0 {
						t.Logf("first %d from %s %s: %s", a.status, m.name, uri, a.body)
					}
					counts[a.status]++
					mu.Unlock()
				}
			}
		}
	}()
	return func() map[int]int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return counts
	}
}

// oldestBooks reads BTC_USDT's book of every member every 20 ms until stop
// and returns, by member, how old the oldest book it answered 200 with was
// when it came (the answer's timestamp against the clock).
func oldestBooks(t *testing.T, members []*member, stop <-chan struct{}) (oldest func() map[string]time.Duration) {
	ages := map[string]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, m := range members {
				a := ask(t, m.api, "/api/public/orderbook?ticker_id=BTC_USDT&depth=1", "")
				if a.status != 200 {
					continue
				}
				var book struct{ Timestamp int64 }
				if err := json.Unmarshal([]byte(a.body), &book); err != nil {
					t.Errorf("%s: book: %v", m.name, err)
					return
				}
				ages[m.name] = max(ages[m.name], time.Since(time.UnixMilli(book.Timestamp)))
			}
		}
	}()
	return func() map[string]time.Duration {
		<-done
		return ages
	}
}

// NATS stopped: every member goes on serving, then reads the venue alone
// with its third of the budget, so that nothing it serves grows older than
// -max-stale; NATS started again: they stop, join again, and one leads.
// The leader goes alone warm, as a follower does: its books go on from the
// depths its poller left when its term ended and the events since, with no
// snapshot read to sync them.
func TestClusterServesThroughANATSOutage(t *testing.T) {
	s := natstest.Start(t)
	members := warmCluster(t, s.ClientURL())
	leader := members[0]
	listed := int64(len(leader.a.store.Pairs().List()))
	syncsBefore := leader.venue.bookReads(poller.DefaultSyncDepth)
	stop, stopAges := make(chan struct{}), make(chan struct{})
	statuses := askAll(t, members, stop)
	oldest := oldestBooks(t, members, stopAges)
	restart := natstest.Stop(t, s)
	for _, m := range members {
		deadline := time.Now().Add(15 * time.Second)
		for {
			_, role := m.role(t)
			if role.Role == "alone" {
				if role.Members != 3 {
					t.Errorf("%s reads alone counting %d members, want 3", m.name, role.Members)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %q 15s after NATS stopped, not alone", m.name, role.Role)
			}
			time.Sleep(50 * time.Millisecond) // polling real processes, not synchronising test logic
		}
	}
	time.Sleep(12 * time.Second) // past -max-stale (10s) of what the members held when NATS went
	close(stopAges)
	// A follower's values stop with its connection: it reads alone within
	// two periods of the lease (2 s), not once a leader may go without
	// renewing (4 to 5 s, and its books as old), which would answer 502
	// under a -max-stale of 5 s.
	for name, age := range oldest() {
		t.Logf("%s: the oldest BTC_USDT book it answered across the loss of NATS was %v old", name, age)
		if age > 4*time.Second {
			t.Errorf("%s answered a BTC_USDT book %v old across the loss of NATS, want 4 s at most", name, age)
		}
	}
	seeded := scrapeMetrics(t, leader)[`marketfeed_seeded_total{part="books"}`]
	syncs := leader.venue.bookReads(poller.DefaultSyncDepth) - syncsBefore
	t.Logf("%s, the leader, went alone with %v of %d books seeded and read %d snapshots to sync one", leader.name, seeded, listed, syncs)
	// A book that was out of sequence, or had run dry, as the term ended
	// left no depth: a few may sync; every one of them was a cold start.
	if int64(seeded) < listed-listed/10 || syncs > listed/10 {
		t.Errorf("%s went alone with %v of %d books seeded, and read %d snapshots to sync books: a cold start, not a warm one",
			leader.name, seeded, listed, syncs)
	}
	restart()
	next := waitLeader(t, members, 30*time.Second)
	close(stop)
	got := statuses()
	t.Logf("answers across the outage: %v; %s leads again", got, next.name)
	for status, n := range got {
		if status != 200 {
			t.Errorf("%d answers with status %d across the outage", n, status)
		}
	}
	for _, m := range members {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, role := m.role(t); role.Role != "alone" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still reads alone 10s after its cluster has a leader again", m.name)
			}
			time.Sleep(50 * time.Millisecond) // polling real processes, not synchronising test logic
		}
	}
}

// Behind a round-robin balancer, a client is limited by the members
// together: at 60 a minute each, a client asking them in turn ten times a
// second for 12 s gets what one process would give it (60 in its first 6 s,
// then nothing until they leave the minute), plus at most what it sends in
// an exchange period at each member, not 120.
func TestClusterMembersShareOneRateLimit(t *testing.T) {
	s := natstest.Start(t)
	members := []*member{startMember(t, s.ClientURL(), "a", "-rate-limit", "60"), startMember(t, s.ClientURL(), "b", "-rate-limit", "60"),
		startMember(t, s.ClientURL(), "c", "-rate-limit", "60")}
	waitLeader(t, members, 20*time.Second)
	allowed := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := range 120 {
		<-tick.C
		if ask(t, members[i%3].api, "/api/public/pairs", "").status == 200 {
			allowed++
		}
	}
	t.Logf("%d of 120 requests allowed", allowed)
	if allowed > 60+4 || allowed < 60 {
		t.Fatalf("%d of 120 requests allowed by three members at 60 a minute, want 60 or a few more", allowed)
	}
}

// A delisting and a listing seen through three members: the delisted pair
// leaves /pairs on every member and is answered for the caches' 5 s on each,
// then 404; the listed pair is answered on every member before any lists it
// (make before break), so no ticker_id a member's /pairs returns answers
// 404 or 502 anywhere.
func TestClusterListingsMakeBeforeBreak(t *testing.T) {
	s := natstest.Start(t)
	members := warmCluster(t, s.ClientURL())
	leader := members[0]
	const id, sym = "DOGE_USDT", "DOGEUSDT"
	book, trades := "/api/public/orderbook?ticker_id="+id, "/api/public/trades?ticker_id="+id
	lists := func(m *member) bool { return strings.Contains(ask(t, m.api, "/api/public/pairs", "").body, `"`+id+`"`) }

	leader.venue.hidden.Store(sym, struct{}{})
	delisted := time.Now() // each member drops it from /pairs after this
	if err := leader.a.poller().RefreshCatalog(t.Context()); err != nil {
		t.Fatal(err)
	}
	for time.Since(delisted) < 4*time.Second {
		for _, m := range members {
			for _, uri := range []string{book, trades} {
				if a := ask(t, m.api, uri, ""); a.status != 200 {
					t.Fatalf("%s answered %s %d %s after the delisting, within the caches' 5s: %s", m.name, uri, a.status, time.Since(delisted), a.body)
				}
			}
		}
	}
	for _, m := range members {
		if lists(m) {
			t.Errorf("%s still lists %s 4s after the delisting", m.name, id)
		}
	}
	time.Sleep(time.Until(delisted.Add(7 * time.Second))) // past the 5 s on every member
	for _, m := range members {
		if st := ask(t, m.api, book, "").status; st != 404 {
			t.Errorf("%s answered %s %d 7s after the delisting, want 404", m.name, book, st)
		}
	}

	leader.venue.hidden.Delete(sym)
	if err := leader.a.poller().RefreshCatalog(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The followers first: a cold load on the leader would wait for the
	// pair's book, and the followers would have it by the time they were
	// asked.
	order := []*member{members[1], members[2], leader}
	deadline := time.Now().Add(15 * time.Second)
	for listed := 0; listed < len(members); {
		if time.Now().After(deadline) {
			t.Fatalf("%s listed on %d members of 3, 15s after the listing", id, listed)
		}
		listed = 0
		for _, m := range order {
			if !lists(m) {
				continue
			}
			listed++
			for _, other := range order {
				for _, uri := range []string{book, trades} {
					if a := ask(t, other.api, uri, ""); a.status != 200 {
						t.Fatalf("%s lists %s, and %s answers %s %d: %s", m.name, id, other.name, uri, a.status, a.body)
					}
				}
			}
		}
	}
}

// Without market streams the leader reads the pairs requests ask for. A
// follower's first request for a pair nobody has asked for is answered as
// the leader, or a process alone, answers it: the leader reads it for the
// follower, which serves it, rather than a 502; and the leader keeps it
// hot from then on, as it keeps the pairs asked of it.
func TestClusterFollowersColdRequestIsReadByTheLeader(t *testing.T) {
	s := natstest.Start(t)
	var members []*member
	for _, name := range []string{"a", "b", "c"} {
		members = append(members, startMember(t, s.ClientURL(), name, "-venue-streams", "off"))
	}
	leader := waitLeader(t, members, 20*time.Second)
	var follower *member
	for _, m := range members {
		if m != leader {
			follower = m
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for ask(t, follower.api, "/api/public/pairs", "").status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the follower lists no pairs within 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling real processes, not synchronising test logic
	}
	const uri = "/api/public/orderbook?ticker_id=DOGE_USDT&depth=5"
	got := ask(t, follower.api, uri, "")
	if got.status != 200 || !strings.Contains(got.body, `"ticker_id":"DOGE_USDT"`) {
		t.Fatalf("the follower's first request for a pair: %d %s", got.status, got.body)
	}
	asked := scrapeMetrics(t, follower)[`marketfeed_cluster_loads_total{side="asked",result="ok"}`]
	served := scrapeMetrics(t, leader)[`marketfeed_cluster_loads_total{side="served",result="ok"}`]
	if asked < 1 || served < 1 {
		t.Errorf("the follower asked %v loads and the leader served %v: the book did not come through the leader's read", asked, served)
	}
	if catalogs, perPair := follower.venue.catalogs.Load(), follower.venue.perPair(); catalogs+perPair != 0 {
		t.Errorf("the follower read the venue: %d catalogs, %d per-pair and contract reads", catalogs, perPair)
	}
	// The leader keeps the pair hot, read at full cadence, as if the
	// request had come to it.
	waitMetrics(t, leader, 5*time.Second, map[string]float64{`marketfeed_hot_pairs{stream="book"}`: 1})
}
