package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"marketfeed/internal/process"
	"marketfeed/internal/venuetruth"
)

// The recovery run (-recovery) measures what an operator meets when things
// go wrong rather than the steady state: how long a cold start takes and how
// much of the budget it uses, what a planned rotation of every market-stream
// connection costs, and how long the books take to be current again after
// the venue cuts every connection at once. An aggregator reads every pair's
// book and trades once a -round (10 s by default) from /readyz to the end.

// recoveryShare is the share of the pairs a phase waits for: 99.9 %,
// rounded up, so that a phase of fewer than a thousand pairs waits for all.
func recoveryShare(pairs int) int { return (999*pairs + 999) / 1000 }

// Targets of the recovery run (those against the venue's bound are in
// bound.go).
const (
	targetCPU      = 0.25      // of a core in the steady state, one line a stream
	targetCPULines = 0.40      // the same with two lines
	targetRSS      = 250 << 20 // bytes
	// targetBookAge is the age no book may pass while one line's
	// connections are dropped: the other line's events keep every book
	// current.
	targetBookAge = time.Second
)

// recoveryResult is everything the recovery run measures for one count.
type recoveryResult struct {
	Extra, Pairs int
	Budget       int           // marketfeed's weight a minute (marketfeed_venue_weight_budget)
	Round        time.Duration // the aggregator's period
	Lines        int           // connections carrying each stream
	// SyncDepth is the snapshot depth books are synced at, and BookWeight
	// the venue's weight of one such snapshot: what the least weight of a
	// recovery is counted in.
	SyncDepth, BookWeight int

	Ready       time.Duration
	ColdBooks   time.Duration // from the start until 99.9 % of the books were stream-fed
	ColdAnswers time.Duration // until 99.9 % of the pairs had answered 200 for book and trades
	ColdPending int           // pairs still waiting when -cold-timeout passed
	ColdWeight  weightUse     // from the start until ColdBooks
	// ColdLeast is the least weight a cold start must read, ColdBound when
	// the venue's minute allows it at the earliest; ColdAgg the answers and
	// ColdResyncs the resyncs from the start until ColdBooks.
	ColdLeast least
	ColdBound time.Duration
	// ColdSnapshot is the weight the cold start's depth reads had most
	// often: the sync depth marketfeed really used.
	ColdSnapshot int
	ColdAgg      statusCount
	ColdResyncs  map[string]int

	Steady      time.Duration
	SteadyAgg   statusCount
	CPUShare    float64
	MaxRSS      int64
	Connections int
	Rotations   int
	RotResyncs  map[string]int // resyncs by cause over the steady window, refreshes included

	Line lineDrop // one line's connections dropped (two lines only)

	Drop cut // every connection cut, the venue accepting new ones at once
	// Outage is every connection cut and new ones refused for a while
	// (-outage): every market then misses events.
	Outage cut

	// Closes is the venue closing every connection at an age of its own.
	Closes venueCloses

	// Gap is a sequence gap in a few books' diff streams.
	Gap gapPhase

	// Truth is the sampled served books judged against the venue's true
	// book, by phase.
	Truth map[string]venuetruth.Tally
}

// cut is what cutting every market-stream connection cost, from the cut
// until the books were current again and the trade windows whole.
type cut struct {
	Measured bool
	Outage   time.Duration // how long the venue refused new connections after the cut
	// Recovered is from the cut until 99.9 % of the books were newer than
	// it; Pending the books still not when -cold-timeout passed.
	Recovered time.Duration
	Pending   int
	// Agg is the aggregator's answers from the cut to one round after
	// Whole; AggTrades those of the trades routes alone.
	Agg, AggTrades statusCount
	Resyncs        map[string]int
	Suspends       int
	// TradeGaps are the trade windows that missed trades, GapReads the
	// reads of their missing ids, GapsCut the holes given up; Whole is from
	// the cut until no window held a hole, HolesLeft those still holding
	// one when -cold-timeout passed.
	TradeGaps, GapReads, GapsCut int
	Whole                        time.Duration
	HolesLeft                    int
	Weight                       weightUse // REST weight from the cut until Whole
	// SyncWeight is the REST weight from the end of the outage until
	// Recovered: what the books that missed events were synced with.
	SyncWeight weightUse
	// Before is the REST weight of the minute before the cut: what the
	// venue still counted when the recovery began.
	Before int
	// Least is the least weight the recovery must read: a snapshot of
	// every book out of sequence (of every book after an outage, which
	// every market outlasts with events), and the bulk reads. Bound is
	// the earliest the venue's minute allows it, from the cut: the outage,
	// then from the streams' return with what the minute before that held
	// counted. Spent is the weight read from the cut until Recovered.
	Least least
	Bound time.Duration
	Spent int
}

