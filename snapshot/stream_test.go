package snapshot

import (
	"testing"
	"time"
)

// Each kind's row takes its own values through the store and the wire, and
// a value goes to its own kind whatever the caller holds it as.
func TestStreamRows(t *testing.T) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT"), readAt)
	id := []byte("BTC_USDT")
	values := [NumStreams]PairValue{StreamBook: bookFor(t, "BTC_USDT"), StreamTrades: tradesFor(t, "BTC_USDT")}
	prefixes := map[string]bool{}
	for k := range NumStreams {
		v := values[k]
		if v.Stream() != k {
			t.Fatalf("%v: the value says it is of %v", k, v.Stream())
		}
		if prefixes[k.KeyPrefix()] {
			t.Errorf("%v: key prefix %q is another kind's", k, k.KeyPrefix())
		}
		prefixes[k.KeyPrefix()] = true
		now := readAt.UnixNano()
		if got, listed := s.Pair(k, id, now); !listed || got.FreshAt(now, time.Second) {
			t.Errorf("%v: before a put: listed %v, fresh %v", k, listed, listed && got.FreshAt(now, time.Second))
		}
		decoded, err := k.Decode(v.AppendWire(nil))
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if !s.Put(decoded) {
			t.Fatalf("%v: not put", k)
		}
		if got, _ := s.Pair(k, id, now); got.ReadAt() != v.ReadAt() || !got.FreshAt(now, time.Second) {
			t.Errorf("%v: the store holds a value read at %d, want %d", k, got.ReadAt(), v.ReadAt())
		}
		if at, _ := s.ReadAt(k, id); at != v.ReadAt() {
			t.Errorf("%v: ReadAt %d, want %d", k, at, v.ReadAt())
		}
		if _, err := k.Decode(values[(k+1)%NumStreams].AppendWire(nil)); err == nil {
			t.Errorf("%v: decoded another kind's wire form", k)
		}
	}
	if got := s.Covered(StreamTrades, id, readAt.UnixNano()); got != values[StreamTrades].(*Trades).NewestVenueID() {
		t.Errorf("trades cover %d", got)
	}
	if got := s.Covered(StreamBook, id, readAt.UnixNano()); got != values[StreamBook].(*Book).Seq() {
		t.Errorf("book covers %d", got)
	}
}

// A Stream that names no kind panics where it is used: a guess would serve
// one kind's snapshot for another's.
func TestUnknownStreamPanics(t *testing.T) {
	for _, k := range []Stream{-1, NumStreams} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("stream %d has a key prefix", int(k))
				}
			}()
			_ = k.KeyPrefix()
		}()
		if k.String() != "stream(?)" {
			t.Errorf("stream %d is named %q", int(k), k)
		}
	}
}

// A kind's names are what operators query and other processes read: the
// metric labels and the replication keys stay as served.
func TestStreamKindNames(t *testing.T) {
	for _, tc := range []struct {
		s                         Stream
		name, part, venue, prefix string
	}{
		{StreamBook, "book", "books", "depth", "book."},
		{StreamTrades, "trades", "trades", "trades", "trades."},
	} {
		if got := [4]string{tc.s.String(), tc.s.Part(), tc.s.VenueStream(), tc.s.KeyPrefix()}; got != [4]string{tc.name, tc.part, tc.venue, tc.prefix} {
			t.Errorf("kind %d: names %q, want %q", int(tc.s), got, [4]string{tc.name, tc.part, tc.venue, tc.prefix})
		}
	}
}

// A pair holds a kind once a value of it is put, and nothing of a kind
// put for another pair, nor of an unlisted pair.
func TestStoreHoldsEachKindOnceItIsPut(t *testing.T) {
	s := NewStore()
	s.PutDoc(pairsOf("BTC_USDT", "ETH_USDT"), readAt)
	id, now := []byte("BTC_USDT"), readAt.UnixNano()
	values := [NumStreams]PairValue{StreamBook: bookFor(t, "BTC_USDT"), StreamTrades: tradesFor(t, "BTC_USDT")}
	for k := range NumStreams {
		if s.Holds(k, id, now) {
			t.Errorf("%v held before its put", k)
		}
		s.Put(values[k])
		for j := range NumStreams {
			if got, want := s.Holds(j, id, now), j <= k; got != want {
				t.Errorf("after %v's put: holds %v %v, want %v", k, j, got, want)
			}
			if s.Holds(j, []byte("ETH_USDT"), now) || s.Holds(j, []byte("XRP_USDT"), now) {
				t.Errorf("after %v's put: another pair holds %v", k, j)
			}
		}
	}
}

// A kind whose values can vouch for fewer levels than a request asks says
// so (Deep): the poller reads such a value deeper for the request, and a
// kind that did not say so would be served short instead.
func TestOnlyDeepKindsServeToADepth(t *testing.T) {
	short := [NumStreams]PairValue{
		StreamBook:   NewLocalBook("BTC_USDT", bookTime, 1, ladder(3, true), ladder(3, false), Open{Bids: true, Asks: true}, readAt),
		StreamTrades: tradesFor(t, "BTC_USDT"),
	}
	for k := range NumStreams {
		if v := short[k]; !k.Deep() && !v.Serves(MaxDepth) {
			t.Errorf("%v: its value serves only %d levels or fewer, yet the kind is not deep", k, 3)
		}
	}
}
