package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"marketfeed/apptest"
)

// logRecorder keeps every line a process logs, in order, and wakes those
// waiting for one.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	added chan struct{} // closed and replaced at every line
}

func newLogRecorder() *logRecorder { return &logRecorder{added: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	close(l.added)
	l.added = make(chan struct{})
	return nil
}

// mark is where the log is now: what later waits look after.
func (l *logRecorder) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since returns the lines logged after mark.
func (l *logRecorder) since(mark int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[mark:]...)
}

// waitFor waits until a line after mark has msg, and returns its index.
func (l *logRecorder) waitFor(t *testing.T, mark int, msg string, limit time.Duration) int {
	t.Helper()
	deadline := time.After(limit)
	for {
		l.mu.Lock()
		for i := mark; i < len(l.lines); i++ {
			if strings.Contains(l.lines[i], msg) {
				l.mu.Unlock()
				return i
			}
		}
		added := l.added
		l.mu.Unlock()
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("no %q logged within %s; the log since:\n%s", msg, limit, strings.Join(l.since(mark), "\n"))
		}
	}
}

// count counts the lines after mark that have msg.
func (l *logRecorder) count(mark int, msg string) int {
	n := 0
	for _, line := range l.since(mark) {
		if strings.Contains(line, msg) {
			n++
		}
	}
	return n
}

// The log tells an incident's end as well as its start, once per change of
// state: every stream connection cut, then "market streams up again" and,
// for the books that missed events, "every order book in sequence" again
// seconds after the cold start's (a repeat suppression once swallowed it);
// a depth stream silent while its market trades, then "every silenced
// stream delivers again".
func TestLogSaysWhenAnIncidentEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim and runs for about a minute")
	}
	venue := apptest.StartVenueSim(t)
	logs := newLogRecorder()
	_, _, a, _ := startAppLogged(t, nil, nil, logs, streamArgs(venue.URL, 3*time.Second)...)
	allStreamed(t, a, 30*time.Second)
	logs.waitFor(t, 0, "every order book in sequence", 30*time.Second)

	mark := logs.mark()
	before := opsMetrics(t, a)
	venue.Control(http.MethodPost, "/_control/drop")
	down := logs.waitFor(t, mark, "market stream connection closed", 10*time.Second)
	logs.waitFor(t, down, "market streams up again", 20*time.Second)
	if n := logs.count(down, "market streams up again"); n != 1 {
		t.Errorf("the streams' return logged %d times, want once:\n%s", n, strings.Join(logs.since(down), "\n"))
	}
	allStreamed(t, a, 30*time.Second)
	lost := `marketfeed_book_resyncs_total{cause="lost"}`
	if resynced := opsMetrics(t, a)[lost] - before[lost]; resynced > 0 {
		logs.waitFor(t, down, "every order book in sequence", 10*time.Second)
	} else {
		t.Log("no book missed events in the drop: no sync to end")
	}

	mark = logs.mark()
	venue.Control(http.MethodPost, "/_control/silence?stream=ethusdt@depth@100ms&for=12s")
	silent := logs.waitFor(t, mark, "stream silent; pair served by REST", 30*time.Second)
	end := logs.waitFor(t, silent, "every silenced stream delivers again", 40*time.Second)
	if n := logs.count(silent, "every silenced stream delivers again"); n != 1 {
		t.Errorf("the end of the silence logged %d times, want once:\n%s", n, strings.Join(logs.since(silent), "\n"))
	}
	t.Logf("the incidents' log:\n%s", strings.Join(logs.since(0)[:end+1], "\n"))
}

// A venue answering 451 is one line at error level that says the venue
// refuses this region and for how long, not a "tickers read failed" and
// "contracts read failed" every 1.5 to 3 s for the 15-minute pause: the
// reads the pause refuses say nothing of their own, and the line repeats
// at most once a minute.
func TestLogOfARegionRefusedIsOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds venuesim")
	}
	venue := apptest.StartVenueSim(t)
	logs := newLogRecorder()
	_, ops, a, _ := startAppLogged(t, nil, nil, logs, chaosArgs(venue.URL, 3*time.Second)...) // ready
	mark := logs.mark()
	venue.Fault("status=451")
	logs.waitFor(t, mark, "the venue refuses this region (HTTP 451)", 10*time.Second)
	// The pause refuses every read: let several rounds of tickers and
	// contracts reads pass, as the tickers' age shows.
	tickersAge := `marketfeed_snapshot_age_seconds{kind="tickers"}`
	if !apptest.WaitFor(20*time.Second, func() bool { return opsMetrics(t, a)[tickersAge] >= 8 }) {
		t.Fatalf("tickers not 8 s old within 20 s of the 451: %v", opsMetrics(t, a)[tickersAge])
	}
	var region []string
	for _, line := range logs.since(mark) {
		switch {
		case strings.Contains(line, "refuses this region"):
			region = append(region, line)
			if !strings.Contains(line, "ERROR") || !strings.Contains(line, "for=15m0s") {
				t.Errorf("the 451 line is not an error that says for how long: %s", line)
			}
		case strings.Contains(line, "read failed"), strings.Contains(line, "venue calls paused"):
			t.Errorf("a read the pause refused logged a line of its own: %s", line)
		}
	}
	if len(region) != 1 {
		t.Errorf("the 451 logged %d times in 8 s, want once:\n%s", len(region), strings.Join(logs.since(mark), "\n"))
	}
	if _, body := apptest.Get(t, ops+"/readyz"); !strings.Contains(string(body), "venue refuses this region (451)") {
		t.Errorf("/readyz does not say the region is refused: %s", body)
	}
}
