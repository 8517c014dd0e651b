package poller

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// recorder is a slog.Handler that keeps every record it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec.Clone())
	r.mu.Unlock()
	return nil
}

// lines returns the messages logged so far and the "repeated" count of each
// (0 when absent).
func (r *recorder) lines() (msgs []string, repeated []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		var n int64
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "repeated" {
				n = a.Value.Int64()
			}
			return true
		})
		msgs = append(msgs, rec.Message)
		repeated = append(repeated, n)
	}
	return msgs, repeated
}

// The poller's own use: a venue that fails every book read for three minutes
// writes about one line a minute, not one per round.
func TestRepeatedVenueFailuresAreLoggedOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		v := newFakeVenue(1)
		p, _ := newTestPoller(v, Config{Logger: slog.New(&rec)})
		v.setFail(func(c venue.Call, _ string) error {
			if c == venue.CallBook {
				return venue.ErrBadData // no pause: every round calls the venue again
			}
			return nil
		})
		start := time.Now()
		rounds := 0
		for time.Since(start) < 3*time.Minute {
			p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
			p.Refresh(t.Context(), snapshot.StreamBook)
			rounds++
			time.Sleep(350 * time.Millisecond)
		}
		if n := v.count(venue.CallBook, ""); n != rounds {
			t.Fatalf("%d book calls in %d rounds", n, rounds)
		}
		msgs, repeated := rec.lines()
		var lines int
		var total int64
		for i, m := range msgs {
			if m == "venue read failed" {
				lines++
				total += 1 + repeated[i]
			}
		}
		if lines < 3 || lines > 4 {
			t.Fatalf("%d failures logged as %d lines, want one a minute (3 or 4)", rounds, lines)
		}
		if total > int64(rounds) || total < int64(rounds)-int64(time.Minute/(350*time.Millisecond))-1 {
			t.Fatalf("lines account for %d failures of %d: the counts are wrong", total, rounds)
		}
	})
}

// A venue that answers 451 pauses every call for 15 minutes: the log says
// once that the venue refuses this region and for how long, repeats it at
// most once a minute while reads are refused (no read logs a failure of its
// own), and says once that the venue answers again when a call after the
// pause succeeds.
func TestARegionRefusedIsLoggedOnceAMinuteAndItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		v := newFakeVenue(1)
		p, _ := newTestPoller(v, Config{Logger: slog.New(&rec)})
		refused := true
		var mu sync.Mutex
		v.setFail(func(venue.Call, string) error {
			mu.Lock()
			defer mu.Unlock()
			if refused {
				return &venue.StatusError{Status: 451}
			}
			return nil
		})
		start := time.Now()
		// The tickers' schedule reads every 1.5 s, as it does in Run.
		for time.Since(start) < 10*time.Minute {
			p.Want([]byte(pairID(1)), snapshot.StreamBook, time.Now().UnixNano())
			p.Refresh(t.Context(), snapshot.StreamBook)
			_ = p.docs.refreshTickers(t.Context())
			time.Sleep(1500 * time.Millisecond)
		}
		mu.Lock()
		refused = false
		mu.Unlock()
		for time.Since(start) < 16*time.Minute {
			p.Refresh(t.Context(), snapshot.StreamBook)
			_ = p.docs.refreshTickers(t.Context())
			time.Sleep(1500 * time.Millisecond)
		}
		msgs, _ := rec.lines()
		var region, resumed int
		for _, m := range msgs {
			switch {
			case strings.HasPrefix(m, "the venue refuses this region (HTTP 451)"):
				region++
			case m == "venue answers again: calls resumed":
				resumed++
			case strings.Contains(m, "read failed"), m == "venue calls paused":
				t.Errorf("logged %q during the pause", m)
			}
		}
		// Once at the 451, then a reminder a minute for the 15 minutes.
		if region < 14 || region > 16 {
			t.Errorf("the refused region logged %d times in 15 minutes, want one a minute", region)
		}
		if resumed != 1 {
			t.Errorf("the venue's return logged %d times, want once: %q", resumed, msgs)
		}
	})
}
