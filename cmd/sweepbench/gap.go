package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"marketfeed/internal/process"
	"marketfeed/internal/venuetruth"
)

// The recovery run's sequence gap: venuesim skips a depth event in a few
// books' diff streams (/_control/gap), so that each book's next event does
// not chain and marketfeed must sync it again from a snapshot. Every book
// those pairs answer from the gap until a round after they are current
// again is judged against the venue's, not only a sample: a book synced
// again must be the venue's to the full depth, not a prefix of it.

// gapPhase is what a gap in a few books cost.
type gapPhase struct {
	Measured bool
	Books    int // books whose diff stream skipped an event
	// Recovered is from the gap until every one of them answered a book
	// newer than it; Pending those that had not when -cold-timeout passed.
	Recovered time.Duration
	Pending   int
	Agg       statusCount // the aggregator's answers from the gap to a round after Recovered
	Resyncs   map[string]int
}

// gapBooks makes the gap in the first -gaps pairs and measures it.
func gapBooks(ctx context.Context, cfg *config, env *pair, answers *answerLog, pairs []string, samples *venuetruth.Sampler) (gapPhase, error) {
	g := gapPhase{Measured: true}
	gapped := pairs[:min(cfg.gaps, len(pairs))]
	g.Books = len(gapped)
	s0, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return g, err
	}
	samples.SetPhase(phaseGap)
	at := time.Now()
	client := newClient(1)
	for _, p := range gapped {
		u := env.venueURL + "/_control/gap?symbol=" + url.QueryEscape(venuetruth.Symbol(p))
		if status, _ := send(ctx, client, http.MethodPost, u); status/100 != 2 {
			return g, fmt.Errorf("venuesim gap of %s: status %d", p, status)
		}
	}
	// The gapped books' every answer is judged, both while they come back
	// and for a round after.
	newer := newerThan(at)
	probe, err := probeBooks(ctx, "http://"+env.apiAddr, gapped, len(gapped), 250*time.Millisecond, at.Add(cfg.coldTimeout), 0,
		func(body []byte) bool {
			ok := newer(body)
			if ok {
				samples.Keep(body)
			}
			return ok
		})
	if err != nil {
		return g, err
	}
	g.Recovered, g.Pending = probe.end.Sub(at), probe.pending
	end := time.Now().Add(cfg.round)
	for time.Now().Before(end) {
		for _, p := range gapped {
			if status, body := get(ctx, client, routeURL("http://"+env.apiAddr, "orderbook", p)); status == http.StatusOK {
				samples.Keep(body)
			}
		}
		if err := process.Sleep(ctx, time.Second); err != nil {
			return g, err
		}
	}
	s1, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return g, err
	}
	g.Agg = answers.statuses(at, time.Now())
	g.Resyncs = since(s0.byLabel(seriesResyncs, "cause"), s1.byLabel(seriesResyncs, "cause"))
	samples.SetPhase(phaseBetween)
	return g, nil
}

// gapRows are the table's lines for the gap.
func gapRows(g gapPhase) []row {
	if !g.Measured {
		return nil
	}
	recovered := dur(g.Recovered)
	if g.Pending > 0 {
		recovered = fmt.Sprintf("%s, %d books never newer", recovered, g.Pending)
	}
	return []row{
		{fmt.Sprintf("sequence gap in %d books: every one newer than the gap", g.Books), recovered, "", ""},
		{"sequence gap: books out of sequence, by cause", causes(outOfSequence(g.Resyncs)), "", ""},
	}
}
