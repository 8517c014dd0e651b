package binance

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/coder/websocket"

	"marketfeed/poller/venue"
	"marketfeed/poller/venue/venuetest"
	"marketfeed/snapshot"
)

// lineConns returns the connection of each line on path that carries name,
// line A first, telling the lines by the User-Agent they were opened with.
func (h *harness) lineConns(path, name string) [2]*venueConn {
	h.t.Helper()
	var by [2]*venueConn
	for _, c := range h.v.connections() {
		if c.path != path || !slices.Contains(c.streams(), name) {
			continue
		}
		switch c.ua {
		case userAgent + " (line A)":
			by[0] = c
		case userAgent + " (line B)":
			by[1] = c
		default:
			h.t.Fatalf("connection %d opened as %q", c.n, c.ua)
		}
	}
	if by[0] == nil || by[1] == nil || by[0] == by[1] {
		h.t.Fatalf("%s on %s: want one connection of each line, got %v", name, path, by)
	}
	return by
}

// depthEvent is a BTCUSDT depth event with update ids first..last after
// prev, at time ms, whose levels are given as JSON.
func depthEvent(first, last, prev int, levels string) string {
	return fmt.Sprintf(`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":%d,"T":%d,"s":"BTCUSDT","U":%d,"u":%d,"pu":%d,%s}}`,
		1000+last, 1000+last, first, last, prev, levels)
}

// deliveredIDs returns the last update ids of the depth events delivered.
func (r *recordSink) deliveredIDs() []int64 {
	var ids []int64
	for _, u := range r.DepthEvents("") {
		ids = append(ids, u.Last)
	}
	return ids
}

// With two lines every stream is carried by two connections, one of each
// line; each event is delivered once, whichever line brings it first, and a
// copy is dropped before its levels are read.
func TestTwoLinesDeliverEachEventOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, Binance, []string{"BTCUSDT"}, nil, StreamOptions{Lines: 2})
		defer h.stop()
		wantCalls(t, sorted(h.sink.take()), "live book BTCUSDT", "live book BTCUSDT", "live trades BTCUSDT", "live trades BTCUSDT")
		depth := h.lineConns("/public/stream", "btcusdt@depth@100ms")
		market := h.lineConns("/market/stream", "btcusdt@aggTrade")
		if n := len(h.v.connections()); n != 4 {
			t.Fatalf("%d connections, want a depth and a market connection for each line", n)
		}
		if !slices.Contains(market[0].streams(), tickerName) || !slices.Contains(market[1].streams(), tickerName) {
			t.Error("the all-market ticker stream is not carried by both lines")
		}

		const levels = `"b":[["100.5","1"]],"a":[]`
		depth[0].send(t, depthEvent(1, 2, 0, levels))
		synctest.Wait()
		depth[1].send(t, depthEvent(1, 2, 0, levels))
		// Line B is ahead for the next two: line A's copies come late.
		depth[1].send(t, depthEvent(3, 4, 2, levels))
		depth[1].send(t, depthEvent(5, 6, 4, levels))
		synctest.Wait()
		depth[0].send(t, depthEvent(3, 4, 2, levels))
		// A copy's levels are not read: a copy whose levels would be
		// refused is dropped as a copy, not reported as bad data.
		depth[0].send(t, depthEvent(5, 6, 4, `"b":[["not a price","1"]],"a":[]`))
		depth[0].send(t, depthEvent(7, 8, 6, levels))
		synctest.Wait()
		depth[1].send(t, depthEvent(7, 8, 6, levels))
		synctest.Wait()
		if got := h.sink.deliveredIDs(); !slices.Equal(got, []int64{2, 4, 6, 8}) {
			t.Errorf("delivered update ids %v, want each of 2, 4, 6, 8 once, in order", got)
		}

		trade := `{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":5,"T":5,"s":"BTCUSDT","a":%d,"p":"100","q":"1","m":false}}`
		market[1].send(t, fmt.Sprintf(trade, 10))
		market[0].send(t, fmt.Sprintf(trade, 10))
		market[0].send(t, fmt.Sprintf(trade, 11))
		market[1].send(t, fmt.Sprintf(trade, 11))
		tickers := `{"stream":"!ticker@arr","data":[{"e":"24hrTicker","E":%d,"s":"BTCUSDT","c":"100","h":"101","l":"99","v":"%d","q":"1000"}]}`
		market[0].send(t, fmt.Sprintf(tickers, 2000, 7))
		market[1].send(t, fmt.Sprintf(tickers, 2000, 7))
		market[1].send(t, fmt.Sprintf(tickers, 3000, 8))
		market[0].send(t, fmt.Sprintf(tickers, 3000, 8))
		// A frame older than one delivered (a line lagging by a second)
		// would put older statistics back: dropped.
		market[0].send(t, fmt.Sprintf(tickers, 2500, 6))
		synctest.Wait()
		var tradeIDs []int64
		for _, tr := range h.sink.Trades("") {
			tradeIDs = append(tradeIDs, tr.ID)
		}
		var volumes []string
		for _, rows := range h.sink.TickerRows() {
			volumes = append(volumes, rows[0].BaseVolume)
		}
		if !slices.Equal(tradeIDs, []int64{10, 11}) {
			t.Errorf("delivered trade ids %v, want 10 and 11 once each", tradeIDs)
		}
		if !slices.Equal(volumes, []string{"7", "8"}) {
			t.Errorf("delivered ticker volumes %v, want 7 then 8, each once", volumes)
		}
		for name, want := range map[string]string{
			`marketfeed_stream_events_total{kind="depth"}`:   "4",
			`marketfeed_stream_events_total{kind="trades"}`:  "2",
			`marketfeed_stream_events_total{kind="tickers"}`: "2",
			`marketfeed_stream_duplicates_total`:             "9",
			`marketfeed_stream_bad_frames_total`:             "0",
			`marketfeed_stream_connections`:                  "4",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
		for _, c := range h.sink.take() {
			if c != "depth BTCUSDT" && c != "trade BTCUSDT" && c != "tickers 1" {
				t.Errorf("sink call %q while both lines delivered", c)
			}
		}
	})
}

