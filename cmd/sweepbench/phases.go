package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"marketfeed/internal/venuetruth"
)

// Each phase of the recovery run is judged the same way: against the
// venue's bound where it must read every book again, and against the
// venue's true book for every book it served.

// Phase names, under which the sampled books are filed.
const (
	phaseCold    = "cold start"
	phaseSteady  = "steady, connections rotated"
	phaseLine    = "one line cut"
	phaseDrop    = "every connection cut"
	phaseOutage  = "outage"
	phaseCloses  = "venue closes connections"
	phaseGap     = "sequence gap"
	phaseBetween = "between faults"
)

// phase is one phase's figures, as the phase table prints them.
type phase struct {
	Name string
	// Time is from the fault (or marketfeed's start) until 99.9 % of the
	// books were current again (0: not measured); Bound the venue's bound on it (Bounded:
	// one was computed), Least the least weight the bound is for and
	// Spent the weight read meanwhile. Judged marks the phases whose time
	// and weight have targets.
	Time, Bound time.Duration
	Bounded     bool
	Least       least
	Spent       int
	Judged      bool
	Truth       venuetruth.Tally
	Resyncs     map[string]int
	Agg         statusCount
	// Quiet marks a phase that must cost nothing: no book out of
	// sequence and every answer 200.
	Quiet bool
}

// timeOK and weightOK are the judged phases' targets: within the bound and
// 15 s, and at most 1.15 times the least weight.
func (p phase) timeOK() bool   { return p.Time <= p.Bound+boundSlack }
func (p phase) weightOK() bool { return float64(p.Spent) <= leastSlack*float64(p.Least.Total()) }
func (p phase) quietOK() bool {
	return total(outOfSequence(p.Resyncs)) == 0 && p.Agg.total() > 0 && p.Agg[http.StatusOK] == p.Agg.total()
}

// rows are the phase's judged figures, for the run's list of misses.
func (p phase) rows() []row {
	var out []row
	if p.Judged {
		out = append(out,
			row{p.Name + ": time against the venue's bound", fmt.Sprintf("%s, bound %s", dur(p.Time), dur(p.Bound)),
				"≤ bound + " + dur(boundSlack), verdict(p.timeOK())},
			row{p.Name + ": weight against the least", fmt.Sprintf("%d of least %s", p.Spent, p.Least),
				fmt.Sprintf("≤ %.2f × least", leastSlack), verdict(p.weightOK())})
	}
	out = append(out, row{p.Name + ": books equal to the venue (sampled)", p.Truth.String(), "every one", verdict(p.Truth.AllEqual())})
	if p.Quiet {
		out = append(out, row{p.Name + ": books out of sequence; answers not 200",
			fmt.Sprintf("%s; %d", causes(outOfSequence(p.Resyncs)), p.Agg.total()-p.Agg[http.StatusOK]), "0; 0", verdict(p.quietOK())})
	}
	return out
}

// writePhases prints the phase table: one line a phase, with its targets'
// verdicts.
func writePhases(w io.Writer, heading string, ps []phase) {
	fmt.Fprintf(w, "\n== %s\n", heading)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\ttime\tbound\tweight\tleast\tbooks equal to the venue\tresyncs by cause\t200 share\ttargets")
	for _, p := range ps {
		tm, bound, spent, lw := "-", "-", "-", "-"
		if p.Bounded || p.Time > 0 {
			tm = dur(p.Time)
		}
		if p.Bounded {
			bound, spent, lw = dur(p.Bound), fmt.Sprint(p.Spent), fmt.Sprint(p.Least.Total())
		}
		share := "-"
		if n := p.Agg.total(); n > 0 {
			share = fmt.Sprintf("%.3f%% of %d", 100*p.Agg.okShare(), n)
		}
		var verdicts []string
		for _, r := range p.rows() {
			name := strings.TrimPrefix(r.Figure, p.Name+": ")
			verdicts = append(verdicts, fmt.Sprintf("%s %s", shortCheck(name), r.Verdict))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, tm, bound, spent, lw, p.Truth, causes(p.Resyncs), share, strings.Join(verdicts, ", "))
	}
	tw.Flush()
}

// shortCheck names a phase's check in the table's last column.
func shortCheck(figure string) string {
	switch {
	case strings.HasPrefix(figure, "time"):
		return "time"
	case strings.HasPrefix(figure, "weight"):
		return "weight"
	case strings.HasPrefix(figure, "books equal"):
		return "books"
	}
	return "quiet"
}
