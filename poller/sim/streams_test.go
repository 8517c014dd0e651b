package sim

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/poller/venue/venuetest"
	"marketfeed/snapshot"
)

// The venue's streams satisfy the interface the poller consumes.
var _ venue.Streams = (*Venue)(nil).Streams()

// recorder is a sink that keeps what it was given, in order. stall, when
// set, is how long its first Depth call takes: a slow consumer.
type recorder struct {
	venuetest.Recorder
	mu    sync.Mutex
	stall time.Duration
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) Depth(u venue.DepthUpdate) {
	r.mu.Lock()
	stall := r.stall
	r.stall = 0
	r.mu.Unlock()
	r.Recorder.Depth(u)
	time.Sleep(stall) // a consumer that falls behind, in the bubble's time
}

// run starts the streams in the bubble and returns a stop function that
// cancels them and returns Run's error.
func run(s *Streams, sink venue.Sink) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sink) }()
	return func() error {
		cancel()
		return <-done
	}
}

// checkChain checks that a symbol's events chain without a gap from the
// heartbeat after k0 to k1, each equal to what the venue serves for it, and
// returns how many events spanned more than one heartbeat.
func checkChain(t *testing.T, v *Venue, sym string, got []venue.DepthUpdate, k0, k1 int64) (spans int) {
	t.Helper()
	prev, _ := v.UpdateID(sym, k0)
	last, _ := v.UpdateID(sym, k1)
	for i, u := range got {
		if u.Prev != prev {
			t.Fatalf("%s event %d: pu %d, previous u %d", sym, i, u.Prev, prev)
		}
		from := v.bySymbol[sym].heartbeatOf(prev)
		to := Heartbeat(time.UnixMilli(u.Time)) // the heartbeat the event ends at
		want, err := v.depthUpdateSince(sym, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(u, want) {
			t.Fatalf("%s event %d differs from the venue's diff", sym, i)
		}
		if to-from > 1 {
			spans++
		}
		prev = u.Last
	}
	if prev != last {
		t.Fatalf("%s: events end at u %d, want %d", sym, prev, last)
	}
	return spans
}

func TestStreamsDeliverInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New(Config{Seed: 1})
		s := v.Streams()
		s.Watch([]string{"ETHUSDT", "BTCUSDT", "NOPEUSDT", "BTCUSDT"})
		r := newRecorder()
		k0 := Heartbeat(time.Now())
		stop := run(s, r)
		time.Sleep(2*time.Second + 50*time.Millisecond)
		synctest.Wait()
		s.Resubscribe(snapshot.StreamBook, "ETHUSDT")
		s.Resubscribe(snapshot.StreamTrades, "SOLUSDT") // not watched: ignored
		time.Sleep(100 * time.Millisecond)
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		k1 := Heartbeat(time.Now())
		if k1 != k0+21 {
			t.Fatalf("%d heartbeats passed, want 21", k1-k0)
		}

		if got := slices.Sorted(func(yield func(string) bool) {
			seen := map[string]bool{}
			for _, u := range r.DepthEvents("") {
				if !seen[u.Symbol] {
					seen[u.Symbol] = true
					yield(u.Symbol)
				}
			}
		}); !reflect.DeepEqual(got, []string{"BTCUSDT", "ETHUSDT"}) {
			t.Errorf("depth events for %v, want BTCUSDT and ETHUSDT", got)
		}
		for _, sym := range []string{"BTCUSDT", "ETHUSDT"} {
			if len(r.DepthEvents(sym)) != 21 {
				t.Errorf("%s: %d depth events in 21 heartbeats", sym, len(r.DepthEvents(sym)))
			}
			checkChain(t, v, sym, r.DepthEvents(sym), k0, k1)
			// Trades: those of every heartbeat that ended, in order.
			var want []venue.Trade
			for k := k0; k < k1; k++ {
				hb, _ := v.heartbeatTrades(sym, k)
				want = append(want, hb...)
			}
			if len(want) == 0 || !reflect.DeepEqual(r.Trades(sym), want) {
				t.Errorf("%s: %d trades streamed, want the %d of the heartbeats", sym, len(r.Trades(sym)), len(want))
			}
		}
		if len(r.TickerRows()) != 2 || len(r.TickerRows()[0]) != len(v.markets) {
			t.Errorf("%d ticker deliveries, want 2 of %d rows", len(r.TickerRows()), len(v.markets))
		}
		if len(r.ContractRows()) != 2 || len(r.ContractRows()[0]) == 0 {
			t.Errorf("%d mark price deliveries, want 2 of every perpetual's row", len(r.ContractRows()))
		}
		wantLive := []string{"BTCUSDT", "ETHUSDT", "ETHUSDT"}
		if !reflect.DeepEqual(r.Reported(venuetest.Live, snapshot.StreamBook), wantLive) ||
			!reflect.DeepEqual(r.Reported(venuetest.Live, snapshot.StreamTrades), wantLive[:2]) {
			t.Errorf("live %v and %v, want depth %v and trades %v", r.Reported(venuetest.Live, snapshot.StreamBook), r.Reported(venuetest.Live, snapshot.StreamTrades), wantLive, wantLive[:2])
		}
		if !reflect.DeepEqual(r.Reported(venuetest.Lost, snapshot.StreamBook), []string{"NOPEUSDT"}) {
			t.Errorf("lost %v, want NOPEUSDT", r.Reported(venuetest.Lost, snapshot.StreamBook))
		}
	})
}