// The all-market mark price stream rides both lines' market connections;
// each second's frame is delivered once, whichever line brings it first,
// and a frame older than one delivered is dropped, as the tickers' are.
func TestTwoLinesDeliverEachMarkPriceFrameOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, Binance, []string{"BTCUSDT"}, nil, StreamOptions{Lines: 2})
		defer h.stop()
		h.sink.take()
		market := h.lineConns("/market/stream", "btcusdt@aggTrade")
		if !slices.Contains(market[0].streams(), MarkPriceStream) || !slices.Contains(market[1].streams(), MarkPriceStream) {
			t.Fatal("the mark price stream is not carried by both lines")
		}
		marks := `{"stream":"!markPrice@arr@1s","data":[{"e":"markPriceUpdate","E":%d,"s":"BTCUSDT","p":"%s","P":"99","i":"99.5","r":"0.0001","T":1767225600000},` +
			`{"e":"markPriceUpdate","E":%[1]d,"s":"ETHUSDT","p":"-1","P":"1","i":"1","r":"0","T":1767225600000}]}`
		market[0].send(t, fmt.Sprintf(marks, 2000, "100"))
		market[1].send(t, fmt.Sprintf(marks, 2000, "100"))
		market[1].send(t, fmt.Sprintf(marks, 3000, "101"))
		market[0].send(t, fmt.Sprintf(marks, 3000, "101"))
		market[0].send(t, fmt.Sprintf(marks, 2500, "99"))
		synctest.Wait()
		var got []venue.Contract
		for _, rows := range h.sink.ContractRows() {
			got = append(got, rows...)
		}
		want := []venue.Contract{
			{Symbol: "BTCUSDT", MarkPrice: "100", IndexPrice: "99.5", SettlePrice: "99", FundingRate: "0.0001", NextFunding: 1767225600000, Time: 2000},
			{Symbol: "BTCUSDT", MarkPrice: "101", IndexPrice: "99.5", SettlePrice: "99", FundingRate: "0.0001", NextFunding: 1767225600000, Time: 3000},
		}
		if !slices.Equal(got, want) {
			t.Errorf("delivered %+v, want each second's BTCUSDT row once (ETHUSDT's negative mark left out)", got)
		}
		for name, want := range map[string]string{
			`marketfeed_stream_events_total{kind="marks"}`: "2",
			`marketfeed_stream_duplicates_total`:           "3",
			`marketfeed_stream_bad_frames_total`:           "0",
		} {
			if got := h.metric(name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
	})
}