// lineDrop is what the drop of line B's connections cost, with two lines.
type lineDrop struct {
	Measured bool
	Back     time.Duration // from the drop until line B's connections were open again
	Agg      statusCount   // the aggregator's answers from the drop to a round after Back
	Resyncs  map[string]int
	Suspends int
	// OldestAge is the oldest book's age (marketfeed_snapshot_age_seconds
	// {kind="books"}) at its highest over the window, sampled every
	// agePeriod; Over how long it was above targetBookAge. Baseline is
	// the highest over as long a window before the drop.
	OldestAge, Over, Baseline time.Duration
}

// agePeriod is how often the oldest book's age is sampled.
const agePeriod = 250 * time.Millisecond

// ageSampler samples the oldest book's age until stopped.
type ageSampler struct {
	*sampler
	highest, over time.Duration
	err           error
}

func sampleAges(ctx context.Context, opsAddr string) *ageSampler {
	a := &ageSampler{}
	a.sampler = startSampler(agePeriod, func() bool {
		m, err := scrape(ctx, opsAddr)
		if err != nil {
			a.err = err
			return false
		}
		age := time.Duration(m[seriesBookAge] * float64(time.Second))
		a.highest = max(a.highest, age)
		if age > targetBookAge {
			a.over += agePeriod
		}
		return true
	})
	return a
}

// stop ends the sampling and returns the highest age and how long it was
// above targetBookAge.
func (a *ageSampler) stop() (highest, over time.Duration, err error) {
	a.sampler.stop()
	return a.highest, a.over, a.err
}

// answer is one aggregator read.
type answer struct {
	at     time.Time
	pair   string
	kind   string
	status int
	age    time.Duration // a book answered: its age; -1 for anything else
}

// answerLog keeps every answer of the recovery run's aggregator, and
// hands the books it was answered to the sampler that judges them against
// the venue (nil: none).
type answerLog struct {
	mu      sync.Mutex
	all     []answer
	sampler *venuetruth.Sampler
}

func (l *answerLog) record(kind, pair string, status int, body []byte, at time.Time) {
	a := answer{at: at, pair: pair, kind: kind, status: status, age: -1}
	if status == http.StatusOK && kind == "orderbook" {
		if age, _, err := bookAge(body, at); err == nil {
			a.age = age
		}
		if l.sampler != nil {
			l.sampler.Offer(body)
		}
	}
	l.mu.Lock()
	l.all = append(l.all, a)
	l.mu.Unlock()
}

// statuses counts the answers in [from, to).
func (l *answerLog) statuses(from, to time.Time) statusCount { return l.statusesOf("", from, to) }

// statusesOf counts the answers of route kind ("orderbook", "trades"; ""
// for both) in [from, to).
func (l *answerLog) statusesOf(kind string, from, to time.Time) statusCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := statusCount{}
	for _, a := range l.all {
		if !a.at.Before(from) && a.at.Before(to) && (kind == "" || a.kind == kind) {
			s[a.status]++
		}
	}
	return s
}

// allAnswered returns when the need-th pair had answered 200 for both its
// book and its trades (each pair counting from its later first 200), and
// whether need pairs have.
func (l *answerLog) allAnswered(need int) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	type firsts struct{ book, trades time.Time }
	by := map[string]*firsts{}
	for _, a := range l.all {
		if a.status != http.StatusOK {
			continue
		}
		f := by[a.pair]
		if f == nil {
			f = &firsts{}
			by[a.pair] = f
		}
		at := &f.book
		if a.kind == "trades" {
			at = &f.trades
		}
		if at.IsZero() {
			*at = a.at
		}
	}
	var done []time.Time
	for _, f := range by {
		if !f.book.IsZero() && !f.trades.IsZero() {
			done = append(done, later(f.book, f.trades))
		}
	}
	if len(done) < need || need == 0 {
		return time.Time{}, false
	}
	slices.SortFunc(done, time.Time.Compare)
	return done[need-1], true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// metricsScrape is one read of marketfeed's /metrics: every series's value
// by its name and labels as written.
type metricsScrape map[string]float64

// scrape reads marketfeed's metrics.
func scrape(ctx context.Context, opsAddr string) (metricsScrape, error) {
	status, body := get(ctx, newClient(1), "http://"+opsAddr+"/metrics")
	if status != http.StatusOK {
		return nil, fmt.Errorf("marketfeed metrics: status %d", status)
	}
	return parseMetrics(body), nil
}

