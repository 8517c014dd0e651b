package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"marketfeed/internal/process"
	"marketfeed/internal/venuetruth"
)

// streamMode is how marketfeed is told about market streams.
type streamMode string

const (
	streamsOn  streamMode = "on"
	streamsOff streamMode = "off"
	// streamsOmitted passes neither stream flag: a marketfeed that predates
	// them, polling REST only.
	streamsOmitted streamMode = "omitted"
)

// result is everything measured for one configuration.
type result struct {
	Extra   int
	Streams streamMode
	Pairs   int

	Ready       time.Duration // from marketfeed's start to /readyz 200
	ColdStart   time.Duration // from marketfeed's start to every pair's book answering 200
	ColdPending int           // pairs whose book never answered 200 within -cold-timeout
	// ColdRelapsed counts the pairs whose book answered 200 during the cold
	// start and later did not, or answered a book older than coldStaleAge,
	// before the cold start ended (streams only); ColdRelapses those
	// answers, ColdStale the 200s among them.
	ColdRelapsed, ColdRelapses, ColdStale int
	ColdWeight                            weightUse

	Measured  time.Duration // the length of the measured run
	HotRate   int           // reads a second the hot client aimed at
	Agg, Hot  statusCount
	BadBodies int // 200 answers that did not decode
	// ShortBooks counts the aggregator's book answers with fewer than
	// fullDepth levels on a side: a book whose refresh waits. FewestLevels
	// is the shortest side among them.
	ShortBooks   int
	FewestLevels int
	NoTrades     int // trade answers with an empty list
	BookAge      percentiles
	TradeLag     percentiles
	HotBookAge   percentiles
	Steady       weightUse
	// Contracts counts the statuses of /contracts, read every
	// contractsEvery; MarkAge is every listed contract's mark age over
	// them, FewestContracts the fewest contracts an answer listed (-1:
	// none answered), and WithInterest and OldestInterest how many
	// contracts of the last answer had an open interest and the oldest's
	// age.
	Contracts       statusCount
	MarkAge         percentiles
	FewestContracts int
	WithInterest    int
	OldestInterest  time.Duration

	// ColdTruth and Truth are the sampled books of the cold start and of
	// the measured run judged against the venue's true book.
	ColdTruth, Truth venuetruth.Tally

	CPUShare float64 // marketfeed's CPU time over the measured run / its length
	MaxRSS   int64   // bytes, sampled over the whole configuration
}

// collector gathers answers from concurrent readers.
type collector struct {
	mu        sync.Mutex
	agg, hot  statusCount
	badBodies int
	noTrades  int
	short     int // aggregator book answers under fullDepth levels a side
	fewest    int // the fewest levels a side among them
	bookAges  []time.Duration
	lags      []time.Duration
	hotAges   []time.Duration
	// The derivatives aggregator's reads of /contracts: their statuses,
	// every item's mark age, and the last answer's reading.
	contracts     statusCount
	markAges      []time.Duration
	fewestItems   int
	lastContracts contractsRead
	// samples keeps the aggregator's books to be judged against the
	// venue's (nil: none).
	samples *venuetruth.Sampler
}

// fullDepth is the levels a side of a full book answer holds: the API's
// default and ceiling, and what every simulated market has.
const fullDepth = 100

func newCollector() *collector {
	return &collector{agg: statusCount{}, hot: statusCount{}, contracts: statusCount{}, fewestItems: -1}
}