// A line whose connection is dropped in the middle of a burst costs
// nothing: the other line's copies keep the chain whole, nothing is
// reported Lost, and the dropped line comes back. Only when both lines
// have lost a stream is it reported Lost, once.
func TestTwoLinesOneDroppedMidBurstLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, Binance, []string{"BTCUSDT"}, nil, StreamOptions{Lines: 2})
		defer h.stop()
		h.sink.take()
		depth := h.lineConns("/public/stream", "btcusdt@depth@100ms")
		const levels = `"b":[],"a":[["101","2"]]`
		prev := 0
		send := func(lines []*venueConn, n int) {
			for range n {
				ev := depthEvent(prev+1, prev+2, prev, levels)
				for _, c := range lines {
					c.send(t, ev)
				}
				prev += 2
			}
		}
		send([]*venueConn{depth[0], depth[1]}, 3)
		depth[0].send(t, depthEvent(prev+1, prev+2, prev, levels))
		synctest.Wait()
		// Line A is cut after the venue sent it one more event than line
		// B; the burst goes on on line B alone.
		_ = depth[0].ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		depth[1].send(t, depthEvent(prev+1, prev+2, prev, levels))
		prev += 2
		send([]*venueConn{depth[1]}, 3)
		synctest.Wait()
		// Line A is dialled again at once (its connection was young, so
		// after a back-off of at most a second) and carries the stream
		// again: reported Live, never Lost.
		time.Sleep(time.Second)
		synctest.Wait()
		calls := h.sink.take()
		for _, c := range calls {
			if c == "lost book BTCUSDT" {
				t.Fatalf("sink calls %q: a stream reported Lost while the other line carried it", calls)
			}
		}
		if !slices.Contains(calls, "live book BTCUSDT") {
			t.Errorf("sink calls %q: line A's stream not back", calls)
		}
		again := h.lineConns("/public/stream", "btcusdt@depth@100ms")
		if again[0] == depth[0] || again[1] != depth[1] {
			t.Fatal("want a new line A connection beside the same line B")
		}
		send([]*venueConn{again[0], again[1]}, 2)
		synctest.Wait()
		var want []int64
		for id := int64(2); id <= int64(prev); id += 2 {
			want = append(want, id)
		}
		if got := h.sink.deliveredIDs(); !slices.Equal(got, want) {
			t.Errorf("delivered update ids %v, want %v: every event once, none missed", got, want)
		}

		// Both lines cut: the stream is lost, and said so once.
		h.v.mu.Lock()
		h.v.reject = true
		h.v.mu.Unlock()
		_ = again[0].ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		_ = again[1].ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		lost := 0
		for _, c := range h.sink.take() {
			if c == "lost book BTCUSDT" {
				lost++
			}
		}
		if lost != 1 {
			t.Errorf("lost reported %d times when both lines were cut, want once", lost)
		}
	})
}

// The table a copy is told by: only an event delivered is a copy. An event
// older than the newest delivered but never delivered itself is not (a
// connection just opened delivers the newest events while the one it
// replaces still has older ones queued); ids that start again at a later
// time (a venue that restarted) are new events, not copies.
func TestDedupTellsCopiesByIDAndTime(t *testing.T) {
	var d dedup
	d.watch(map[string]bool{"BTCUSDT": true})
	routed := d.of("BTCUSDT") // the marks the symbol's routes hold
	sink := newRecordSink()
	ev := func(last, time int64) venue.DepthUpdate {
		return venue.DepthUpdate{Symbol: "BTCUSDT", First: last, Last: last, Prev: last - 1, Time: time}
	}
	var h hold // what the check leaves held for the delivery
	depth := func(u venue.DepthUpdate) bool {
		return d.deliver(snapshot.StreamBook, u.Symbol, routed, u.Last, u.Time, &frame{depth: u}, sink, &h)
	}
	for _, step := range []struct {
		u    venue.DepthUpdate
		want bool
	}{
		{ev(100, 5000), true},
		{ev(100, 5000), false}, // the other line's copy
		{ev(104, 5040), true},  // a new connection's first event
		{ev(102, 5020), true},  // the old one's queued events, never delivered
		{ev(103, 5030), true},
		{ev(104, 5040), false}, // and then its copy of the newest
		{ev(105, 5040), true},  // the next, in the same millisecond
		{ev(3, 9000), true},    // ids that started again
		{ev(4, 9100), true},
		{ev(4, 9100), false}, // and copies of them, below ids delivered before
		{ev(3, 9000), false},
	} {
		if known := d.check(snapshot.StreamBook, step.u.Symbol, routed, step.u.Last, step.u.Time, &h); known == step.want {
			t.Errorf("update %d at %d: known before delivery %v", step.u.Last, step.u.Time, known)
		}
		if got := depth(step.u); got != step.want {
			t.Errorf("update %d at %d: delivered %v, want %v", step.u.Last, step.u.Time, got, step.want)
		}
	}
	tr := venue.Trade{ID: 7, Time: 100, Price: "1", Size: "1"}
	trade := func() bool {
		return d.deliver(snapshot.StreamTrades, "BTCUSDT", routed, tr.ID, tr.Time, &frame{symbol: "BTCUSDT", trade: tr}, sink, &h)
	}
	if !trade() || trade() {
		t.Error("a trade and its copy: want the trade delivered and the copy not")
	}
	// A symbol no longer watched has no marks, whatever its routes still
	// hold: its events go to the sink, which drops what it does not follow.
	d.watch(map[string]bool{})
	if !depth(ev(100, 5000)) {
		t.Error("an unwatched symbol's event was taken for a copy")
	}
}