// parseMetrics reads the Prometheus text format, skipping comments and any
// line whose value does not parse.
func parseMetrics(body []byte) metricsScrape {
	m := metricsScrape{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// byLabel returns the series of name by the value of label, e.g. the
// resyncs by cause.
func (m metricsScrape) byLabel(name, label string) map[string]int {
	out := map[string]int{}
	prefix := name + "{"
	key := label + `="`
	for series, v := range m {
		if !strings.HasPrefix(series, prefix) {
			continue
		}
		i := strings.Index(series, key)
		if i < 0 {
			continue
		}
		rest := series[i+len(key):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			out[rest[:j]] += int(v)
		}
	}
	return out
}

// refreshCauses are the resync causes of a book that stays in sequence and
// served while a deeper snapshot is laid under it: the steady state's
// refreshes, not a book lost by a fault.
var refreshCauses = []string{"short", "depleted"}

// outOfSequence keeps the causes of books that left sequence.
func outOfSequence(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if !slices.Contains(refreshCauses, k) {
			out[k] = v
		}
	}
	return out
}

// since returns each label's growth from before to m, leaving out those
// that did not grow.
func since(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

const (
	seriesStreamBooks = `marketfeed_pairs{part="books",source="stream"}`
	seriesRotations   = `marketfeed_stream_reconnects_total{reason="rotated"}`
	seriesConnections = `marketfeed_stream_connections`
	seriesSuspended   = `marketfeed_books_suspended_total`
	seriesTradeGaps   = `marketfeed_trade_window_gaps_total`
	seriesGapReads    = `marketfeed_trade_window_gap_reads_total`
	seriesGapsCut     = `marketfeed_trade_window_gaps_cut_total`
	seriesHoles       = `marketfeed_trade_window_holes`
	seriesBudget      = `marketfeed_venue_weight_budget`
	seriesBookAge     = `marketfeed_snapshot_age_seconds{kind="books"}`
	seriesClosed      = `marketfeed_stream_reconnects_total{reason="closed"}`
	seriesResyncs     = `marketfeed_book_resyncs_total`
)

// recoveryOne runs the recovery phases for one count of extra markets.
func recoveryOne(ctx context.Context, cfg *config, bins binaries, extra int) (res recoveryResult, err error) {
	res.Extra, res.Round, res.Lines = extra, cfg.round, cfg.lines
	res.SyncDepth, res.BookWeight = cfg.syncDepth, snapshotWeightAt(cfg.syncDepth)
	env, err := startPair(ctx, cfg, bins, extra, streamsOn, "-venue-ws-max-age", cfg.wsMaxAge.String(), "-venue-ws-lines", strconv.Itoa(cfg.lines))
	if err != nil {
		return res, err
	}
	defer env.stop()
	rss := sampleRSS(env.feed.Pid())
	defer rss.stop()
	if err := process.WaitHTTP(ctx, env.feed, "http://"+env.opsAddr+"/readyz", 2*time.Minute); err != nil {
		return res, err
	}
	res.Ready = time.Since(env.t0)
	apiURL := "http://" + env.apiAddr
	pairs, err := fetchPairs(ctx, apiURL)
	if err != nil {
		return res, err
	}
	res.Pairs = len(pairs)
	need := recoveryShare(len(pairs))
	fmt.Fprintf(cfg.stdout, "  ready after %v, %d pairs; an aggregator reads every pair every %v\n", dur(res.Ready), len(pairs), cfg.round)

	samples := venuetruth.NewSampler(cfg.truthEvery)
	samples.SetPhase(phaseCold)
	answers := &answerLog{sampler: samples}
	aggCtx, stopAgg := context.WithCancel(ctx)
	var agg sync.WaitGroup
	agg.Go(func() {
		begin := time.Now()
		aggregate(aggCtx, apiURL, pairs, cfg.round, cfg.workers, begin, begin.Add(24*time.Hour), answers.record)
	})
	defer func() { stopAgg(); agg.Wait() }()

	// Cold start: the stream-fed books from the metrics, each second, and
	// the first 200s from the aggregator's answers.
	deadline := env.t0.Add(cfg.coldTimeout)
	var booksAt, answeredAt time.Time
	for booksAt.IsZero() || answeredAt.IsZero() {
		if time.Now().After(deadline) {
			break
		}
		m, err := scrape(ctx, env.opsAddr)
		if err != nil {
			return res, err
		}
		if booksAt.IsZero() && int(m[seriesStreamBooks]) >= need {
			booksAt = time.Now()
			res.Budget = int(m[seriesBudget])
		}
		if answeredAt.IsZero() {
			if at, ok := answers.allAnswered(need); ok {
				answeredAt = at
			}
		}
		if err := process.Sleep(ctx, time.Second); err != nil {
			return res, err
		}
	}
	if booksAt.IsZero() || answeredAt.IsZero() {
		m, err := scrape(ctx, env.opsAddr)
		if err != nil {
			return res, err
		}
		res.ColdPending = len(pairs) - int(m[seriesStreamBooks])
		return res, fmt.Errorf("cold start: %d books not stream-fed after %v", res.ColdPending, cfg.coldTimeout)
	}
	res.ColdBooks, res.ColdAnswers = booksAt.Sub(env.t0), answeredAt.Sub(env.t0)
	cold, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return res, err
	}
	res.ColdResyncs = since(nil, cold.byLabel(seriesResyncs, "cause"))
	res.ColdAgg = answers.statuses(env.t0, booksAt)
	samples.SetPhase(phaseBetween)
	fmt.Fprintf(cfg.stdout, "  cold start: books %v, answers %v; steady state for %v (connections replaced every %v)\n",
		dur(res.ColdBooks), dur(res.ColdAnswers), cfg.duration, cfg.wsMaxAge)

	// Steady state, over which every connection is replaced at least once.
	if err := process.Sleep(ctx, cfg.round); err != nil {
		return res, err
	}
	w, err := measureWindow(ctx, env, cfg.duration,
		func() { samples.SetPhase(phaseSteady) }, func() { samples.SetPhase(phaseBetween) })
	if err != nil {
		return res, err
	}
	s0, s1, m0, m1 := w.before, w.after, w.start, w.end
	res.Steady = m1.Sub(m0)
	res.CPUShare = float64(w.cpu) / float64(res.Steady)
	res.MaxRSS = rss.stop()
	res.SteadyAgg = answers.statuses(m0, m1)
	res.Connections = int(s1[seriesConnections])
	res.Rotations = int(s1[seriesRotations] - s0[seriesRotations])
	res.RotResyncs = since(s0.byLabel(seriesResyncs, "cause"), s1.byLabel(seriesResyncs, "cause"))

	if cfg.lines == 2 {
		fmt.Fprintf(cfg.stdout, "  steady state done; cutting line B's connections\n")
		samples.SetPhase(phaseLine)
		if res.Line, err = dropLine(ctx, cfg, env, answers); err != nil {
			return res, err
		}
		samples.SetPhase(phaseBetween)
	}

	// Every connection cut at once; then, with -outage, cut and refused
	// for a while.
	fmt.Fprintf(cfg.stdout, "  cutting every market-stream connection\n")
	samples.SetPhase(phaseDrop)
	if res.Drop, err = cutAll(ctx, cfg, env, answers, pairs, 0, res.Budget, res.BookWeight); err != nil {
		return res, err
	}
	samples.SetPhase(phaseBetween)
	if cfg.outage > 0 {
		if err := settle(ctx, cfg); err != nil {
			return res, err
		}
		fmt.Fprintf(cfg.stdout, "  cutting every market-stream connection, refused for %v\n", cfg.outage)
		samples.SetPhase(phaseOutage)
		if res.Outage, err = cutAll(ctx, cfg, env, answers, pairs, cfg.outage, res.Budget, res.BookWeight); err != nil {
			return res, err
		}
		samples.SetPhase(phaseBetween)
	}

	if err := settle(ctx, cfg); err != nil {
		return res, err
	}
	fmt.Fprintf(cfg.stdout, "  the venue closing every connection at %v of age\n", phaseCloseAge(cfg.wsMaxAge))
	samples.SetPhase(phaseCloses)
	if res.Closes, err = closeOnSchedule(ctx, cfg, env, answers); err != nil {
		return res, err
	}
	samples.SetPhase(phaseBetween)
	if cfg.gaps > 0 {
		if err := settle(ctx, cfg); err != nil {
			return res, err
		}
		fmt.Fprintf(cfg.stdout, "  a sequence gap in %d books' diff streams\n", min(cfg.gaps, len(pairs)))
		if res.Gap, err = gapBooks(ctx, cfg, env, answers, pairs, samples); err != nil {
			return res, err
		}
	}
	samples.SetPhase("")

	calls, err := fetchCalls(ctx, env.venueURL, env.t0)
	if err != nil {
		return res, err
	}
	res.ColdWeight = weightIn(calls, env.t0, booksAt)
	res.ColdLeast = leastWeight(len(pairs), res.BookWeight, calls, env.t0, booksAt)
	res.ColdSnapshot = commonWeight(calls, "/fapi/v1/depth", env.t0, booksAt)
	res.ColdBound = recoveryBound(calls, env.t0, res.Budget, res.ColdLeast.Total())
	fmt.Fprintf(cfg.stdout, "  judging the sampled books against the venue's\n")
	res.Truth = samples.Judge(ctx, venuetruth.NewJudge(env.venueURL, newClient(4)), fullDepth)
	return res, nil
}

// settle waits -settle after one venue-wide fault's recovery, before the
// next: each fault is measured from the steady state, not from the last
// one's syncs, which the venue counts for a minute after they were read
// and which would leave the next recovery that much less of its budget.
func settle(ctx context.Context, cfg *config) error {
	if cfg.settle <= 0 {
		return nil
	}
	fmt.Fprintf(cfg.stdout, "  settling for %v\n", cfg.settle)
	return process.Sleep(ctx, cfg.settle)
}

// cutAll cuts every market-stream connection, the venue refusing new ones
// for outage, and measures what that cost: until 99.9 % of the books are
// newer than the cut, then until no trade window holds a hole, then one
// more round for the aggregator's reads.
func cutAll(ctx context.Context, cfg *config, env *pair, answers *answerLog, pairs []string, outage time.Duration, budget, bookWeight int) (c cut, err error) {
	c.Measured, c.Outage = true, outage
	s1, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return c, err
	}
	at := time.Now()
	url := env.venueURL + "/_control/drop"
	if outage > 0 {
		url += "?for=" + outage.String()
	}
	if status, _ := send(ctx, newClient(1), http.MethodPost, url); status/100 != 2 {
		return c, fmt.Errorf("venuesim drop: status %d", status)
	}
	deadline := at.Add(cfg.coldTimeout)
	probe, err := probeBooks(ctx, "http://"+env.apiAddr, pairs, recoveryShare(len(pairs)), time.Second, deadline, 0, newerThan(at))
	if err != nil {
		return c, err
	}
	c.Recovered, c.Pending = probe.end.Sub(at), probe.pending
	var whole time.Time
	for {
		m, err := scrape(ctx, env.opsAddr)
		if err != nil {
			return c, err
		}
		whole, c.HolesLeft = time.Now(), int(m[seriesHoles])
		if c.HolesLeft == 0 || whole.After(deadline) {
			break
		}
		if err := process.Sleep(ctx, time.Second); err != nil {
			return c, err
		}
	}
	c.Whole = whole.Sub(at)
	// One more round, so that the aggregator's reads of the window are in.
	if err := process.Sleep(ctx, cfg.round); err != nil {
		return c, err
	}
	d1, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return c, err
	}
	c.Agg = answers.statuses(at, whole.Add(cfg.round))
	c.AggTrades = answers.statusesOf("trades", at, whole.Add(cfg.round))
	c.Resyncs = since(s1.byLabel(seriesResyncs, "cause"), d1.byLabel(seriesResyncs, "cause"))
	c.Suspends = int(d1[seriesSuspended] - s1[seriesSuspended])
	c.TradeGaps = int(d1[seriesTradeGaps] - s1[seriesTradeGaps])
	c.GapReads = int(d1[seriesGapReads] - s1[seriesGapReads])
	c.GapsCut = int(d1[seriesGapsCut] - s1[seriesGapsCut])
	calls, err := fetchCalls(ctx, env.venueURL, env.t0)
	if err != nil {
		return c, err
	}
	c.Weight = weightIn(calls, at, whole.Add(time.Millisecond))
	c.Before = weightIn(calls, at.Add(-time.Minute), at).Total
	c.SyncWeight = weightIn(calls, at.Add(outage), probe.end.Add(time.Millisecond))
	c.Spent = weightIn(calls, at, probe.end.Add(time.Millisecond)).Total
	// Through an outage every market has events the books miss; a cut the
	// venue lets back at once costs a snapshot only of the books that lost
	// one.
	books := total(outOfSequence(c.Resyncs))
	if outage > 0 {
		books = len(pairs)
	}
	back := at.Add(outage)
	c.Least = leastWeight(books, bookWeight, calls, at, probe.end.Add(time.Millisecond))
	c.Bound = outage + recoveryBound(calls, back, budget, c.Least.Total())
	return c, nil
}

