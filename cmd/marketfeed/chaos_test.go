package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marketfeed/apptest"
	"marketfeed/snapshot"
)

// The chaos tests run marketfeed in process (its store is what tells a
// legitimate 502 from a wrong one) against the venuesim binary over HTTP, the
// real Binance adapter in between, while clients read every route. The venue
// is made to fail in each way a real one does; throughout, every response is
// checked:
//
//   - no 500 and no status outside what the route may answer;
//   - no byte of a venue body (the simulator's fault pages, Binance's error
//     objects and field names, the garbage body);
//   - a 502 only when the store held no snapshot young enough to serve from
//     before the request was sent until its answer arrived.
//
// After each fault the venue heals and the test measures how long until a
// hot pair's book is fresh again (a 200 whose venue timestamp is after the
// heal), split into the back-off left when the venue healed (no call reaches
// it) and the refresh that follows.

// logCounter is a slog handler that counts records by level and keeps the
// messages of errors, so that a recovered panic anywhere in the process
// (handler or poller job) fails the run; it keeps the last warnings and
// errors whole, for a failed run to show what the process said.
type logCounter struct {
	mu     sync.Mutex
	levels map[slog.Level]int
	errors []string
	last   []string
}

// logKept is how many of the last warnings and errors a logCounter keeps.
const logKept = 40

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.levels == nil {
		l.levels = make(map[slog.Level]int)
	}
	l.levels[r.Level]++
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		if len(l.last) == logKept {
			l.last = slices.Delete(l.last, 0, 1)
		}
		l.last = append(l.last, b.String())
	}
	if r.Level >= slog.LevelError {
		l.errors = append(l.errors, r.Message)
	}
	return nil
}

func (l *logCounter) summary() (warns int, errs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.levels[slog.LevelWarn], slices.Clone(l.errors)
}

// startLoggedApp is startApp with a logger whose records the test reads;
// a failed test shows the last warnings and errors the process logged.
func startLoggedApp(t *testing.T, args ...string) (api string, a *app, logs *logCounter) {
	t.Helper()
	logs = new(logCounter)
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			defer logs.mu.Unlock()
			t.Logf("marketfeed's last warnings and errors:\n%s", strings.Join(logs.last, "\n"))
		}
	})
	api, _, a, _ = startAppLogged(t, nil, nil, logs, args...)
	return api, a, logs
}

// target is one URL the traffic reads.
type target struct {
	path   string // under /api/public
	id     string // ticker_id; "" for the lists
	stream string // pairs | tickers | contracts | book | trades
	may404 bool   // the pair may be delisted during the run
}

func bookTarget(id, query string) target {
	return target{path: "/orderbook?ticker_id=" + id + query, id: id, stream: "book"}
}

func tradesTarget(route, id, query string) target {
	return target{path: "/" + route + "?ticker_id=" + id + query, id: id, stream: "trades"}
}

// traffic reads targets from a few clients and checks every answer.
type traffic struct {
	t        testing.TB
	api      string
	store    *snapshot.Store
	maxStale time.Duration
	client   *http.Client

	phase atomic.Pointer[string]

	mu      sync.Mutex
	byPhase map[string]map[int]int // phase → status → count
	// unavailable counts the 502s by phase and target, to say which pairs
	// a fault left without a fresh snapshot.
	unavailable map[string]int
	phases      []string // in order of first answer
	total       int
	violations  int
	examples    []string // the first violations, for the failure message
}

func newTraffic(t testing.TB, api string, store *snapshot.Store, maxStale time.Duration) *traffic {
	tr := &traffic{
		t: t, api: api, store: store, maxStale: maxStale,
		client:      &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		byPhase:     make(map[string]map[int]int),
		unavailable: make(map[string]int),
	}
	tr.setPhase("start")
	return tr
}

func (tr *traffic) setPhase(name string) { tr.phase.Store(&name) }