// recordContracts files one /contracts answer.
func (c *collector) recordContracts(status int, body []byte, at time.Time) {
	var r contractsRead
	var err error
	if status == http.StatusOK {
		r, err = readContracts(body, at)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.contracts[status]++
	switch {
	case err != nil:
		c.badBodies++
	case status == http.StatusOK:
		c.markAges = append(c.markAges, r.markAges...)
		if c.fewestItems < 0 || r.items < c.fewestItems {
			c.fewestItems = r.items
		}
		c.lastContracts = r
	}
}

// contractsEvery is how often the derivatives aggregator reads /contracts:
// every pair's contract at once, as a derivatives aggregator polls.
const contractsEvery = 5 * time.Second

// contractsClient reads /contracts every contractsEvery until end.
func contractsClient(ctx context.Context, apiURL string, end time.Time, col *collector) {
	client := newClient(1)
	tick := time.NewTicker(contractsEvery)
	defer tick.Stop()
	for time.Now().Before(end) {
		status, body := get(ctx, client, apiURL+"/api/public/contracts")
		if ctx.Err() != nil {
			return
		}
		col.recordContracts(status, body, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// record files one answer. status is 0 for a transport error.
func (c *collector) record(hot bool, kind string, status int, body []byte, at time.Time) {
	var age time.Duration
	var hasAge bool
	var err error
	levels := fullDepth
	if status == http.StatusOK {
		switch kind {
		case "orderbook":
			age, levels, err = bookAge(body, at)
			hasAge = err == nil
		case "trades":
			age, hasAge, err = tradeLag(body, at)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := c.agg
	if hot {
		counts = c.hot
	}
	if !hot && c.samples != nil && status == http.StatusOK && kind == "orderbook" {
		c.samples.Offer(body)
	}
	counts[status]++
	if !hot && err == nil && levels < fullDepth {
		if c.short == 0 || levels < c.fewest {
			c.fewest = levels
		}
		c.short++
	}
	switch {
	case err != nil:
		c.badBodies++
	case status == http.StatusOK && kind == "trades" && !hasAge:
		c.noTrades++
	case !hasAge:
	case hot && kind == "orderbook":
		c.hotAges = append(c.hotAges, age)
	case hot:
	case kind == "orderbook":
		c.bookAges = append(c.bookAges, age)
	default:
		c.lags = append(c.lags, age)
	}
}

// get reads url and returns its status (0 for a transport error) and body.
func get(ctx context.Context, client *http.Client, u string) (int, []byte) {
	return send(ctx, client, http.MethodGet, u)
}

// send sends an empty request and returns the status (0 for a transport
// error) and the body.
func send(ctx context.Context, client *http.Client, method, u string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, body
}

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns},
	}
}

func routeURL(base, kind, pair string) string {
	return base + "/api/public/" + kind + "?ticker_id=" + url.QueryEscape(pair)
}

// sweepOne starts a venue and a feed for one configuration, measures it and
// stops both. An error means the configuration could not be run at all.
func sweepOne(ctx context.Context, cfg *config, bins binaries, extra int, mode streamMode) (res result, err error) {
	res = result{Extra: extra, Streams: mode, HotRate: cfg.hotRate}
	env, err := startPair(ctx, cfg, bins, extra, mode)
	if err != nil {
		return res, err
	}
	defer env.stop()
	feed, t0, venueURL, opsAddr, apiAddr := env.feed, env.t0, env.venueURL, env.opsAddr, env.apiAddr
	rss := sampleRSS(feed.Pid())
	defer rss.stop()

	if err := process.WaitHTTP(ctx, feed, "http://"+opsAddr+"/readyz", 2*time.Minute); err != nil {
		return res, err
	}
	res.Ready = time.Since(t0)
	apiURL := "http://" + apiAddr
	pairs, err := fetchPairs(ctx, apiURL)
	if err != nil {
		return res, err
	}
	res.Pairs = len(pairs)
	fmt.Fprintf(cfg.stdout, "  ready after %v, %d pairs; waiting for every book\n", res.Ready.Round(time.Millisecond), len(pairs))

	// Over the streams every pair is kept once synced, so a book that
	// answered must go on answering; over REST alone a cold load's answer
	// lasts only while requests keep the pair hot.
	var recheck time.Duration
	if mode == streamsOn {
		recheck = coldStaleAge
	}
	// The first book each pair answers is sampled, then the aggregator's.
	samples := venuetruth.NewSampler(cfg.truthEvery)
	samples.SetPhase(phaseCold)
	cold, err := probeBooks(ctx, apiURL, pairs, len(pairs), cfg.coldInterval, t0.Add(cfg.coldTimeout),
		recheck, func(body []byte) bool { samples.Offer(body); return true })
	if err != nil {
		return res, err
	}
	coldEnd := cold.end
	res.ColdStart, res.ColdPending = coldEnd.Sub(t0), cold.pending
	res.ColdRelapsed, res.ColdRelapses, res.ColdStale = cold.relapsed, cold.relapses, cold.stale
	fmt.Fprintf(cfg.stdout, "  cold start %v (%d books pending, %d answered and then did not %v); measuring for %v\n",
		res.ColdStart.Round(time.Millisecond), cold.pending, cold.relapsed, cold.relapsedIDs, cfg.duration)
	for _, how := range cold.relapsedHow {
		fmt.Fprintf(cfg.stdout, "    relapsed: %s after the probe began\n", how)
	}

	col := newCollector()
	col.samples = samples
	samples.SetPhase(phaseSteady)
	cpu0, err := readCPU(feed.Pid())
	if err != nil {
		return res, err
	}
	m0 := time.Now()
	end := m0.Add(cfg.duration)
	var wg sync.WaitGroup
	wg.Go(func() {
		aggregate(ctx, apiURL, pairs, cfg.round, cfg.workers, m0, end, func(kind, _ string, status int, body []byte, at time.Time) {
			col.record(false, kind, status, body, at)
		})
	})
	wg.Go(func() { contractsClient(ctx, apiURL, end, col) })
	if cfg.hotRate > 0 {
		hotPair := cfg.hotPair
		if hotPair == "" {
			hotPair = pairs[0]
		}
		wg.Go(func() { hotClient(ctx, apiURL, hotPair, cfg.hotRate, end, col) })
	}
	// The run ends at end, not when the last read in flight comes back: a
	// read the feed holds for seconds would otherwise stretch the window
	// the CPU and the weight are measured over. Those reads still count.
	if err := process.Sleep(ctx, time.Until(end)); err != nil {
		return res, err
	}
	m1 := time.Now()
	cpu1, err := readCPU(feed.Pid())
	if err != nil {
		return res, fmt.Errorf("marketfeed during the run: %w", err)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Measured = m1.Sub(m0)
	res.CPUShare = float64(cpu1-cpu0) / float64(res.Measured)

	calls, err := fetchCalls(ctx, venueURL, t0)
	if err != nil {
		return res, err
	}
	res.ColdWeight = weightIn(calls, t0, coldEnd)
	res.Steady = weightIn(calls, m0, m1)

	col.mu.Lock()
	res.Agg, res.Hot, res.BadBodies, res.NoTrades, res.ShortBooks = col.agg, col.hot, col.badBodies, col.noTrades, col.short
	res.FewestLevels = col.fewest
	res.BookAge, res.TradeLag, res.HotBookAge = summarize(col.bookAges), summarize(col.lags), summarize(col.hotAges)
	res.Contracts, res.MarkAge, res.FewestContracts = col.contracts, summarize(col.markAges), col.fewestItems
	res.WithInterest, res.OldestInterest = col.lastContracts.withInterest, col.lastContracts.oldestInterest
	col.mu.Unlock()
	res.MaxRSS = rss.stop()
	samples.SetPhase("")
	truth := samples.Judge(ctx, venuetruth.NewJudge(venueURL, newClient(4)), fullDepth)
	res.ColdTruth, res.Truth = truth[phaseCold], truth[phaseSteady]
	return res, nil
}

// binaries are the two commands the sweep runs.
type binaries struct{ venuesim, marketfeed string }

// pair is a running venuesim and the marketfeed that reads it.
type pair struct {
	venue, feed      *process.Proc
	t0               time.Time // when marketfeed was started
	venueURL         string
	opsAddr, apiAddr string
}

// startPair starts venuesim with extra markets and Binance's weight limit,
// then marketfeed on it with the given stream mode and -marketfeed-args,
// each on free loopback ports and logging into the work directory.
func startPair(ctx context.Context, cfg *config, bins binaries, extra int, mode streamMode, args ...string) (*pair, error) {
	venueAddr, err1 := process.FreeAddr()
	apiAddr, err2 := process.FreeAddr()
	opsAddr, err3 := process.FreeAddr()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	tag := fmt.Sprintf("extra%d-%s", extra, mode)
	venueArgv := []string{bins.venuesim, "-listen", venueAddr, "-extra", strconv.Itoa(extra), "-weight-limit", strconv.Itoa(cfg.weightLimit)}
	if cfg.depthWindow > 0 {
		venueArgv = append(venueArgv, "-depth-window", strconv.Itoa(cfg.depthWindow))
	}
	venue, err := process.Start("venuesim", filepath.Join(cfg.workDir, "venuesim-"+tag+".log"), process.Options{}, venueArgv...)
	if err != nil {
		return nil, err
	}
	e := &pair{venue: venue, venueURL: "http://" + venueAddr, opsAddr: opsAddr, apiAddr: apiAddr}
	if err := process.WaitHTTP(ctx, venue, e.venueURL+"/_control/stats", 30*time.Second); err != nil {
		venue.Stop()
		return nil, err
	}
	argv := []string{bins.marketfeed,
		"-venue", "binance", "-venue-url", e.venueURL,
		"-rate-limit", "0", "-ops-listen", opsAddr, "-listen", apiAddr}
	if mode != streamsOmitted {
		argv = append(argv, "-venue-ws-url", "ws://"+venueAddr, "-venue-streams", string(mode))
	}
	argv = append(append(argv, args...), cfg.marketfeedArgs...)
	e.t0 = time.Now()
	if e.feed, err = process.Start("marketfeed", filepath.Join(cfg.workDir, "marketfeed-"+tag+".log"), process.Options{}, argv...); err != nil {
		venue.Stop()
		return nil, err
	}
	return e, nil
}

// stop ends both processes, marketfeed first.
func (e *pair) stop() {
	e.feed.Stop()
	e.venue.Stop()
}

// fetchPairs reads the pair list, retrying briefly: /readyz says pairs are
// loaded, but a list must not be empty for a sweep to mean anything.
func fetchPairs(ctx context.Context, apiURL string) ([]string, error) {
	client := newClient(1)
	var last error
	for range 30 {
		status, body := get(ctx, client, apiURL+"/api/public/pairs")
		if status == http.StatusOK {
			ids, err := pairIDs(body)
			if err == nil && len(ids) > 0 {
				return ids, nil
			}
			last = errors.Join(err, errors.New("pairs: empty list"))
		} else {
			last = fmt.Errorf("pairs: status %d", status)
		}
		if err := process.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	return nil, last
}

// coldProbe is what probeBooks saw.
type coldProbe struct {
	end     time.Time // when the need-th pair answered (the deadline's time when fewer did)
	pending int       // pairs that never answered
	// relapsed counts the pairs that answered and then, at a later probe
	// (with recheck), did not answer 200 or answered a book older than
	// recheck: a book served and then lost or left behind, which a client
	// that read it once would see fail or go stale. relapses counts those
	// answers, stale the 200s among them.
	relapsed, relapses, stale int
	relapsedIDs               []string // the pairs that relapsed, in the order they did
	// relapsedHow says, for each of relapsedIDs, what its first relapse
	// answered and when, from the probe's start: what to look for in the
	// feed's log.
	relapsedHow []string
}

// probeBooks asks for every pair's book until need of them have answered
// 200 with a body ok accepts, or the deadline passes. A pair is asked until
// it has, at most once a round, and rounds start interval apart, so the
// probe stays a small load however many pairs wait. With recheck above 0, a
// pair that has answered is asked again every round as well, and an answer
// then that is not 200, or whose book is older than recheck, is counted as a
// relapse.
func probeBooks(ctx context.Context, apiURL string, pairs []string, need int, interval time.Duration, deadline time.Time, recheck time.Duration, ok func(body []byte) bool) (coldProbe, error) {
	const conns = 8
	client := newClient(conns)
	answered := make([]time.Time, len(pairs))
	relapsed := make([]bool, len(pairs))
	var res coldProbe
	var mu sync.Mutex
	done := 0
	start := time.Now()
	for done < need && time.Now().Before(deadline) {
		round := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, conns)
		for i, p := range pairs {
			mu.Lock()
			again := !answered[i].IsZero()
			mu.Unlock()
			if again && recheck <= 0 {
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				status, body := get(ctx, client, routeURL(apiURL, "orderbook", p))
				// A 200 that is not a book fails the client as a 502 would;
				// only a book that decodes can be stale.
				failed, stale := status != http.StatusOK, false
				var age time.Duration
				if again && !failed {
					var err error
					age, _, err = bookAge(body, time.Now())
					failed, stale = err != nil, err == nil && age > recheck
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case again && (failed || stale) && ctx.Err() == nil:
					res.relapses++
					if stale {
						res.stale++
					}
					if !relapsed[i] {
						res.relapsedIDs = append(res.relapsedIDs, p)
						how := fmt.Sprintf("%d", status)
						switch {
						case stale:
							how = "a book " + age.Round(time.Millisecond).String() + " old"
						case status == http.StatusOK:
							how = "200 with no book"
						}
						res.relapsedHow = append(res.relapsedHow, fmt.Sprintf("%s: %s at %v", p, how, time.Since(start).Round(time.Millisecond)))
					}
					relapsed[i] = true
				case !again && status == http.StatusOK && ok(body):
					answered[i] = time.Now()
					done++
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if done < need {
			if err := process.Sleep(ctx, time.Until(round.Add(interval))); err != nil {
				return res, err
			}
		}
	}
	times := make([]time.Time, 0, done)
	for i, t := range answered {
		if !t.IsZero() {
			times = append(times, t)
		}
		if relapsed[i] {
			res.relapsed++
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	res.pending = len(pairs) - len(times)
	res.end = time.Now()
	if len(times) >= need && need > 0 {
		res.end = times[need-1]
	}
	return res, nil
}

// aggregate reads every pair's book and trades once a round, spread evenly
// over the round, until end, and hands each answer to record (status 0: a
// transport error). At most workers reads are in flight; a read that finds
// them all busy goes late rather than piling up.
func aggregate(ctx context.Context, apiURL string, pairs []string, round time.Duration, workers int, begin, end time.Time, record func(kind, pair string, status int, body []byte, at time.Time)) {
	client := newClient(workers)
	sched := schedule(pairs, round)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for r := 0; ; r++ {
		for _, q := range sched {
			at := begin.Add(time.Duration(r)*round + q.At)
			if !at.Before(end) {
				return
			}
			if process.Sleep(ctx, time.Until(at)) != nil {
				return
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				status, body := get(ctx, client, routeURL(apiURL, q.Kind, q.Pair))
				if ctx.Err() == nil {
					record(q.Kind, q.Pair, status, body, time.Now())
				}
			})
		}
	}
}

// hotClient reads one pair's book and trades in turn at rate reads a second
// until end, as a client that follows one market closely.
func hotClient(ctx context.Context, apiURL, pair string, rate int, end time.Time, col *collector) {
	client := newClient(1)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	kinds := [2]string{"orderbook", "trades"}
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		kind := kinds[i%2]
		status, body := get(ctx, client, routeURL(apiURL, kind, pair))
		if ctx.Err() == nil {
			col.record(true, kind, status, body, time.Now())
		}
	}
}

// fetchCalls reads venuesim's log of the calls since t0.
func fetchCalls(ctx context.Context, venueURL string, t0 time.Time) ([]venueCall, error) {
	status, body := get(ctx, newClient(1), venueURL+"/_control/calls?since_us="+strconv.FormatInt(t0.UnixMicro(), 10))
	if status != http.StatusOK {
		return nil, fmt.Errorf("venuesim call log: status %d", status)
	}
	var log struct {
		Calls []venueCall `json:"calls"`
	}
	if err := json.Unmarshal(body, &log); err != nil {
		return nil, fmt.Errorf("venuesim call log: %w", err)
	}
	// venuesim keeps the last 65,536 calls; a full log may have lost the
	// oldest, and a weight figure from it would be too low.
	if len(log.Calls) >= 1<<16 {
		return nil, errors.New("venuesim call log is full: the oldest calls of the run are lost")
	}
	return log.Calls, nil
}

// sampler calls a sample function once a period, the first time at once,
// until stopped or the function reports it is done.
type sampler struct {
	quit chan struct{}
	done chan struct{}
}

func startSampler(every time.Duration, sample func() bool) *sampler {
	s := &sampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for sample() {
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and waits for the last sample; calling it again is
// harmless.
func (s *sampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// rssSampler records the largest VmRSS of a process.
type rssSampler struct {
	*sampler
	peak int64
}

// sampleRSS reads pid's VmRSS twice a second until stopped.
func sampleRSS(pid int) *rssSampler {
	r := &rssSampler{}
	r.sampler = startSampler(500*time.Millisecond, func() bool {
		if n, err := process.ReadVmRSS(pid); err == nil {
			r.peak = max(r.peak, n)
		}
		return true
	})
	return r
}

// stop ends the sampling and returns the peak; calling it again is harmless.
func (r *rssSampler) stop() int64 {
	r.sampler.stop()
	return r.peak
}

// readCPU is the CPU time a process has used so far.
func readCPU(pid int) (time.Duration, error) {
	st, err := process.ReadStat(pid)
	return st.CPU(), err
}