// dropLine cuts line B's connections and measures what that cost until a
// round after they are back: with the other line carrying every event,
// nothing at all.
func dropLine(ctx context.Context, cfg *config, env *pair, answers *answerLog) (lineDrop, error) {
	ld := lineDrop{Measured: true}
	b0, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return ld, err
	}
	// A baseline of the oldest book's age over as long as the drop is
	// given, to tell what the drop adds.
	base := sampleAges(ctx, env.opsAddr)
	if err := process.Sleep(ctx, cfg.round); err != nil {
		return ld, err
	}
	if ld.Baseline, _, err = base.stop(); err != nil {
		return ld, err
	}
	conns := b0[seriesConnections]
	ages := sampleAges(ctx, env.opsAddr)
	at := time.Now()
	if status, _ := send(ctx, newClient(1), http.MethodPost, env.venueURL+"/_control/drop?line=B"); status/100 != 2 {
		return ld, fmt.Errorf("venuesim drop of line B: status %d", status)
	}
	// Back: every connection that closed has been dialled again.
	for {
		m, err := scrape(ctx, env.opsAddr)
		if err != nil {
			return ld, err
		}
		if m[seriesClosed] >= b0[seriesClosed]+conns/2 && m[seriesConnections] >= conns {
			ld.Back = time.Since(at)
			break
		}
		if time.Since(at) > time.Minute {
			return ld, fmt.Errorf("line B not back a minute after its drop: %v of %v connections", m[seriesConnections], conns)
		}
		if err := process.Sleep(ctx, agePeriod); err != nil {
			return ld, err
		}
	}
	if err := process.Sleep(ctx, cfg.round); err != nil {
		return ld, err
	}
	if ld.OldestAge, ld.Over, err = ages.stop(); err != nil {
		return ld, err
	}
	ld.Agg = answers.statuses(at, time.Now())
	b1, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return ld, err
	}
	ld.Resyncs = since(b0.byLabel(seriesResyncs, "cause"), b1.byLabel(seriesResyncs, "cause"))
	ld.Suspends = int(b1[seriesSuspended] - b0[seriesSuspended])
	return ld, nil
}

