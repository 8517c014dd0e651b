package binance

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
)

// firstTurn is when line's k-th slot first replaces a connection opened at
// the start, counted from the start, no closing age being known.
func firstTurn(maxAge time.Duration, line, k int) time.Duration {
	epoch := time.Unix(1_800_000_000, 0)
	return turn(epoch, epoch, time.Duration(periodOfLimit*float64(maxAge)), slotPhase(line, k)).Sub(epoch)
}

// A connection is replaced on one of its slot's turns, at least a quarter
// period after it opened and never later than the limit, a period and a
// quarter; its replacement, opened at that turn, is replaced a period
// later.
func TestTurnsKeepEveryConnectionWithinTheLimit(t *testing.T) {
	epoch := time.Unix(1_800_000_000, 0)
	const period = 12800 * time.Millisecond // the period of a venue that closes at 20 s
	for line := range 2 {
		for k := range 8 {
			phase := slotPhase(line, k)
			for i := range 40 {
				opened := epoch.Add(time.Duration(i) * period / 7)
				due := turn(epoch, opened, period, phase)
				if life := due.Sub(opened); life < period/4 || life > period+period/4 {
					t.Fatalf("line %d slot %d opened at %s: replaced after %s, want between a quarter and a period and a quarter", line, k, opened.Sub(epoch), life)
				}
				if off := due.Sub(epoch) - time.Duration(phase*float64(period)); off%period != 0 {
					t.Fatalf("line %d slot %d: replaced at %s, not on its turns", line, k, due.Sub(epoch))
				}
				if next := turn(epoch, due, period, phase); next.Sub(due) != period {
					t.Fatalf("line %d slot %d: a replacement made on a turn is replaced %s later, want a period", line, k, next.Sub(due))
				}
			}
		}
	}
	if got := rotationLimit(23*time.Hour, 0); got != 23*time.Hour {
		t.Errorf("limit without a closing age %s, want MaxAge", got)
	}
	if got := rotationLimit(23*time.Hour, 20*time.Second); got != 16*time.Second {
		t.Errorf("limit before a closing age of 20 s: %s, want 16 s", got)
	}
	if got := rotationLimit(10*time.Second, 20*time.Second); got != 10*time.Second {
		t.Errorf("limit of a MaxAge shorter than a fifth under the closing age: %s, want MaxAge", got)
	}
}

// No slot of line A has its turns within a quarter period of a line B
// slot's: a venue that closes connections at an age shorter than the one
// learned never closes both lines' connections at once. A line's own
// slots have turns of their own.
func TestTheLinesTurnsAreAQuarterPeriodApartAtLeast(t *testing.T) {
	seen := map[float64]bool{}
	for k := range 32 {
		a := slotPhase(0, k)
		if seen[a] {
			t.Fatalf("line A's slot %d shares its turn %v", k, a)
		}
		seen[a] = true
		for j := range 32 {
			d := a - slotPhase(1, j)
			d -= float64(int(d))
			if d < 0 {
				d++
			}
			if d < 0.25 || d > 0.75 {
				t.Fatalf("line A slot %d and line B slot %d are %.3f of a period apart", k, j, d)
			}
		}
	}
}