// readAt returns when the snapshot serving tg was read, 0 when there is none.
func (tr *traffic) readAt(tg target) int64 {
	switch tg.stream {
	case "pairs":
		if p := tr.store.Pairs(); p != nil {
			return p.ReadAt()
		}
	case "tickers":
		if tk := tr.store.Tickers(); tk != nil {
			return tk.ReadAt()
		}
	case "contracts":
		if c := tr.store.Contracts(); c != nil {
			return c.ReadAt()
		}
	case "book":
		if b, _ := tr.store.Book([]byte(tg.id), time.Now().UnixNano()); b != nil {
			return b.ReadAt()
		}
	case "trades":
		if t, _ := tr.store.Trades([]byte(tg.id), time.Now().UnixNano()); t != nil {
			return t.ReadAt()
		}
	}
	return 0
}

// maxStaleOf is how old a snapshot of the stream may be and still be served.
func (tr *traffic) maxStaleOf(stream string) time.Duration {
	if stream == "pairs" {
		return 10 * time.Minute // the server's PairsMaxStale default
	}
	return tr.maxStale
}

// once sends one request for tg and checks its answer.
func (tr *traffic) once(tg target) {
	phase := *tr.phase.Load()
	before := tr.readAt(tg)
	resp, err := tr.client.Get(tr.api + "/api/public" + tg.path)
	var body []byte
	status := 0
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	}
	answered := time.Now()

	var problem string
	switch {
	case err != nil:
		problem = fmt.Sprintf("no answer: %v", err)
	case status == 200 && len(body) == 0:
		problem = "200 with an empty body"
	case status == 200:
	case status == 502:
		if before != 0 && answered.UnixNano()-before <= int64(tr.maxStaleOf(tg.stream)) {
			problem = fmt.Sprintf("502 although a snapshot read %s before the answer was in the store", answered.Sub(time.Unix(0, before)).Round(time.Millisecond))
		}
	case status == 404 && tg.may404:
	default:
		problem = fmt.Sprintf("status %d: %s", status, body)
	}
	for _, m := range apptest.VenueMarkers {
		if bytes.Contains(body, []byte(m)) {
			problem = fmt.Sprintf("venue bytes %q in the answer: %.200s", m, body)
		}
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	counts := tr.byPhase[phase]
	if counts == nil {
		counts = make(map[int]int)
		tr.byPhase[phase] = counts
		tr.phases = append(tr.phases, phase)
	}
	counts[status]++
	if status == 502 {
		tr.unavailable[phase+" "+tg.path]++
	}
	tr.total++
	if problem != "" {
		tr.violations++
		if len(tr.examples) < 20 {
			tr.examples = append(tr.examples, fmt.Sprintf("[%s] %s: %s", phase, tg.path, problem))
		}
	}
}

// run reads targets round robin from clients goroutines, each pausing every
// between requests, until ctx is done or limit requests were sent.
func (tr *traffic) run(ctx context.Context, clients int, every time.Duration, limit int64, targets []target) (wait func()) {
	var wg sync.WaitGroup
	var sent atomic.Int64
	for c := range clients {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := c; ctx.Err() == nil && sent.Add(1) <= limit; i++ {
				tr.once(targets[i%len(targets)])
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		})
	}
	return wg.Wait
}

// report logs the answers by phase and fails the test on any violation.
func (tr *traffic) report(t testing.TB) (total, s502 int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, ph := range tr.phases {
		counts := tr.byPhase[ph]
		var statuses []int
		for st := range counts {
			statuses = append(statuses, st)
		}
		sort.Ints(statuses)
		var parts []string
		for _, st := range statuses {
			parts = append(parts, fmt.Sprintf("%d×%d", counts[st], st))
			if st == 502 {
				s502 += counts[st]
			}
		}
		t.Logf("  %-28s %s", ph, strings.Join(parts, " "))
		for key, n := range tr.unavailable {
			if target, ok := strings.CutPrefix(key, ph+" "); ok {
				t.Logf("  %-28s   502×%d %s", "", n, target)
			}
		}
	}
	t.Logf("answers: %d, of which 502: %d; violations: %d", tr.total, s502, tr.violations)
	if tr.violations > 0 {
		t.Errorf("%d answers broke the rules, first ones:\n%s", tr.violations, strings.Join(tr.examples, "\n"))
	}
	return tr.total, s502
}