// newerThan accepts a book whose timestamp is after at.
func newerThan(at time.Time) func(body []byte) bool {
	after := at.UnixMilli()
	return func(body []byte) bool {
		var b struct {
			Timestamp int64 `json:"timestamp"`
		}
		return json.Unmarshal(body, &b) == nil && b.Timestamp > after
	}
}

// recoveryRows turns one count's recovery result into the table's lines.
func recoveryRows(r recoveryResult) []row {
	var out []row
	add := func(figure, value, target, v string) { out = append(out, row{figure, value, target, v}) }
	add("marketfeed ready (/readyz)", dur(r.Ready), "", "")
	// The depth reads of the cold start say what marketfeed synced at: a
	// run whose -sync-depth is not marketfeed's would count the least
	// weight in the wrong snapshots.
	add("snapshot depth books are synced at (-sync-depth)", fmt.Sprintf("%d levels, weight %d; the cold start's depth reads weighed %d most often", r.SyncDepth, r.BookWeight, r.ColdSnapshot),
		fmt.Sprintf("the cold start's: %d", r.BookWeight), verdict(r.ColdSnapshot == r.BookWeight))
	add("cold start: 99.9 % of books stream-fed", dur(r.ColdBooks), "", "")
	// The aggregator sees a pair's first 200 when it reads the pair, up to
	// a round after the pair could answer.
	add("cold start: 99.9 % of pairs' book and trades 200", dur(r.ColdAnswers), "≤ the books' + a round",
		verdict(r.ColdAnswers <= r.ColdBooks+r.Round))
	coldShare := 0.0
	if r.Budget > 0 {
		coldShare = r.ColdWeight.PerMin / float64(r.Budget)
	}
	add("cold start: REST weight", fmt.Sprintf("%d, %.0f a minute = %.0f%% of the budget (%d)", r.ColdWeight.Total, r.ColdWeight.PerMin, 100*coldShare, r.Budget), "", "")
	add("cold start: weight by path", byPath(r.ColdWeight), "", "")
	add("steady: aggregator 200 share", fmt.Sprintf("%.3f%% of %d", 100*r.SteadyAgg.okShare(), r.SteadyAgg.total()), fmt.Sprintf("≥ %.1f%%", 100*targetOKShare),
		verdict(r.SteadyAgg.okShare() >= targetOKShare))
	add("steady: other statuses", r.SteadyAgg.others(), "", "")
	cpuTarget := targetCPU
	if r.Lines == 2 {
		cpuTarget = targetCPULines
	}
	add("lines: connections carrying each stream", strconv.Itoa(max(r.Lines, 1)), "", "")
	add("steady: CPU", fmt.Sprintf("%.1f%% of a core", 100*r.CPUShare), fmt.Sprintf("≤ %.0f%%", 100*cpuTarget), verdict(r.CPUShare <= cpuTarget))
	add("peak RSS", fmt.Sprintf("%.1f MiB", float64(r.MaxRSS)/(1<<20)), fmt.Sprintf("≤ %d MiB", targetRSS>>20), verdict(r.MaxRSS <= targetRSS))
	add("rotation: connections replaced", fmt.Sprintf("%d over %s (%d connections)", r.Rotations, dur(r.Steady), r.Connections), "every connection", verdict(r.Rotations >= r.Connections))
	lost := outOfSequence(r.RotResyncs)
	add("rotation: books out of sequence", causes(lost), "0", verdict(total(lost) == 0))
	add("steady: refreshes of books in sequence", causes(since(outOfSequence(r.RotResyncs), r.RotResyncs)), "", "")
	out = append(out, lineRows(r.Line)...)
	out = append(out, cutRows("every connection dropped", r.Pairs, r.Budget, r.Drop)...)
	out = append(out, cutRows(fmt.Sprintf("every connection dropped, refused for %v", r.Outage.Outage), r.Pairs, r.Budget, r.Outage)...)
	out = append(out, venueCloseRows(r.Closes)...)
	out = append(out, gapRows(r.Gap)...)
	for _, p := range recoveryPhases(r) {
		out = append(out, p.rows()...)
	}
	return out
}

