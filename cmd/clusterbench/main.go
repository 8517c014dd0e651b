// Command clusterbench is the client side of make cluster-bench: an
// aggregator that reads every pair's book and trades, and the contracts,
// from members or a balancer every round, and a client that sends a steady
// rate of requests to see what a shared rate limit lets through.
// scripts/clusterbench.sh runs the cluster, the faults and these clients,
// and prints the figures.
//
//	clusterbench sweep -targets URL[,URL...] -rounds N -every 10s -xff ADDR [-venue URL -truth-every 10]
//	clusterbench rate -targets URL[,URL...] -per-minute 900 -for 60s -xff ADDR
//	clusterbench lag -targets OPS-URL[,OPS-URL...]
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-json"

	"marketfeed/internal/promtext"
	"marketfeed/internal/venuetruth"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: sweep, rate or lag")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	targets := fs.String("targets", "", "comma-separated base URLs, asked in turn")
	xff := fs.String("xff", "", "X-Forwarded-For to send: the client address a balancer passes on")
	rounds := fs.Int("rounds", 6, "sweep: rounds")
	every := fs.Duration("every", 10*time.Second, "sweep: a round every")
	perMinute := fs.Int("per-minute", 1200, "rate: requests a minute")
	span := fs.Duration("for", 4*time.Minute, "rate: how long")
	venueURL := fs.String("venue", "", "sweep: the venuesim the members read (http://host:port): one served book in -truth-every is judged against its true book")
	truthEvery := fs.Int("truth-every", 10, "sweep: with -venue, judge one served book in this many")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	bases := strings.Split(*targets, ",")
	if *targets == "" {
		return errors.New("-targets is empty")
	}
	c := client{http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}, xff: *xff}
	ctx := context.Background()
	switch args[0] {
	case "sweep":
		var judge *venuetruth.Judge
		if *venueURL != "" {
			judge = venuetruth.NewJudge(*venueURL, c.http)
		}
		return sweep(ctx, c, bases, *rounds, *every, out, judge, *truthEvery)
	case "rate":
		return rate(ctx, c, bases, *perMinute, *span, out)
	case "lag":
		return lag(ctx, c, bases, out)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

type client struct {
	http *http.Client
	xff  string
}

// get returns the status and body of a GET, status 0 when it failed.
func (c client) get(ctx context.Context, u string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil
	}
	if c.xff != "" {
		req.Header.Set("X-Forwarded-For", c.xff)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// round is what one round of the sweep saw at one target.
type round struct {
	statuses map[int]int
	ages     []time.Duration // of the books answered 200: now minus their timestamp
	// truth is the sampled books judged against the venue's true book;
	// judged is false without a venue to judge them.
	truth  venuetruth.Tally
	judged bool
}

// sweep reads every pair's book and trades, and the contracts and their
// specifications, at each target every round, eight requests at a time,
// and prints each round and the whole. With a judge, one book in
// truthEvery is compared with the venue's true book at its venue time.
func sweep(ctx context.Context, c client, bases []string, rounds int, every time.Duration, out io.Writer, judge *venuetruth.Judge, truthEvery int) error {
	status, body := c.get(ctx, bases[0]+"/api/public/pairs")
	var pairs []struct {
		TickerID string `json:"ticker_id"`
	}
	if status != 200 || json.Unmarshal(body, &pairs) != nil || len(pairs) == 0 {
		return fmt.Errorf("no pair list from %s (%d)", bases[0], status)
	}
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = p.TickerID
	}
	start := time.Now()
	all := round{statuses: map[int]int{}, judged: judge != nil}
	samples := venuetruth.NewSampler(truthEvery)
	samples.SetPhase("sweep")
	for r := range rounds {
		begin := time.Now()
		for _, base := range bases {
			got := sweepOnce(ctx, c, base, ids, samples)
			if judge != nil {
				got.truth, got.judged = samples.Judge(ctx, judge, bookDepth)["sweep"], true
			}
			fmt.Fprintf(out, "t+%4.0fs %s %s\n", time.Since(start).Seconds(), base, got)
			for s, n := range got.statuses {
				all.statuses[s] += n
			}
			all.ages = append(all.ages, got.ages...)
			all.truth.Merge(got.truth)
		}
		if r < rounds-1 {
			time.Sleep(every - time.Since(begin))
		}
	}
	fmt.Fprintf(out, "all %s; 200 share %.2f %%\n", all, share200(all.statuses))
	return nil
}

// bookDepth is the levels a side the sweep's book reads ask for: none
// given, the API's 100.
const bookDepth = 100

func sweepOnce(ctx context.Context, c client, base string, ids []string, samples *venuetruth.Sampler) round {
	var mu sync.Mutex
	got := round{statuses: map[int]int{}}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for u := range work {
				status, body := c.get(ctx, u)
				at := time.Now()
				mu.Lock()
				got.statuses[status]++
				if status == 200 && strings.Contains(u, "/orderbook") {
					samples.Offer(body)
					var b struct {
						Timestamp int64 `json:"timestamp"`
					}
					if json.Unmarshal(body, &b) == nil {
						got.ages = append(got.ages, at.Sub(time.UnixMilli(b.Timestamp)))
					}
				}
				mu.Unlock()
			}
		})
	}
	// A derivatives aggregator reads both lists once a round.
	work <- base + "/api/public/contracts"
	work <- base + "/api/public/contract_specs"
	for _, id := range ids {
		work <- base + "/api/public/orderbook?ticker_id=" + id
		work <- base + "/api/public/trades?ticker_id=" + id
	}
	close(work)
	wg.Wait()
	return got
}