// chaos is one run: the venue, the app, the traffic and the measurements.
type chaos struct {
	t       *testing.T
	venue   *apptest.VenueSim
	api     string
	app     *app
	logs    *logCounter
	traffic *traffic
	lines   []string // the figures, printed at the end
}

// chaosArgs are marketfeed's flags for a chaos run: the Binance adapter on
// venuesim over REST alone (the stream faults have their own run), three
// spot pairs, no rate limit (the clients are one address).
func chaosArgs(venueURL string, maxStale time.Duration) []string {
	return []string{"-venue", "binance", "-venue-url", venueURL, "-venue-streams", "off", "-spot", "BTC_USDT,ETH_USDT,ADA_USDT",
		"-rate-limit", "0", "-max-stale", maxStale.String(), "-cold-timeout", "1s", "-log-level", "debug"}
}

// chaosTargets covers every route and keeps eight books hot, as many as the
// poller reads at once, so that a failing venue fails a whole round of
// concurrent reads together. DOGE_USDT is the market that is delisted.
var chaosTargets = []target{
	{path: "/pairs", stream: "pairs"},
	{path: "/tickers", stream: "tickers"},
	{path: "/contracts", stream: "contracts"},
	{path: "/contract_specs", stream: "contracts"},
	bookTarget("BTC_USDT", "&depth=5"),
	bookTarget("ETH_USDT", ""),
	tradesTarget("trades", "BTC_USDT", "&limit=10"),
	tradesTarget("historical_trades", "ETH_USDT", "&type=sell"),
	bookTarget("SOL_USDT", "&depth=1"),
	bookTarget("BNB_USDT", "&depth=1"),
	bookTarget("XRP_USDT", "&depth=1"),
	bookTarget("AVAX_USDT", "&depth=1"),
	bookTarget("LINK_USDT", "&depth=1"),
	{path: "/orderbook?ticker_id=DOGE_USDT&depth=3", id: "DOGE_USDT", stream: "book", may404: true},
	{path: "/trades?ticker_id=DOGE_USDT&limit=3", id: "DOGE_USDT", stream: "trades", may404: true},
}

func startChaos(t *testing.T, maxStale time.Duration) *chaos {
	venue := apptest.StartVenueSim(t)
	api, a, logs := startLoggedApp(t, chaosArgs(venue.URL, maxStale)...)
	return &chaos{t: t, venue: venue, api: api, app: a, logs: logs, traffic: newTraffic(t, api, a.store, maxStale)}
}

func (c *chaos) figure(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.lines = append(c.lines, line)
	c.t.Log(line)
}

// bookTime returns the venue timestamp of a pair's book as the API serves
// it, or 0 when it does not answer 200.
func (c *chaos) bookTime(id string) int64 {
	resp, err := http.Get(c.api + "/api/public/orderbook?ticker_id=" + id + "&depth=1")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0
	}
	var b struct{ Timestamp int64 }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		c.t.Fatal(err)
	}
	return b.Timestamp
}

// untilFresh polls a pair's book until the API serves one the venue
// produced at or after from, and returns when that was; zero if it was not
// within limit.
func (c *chaos) untilFresh(id string, from time.Time, limit time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if ts := c.bookTime(id); ts >= from.UnixMilli() {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond) // polling a running process with a deadline
	}
	return time.Time{}
}

// oneCycle is the book refresh period, and the slack a shared, noisy machine
// (and the race detector) needs on top of it before a late refresh counts as
// a failure. The figures report the measured times.
const (
	oneCycle     = 350 * time.Millisecond
	cycleSlack   = 1650 * time.Millisecond
	backoffLimit = 30 * time.Second // the poller's cap on transient back-off
)

