package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"marketfeed/internal/process"
)

// The recovery run's phase of a venue that closes every connection at an
// age of its own, far younger than marketfeed's -venue-ws-max-age (a
// proxy in front of it, or a venue with a shorter limit): venuesim's
// /_control/max-age for a while. Connections older than that age are
// closed at once, both lines together; marketfeed learns the age from the
// closes and replaces each connection before it, the two lines staggered,
// so that from then on a close takes one line at most and costs nothing.

// venueCloseAge is the age at which the phase has venuesim close
// connections, and venueCloseRounds how many of those ages it lasts.
const (
	venueCloseAge    = 20 * time.Second
	venueCloseRounds = 3
)

// venueCloses is what a venue closing connections on its own schedule
// cost, from the moment it began to a round after it stopped.
type venueCloses struct {
	Measured   bool
	Age, For   time.Duration // the venue's closing age, and how long it closed at it
	Agg        statusCount   // the aggregator's answers
	BookAge    percentiles   // the age of the books it was answered
	Resyncs    map[string]int
	Suspends   int
	AgedClosed int64         // connections venuesim closed for their age
	Rotated    int           // connections marketfeed replaced
	Learned    time.Duration // marketfeed_stream_venue_close_age_seconds when it stopped
}

// phaseCloseAge is the venue's closing age for a run whose connections
// live at most maxAge: 20 s, or half maxAge when that is shorter, so that
// the venue closes well before marketfeed would replace them.
func phaseCloseAge(maxAge time.Duration) time.Duration {
	return min(venueCloseAge, maxAge/2)
}

// closeOnSchedule has venuesim close every connection at the phase's age
// for venueCloseRounds of it, and measures what that cost until a round
// after.
func closeOnSchedule(ctx context.Context, cfg *config, env *pair, answers *answerLog) (venueCloses, error) {
	v := venueCloses{Measured: true, Age: phaseCloseAge(cfg.wsMaxAge)}
	v.For = venueCloseRounds * v.Age
	s0, ws0, err := bothSides(ctx, env)
	if err != nil {
		return v, err
	}
	at := time.Now()
	url := fmt.Sprintf("%s/_control/max-age?age=%s&for=%s", env.venueURL, v.Age, v.For)
	if status, _ := send(ctx, newClient(1), http.MethodPost, url); status != http.StatusNoContent {
		return v, fmt.Errorf("venuesim max-age: status %d", status)
	}
	if err := process.Sleep(ctx, v.For); err != nil {
		return v, err
	}
	s1, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return v, err
	}
	v.Learned = time.Duration(s1[seriesCloseAge] * float64(time.Second))
	// A round more, so that every pair is read once after the venue's
	// closes stopped.
	if err := process.Sleep(ctx, cfg.round); err != nil {
		return v, err
	}
	end := time.Now()
	s2, ws1, err := bothSides(ctx, env)
	if err != nil {
		return v, err
	}
	v.Agg = answers.statuses(at, end)
	v.BookAge = answers.bookAges(at, end)
	v.Resyncs = since(s0.byLabel(seriesResyncs, "cause"), s2.byLabel(seriesResyncs, "cause"))
	v.Suspends = int(s2[seriesSuspended] - s0[seriesSuspended])
	v.Rotated = int(s2[seriesRotations] - s0[seriesRotations])
	v.AgedClosed = ws1.Closes["max age"] - ws0.Closes["max age"]
	return v, nil
}

const seriesCloseAge = `marketfeed_stream_venue_close_age_seconds`

// streamsReport is what venuesim's /_control/ws says of its stream
// connections.
type streamsReport struct {
	Closes map[string]int64 `json:"closes"` // connections closed, by reason
}

// bothSides reads marketfeed's metrics and venuesim's report of its stream
// connections.
func bothSides(ctx context.Context, env *pair) (metricsScrape, streamsReport, error) {
	var r streamsReport
	m, err := scrape(ctx, env.opsAddr)
	if err != nil {
		return m, r, err
	}
	status, body := get(ctx, newClient(1), env.venueURL+"/_control/ws")
	if status != http.StatusOK {
		return m, r, fmt.Errorf("venuesim streams: status %d", status)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return m, r, fmt.Errorf("venuesim streams: %w", err)
	}
	return m, r, nil
}

// bookAges summarizes the ages of the books answered in [from, to).
func (l *answerLog) bookAges(from, to time.Time) percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ages []time.Duration
	for _, a := range l.all {
		if a.age >= 0 && !a.at.Before(from) && a.at.Before(to) {
			ages = append(ages, a.age)
		}
	}
	return summarize(ages)
}

// venueCloseRows are the table's lines for the phase.
func venueCloseRows(v venueCloses) []row {
	if !v.Measured {
		return nil
	}
	name := fmt.Sprintf("venue closes every connection at %s for %s", dur(v.Age), dur(v.For))
	ok := v.Agg.total() > 0 && v.Agg.okShare() >= targetOKShare
	return []row{
		{name + ": aggregator 200 share", fmt.Sprintf("%.3f%% of %d; other: %s", 100*v.Agg.okShare(), v.Agg.total(), v.Agg.others()),
			fmt.Sprintf("≥ %.1f%%", 100*targetOKShare), verdict(ok)},
		{name + ": book age p50 / p99 / max", pct(v.BookAge), "p99 ≤ " + dur(targetBookAgeP99), verdict(v.BookAge.N > 0 && v.BookAge.P99 <= targetBookAgeP99)},
		{name + ": books out of sequence, by cause; suspended", fmt.Sprintf("%s; %d; refreshes: %s", causes(outOfSequence(v.Resyncs)), v.Suspends,
			causes(since(outOfSequence(v.Resyncs), v.Resyncs))), "", ""},
		{name + ": closed by the venue for their age; replaced by marketfeed; closing age learned", fmt.Sprintf("%d; %d; %s", v.AgedClosed, v.Rotated, dur(v.Learned)), "", ""},
	}
}
