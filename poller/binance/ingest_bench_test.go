package binance

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
)

// BenchmarkDepthEventDecodeAndApply is one depth event on its way from the
// connection to a local book: the frame decoded as a connection decodes it
// (each decimal checked once, nothing copied: decodeLent) and the event
// applied to a book of 500 levels a side that it continues. The event
// changes the sizes of ten existing levels a side, as most events do; its
// update ids are written into the frame in place, so the loop itself
// allocates nothing, and neither should the ingest.
func BenchmarkDepthEventDecodeAndApply(b *testing.B) {
	const levels, changed = 500, 10
	var snap venue.Book
	for i := range levels {
		snap.Bids = append(snap.Bids, venue.Level{Price: fmt.Sprintf("%d.10", 60000-i), Size: "1.000"})
		snap.Asks = append(snap.Asks, venue.Level{Price: fmt.Sprintf("%d.20", 60001+i), Size: "1.000"})
	}
	const first = 1_000_000_000_000 // 13 digits, as the venue's ids are
	snap.LastUpdateID = first
	book := orderbook.New()
	if err := book.Sync(snap, levels); err != nil {
		b.Fatal(err)
	}
	// U, u and pu are 13 digits each; the loop rewrites them.
	frame := depthFrame(changed)
	at := strings.Index(string(frame), `"U":`)
	put := func(off int, v int64) { strconv.AppendInt(frame[:at+off], v, 10) }
	last := int64(first)
	var lend lender
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		put(4, last+1)
		put(22, last+1)
		put(41, last)
		f, err := decodeLent(frame, nil, &lend)
		if err != nil {
			b.Fatal(err)
		}
		if err := book.Apply(f.depth); err != nil {
			b.Fatal(err)
		}
		last++
	}
	if book.LastUpdateID() != last {
		b.Fatalf("book at %d after the events, want %d: an event did not continue it", book.LastUpdateID(), last)
	}
}

// depthFrame returns BTCUSDT's depth event as the venue frames it, changing
// the sizes of n levels a side of the book BenchmarkDepthEventDecodeAndApply
// syncs; its update ids are 13 digits each, as the venue's are.
func depthFrame(n int) []byte {
	var bids, asks []string
	for i := range n {
		bids = append(bids, fmt.Sprintf(`["%d.10","2.%03d"]`, 60000-i, i))
		asks = append(asks, fmt.Sprintf(`["%d.20","3.%03d"]`, 60001+i, i))
	}
	return []byte(`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1767225600456,"T":1767225600450,"s":"BTCUSDT",` +
		`"U":1000000000001,"u":1000000000001,"pu":1000000000000,"b":[` + strings.Join(bids, ",") + `],"a":[` + strings.Join(asks, ",") + `]}}`)
}
