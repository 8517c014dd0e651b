package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"marketfeed/internal/wire"
)

// The budget's promises seen from outside: what the venue's weight is
// spent on decides which answers stay current.

// hammer reads a pair's book with clients concurrent clients for d and
// returns the distinct venue times its 200 answers carried (each one a venue
// read that reached the client) and how many answers were not 200.
func hammer(t *testing.T, api, id string, clients int, d time.Duration) (times map[int64]bool, failed int) {
	t.Helper()
	var mu sync.Mutex
	times = make(map[int64]bool)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				resp, body := get(t, api+"/api/public/orderbook?ticker_id="+id)
				mu.Lock()
				if resp.StatusCode == http.StatusOK {
					var b wire.Book
					decode(t, body, &b)
					times[b.Timestamp] = true
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return times, failed
}

// Over REST alone (the venue's stream paths answer 404), a pair that
// clients keep reading is read on its 350 ms schedule while the minute has
// weight, however many other pairs and depths the process answered before:
// the reads that keep a requested pair current are not held back by the
// pacing of the reads that stand in for lost streams. Before, after the
// same process had answered a few dozen other books, a pair hammered by six
// clients for 3 s got no read at all (the stand-ins' pacing, a quarter of
// the limit in any 30 s, spent by the books read before), while a fresh
// process read it every 350 ms. Without streams (-venue-streams off) the
// same: the sweep's pairs, hot for a minute, were read before it.
func TestRESTOnlyRequestedPairIsReadOnItsSchedule(t *testing.T) {
	venue := startVenueSim(t, "-streams=false", "-weight-limit", "2400")
	t.Run("streams refused", func(t *testing.T) {
		requestedPairReadOnSchedule(t, streamArgs(venue.url, 10*time.Second))
	})
	t.Run("streams off", func(t *testing.T) {
		requestedPairReadOnSchedule(t, chaosArgs(venue.url, 10*time.Second))
	})
}

// requestedPairReadOnSchedule reads every listed pair's book but one, twice,
// then hammers that one and counts its reads.
func requestedPairReadOnSchedule(t *testing.T, args []string) {
	api, _, _ := startLoggedApp(t, args...)
	ids := listedIDs(t, api)
	if len(ids) < 20 {
		t.Fatalf("%d pairs listed, want a few dozen", len(ids))
	}
	const id = "BTC_USDT"
	for _, other := range ids {
		if other == id {
			continue
		}
		for _, q := range []string{"", "&depth=5"} {
			if resp, body := get(t, api+"/api/public/orderbook?ticker_id="+other+q); resp.StatusCode != http.StatusOK {
				t.Fatalf("/orderbook of %s%s: %d %s", other, q, resp.StatusCode, body)
			}
		}
	}
	const d = 4 * time.Second
	times, failed := hammer(t, api, id, 6, d)
	// 350 ms over 4 s is 11 reads. Until a second request marks the pair
	// again (want marks a pair at most once a second) it waits its turn
	// behind the sweep's pairs; half the schedule is ample margin on a
	// loaded machine, and far from the one or two reads it got before.
	if want := int(d/(350*time.Millisecond)) / 2; len(times) < want {
		t.Errorf("%s read %d times in %s of requests (%d answers not 200), want at least %d",
			id, len(times), d, failed, want)
	}
	t.Logf("%d pairs read before; %s then served %d venue times in %s, %d answers not 200", len(ids)-1, id, len(times), d, failed)
}
