package poller

import (
	"context"
	"log/slog"
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

// A venue failing on every 350 ms book round for a minute writes one line,
// then one line carrying the count of what it held back.
func TestLogThrottleHoldsRepeatsBackAndCountsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		log := slog.New(&rec)
		th := newLogThrottle(time.Minute)
		start := time.Now()
		for time.Since(start) < time.Minute {
			th.log(log, slog.LevelWarn, "read-book", "venue read failed")
			time.Sleep(350 * time.Millisecond)
		}
		msgs, repeated := rec.lines()
		if len(msgs) != 1 || repeated[0] != 0 {
			t.Fatalf("a minute of failures logged %d lines (repeated %v), want 1 line without a count", len(msgs), repeated)
		}
		held := int64(time.Minute / (350 * time.Millisecond)) // the calls after the first within the minute
		th.log(log, slog.LevelWarn, "read-book", "venue read failed")
		msgs, repeated = rec.lines()
		if len(msgs) != 2 || repeated[1] != held {
			t.Fatalf("after the interval: %d lines, repeated %v; want a second line with repeated=%d", len(msgs), repeated, held)
		}

		// Another key is throttled on its own.
		th.log(log, slog.LevelWarn, "catalog", "catalog read failed")
		if msgs, _ = rec.lines(); len(msgs) != 3 || msgs[2] != "catalog read failed" {
			t.Fatalf("a different key was held back: %q", msgs)
		}

		// After a recovery the next failure is news: logged at once, with
		// no count carried over from before.
		th.log(log, slog.LevelWarn, "read-book", "venue read failed") // held back
		th.forget("read-book")
		th.log(log, slog.LevelWarn, "read-book", "venue read failed")
		msgs, repeated = rec.lines()
		if len(msgs) != 4 || repeated[3] != 0 {
			t.Fatalf("after forget: %d lines, repeated %v; want a fourth line without a count", len(msgs), repeated)
		}
	})
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
			p.Want([]byte(pairID(1)), snapshot.StreamBook, false)
			p.RefreshBooks(t.Context())
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
