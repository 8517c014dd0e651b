package poller

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logThrottle logs a repeated message once per interval with a count of the
// repeats it held back, so a venue that fails every 350 ms for an hour writes
// a line a minute instead of ten thousand.
type logThrottle struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[string]*throttled
}

type throttled struct {
	last    time.Time
	dropped int
}

func newLogThrottle(every time.Duration) *logThrottle {
	return &logThrottle{every: every, seen: make(map[string]*throttled)}
}

// log writes msg for key unless one was written less than the interval ago.
func (t *logThrottle) log(l *slog.Logger, level slog.Level, key, msg string, attrs ...slog.Attr) {
	now := time.Now()
	t.mu.Lock()
	e := t.seen[key]
	if e == nil {
		e = new(throttled)
		t.seen[key] = e
	}
	if !e.last.IsZero() && now.Sub(e.last) < t.every {
		e.dropped++
		t.mu.Unlock()
		return
	}
	dropped := e.dropped
	e.last, e.dropped = now, 0
	t.mu.Unlock()
	if dropped > 0 {
		attrs = append(attrs, slog.Int("repeated", dropped))
	}
	l.LogAttrs(context.Background(), level, msg, attrs...)
}

// forget drops the state of key, so the next failure after a recovery is
// logged at once.
func (t *logThrottle) forget(key string) {
	t.mu.Lock()
	delete(t.seen, key)
	t.mu.Unlock()
}