func (r round) String() string {
	keys := make([]int, 0, len(r.statuses))
	for s := range r.statuses {
		keys = append(keys, s)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, s := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", s, r.statuses[s])
	}
	p50, p99, most := quantiles(r.ages)
	fmt.Fprintf(&b, " book age p50 %.2fs p99 %.2fs max %.2fs", p50.Seconds(), p99.Seconds(), most.Seconds())
	if r.judged {
		fmt.Fprintf(&b, " books equal to the venue %s", r.truth)
	}
	return b.String()
}

// quantiles returns the median, the 99th percentile and the largest of ds
// (nearest rank); zeros for none.
func quantiles(ds []time.Duration) (p50, p99, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.99), s[len(s)-1]
}

func share200(statuses map[int]int) float64 {
	total := 0
	for _, n := range statuses {
		total += n
	}
	if total == 0 {
		return 0
	}
	return 100 * float64(statuses[200]) / float64(total)
}

// rate sends perMinute requests a minute to the targets in turn, as a
// round-robin balancer would, for span, and prints the 200s of every
// sliding minute, 10 s apart, and the most in any 60 s window: what the
// contract bounds (the limit, plus a few percent across replicas).
func rate(ctx context.Context, c client, bases []string, perMinute int, span time.Duration, out io.Writer) error {
	// Each request at its own time, start + i × span/n: a slow answer
	// delays the next ones, which then go at once, but drops none.
	n := int(int64(perMinute) * int64(span) / int64(time.Minute))
	start := time.Now()
	var oks []time.Duration
	var late time.Duration
	for i := range n {
		due := time.Duration(int64(span) * int64(i) / int64(n))
		time.Sleep(time.Until(start.Add(due)))
		late = max(late, time.Since(start)-due)
		if status, _ := c.get(ctx, bases[i%len(bases)]+"/api/public/pairs"); status == 200 {
			oks = append(oks, time.Since(start))
		}
	}
	fmt.Fprintf(out, "%d requests, %d answered 200 (sent %s late at most)\n", n, len(oks), late.Round(time.Millisecond))
	minutes := slidingMinutes(oks, span, 10*time.Second)
	for i, n := range minutes {
		fmt.Fprintf(out, "minute from %3ds: %d 200s\n", i*10, n)
	}
	fmt.Fprintf(out, "most 200s in any 60 s: %d\n", mostInAMinute(oks))
	return nil
}

// mostInAMinute returns the most of the sorted times in any closed 60 s
// window: one ending at each time in turn.
func mostInAMinute(times []time.Duration) int {
	most, from := 0, 0
	for i, t := range times {
		for times[from] < t-time.Minute {
			from++
		}
		most = max(most, i-from+1)
	}
	return most
}

// slidingMinutes counts the times in each minute from 0, step, 2 step, ...
// that fits in span.
func slidingMinutes(times []time.Duration, span, step time.Duration) []int {
	var out []int
	for from := time.Duration(0); from+time.Minute <= span; from += step {
		n := 0
		for _, t := range times {
			if t >= from && t < from+time.Minute {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}

// lagTarget is the replication lag the 99th percentile should stay within.
const lagTarget = 50 * time.Millisecond

// lag reads each member's replication-lag histogram from its operator
// endpoint and prints its median and 99th percentile (the upper bound of
// the bucket each falls in) against the target.
func lag(ctx context.Context, c client, bases []string, out io.Writer) error {
	const name = "marketfeed_cluster_replication_lag_seconds_bucket"
	for _, base := range bases {
		status, body := c.get(ctx, base+"/metrics")
		if status != 200 {
			return fmt.Errorf("%s/metrics: %d", base, status)
		}
		series, err := promtext.Parse(string(body))
		if err != nil {
			return fmt.Errorf("%s/metrics: %w", base, err)
		}
		var buckets []bucket
		for k, v := range series {
			if !strings.HasPrefix(k, name+"{") {
				continue
			}
			_, le, ok := strings.Cut(k, `le="`)
			if !ok {
				continue
			}
			le, _, _ = strings.Cut(le, `"`)
			bound := math.Inf(1)
			if le != "+Inf" {
				if bound, err = strconv.ParseFloat(le, 64); err != nil {
					return fmt.Errorf("%s: bucket %q: %w", base, le, err)
				}
			}
			buckets = append(buckets, bucket{bound, v})
		}
		p50, p99, n := bucketQuantiles(buckets)
		if n == 0 {
			fmt.Fprintf(out, "%s: no value applied (the leader, or no follower yet)\n", base)
			continue
		}
		verdict := "met"
		if p99 > lagTarget.Seconds() {
			verdict = "missed"
		}
		fmt.Fprintf(out, "%s: %.0f values, lag p50 <= %gs, p99 <= %gs (target p99 <= %v: %s); %s\n", base, n, p50, p99, lagTarget, verdict, within(buckets))
	}
	return nil
}

// bucket is one cumulative histogram bucket: the count of values at most le.
type bucket struct {
	le    float64
	count float64
}

// within says what share of the values each finite bucket holds, after
// bucketQuantiles sorted them: "within 0.01s 98.2 %, ...".
func within(buckets []bucket) string {
	var b strings.Builder
	for _, bk := range buckets {
		if n := buckets[len(buckets)-1].count; !math.IsInf(bk.le, 1) && n > 0 {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "within %gs %.1f %%", bk.le, 100*bk.count/n)
		}
	}
	return b.String()
}

// bucketQuantiles returns the upper bounds of the buckets the median and
// the 99th percentile fall in, and the count of values.
func bucketQuantiles(buckets []bucket) (p50, p99, n float64) {
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	if len(buckets) == 0 {
		return 0, 0, 0
	}
	n = buckets[len(buckets)-1].count
	at := func(q float64) float64 {
		for _, b := range buckets {
			if b.count >= q*n {
				return b.le
			}
		}
		return math.Inf(1)
	}
	return at(0.5), at(0.99), n
}
