package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentiles are the figures reported for a set of samples.
type percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize returns p50, p99 and the maximum of samples by nearest rank: the
// smallest sample at or above the given share of all samples, so a p99 is
// always a value some answer really had. It sorts samples in place.
func summarize(samples []time.Duration) percentiles {
	if len(samples) == 0 {
		return percentiles{}
	}
	slices.Sort(samples)
	return percentiles{
		N:   len(samples),
		P50: nearestRank(samples, 50),
		P99: nearestRank(samples, 99),
		Max: samples[len(samples)-1],
	}
}

// nearestRank is the sample at rank ceil(p/100 × n) of sorted.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// bookAge decodes an /orderbook answer and returns now minus its timestamp
// (the source's clock, ms since the epoch) and the levels of its shorter
// side. The venue runs on this machine, so the clocks agree to well under a
// millisecond; a timestamp a hair in the future counts as age 0 rather than
// a negative age.
func bookAge(body []byte, now time.Time) (age time.Duration, levels int, err error) {
	var b struct {
		Timestamp *int64            `json:"timestamp"`
		Bids      []json.RawMessage `json:"bids"`
		Asks      []json.RawMessage `json:"asks"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, 0, fmt.Errorf("orderbook: %w", err)
	}
	if b.Timestamp == nil {
		return 0, 0, errors.New("orderbook: no timestamp")
	}
	return ageSince(*b.Timestamp, now), min(len(b.Bids), len(b.Asks)), nil
}

// tradeLag decodes a /trades answer and returns now minus the newest
// trade_timestamp. ok is false for an empty list: a quiet market has no lag
// to measure, which is not an error of the feed.
func tradeLag(body []byte, now time.Time) (lag time.Duration, ok bool, err error) {
	var trades []struct {
		TradeTimestamp *int64 `json:"trade_timestamp"`
	}
	if err := json.Unmarshal(body, &trades); err != nil {
		return 0, false, fmt.Errorf("trades: %w", err)
	}
	if len(trades) == 0 {
		return 0, false, nil
	}
	// The list is newest first by contract; taking the maximum anyway keeps
	// a misordered list from passing as a stale one.
	var newest int64
	for i, t := range trades {
		if t.TradeTimestamp == nil {
			return 0, false, fmt.Errorf("trades: item %d has no trade_timestamp", i)
		}
		newest = max(newest, *t.TradeTimestamp)
	}
	return ageSince(newest, now), true, nil
}

func ageSince(ms int64, now time.Time) time.Duration {
	return max(now.Sub(time.UnixMilli(ms)), 0)
}

// pairIDs decodes /api/public/pairs into its ticker_ids.
func pairIDs(body []byte) ([]string, error) {
	var pairs []struct {
		TickerID string `json:"ticker_id"`
	}
	if err := json.Unmarshal(body, &pairs); err != nil {
		return nil, fmt.Errorf("pairs: %w", err)
	}
	ids := make([]string, 0, len(pairs))
	for _, p := range pairs {
		if p.TickerID == "" {
			return nil, errors.New("pairs: item without ticker_id")
		}
		ids = append(ids, p.TickerID)
	}
	return ids, nil
}

// venueCall is one REST call in venuesim's call log (/_control/calls).
type venueCall struct {
	At     int64  `json:"at_us"` // arrival, Unix microseconds
	Path   string `json:"path"`
	Weight int    `json:"weight"` // what venuesim charged, Binance's weight for the call
	Fault  bool   `json:"fault"`  // a fault or the weight limit answered it
}

// weightUse is the REST weight charged over a window.
type weightUse struct {
	Total   int
	Minutes []int   // weight in each whole minute from the window's start
	PerMin  float64 // the total as a rate per minute over the whole window
	Calls   int     // calls in the window
	Refused int     // calls a fault or the weight limit answered
	// ByPath is the weight by venue path, so that a run says what the
	// weight went on (snapshots, trade backfills, bulk reads).
	ByPath map[string]int
}

// Peak is the heaviest whole minute, or the window's rate when it is shorter
// than a minute, so that a short run still has a figure to compare.
func (w weightUse) Peak() float64 {
	if len(w.Minutes) == 0 {
		return w.PerMin
	}
	return float64(slices.Max(w.Minutes))
}

// weightIn adds up the weight of the calls in [from, to). Minutes are counted
// from from, not from the venue's clock minute, so that each holds exactly a
// minute of the measured run; a trailing part-minute counts towards the
// total and the rate, not as a minute of its own. A call the limit refused is
// charged all the same, as the venue charges it.
func weightIn(calls []venueCall, from, to time.Time) weightUse {
	var w weightUse
	span := to.Sub(from)
	if span <= 0 {
		return w
	}
	whole := int(span / time.Minute)
	w.Minutes = make([]int, whole)
	w.ByPath = map[string]int{}
	f, t := from.UnixMicro(), to.UnixMicro()
	for _, c := range calls {
		if c.At < f || c.At >= t {
			continue
		}
		cost := c.Weight
		w.Total += cost
		if cost > 0 {
			w.ByPath[c.Path] += cost
		}
		w.Calls++
		if c.Fault {
			w.Refused++
		}
		if m := int((c.At - f) / time.Minute.Microseconds()); m < whole {
			w.Minutes[m] += cost
		}
	}
	w.PerMin = float64(w.Total) / span.Minutes()
	return w
}

// request is one read the aggregator makes: a pair's book or its trades.
type request struct {
	At   time.Duration // offset from the start of the round
	Pair string
	Kind string // "orderbook" or "trades"
}

// schedule spreads one round of reads evenly over period: every pair's book
// and trades, 2n reads at period/2n apart, a pair's trades half a step after
// its book. An aggregator that read everything at once would measure the
// feed's burst capacity, not how current each pair stays.
func schedule(pairs []string, period time.Duration) []request {
	n := 2 * len(pairs)
	out := make([]request, 0, n)
	for i, p := range pairs {
		for j, kind := range [2]string{"orderbook", "trades"} {
			slot := 2*i + j
			out = append(out, request{At: period * time.Duration(slot) / time.Duration(n), Pair: p, Kind: kind})
		}
	}
	return out
}

// statusCount counts answers by HTTP status; 0 is a transport error (no
// answer at all).
type statusCount map[int]int

// okShare is the share of answers that were 200, in [0, 1]; 0 with none.
func (s statusCount) okShare() float64 {
	total := 0
	for _, n := range s {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(s[200]) / float64(total)
}

func (s statusCount) total() int {
	t := 0
	for _, n := range s {
		t += n
	}
	return t
}

// others lists every status but 200 with its count, "none" when there is
// none: "429×3 error×1".
func (s statusCount) others() string {
	codes := make([]int, 0, len(s))
	for c, n := range s {
		if c != 200 && n > 0 {
			codes = append(codes, c)
		}
	}
	if len(codes) == 0 {
		return "none"
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "error"
		}
		parts[i] = fmt.Sprintf("%s×%d", name, s[c])
	}
	return strings.Join(parts, " ")
}

// parseExtras reads -extra: market counts, comma separated, each ≥ 0.
func parseExtras(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-extra %q: want counts ≥ 0, comma separated", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-extra: no count given")
	}
	return out, nil
}

// contractsRead is what one /contracts answer says: how many contracts it
// lists, each one's mark age (now minus its timestamp), and the open
// interest it carries: how many have one, and the oldest's age.
type contractsRead struct {
	items, withInterest int
	markAges            []time.Duration
	oldestInterest      time.Duration
}

// readContracts decodes a /contracts answer at now.
func readContracts(body []byte, now time.Time) (contractsRead, error) {
	var items []struct {
		Timestamp    *int64 `json:"timestamp"`
		InterestTime *int64 `json:"open_interest_timestamp"`
	}
	if err := json.Unmarshal(body, &items); err != nil {
		return contractsRead{}, fmt.Errorf("contracts: %w", err)
	}
	r := contractsRead{items: len(items), markAges: make([]time.Duration, 0, len(items))}
	for _, it := range items {
		if it.Timestamp == nil {
			return contractsRead{}, errors.New("contracts: an item without a timestamp")
		}
		r.markAges = append(r.markAges, ageSince(*it.Timestamp, now))
		if it.InterestTime != nil {
			r.withInterest++
			r.oldestInterest = max(r.oldestInterest, ageSince(*it.InterestTime, now))
		}
	}
	return r, nil
}