// rateLimited makes the venue answer one call with status (429 or 418) and
// Retry-After, and checks that no call reaches the venue during the pause and
// that the hot book is fresh within a cycle of its end.
func (c *chaos) rateLimited(status int, retryAfter time.Duration) {
	t := c.t
	name := fmt.Sprintf("%d Retry-After %s", status, retryAfter)
	c.traffic.setPhase(name)
	set := time.Now()
	c.venue.Fault(fmt.Sprintf("status=%d&retry_after=%s&count=1", status, retryAfter))
	var hit time.Time
	if !apptest.WaitFor(10*time.Second, func() bool {
		for _, call := range c.venue.Calls(set) {
			if call.Fault {
				hit = call.At
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s: no call met the fault", name)
	}
	end := hit.Add(retryAfter)
	fresh := c.untilFresh("BTC_USDT", end, retryAfter+10*time.Second)
	// Calls already past the poller's gate when the answer came back may
	// still arrive just after it; anything later is a call during the pause.
	const inFlight = 250 * time.Millisecond
	var during, straggling int
	var lastStraggler time.Duration
	first := time.Time{}
	for _, call := range c.venue.Calls(hit) {
		switch {
		case !call.At.After(hit):
		case call.At.Before(hit.Add(inFlight)):
			straggling++
			lastStraggler = call.At.Sub(hit)
		case call.At.Before(end):
			during++
		case first.IsZero():
			first = call.At
		}
	}
	c.figure("%-22s venue calls during the pause: %d (%d already in flight, the last arriving %s after the answer); "+
		"first call %s after the pause; book fresh %s after the pause",
		name, during, straggling, lastStraggler.Round(time.Millisecond),
		first.Sub(end).Round(time.Millisecond), fresh.Sub(end).Round(time.Millisecond))
	if during != 0 {
		t.Errorf("%s: %d venue calls during the pause", name, during)
	}
	if fresh.IsZero() || fresh.Sub(end) > oneCycle+cycleSlack {
		t.Errorf("%s: book not fresh within %s of the pause's end", name, oneCycle+cycleSlack)
	}
}

// outage runs a fault for hold, heals the venue and measures the recovery:
// how long until the first call reaches the healed venue (the back-off left,
// or the wait for the next scheduled read), and how long until the hot book
// is fresh.
//
// Exponential back-off from 500 ms, each pause at most double the one
// before, leaves less than twice the outage plus one base period when the
// venue heals; more than that means failures that happened together were
// counted as if one had followed the other.
//
// stall is how long a read the fault left hanging may still hold the book
// round after the heal: a round waits for its slowest read and the next one
// is skipped meanwhile, so a fault that holds calls open (a delay, a
// dripping body) can delay the book by up to the venue call timeout.
func (c *chaos) outage(name, query string, hold, stall time.Duration) (resume, fresh time.Duration) {
	t := c.t
	c.traffic.setPhase(name)
	c.venue.Fault(query)
	time.Sleep(hold) // the fault's duration: the venue misbehaves meanwhile, nothing to wait for
	c.traffic.setPhase(name + ", healed")
	healed := time.Now()
	c.venue.Heal()
	at := c.untilFresh("BTC_USDT", healed, backoffLimit+10*time.Second)
	if at.IsZero() {
		t.Fatalf("%s: BTC_USDT book not fresh %s after the venue healed", name, backoffLimit+10*time.Second)
	}
	var first time.Time
	for _, call := range c.venue.Calls(healed) {
		if !call.Fault {
			first = call.At
			break
		}
	}
	resume, fresh = first.Sub(healed), at.Sub(healed)
	c.figure("%-22s held %s; after healing: first venue call %s, book fresh %s (%s after calls resumed)",
		name, hold, resume.Round(time.Millisecond), fresh.Round(time.Millisecond), at.Sub(first).Round(time.Millisecond))
	if limit := 2*hold + time.Second; resume > limit+cycleSlack {
		t.Errorf("%s: the venue healed but no call reached it for %s; an outage of %s justifies at most %s of back-off",
			name, resume.Round(time.Millisecond), hold, limit)
	}
	if limit := oneCycle + stall + cycleSlack; at.Sub(first) > limit {
		t.Errorf("%s: book fresh %s after calls resumed, want within a cycle (%s + %s for a hanging read + %s slack)",
			name, at.Sub(first), oneCycle, stall, cycleSlack)
	}
	return resume, fresh
}

// delist takes DOGEUSDT off the venue for hold. Reads of it fail with 400,
// which must not pause the other pairs; its snapshots age into 502s, and
// once a catalog read has dropped it, 404s. Listed again, it is served
// again: fresh within a cycle if our catalog still lists it, after the next
// catalog read otherwise. gone says which of the two the run expects.
func (c *chaos) delist(hold time.Duration, gone bool) {
	t := c.t
	name := "market delisted"
	c.traffic.setPhase(name)
	c.venue.List("DOGEUSDT", false)
	btc := c.bookTime("BTC_USDT")
	time.Sleep(hold) // the market is away meanwhile, nothing to wait for
	_, listed := c.app.store.Pairs().Lookup("DOGE_USDT")
	if c.bookTime("BTC_USDT") <= btc {
		t.Errorf("%s: BTC_USDT's book did not move while DOGEUSDT was delisted", name)
	}
	if listed == gone {
		t.Errorf("%s: after %s away DOGE_USDT is listed by us: %v, want %v", name, hold, listed, !gone)
	}
	c.traffic.setPhase(name + ", relisted")
	relisted := time.Now()
	c.venue.List("DOGEUSDT", true)
	limit := oneCycle + cycleSlack
	if gone {
		limit += time.Minute // the catalog is read once a minute
	}
	at := c.untilFresh("DOGE_USDT", relisted, limit+10*time.Second)
	if at.IsZero() {
		t.Fatalf("%s: DOGE_USDT not served again within %s of its return", name, limit+10*time.Second)
	}
	c.figure("%-22s away %s, dropped from /pairs: %v; served fresh %s after it returned",
		name, hold, !listed, at.Sub(relisted).Round(time.Millisecond))
	if at.Sub(relisted) > limit {
		t.Errorf("%s: DOGE_USDT fresh %s after it returned, want within %s", name, at.Sub(relisted), limit)
	}
}

// clearOfCatalogRead waits, when needed, until no catalog read (on the
// minute, by the wall clock) falls within the next d.
func clearOfCatalogRead(d time.Duration) {
	next := time.Now().Truncate(time.Minute).Add(time.Minute)
	if time.Until(next) < d+2*time.Second {
		time.Sleep(time.Until(next) + 2*time.Second) // the poller's schedule is the wall clock's minute
	}
}

// finish stops the traffic, reports, and checks the process's own log.
func (c *chaos) finish(stop context.CancelFunc, wait func()) {
	t := c.t
	stop()
	wait()
	c.traffic.report(t)
	warns, errs := c.logs.summary()
	t.Logf("log: %d warnings, %d errors", warns, len(errs))
	for _, e := range errs {
		if strings.Contains(strings.ToLower(e), "panic") {
			t.Errorf("the process logged a panic: %s", e)
		}
	}
	if !strings.HasPrefix(c.bookAnswer(), "200") {
		t.Errorf("after the run BTC_USDT answers %s", c.bookAnswer())
	}
	t.Log("figures:\n" + strings.Join(c.lines, "\n"))
}

func (c *chaos) bookAnswer() string {
	resp, err := http.Get(c.api + "/api/public/orderbook?ticker_id=BTC_USDT&depth=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	return resp.Status
}

// TestChaosShort is the chaos run that fits the ordinary test suite: rate
// limits, a burst of 5xx, truncated JSON, a market that goes away and
// returns, and a flapping venue, under steady traffic.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about half a minute")
	}
	c := startChaos(t, 3*time.Second)
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	wait := c.traffic.run(ctx, 4, 5*time.Millisecond, 1_000_000, chaosTargets)

	c.traffic.setPhase("warm up")
	if c.untilFresh("BTC_USDT", time.Now(), 10*time.Second).IsZero() {
		t.Fatal("BTC_USDT never fresh on a healthy venue")
	}
	c.rateLimited(429, 2*time.Second)
	c.rateLimited(418, 2*time.Second)
	c.outage("5xx burst", "status=503&delay=100ms", 2*time.Second, 0)
	c.outage("truncated JSON", "body=truncated&rate=0.5", 2*time.Second, 0)
	clearOfCatalogRead(5 * time.Second)
	c.delist(4*time.Second, false)
	c.outage("flapping 1s", "status=502&flap=1s", 4*time.Second, 0)
	c.finish(stop, wait)
}
