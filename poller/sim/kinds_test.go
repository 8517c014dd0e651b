package sim

import (
	"testing"

	"marketfeed/snapshot"
)

// Every stream kind has its row: a kind added to snapshot without one here
// fails this test rather than going undelivered.
func TestEveryKindHasARow(t *testing.T) {
	for k := range snapshot.NumStreams {
		if kinds[k].deliver == nil {
			t.Errorf("stream kind %v has no row", k)
		}
	}
}

// A kind with no row panics where it is used, rather than being ignored.
func TestUnknownKindPanics(t *testing.T) {
	s := New(Config{Seed: 1}).Streams()
	for _, k := range []snapshot.Stream{-1, snapshot.NumStreams} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("stream kind %d was resubscribed", int(k))
				}
			}()
			s.Resubscribe(k, "BTCUSDT")
		}()
	}
}