// A symbol watched while the streams run starts at the next heartbeat and
// one no longer watched stops.
func TestStreamsWatchChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New(Config{Seed: 1})
		s := v.Streams()
		r := newRecorder()
		s.Watch([]string{"BTCUSDT"})
		stop := run(s, r)
		time.Sleep(550 * time.Millisecond)
		s.Watch([]string{"XRPUSDT"})
		time.Sleep(500 * time.Millisecond)
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if len(r.DepthEvents("BTCUSDT")) != 5 || len(r.DepthEvents("XRPUSDT")) != 5 {
			t.Errorf("%d BTCUSDT and %d XRPUSDT events, want 5 and 5", len(r.DepthEvents("BTCUSDT")), len(r.DepthEvents("XRPUSDT")))
		}
		if !reflect.DeepEqual(r.Reported(venuetest.Live, snapshot.StreamBook), []string{"BTCUSDT", "XRPUSDT"}) {
			t.Errorf("live %v", r.Reported(venuetest.Live, snapshot.StreamBook))
		}
	})
}

// A sink that stalls makes the streams catch up, not skip: the events still
// chain from the first heartbeat to the last, heartbeat by heartbeat after a
// short stall and in one spanning event after a long one.
func TestStreamsCatchUp(t *testing.T) {
	for _, tc := range []struct {
		stall     time.Duration
		wantSpans int
	}{{320 * time.Millisecond, 0}, {30 * time.Second, 1}} {
		synctest.Test(t, func(t *testing.T) {
			v := New(Config{Seed: 1})
			s := v.Streams()
			s.Watch([]string{"BTCUSDT", "SOLUSDT"})
			r := newRecorder()
			r.stall = tc.stall
			k0 := Heartbeat(time.Now())
			stop := run(s, r)
			// Off the 100 ms grid, so the last tick and the stop never tie.
			time.Sleep(tc.stall + time.Second + 50*time.Millisecond)
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			k1 := Heartbeat(time.Now())
			for _, sym := range []string{"BTCUSDT", "SOLUSDT"} {
				if spans := checkChain(t, v, sym, r.DepthEvents(sym), k0, k1); spans != tc.wantSpans {
					t.Errorf("stall %s, %s: %d spanning events, want %d", tc.stall, sym, spans, tc.wantSpans)
				}
			}
		})
	}
}