// recoveryPhases are the run's phases, as the phase table prints and
// judges them.
func recoveryPhases(r recoveryResult) []phase {
	ps := []phase{{
		Name: phaseCold, Time: r.ColdBooks, Bound: r.ColdBound, Bounded: true, Least: r.ColdLeast, Spent: r.ColdWeight.Total,
		Judged: true, Truth: r.Truth[phaseCold], Resyncs: r.ColdResyncs, Agg: r.ColdAgg,
	}, {
		Name: phaseSteady, Truth: r.Truth[phaseSteady], Resyncs: r.RotResyncs, Agg: r.SteadyAgg, Quiet: true,
	}}
	if r.Line.Measured {
		ps = append(ps, phase{Name: phaseLine, Truth: r.Truth[phaseLine], Resyncs: r.Line.Resyncs, Agg: r.Line.Agg, Quiet: true})
	}
	for _, c := range []struct {
		name string
		cut  cut
	}{{phaseDrop, r.Drop}, {phaseOutage, r.Outage}} {
		if !c.cut.Measured {
			continue
		}
		ps = append(ps, phase{
			Name: c.name, Time: c.cut.Recovered, Bound: c.cut.Bound, Bounded: true, Least: c.cut.Least, Spent: c.cut.Spent,
			Judged: c.cut.Outage > 0, Truth: r.Truth[c.name], Resyncs: c.cut.Resyncs, Agg: c.cut.Agg,
		})
	}
	if r.Closes.Measured {
		ps = append(ps, phase{Name: phaseCloses, Truth: r.Truth[phaseCloses], Resyncs: r.Closes.Resyncs, Agg: r.Closes.Agg})
	}
	if r.Gap.Measured {
		ps = append(ps, phase{Name: phaseGap, Time: r.Gap.Recovered, Truth: r.Truth[phaseGap], Resyncs: r.Gap.Resyncs, Agg: r.Gap.Agg})
	}
	if t, ok := r.Truth[phaseBetween]; ok {
		ps = append(ps, phase{Name: phaseBetween, Truth: t})
	}
	return ps
}