// The lines' reports are merged: Lost only when no line carries a stream.
// A report about a symbol no longer watched leaves no mark, so that it
// cannot hide a loss once the symbol is watched again.
func TestLineReportsMerge(t *testing.T) {
	s := NewStreams(Binance, StreamOptions{Lines: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT"})
	sink := newRecordSink()
	a, b := lineSink{Sink: sink, s: s, line: 0}, lineSink{Sink: sink, s: s, line: 1}
	book := snapshot.StreamBook
	a.Live(book, []string{"BTCUSDT", "ETHUSDT"})
	b.Live(book, []string{"BTCUSDT"})
	a.Lost(book, []string{"BTCUSDT"})
	wantCalls(t, sink.take(), "live book BTCUSDT", "live book BTCUSDT")
	b.Lost(book, []string{"BTCUSDT"})
	wantCalls(t, sink.take(), "lost book BTCUSDT")

	s.Watch(nil)
	a.Live(book, []string{"BTCUSDT"}) // acknowledged after the symbol was dropped
	s.Watch([]string{"BTCUSDT"})
	b.Live(book, []string{"BTCUSDT"})
	b.Lost(book, []string{"BTCUSDT"})
	wantCalls(t, sink.take(), "live book BTCUSDT", "lost book BTCUSDT")
}

// The early check of a depth event leaves its symbol's marks locked for
// the event's delivery (see hold). Whatever becomes of a frame, delivered,
// a copy, spoiled, unroutable, not JSON or read twice, its handling ends
// with the marks unlocked, and an event that was not delivered is not
// taken for a copy later.
func TestFrameLeavesItsSymbolUnlocked(t *testing.T) {
	s := NewStreams(Binance, StreamOptions{Lines: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT", "ETHUSDT"})
	a, b := benchLine(s), benchLine(s)
	for _, c := range []*wsConn{a, b} {
		c.sl = &slot{s: s, want: map[string]streamRef{}, resub: map[string]bool{}, wake: make(chan struct{}, 1)}
		c.reroute(func(routes map[string]streamRef) {
			routes["ethusdt@depth@100ms"] = streamRef{kind: snapshot.StreamBook, symbol: "ETHUSDT"}
		})
	}
	sink := newRecordSink()
	const sides = `"b":[["60000.10","1"]],"a":[]`
	data := func(last int) string {
		ev := depthEvent(last, last, last-1, sides)
		return ev[strings.Index(ev, `{"e"`) : len(ev)-1]
	}
	cut := func(frame string) string { return frame[:strings.Index(frame, `"b":`)+8] }
	for _, step := range []struct {
		what  string
		conn  *wsConn
		frame string
		want  []string // the sink calls
	}{
		{"an event", a, depthEvent(10, 10, 9, sides), []string{"depth BTCUSDT"}},
		{"its copy on the same line", a, depthEvent(10, 10, 9, sides), nil},
		{"its copy on the other line", b, depthEvent(10, 10, 9, sides), nil},
		{"an event with a bad level", a, depthEvent(11, 11, 10, `"b":[["x","1"]],"a":[]`), []string{"lost book BTCUSDT"}},
		{"the same event well formed", b, depthEvent(11, 11, 10, sides), []string{"depth BTCUSDT"}},
		{"an event cut short in its levels", a, cut(depthEvent(12, 12, 11, sides)), nil},
		{"an event of another stream's symbol", a, strings.Replace(depthEvent(12, 12, 11, sides), "btcusdt", "ethusdt", 1),
			[]string{"lost book ETHUSDT"}},
		{"an event of a stream not routed", a, strings.Replace(depthEvent(12, 12, 11, sides), "btcusdt", "solusdt", 1), nil},
		{"a frame with two events", b, `{"stream":"btcusdt@depth@100ms","data":` + data(12) + `,"data":` + data(13) + `}`,
			[]string{"depth BTCUSDT"}},
		{"the first of them again", a, depthEvent(12, 12, 11, sides), []string{"depth BTCUSDT"}},
	} {
		step.conn.handle([]byte(step.frame), sink)
		for _, sym := range []string{"BTCUSDT", "ETHUSDT"} {
			m := s.dups.of(sym)
			if !m.mu.TryLock() {
				t.Fatalf("%s: %s left locked", step.what, sym)
			}
			m.mu.Unlock()
		}
		if calls := sink.take(); !slices.Equal(calls, step.want) {
			t.Errorf("%s: sink calls %q, want %q", step.what, calls, step.want)
		}
	}
	if got, want := sink.deliveredIDs(), []int64{10, 11, 13, 12}; !slices.Equal(got, want) {
		t.Errorf("delivered update ids %v, want %v", got, want)
	}
}

// A frame is routed without the connection's lock, which its control
// requests and subscriptions take: a connection busy subscribing still
// delivers what it reads, and a frame takes one lock, its symbol's.
func TestFrameIsRoutedWhileTheConnectionIsLocked(t *testing.T) {
	s := NewStreams(Binance, StreamOptions{Lines: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT"})
	c := benchLine(s)
	sink := newRecordSink()
	c.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle([]byte(depthEvent(10, 10, 9, `"b":[["60000.10","1"]],"a":[]`)), sink)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a frame waited for the connection's lock")
	}
	c.mu.Unlock()
	if calls := sink.take(); !slices.Equal(calls, []string{"depth BTCUSDT"}) {
		t.Errorf("sink calls %q, want the event delivered", calls)
	}
}

// A symbol dropped and watched again has new marks, and a connection
// still routed as it was before (its streams not yet subscribed again)
// finds them as one routed anew does: an event either line delivers is a
// copy on the other.
func TestLinesRoutedAcrossAWatchAgainShareTheirMarks(t *testing.T) {
	s := NewStreams(Binance, StreamOptions{Lines: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Watch([]string{"BTCUSDT"})
	before := benchLine(s)
	s.Watch(nil)
	s.Watch([]string{"BTCUSDT"})
	after := benchLine(s)
	sink := newRecordSink()
	const sides = `"b":[["60000.10","1"]],"a":[]`
	before.handle([]byte(depthEvent(10, 10, 9, sides)), sink)
	after.handle([]byte(depthEvent(10, 10, 9, sides)), sink)
	after.handle([]byte(depthEvent(11, 11, 10, sides)), sink)
	before.handle([]byte(depthEvent(11, 11, 10, sides)), sink)
	if got, want := sink.deliveredIDs(), []int64{10, 11}; !slices.Equal(got, want) {
		t.Errorf("delivered update ids %v, want %v: each once", got, want)
	}
}

// An event reaches the sink as the event of the very string the symbol was
// watched by, not of the frame's copy of it: a sink that keys its markets
// by the strings it gave Watch finds the market by the string's address.
func TestEventsCarryTheWatchedSymbol(t *testing.T) {
	s := NewStreams(Binance, StreamOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	watched := strings.Clone("BTCUSDT")
	s.Watch([]string{watched})
	c := benchLine(s)
	sink := &symbolSink{}
	c.handle([]byte(depthEvent(10, 10, 9, `"b":[["60000.10","1"]],"a":[]`)), sink)
	c.handle([]byte(`{"stream":"btcusdt@aggTrade","data":`+goodTradeData+`}`), sink)
	if len(sink.symbols) != 2 {
		t.Fatalf("%d events delivered, want a depth event and a trade", len(sink.symbols))
	}
	for i, sym := range sink.symbols {
		if sym != watched || unsafe.StringData(sym) != unsafe.StringData(watched) {
			t.Errorf("event %d delivered as %q at %p, want the watched %q at %p",
				i, sym, unsafe.StringData(sym), watched, unsafe.StringData(watched))
		}
	}
}

// symbolSink keeps the symbol strings of the events delivered, as given.
type symbolSink struct {
	venue.Sink
	symbols []string
}

func (s *symbolSink) Depth(u venue.DepthUpdate)          { s.symbols = append(s.symbols, u.Symbol) }
func (s *symbolSink) Trade(symbol string, _ venue.Trade) { s.symbols = append(s.symbols, symbol) }

// A symbol unwatched and watched again (delisted and listed again) before
// its connections were synced is still subscribed on them, and stays so:
// each line reports it Live again, as a new stream, which is what the sink
// waits for to sync a book and to watch for silence; its events reach the
// sink as the string it is watched by now, each once; and a line that then
// loses it is not taken for the last one carrying it.
func TestSymbolWatchedAgainBeforeItsConnectionsSyncIsLiveAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The venue answers ETHUSDT's unsubscriptions only once release is
		// closed: meanwhile every connection is busy syncing.
		release := make(chan struct{})
		held := make(chan struct{}, 4)
		busy := func(v *fakeStreamVenue) {
			v.refuse = func(method string, params []string) bool {
				if method == "UNSUBSCRIBE" && (slices.Contains(params, "ethusdt@depth@100ms") || slices.Contains(params, "ethusdt@aggTrade")) {
					held <- struct{}{}
					<-release
				}
				return false
			}
		}
		first := strings.Clone("BTCUSDT")
		h := startHarness(t, Binance, []string{first, "ETHUSDT"}, busy, StreamOptions{Lines: 2})
		defer h.stop()
		h.sink.take()
		depth := h.lineConns("/public/stream", "btcusdt@depth@100ms")
		market := h.lineConns("/market/stream", "btcusdt@aggTrade")
		conns := append(depth[:], market[:]...)
		sent := make([]int, len(conns)) // the control messages each had before
		for i, c := range conns {
			sent[i] = len(c.messages())
		}
		h.s.Watch([]string{first})
		for range conns { // each sends its unsubscription, paced
			<-held
		}
		h.s.Watch(nil)
		again := strings.Clone("BTCUSDT")
		h.s.Watch([]string{again})
		close(release)
		synctest.Wait()

		wantCalls(t, sorted(h.sink.take()), "live book BTCUSDT", "live book BTCUSDT", "live trades BTCUSDT", "live trades BTCUSDT")
		for i, c := range conns {
			for _, m := range c.messages()[sent[i]:] {
				if slices.ContainsFunc(m.Params, func(n string) bool { return strings.HasPrefix(n, "btcusdt@") }) {
					t.Errorf("conn %d: %s %v sent for a stream it never stopped carrying", c.n, m.Method, m.Params)
				}
			}
		}

		h.sink.Clone = false // the symbol's string, as delivered, is looked at
		const levels = `"b":[["100.5","1"]],"a":[]`
		depth[0].send(t, depthEvent(1, 2, 0, levels))
		synctest.Wait()
		depth[1].send(t, depthEvent(1, 2, 0, levels))
		trade := `{"stream":"btcusdt@aggTrade","data":` + goodTradeData + `}`
		market[1].send(t, trade)
		synctest.Wait()
		market[0].send(t, trade)
		synctest.Wait()
		var syms []string
		for _, c := range h.sink.Take() {
			switch {
			case c.Method == venuetest.Depth:
				syms = append(syms, c.Depth.Symbol)
			case c.Method == venuetest.Trade:
				syms = append(syms, c.Symbol)
			}
		}
		if len(syms) != 2 {
			t.Fatalf("%d events delivered, want the depth event and the trade once each", len(syms))
		}
		for i, sym := range syms {
			if sym != again || unsafe.StringData(sym) != unsafe.StringData(again) {
				t.Errorf("event %d delivered as %q at %p, want the string watched now at %p (first watched at %p)",
					i, sym, unsafe.StringData(sym), unsafe.StringData(again), unsafe.StringData(first))
			}
		}

		// Line A's depth connection closes: line B still carries the
		// book.
		_ = depth[0].ws.Close(websocket.StatusGoingAway, "")
		synctest.Wait()
		if calls := h.sink.take(); slices.Contains(calls, "lost book BTCUSDT") {
			t.Errorf("sink calls %q: the book reported Lost while line B carried it", calls)
		}
	})
}

// What tells a line's new event from a copy, every kind's ring head, is in
// the first cache line of a symbol's marks, the one its lock is in: the
// check of an event newer than any delivered reads no other.
func TestMarksHeadsShareTheLocksCacheLine(t *testing.T) {
	var m marks
	if end := unsafe.Offsetof(m.heads) + unsafe.Sizeof(m.heads); end > 64 {
		t.Errorf("the ring heads end %d bytes into the marks, past their first 64", end)
	}
}
