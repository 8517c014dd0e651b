package logthrottle

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// recorder keeps the JSON lines a slog.JSONHandler writes.
type recorder struct{ buf bytes.Buffer }

func (r *recorder) Write(p []byte) (int, error) { return r.buf.Write(p) }

// lines returns the messages logged so far and the "repeated" count of each
// (0 when absent).
func (r *recorder) lines() (msgs []string, repeated []int64) {
	for _, line := range bytes.Split(bytes.TrimSpace(r.buf.Bytes()), []byte("\n")) {
		var rec struct {
			Msg      string `json:"msg"`
			Repeated int64  `json:"repeated"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			panic(err)
		}
		msgs = append(msgs, rec.Msg)
		repeated = append(repeated, rec.Repeated)
	}
	return msgs, repeated
}

// A venue failing on every 350 ms book round for a minute writes one line,
// then one line carrying the count of what it held back.
func TestLogThrottleHoldsRepeatsBackAndCountsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		log := slog.New(slog.NewJSONHandler(&rec, nil))
		th := New(time.Minute)
		start := time.Now()
		for time.Since(start) < time.Minute {
			th.Log(log, slog.LevelWarn, "read-book", "venue read failed")
			time.Sleep(350 * time.Millisecond)
		}
		msgs, repeated := rec.lines()
		if len(msgs) != 1 || repeated[0] != 0 {
			t.Fatalf("a minute of failures logged %d lines (repeated %v), want 1 line without a count", len(msgs), repeated)
		}
		held := int64(time.Minute / (350 * time.Millisecond)) // the calls after the first within the minute
		th.Log(log, slog.LevelWarn, "read-book", "venue read failed")
		msgs, repeated = rec.lines()
		if len(msgs) != 2 || repeated[1] != held {
			t.Fatalf("after the interval: %d lines, repeated %v; want a second line with repeated=%d", len(msgs), repeated, held)
		}

		// Another key is throttled on its own.
		th.Log(log, slog.LevelWarn, "catalog", "catalog read failed")
		if msgs, _ = rec.lines(); len(msgs) != 3 || msgs[2] != "catalog read failed" {
			t.Fatalf("a different key was held back: %q", msgs)
		}

		// After a recovery the next failure is news: logged at once, with
		// no count carried over from before.
		th.Log(log, slog.LevelWarn, "read-book", "venue read failed") // held back
		th.Forget("read-book")
		th.Log(log, slog.LevelWarn, "read-book", "venue read failed")
		msgs, repeated = rec.lines()
		if len(msgs) != 4 || repeated[3] != 0 {
			t.Fatalf("after forget: %d lines, repeated %v; want a fourth line without a count", len(msgs), repeated)
		}
	})
}

// The count goes on the line, never into the caller's arguments: a slice
// with room to spare is left as it was.
func TestLogLeavesTheCallersArgumentsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		log := slog.New(slog.NewJSONHandler(&rec, nil))
		th := New(time.Minute)
		buf := make([]any, 2, 4)
		buf[0], buf[1] = "url", "wss://venue"
		th.Log(log, slog.LevelWarn, "dial", "connection failed", buf...)
		th.Log(log, slog.LevelWarn, "dial", "connection failed", buf...) // held back
		time.Sleep(time.Minute)
		th.Log(log, slog.LevelWarn, "dial", "connection failed", buf...)
		if _, repeated := rec.lines(); len(repeated) != 2 || repeated[1] != 1 {
			t.Fatalf("repeated %v, want a second line with repeated=1", repeated)
		}
		if spare := buf[:cap(buf)]; spare[2] != nil || spare[3] != nil {
			t.Fatalf("the count was written into the caller's slice: %v", spare)
		}
	})
}
