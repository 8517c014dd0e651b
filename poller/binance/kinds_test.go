package binance

import (
	"testing"

	"marketfeed/poller/venue"
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
		if row.read == nil || row.event == nil || row.deliver == nil {
			t.Errorf("%v: its row has no reader, event or sink call", k)
		}
	}
	if streamName(snapshot.StreamTrades, "BTCUSDT") == streamName(snapshot.StreamBook, "BTCUSDT") {
		t.Error("two kinds share a stream name")
	}
}

// Every whole-market stream's row is whole, its name is read back as its
// frames, and its label, which its metrics and log keys carry, is its own:
// a row missing a part fails here rather than dropping the stream's frames.
func TestEveryWholeMarketStreamIsARow(t *testing.T) {
	labels := map[string]bool{"unknown": true}
	for k := range snapshot.NumStreams {
		labels[k.VenueStream()] = true
	}
	frames := map[frameKind]bool{}
	if len(wholeMarket) != int(venue.NumDocs) {
		t.Errorf("%d whole-market stream rows, want one per venue.Doc (%d)", len(wholeMarket), venue.NumDocs)
	}
	for _, row := range wholeMarket {
		if row.name == "" || row.read == nil || row.newest == nil || row.deliver == nil || row.what == "" {
			t.Errorf("whole-market stream %q: its row is not complete", row.name)
		}
		if got := classify(row.name); got != row.frame || frames[row.frame] {
			t.Errorf("%s reads as frame kind %d, want its own %d", row.name, got, row.frame)
		}
		label := row.doc.String()
		if labels[label] {
			t.Errorf("%s: label %q is another stream's", row.name, label)
		}
		frames[row.frame], labels[label] = true, true
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
