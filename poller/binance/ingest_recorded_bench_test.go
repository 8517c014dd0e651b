package binance

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"marketfeed/poller/orderbook"
	"marketfeed/poller/venue"
)

// recordedSymbols are the four markets of the recorded streams, each with
// its real depth snapshot (testdata/recorded/README.md).
var recordedSymbols = []string{"SUSHIUSDT", "AKROUSDT", "KEEPUSDT", "CTKUSDT"}

// recordedEvent is one depth frame of the recording, with where its update
// ids are written so that a replay can number it on.
type recordedEvent struct {
	frame  []byte
	symbol int    // index in recordedSymbols
	ids    [3]int // offsets of the values of U, u and pu in frame
	first  int64  // U, u and pu as recorded
	last   int64
	prev   int64
}

// BenchmarkDepthEventDecodeAndApplyRecorded is what the synthetic
// BenchmarkDepthEventDecodeAndApply measures, on real frames: the 764
// depth@100ms frames of thirty seconds of four mainnet markets
// (testdata/recorded/binance-ws-combined-cryptofeed-20210722.jsonl), each
// decoded as a connection decodes it and applied to its market's book,
// synced from the market's real 1000-level snapshot. One op is one event.
// The recording is replayed over and over (see recordedReplay).
func BenchmarkDepthEventDecodeAndApplyRecorded(b *testing.B) {
	r := newRecordedReplay(b)
	var lend lender
	b.SetBytes(r.size)
	b.ReportAllocs()
	pass, i := int64(1), 0
	for b.Loop() {
		e := &r.replay[i]
		if !e.number(pass * r.span[e.symbol]) {
			// The ids would outgrow their digits: start over.
			b.StopTimer()
			r.start()
			pass, i = 1, 0
			b.StartTimer()
			continue
		}
		f, err := decodeLent(e.frame, nil, &lend)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.books[e.symbol].Apply(f.depth); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(r.replay) {
			pass, i = pass+1, 0
		}
	}
	r.check()
}

// BenchmarkDepthEventApplyRecorded is the book's share of
// BenchmarkDepthEventDecodeAndApplyRecorded: the same events, decoded
// before the clock starts, applied to the same books.
func BenchmarkDepthEventApplyRecorded(b *testing.B) {
	r := newRecordedReplay(b)
	events := make([]venue.DepthUpdate, len(r.replay))
	for i, e := range r.replay {
		e.number(0)
		f, err := decodeFrame(e.frame)
		if err != nil {
			b.Fatal(err)
		}
		events[i] = f.depth
	}
	b.ReportAllocs()
	pass, i := int64(1), 0
	for b.Loop() {
		e := &r.replay[i]
		u, shift := events[i], pass*r.span[e.symbol]
		u.First, u.Last, u.Prev = u.First+shift, u.Last+shift, u.Prev+shift
		if err := r.books[e.symbol].Apply(u); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(r.replay) {
			pass, i = pass+1, 0
		}
	}
	r.check()
}

// recordedReplay replays the recording over and over: first once as it
// was recorded, from the markets' snapshots (start); then, pass after
// pass, each market's events from the first that applies to its snapshot
// (replay), their update ids moved on by the market's span a pass so
// that they continue the book. The events set sizes outright, so from the
// second pass on the books go through the same states every pass.
type recordedReplay struct {
	b         *testing.B
	events    []recordedEvent // every depth frame, in order
	snapshots []venue.Book
	replay    []recordedEvent
	span      []int64 // per market: its last replayed u less its first replayed pu
	books     []*orderbook.Book
	size      int64 // the replayed frames' mean length
}

func newRecordedReplay(b *testing.B) *recordedReplay {
	r := &recordedReplay{b: b, span: make([]int64, len(recordedSymbols)),
		books: make([]*orderbook.Book, len(recordedSymbols))}
	r.events, r.snapshots = recordedDepth(b)
	firstPrev := make([]int64, len(recordedSymbols))
	for _, e := range r.events {
		if firstPrev[e.symbol] == 0 {
			if id := r.snapshots[e.symbol].LastUpdateID; e.last < id || e.first > id {
				continue
			}
			firstPrev[e.symbol] = e.prev
		}
		r.span[e.symbol] = e.last - firstPrev[e.symbol]
		r.replay = append(r.replay, e)
		r.size += int64(len(e.frame))
	}
	r.size /= int64(len(r.replay))
	r.start()
	return r
}

// start syncs every book from its snapshot and applies the whole
// recording once, as it was recorded: then the books are where every
// later pass leaves them.
func (r *recordedReplay) start() {
	for i := range recordedSymbols {
		r.books[i] = orderbook.New()
		if err := r.books[i].Sync(r.snapshots[i], 1000); err != nil {
			r.b.Fatal(err)
		}
	}
	for _, e := range r.events {
		e.number(0)
		f, err := decodeFrame(e.frame)
		if err != nil {
			r.b.Fatal(err)
		}
		if err := r.books[e.symbol].Apply(f.depth); err != nil {
			r.b.Fatal(err)
		}
	}
}

// check fails the benchmark unless every book is still in sequence.
func (r *recordedReplay) check() {
	for s, book := range r.books {
		if !book.Synced() {
			r.b.Fatalf("%s: book out of sequence after the replay", recordedSymbols[s])
		}
	}
}

// number writes the event's update ids moved on by shift into its frame,
// in place; it reports false, writing nothing, when one would need another
// digit.
func (e *recordedEvent) number(shift int64) bool {
	vals := [3]int64{e.first + shift, e.last + shift, e.prev + shift}
	orig := [3]int64{e.first, e.last, e.prev}
	for k := range vals {
		if digits(vals[k]) != digits(orig[k]) {
			return false
		}
	}
	for k, off := range e.ids {
		strconv.AppendInt(e.frame[:off], vals[k], 10)
	}
	return true
}

// recordedDepth reads the recording's depth frames, in order, and the four
// markets' snapshots.
func recordedDepth(b *testing.B) ([]recordedEvent, []venue.Book) {
	f, err := os.Open(filepath.Join("testdata", "recorded", "binance-ws-combined-cryptofeed-20210722.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	index := map[string]int{}
	snapshots := make([]venue.Book, len(recordedSymbols))
	for i, sym := range recordedSymbols {
		index[sym] = i
		snapshots[i], err = decodeBook(readFixture(b, "recorded/binance-depth-cryptofeed-"+sym+"-limit1000-20210722.json"))
		if err != nil {
			b.Fatal(err)
		}
	}
	var events []recordedEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		fr, err := decodeFrame(line)
		if err != nil {
			b.Fatal(err)
		}
		if fr.kind != frameDepth {
			continue
		}
		e := recordedEvent{frame: line, symbol: index[fr.depth.Symbol],
			first: fr.depth.First, last: fr.depth.Last, prev: fr.depth.Prev}
		for k, key := range []string{`"U":`, `"u":`, `"pu":`} {
			at := bytes.Index(line, []byte(key))
			if at < 0 {
				b.Fatalf("no %s in %s", key, line)
			}
			e.ids[k] = at + len(key)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	if len(events) != 764 {
		b.Fatalf("%d depth frames in the recording, want 764", len(events))
	}
	return events, snapshots
}

// digits is how many decimal digits v, positive, is written with.
func digits(v int64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}