// cutGrace is how long books that lost no event may take to be newer than
// a cut: the connections' replacement and a publication.
const cutGrace = 10 * time.Second

// cutRows are the table's lines for one cut of every connection, named
// name. The books that missed events are synced again at the budget's
// target share, after the outage: their time is at most a cold start's of
// those books.
func cutRows(name string, pairs, budget int, c cut) []row {
	if !c.Measured {
		return nil
	}
	var out []row
	add := func(figure, value, target, v string) { out = append(out, row{name + ": " + figure, value, target, v}) }
	resynced := total(outOfSequence(c.Resyncs))
	// Books that lost no event are newer than the cut once the connections
	// are back and a publication is out: cutGrace; books that did, within
	// the venue's bound on their snapshots (the phase table judges an
	// outage's time against it).
	target := max(c.Bound+boundSlack, cutGrace)
	recovered := dur(c.Recovered)
	if c.Pending > 0 {
		recovered = fmt.Sprintf("%s, %d books never newer", recovered, c.Pending)
	}
	add("99.9 % of books newer than the drop", recovered, "≤ "+dur(target), verdict(c.Recovered <= target && c.Pending <= pairs-recoveryShare(pairs)))
	add("books out of sequence, by cause", fmt.Sprintf("%s (%.1f%% of books); %d suspended; refreshes: %s",
		causes(outOfSequence(c.Resyncs)), 100*float64(resynced)/float64(max(pairs, 1)), c.Suspends,
		causes(since(outOfSequence(c.Resyncs), c.Resyncs))), "", "")
	whole := dur(c.Whole)
	if c.HolesLeft > 0 {
		whole = fmt.Sprintf("%s, %d windows still holding one", whole, c.HolesLeft)
	}
	add("trade windows that missed trades", fmt.Sprintf("%d; %d reads of the missing ids; %d given up; none left after %s",
		c.TradeGaps, c.GapReads, c.GapsCut, whole), "", "")
	add("REST weight", fmt.Sprintf("%d (%s)", c.Weight.Total, byPath(c.Weight)), "", "")
	add("REST weight of the minute before", strconv.Itoa(c.Before), "", "")
	add("the venue's bound: the least weight, and when the minute allows it", fmt.Sprintf("%s; %s after the drop", c.Least, dur(c.Bound)), "", "")
	// A rate over less than a minute says nothing of the budget: the
	// venue's window slides over a whole minute.
	if budget > 0 && len(c.SyncWeight.Minutes) > 0 {
		add("REST weight while the books synced", fmt.Sprintf("%.0f a minute = %.0f%% of the budget (%d)",
			c.SyncWeight.PerMin, 100*c.SyncWeight.PerMin/float64(budget), budget), "", "")
	}
	// A cut the venue lets the connections back from at once costs the
	// clients nothing: both lines' connections are replaced within a
	// second and every book and window goes on where it was. Through an
	// outage longer than max-stale the streams cannot vouch for anything,
	// and what REST can read in its place is bound by the budget: those
	// answers are reported, not held to a target.
	share, met := "", func(statusCount) string { return "" }
	if c.Outage == 0 {
		share = fmt.Sprintf("≥ %.1f%%", 100*targetOKShare)
		met = func(s statusCount) string { return verdict(s.okShare() >= targetOKShare) }
	}
	add("aggregator answers", fmt.Sprintf("%.3f%% 200 of %d; other: %s", 100*c.Agg.okShare(), c.Agg.total(), c.Agg.others()), share, met(c.Agg))
	add("aggregator answers for trades", fmt.Sprintf("%.3f%% 200 of %d; other: %s", 100*c.AggTrades.okShare(), c.AggTrades.total(), c.AggTrades.others()), share, met(c.AggTrades))
	return out
}

