package binance

import (
	"testing"

	"marketfeed/snapshot"
)

// Every stream kind has its row, and the names it gives are read back as
// that kind's frames: a kind added to snapshot without its row here fails
// this test rather than being subscribed as another kind's stream.
func TestEveryKindHasARow(t *testing.T) {
	for k := range snapshot.NumStreams {
		row := kinds[k]
		if row.suffix == "" {
			t.Errorf("stream kind %v has no row", k)
			continue
		}
		if got := classify(streamName(k, "BTCUSDT")); got != row.frame {
			t.Errorf("%v: the stream %s reads as frame kind %d, want %d", k, streamName(k, "BTCUSDT"), got, row.frame)
		}
	}
	if streamName(snapshot.StreamTrades, "BTCUSDT") == streamName(snapshot.StreamBook, "BTCUSDT") {
		t.Error("two kinds share a stream name")
	}
}

// A kind with no row panics where it is used: never a resubscription of
// the trade stream for a kind the client does not know.
func TestUnknownKindPanics(t *testing.T) {
	for _, k := range []snapshot.Stream{-1, snapshot.NumStreams} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("stream kind %d was given a stream", int(k))
				}
			}()
			new(Streams).Resubscribe(k, "BTCUSDT")
		}()
	}
}
