// Package logthrottle is the one throttled logger: a message repeated under
// one key is written once per interval, with the count of the repeats it
// held back, so that a venue failing every 350 ms for an hour writes a line
// a minute instead of ten thousand, and the line says how many it stands for.
package logthrottle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Throttle logs a repeated message once per interval with a count of the
// repeats it held back. It is safe for concurrent use.
type Throttle struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[string]*throttled
}

type throttled struct {
	last    time.Time
	dropped int
}

// New returns a throttle that writes a key's message at most once per every.
func New(every time.Duration) *Throttle {
	return &Throttle{every: every, seen: make(map[string]*throttled)}
}

// Log writes msg with args (as slog.Logger.Log takes them) for key unless one was written less than the interval ago.
func (t *Throttle) Log(l *slog.Logger, level slog.Level, key, msg string, args ...any) {
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
		// Clipped first: a caller passing a slice with room to spare must
		// not find the count written into it.
		args = append(slices.Clip(args), slog.Int("repeated", dropped))
	}
	l.Log(context.Background(), level, msg, args...)
}

// Forget drops the state of key, so the next failure after a recovery is
// logged at once.
func (t *Throttle) Forget(key string) {
	t.mu.Lock()
	delete(t.seen, key)
	t.mu.Unlock()
}