// The closing age is what two closes agree on, the youngest such; one close
// alone teaches nothing; what is not seen again is forgotten.
func TestCloseAgesLearnWhatTwoClosesAgreeOn(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var c closeAges
	for _, step := range []struct {
		after time.Duration // since t0
		age   time.Duration // 0: no close, only a look
		want  time.Duration
	}{
		{0, 20 * time.Second, 0},                                      // one close: a hiccup, as far as is known
		{time.Second, 45 * time.Second, 0},                            // another, at an age of its own
		{5 * time.Second, 20500 * time.Millisecond, 20 * time.Second}, // agrees with the first within a tenth
		{6 * time.Second, 12 * time.Second, 20 * time.Second},
		{7 * time.Second, 12100 * time.Millisecond, 12 * time.Second}, // a shorter age, shown twice
		{forgetCloses + 5500*time.Millisecond, 0, 12 * time.Second},   // the first three forgotten
		{forgetCloses + 7*time.Second, 0, 0},                          // and the last two
	} {
		now := t0.Add(step.after)
		if step.age > 0 {
			c.add(now, step.age)
		}
		if got := c.learned(now); got != step.want {
			t.Fatalf("at %s: learned %s, want %s", step.after, got, step.want)
		}
	}
	for i := range 3 * recentCloses {
		c.add(t0, time.Duration(i)*time.Hour)
	}
	if n := len(c.seen); n != recentCloses {
		t.Errorf("%d closes kept, want the last %d", n, recentCloses)
	}

	for _, tc := range []struct {
		err  error
		want bool
	}{
		{websocket.CloseError{Code: websocket.StatusGoingAway, Reason: "max age"}, true},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: websocket.StatusNormalClosure}), true},
		{websocket.CloseError{Code: websocket.StatusPolicyViolation}, false}, // its rules: see shrink
		{websocket.CloseError{Code: websocket.StatusTryAgainLater}, false},   // a slow consumer
		{errors.New("unexpected EOF"), false},                                // cut, not closed
	} {
		if got := closedInOrder(tc.err); got != tc.want {
			t.Errorf("closedInOrder(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// lockedBuffer is a log the streams' goroutines write while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// venueAged returns how many connections the fake venue closed for their
// age among its events from the from-th on.
func (h *harness) venueAged(from int) int {
	n := 0
	for _, e := range h.v.events()[from:] {
		if strings.HasPrefix(e, "aged ") {
			n++
		}
	}
	return n
}

func (h *harness) setVenueAge(age time.Duration) {
	h.v.mu.Lock()
	h.v.maxAge = age
	h.v.mu.Unlock()
}

// A venue that closes every connection at 20 s, far younger than MaxAge:
// its first closes teach the age, every connection is dialled again at
// once, and from then on each is replaced before the venue's close, line
// B's half a period from line A's, so that the venue closes none. A venue
// that then closes sooner still closes the two lines' connections at
// different times, which costs nothing, and is learned in turn. Once no
// close has been seen for forgetCloses, MaxAge is in force again.
func TestStreamsLearnTheVenueCloseAgeAndReplaceBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const learnedLine = "closes market stream connections at this age"
		logs := &lockedBuffer{}
		h := startHarness(t, Binance, []string{"BTCUSDT"}, func(v *fakeStreamVenue) { v.maxAge = 20 * time.Second },
			StreamOptions{Lines: 2, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		defer h.stop()
		h.sink.take()
		if got := h.metric("marketfeed_stream_max_age_seconds"); got != "84600" {
			t.Fatalf("max age before any close: %s s, want the default 84600", got)
		}

		// The four connections were opened together and are closed together:
		// both lines at once, the cost of a venue's age not yet known.
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := h.metric("marketfeed_stream_venue_close_age_seconds"); got != "20" {
			t.Fatalf("learned closing age %s s, want 20", got)
		}
		if got := h.metric("marketfeed_stream_max_age_seconds"); got != "16" {
			t.Errorf("max age %s s once the venue closes at 20 s, want 16", got)
		}
		open := 0
		for _, c := range h.v.connections() {
			if c.opened.Equal(time.Now()) {
				open++
			}
		}
		if open != 4 {
			t.Fatalf("%d connections dialled again at once after the venue's scheduled close, want 4", open)
		}
		if n := logs.count(learnedLine); n != 1 {
			t.Errorf("the learned age logged %d times, want once", n)
		}
		h.sink.take()

		mark, reopened := len(h.v.events()), len(h.v.connections())
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := h.venueAged(mark); n != 0 {
			t.Errorf("the venue closed %d connections for their age after its age was learned", n)
		}
		for _, c := range h.sink.take() {
			if strings.HasPrefix(c, "lost ") {
				t.Errorf("sink heard %q while every connection was replaced before the venue's close", c)
			}
		}
		if got := h.metric(`marketfeed_stream_reconnects_total{reason="rotated"}`); got == "0" {
			t.Error("no connection replaced")
		}
		// Line A's and line B's connections are opened a quarter of the
		// 12.8 s period apart at least.
		var a, b []time.Time
		for _, c := range h.v.connections()[reopened:] {
			if strings.HasSuffix(c.ua, "(line A)") {
				a = append(a, c.opened)
			} else {
				b = append(b, c.opened)
			}
		}
		for _, ta := range a {
			for _, tb := range b {
				if d := ta.Sub(tb).Abs(); d < 3200*time.Millisecond {
					t.Fatalf("a line A and a line B connection opened %s apart", d)
				}
			}
		}
		if n := logs.count(learnedLine); n != 1 {
			t.Errorf("the learned age logged %d times, want once", n)
		}

		// Sooner than learned: one line's connection at a time is closed,
		// and dialled again at once; nothing is lost. 10 s is learned.
		h.setVenueAge(10 * time.Second)
		mark = len(h.v.events())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := h.venueAged(mark); n < 2 {
			t.Errorf("the venue closed %d connections at its shorter age, want them to teach it", n)
		}
		for _, c := range h.sink.take() {
			if strings.HasPrefix(c, "lost ") {
				t.Errorf("sink heard %q: both lines' connections closed at once", c)
			}
		}
		if got := h.metric("marketfeed_stream_venue_close_age_seconds"); got != "10" {
			t.Errorf("learned closing age %s s once the venue closes at 10 s, want 10", got)
		}
		mark = len(h.v.events())
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := h.venueAged(mark); n != 0 {
			t.Errorf("the venue closed %d connections for their age after its shorter age was learned", n)
		}

		// The venue closes connections no more: forgotten, MaxAge again.
		h.setVenueAge(0)
		time.Sleep(forgetCloses)
		synctest.Wait()
		if got := h.metric("marketfeed_stream_venue_close_age_seconds"); got != "0" {
			t.Errorf("closing age %s s after %s without a close, want forgotten", got, forgetCloses)
		}
		if got := h.metric("marketfeed_stream_max_age_seconds"); got != "84600" {
			t.Errorf("max age %s s after the closing age was forgotten, want the default 84600", got)
		}
		if n := logs.count("no longer seen closing"); n != 1 {
			t.Errorf("forgetting logged %d times, want once", n)
		}
	})
}

// A venue that closes every connection right after it opens (half a second)
// is not taken for one that closes on a schedule: nothing is learned, and
// the slots back off as after any failure instead of dialling again and
// again.
func TestStreamsBackOffFromAVenueThatClosesRightAfterConnecting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, Binance, []string{"BTCUSDT"}, func(v *fakeStreamVenue) { v.maxAge = 500 * time.Millisecond }, StreamOptions{})
		defer h.stop()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		// Two slots, each waiting at least half of 1, 2, 4, ... 60 s between
		// dials: about eight dials each in two minutes; dialling again at
		// once would be 240 each.
		if n := len(h.v.connections()); n > 2*10 {
			t.Errorf("%d connections in two minutes, want the slots backing off", n)
		}
		if got := h.metric("marketfeed_stream_venue_close_age_seconds"); got != "0" {
			t.Errorf("learned closing age %s s from closes right after connecting, want none", got)
		}
	})
}