// lineRows are the table's lines for one line's drop.
func lineRows(l lineDrop) []row {
	if !l.Measured {
		return []row{{"one line dropped", "not measured: one line (-lines 2 measures it)", "", ""}}
	}
	bad := l.Agg.total() - l.Agg[http.StatusOK]
	lost := outOfSequence(l.Resyncs)
	return []row{
		{"one line dropped: line back", dur(l.Back), "", ""},
		{"one line dropped: aggregator answers not 200", fmt.Sprintf("%d of %d (%s)", bad, l.Agg.total(), l.Agg.others()), "0", verdict(bad == 0)},
		{"one line dropped: books out of sequence; suspended", fmt.Sprintf("%s; %d", causes(lost), l.Suspends), "0; 0", verdict(total(lost) == 0 && l.Suspends == 0)},
		{"one line dropped: oldest book", fmt.Sprintf("%s at most (%s before the drop); over %s for %s", dur(l.OldestAge), dur(l.Baseline), dur(targetBookAge), dur(l.Over)),
			"0 s over " + dur(targetBookAge), verdict(l.Over == 0)},
	}
}

// causes lists counts by cause, "none" without any.
func causes(m map[string]int) string {
	if total(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func total(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// runRecovery runs the recovery phases for every count and prints a table
// for each, then the figures side by side.
func runRecovery(ctx context.Context, cfg *config, bins binaries) error {
	var results []recoveryResult
	for _, extra := range cfg.extras {
		fmt.Fprintf(cfg.stdout, "\nrecovery: extra %d\n", extra)
		r, err := recoveryOne(ctx, cfg, bins, extra)
		if err != nil {
			return fmt.Errorf("extra %d: %w", extra, err)
		}
		writeTable(cfg.stdout, fmt.Sprintf("recovery, extra %d: %d pairs", r.Extra, r.Pairs), recoveryRows(r))
		writePhases(cfg.stdout, fmt.Sprintf("recovery by phase, extra %d: %d pairs, budget %d a minute, books synced at %d levels (weight %d)",
			r.Extra, r.Pairs, r.Budget, r.SyncDepth, r.BookWeight), recoveryPhases(r))
		results = append(results, r)
	}
	var missedAll []string
	for _, r := range results {
		for _, m := range missedFigures(recoveryRows(r)) {
			missedAll = append(missedAll, fmt.Sprintf("extra %d: %s", r.Extra, m))
		}
	}
	if len(missedAll) == 0 {
		fmt.Fprintln(cfg.stdout, "\nevery target met")
		return nil
	}
	fmt.Fprintf(cfg.stdout, "\n%s:\n  %s\n", missed, strings.Join(missedAll, "\n  "))
	return nil
}
