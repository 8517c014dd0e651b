package binance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"marketfeed/internal/backoff"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// slot is one connection's worth of streams: the names it should carry and
// the goroutine that keeps a connection carrying them, reconnecting after a
// close and replacing the connection before the venue's close.
type slot struct {
	s     *Streams
	line  *line
	group group
	url   string
	phase float64 // where in the rotation period its turns fall (see slotPhase)

	mu    sync.Mutex
	want  map[string]streamRef
	resub map[string]bool // names to unsubscribe and subscribe again
	// wake holds a token when want or resub changed, or the rotation
	// period did.
	wake chan struct{}

	// blocked holds names the venue refused, not retried before the retry
	// timer fires. Only the slot's goroutine uses it.
	blocked map[string]bool
}

func (sl *slot) size() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.want)
}

func (sl *slot) add(name string, ref streamRef) {
	sl.mu.Lock()
	sl.want[name] = ref
	sl.mu.Unlock()
	sl.poke()
}

func (sl *slot) remove(name string) {
	sl.mu.Lock()
	delete(sl.want, name)
	delete(sl.resub, name)
	sl.mu.Unlock()
	sl.poke()
}

// take removes name from the slot without telling the venue: its
// connection is closed. It returns what the name stood for.
func (sl *slot) take(name string) streamRef {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	ref := sl.want[name]
	delete(sl.want, name)
	delete(sl.resub, name)
	return ref
}

func (sl *slot) resubscribe(name string) {
	sl.mu.Lock()
	if _, ok := sl.want[name]; ok {
		sl.resub[name] = true
	}
	sl.mu.Unlock()
	sl.poke()
}

func (sl *slot) poke() {
	select {
	case sl.wake <- struct{}{}:
	default:
	}
}

// wanted returns the names the slot should carry, sorted so that
// subscriptions go out in a stable order.
func (sl *slot) wanted() (map[string]streamRef, []string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	want := make(map[string]streamRef, len(sl.want))
	names := make([]string, 0, len(sl.want))
	for n, r := range sl.want {
		want[n] = r
		names = append(names, n)
	}
	slices.Sort(names)
	return want, names
}

func (sl *slot) takeResubs() []string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	names := make([]string, 0, len(sl.resub))
	for n := range sl.resub {
		names = append(names, n)
	}
	clear(sl.resub)
	slices.Sort(names)
	return names
}

// run keeps a connection for the slot's names until ctx is done. It
// returns only after the connection's reader has ended. What it reports
// to sink is merged with the other line's (see lineSink).
func (sl *slot) run(ctx context.Context, sink venue.Sink) {
	sink = lineSink{Sink: sink, s: sl.s, line: sl.line.n}
	bo := reconnects()
	for ctx.Err() == nil {
		if sl.size() == 0 {
			sl.s.slotUp(sl) // nothing left to carry: not down any more
			select {
			case <-ctx.Done():
				return
			case <-sl.wake:
			}
			continue
		}
		c, err := sl.dial(ctx, sink)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			sl.s.met.refused.Inc()
			sl.s.slotDown(sl)
			sl.s.warn("dial "+sl.url, "market stream connection failed", "url", sl.url, "err", err)
			_ = backoff.Sleep(ctx, bo.Next())
			continue
		}
		healthy := sl.serve(ctx, c, sink, &bo)
		// A connection that had been healthy, or that the venue closed on
		// its schedule, is dialled again at once: its books are suspended,
		// and each heartbeat of waiting is one more chance that a book
		// misses an update and needs a snapshot. A connection that keeps
		// failing backs off.
		if ctx.Err() == nil && !healthy {
			_ = backoff.Sleep(ctx, bo.Next())
		}
	}
}

// handOver closes old, just replaced, once it has read what the venue sent
// it before its replacement was acknowledged (an event stamped after that),
// or after maxHandover: the replacement delivers from the moment the venue
// acknowledged it, while old may still hold events the venue sent it
// before, which the books need and, with one line, nothing else brings. A
// reader running behind, on a loaded machine, may hold a second of them. A
// close of old by the venue meanwhile is learned from like any other (see
// closedBy).
func (sl *slot) handOver(ctx context.Context, old *wsConn) {
	old.uncount()
	t := time.NewTimer(maxHandover)
	defer t.Stop()
	select {
	case <-old.caughtUp:
	case <-t.C:
	case <-ctx.Done():
		old.closeNow()
		return
	case <-old.done:
		sl.s.closedBy(old)
	}
	old.retire()
}

// sync brings c's subscriptions in line with the slot: names no longer
// wanted are unsubscribed, names asked for are resubscribed, names on c
// for an earlier watch of their symbol are routed anew, and wanted
// names not on c are subscribed. refused is true when the venue refused a
// subscription; err is a broken connection.
func (sl *slot) sync(ctx context.Context, c *wsConn, sink venue.Sink) (refused bool, err error) {
	want, names := sl.wanted()
	var drop []string
	for _, n := range c.names() {
		if _, ok := want[n]; !ok {
			drop = append(drop, n)
		}
	}
	for chunk := range slices.Chunk(drop, sl.s.preset.NamesPerSubscribe) {
		c.unroute(chunk)
		r, err := c.request(ctx, "UNSUBSCRIBE", chunk)
		if err != nil {
			return refused, err
		}
		if !r.ok {
			sl.s.met.subscribeErrs.Inc()
			sl.s.warn("unsubscribe "+sl.url, "venue refused an unsubscription", "code", r.code, "streams", len(chunk))
		}
	}
	for _, n := range sl.takeResubs() {
		if _, ok := c.route(n); !ok {
			continue // not on this connection yet: subscribed below
		}
		c.unroute([]string{n})
		r, err := c.request(ctx, "UNSUBSCRIBE", []string{n})
		if err != nil {
			return refused, err
		}
		if !r.ok {
			sl.s.warn("unsubscribe "+sl.url, "venue refused an unsubscription", "code", r.code, "streams", 1)
		}
		// No longer routed: subscribed again below, and reported Live once
		// acknowledged.
	}
	var add, renew []string
	for _, n := range names {
		r, on := c.route(n)
		switch {
		case !on && !sl.blocked[n]:
			add = append(add, n)
		case on && !r.sameWatch(want[n]):
			renew = append(renew, n)
		}
	}
	// A name on c whose route holds another watch's marks is a symbol
	// unwatched and watched again (delisted and listed again) before c was
	// synced: still subscribed, so nothing goes to the venue. But its route
	// would send its events through the table and to the sink as the
	// string of the watch that ended, and its unwatching forgot which lines
	// carry it (see carriers.forget), while the sink follows it anew and
	// waits for its Live: a book is synced only once its stream is live,
	// and the silence watchdog watches only live streams.
	if len(renew) > 0 {
		refs := refsOf(want, renew)
		c.routeTo(renew, refs)
		report(refs, sink.Live)
	}
	for chunk := range slices.Chunk(add, sl.s.preset.NamesPerSubscribe) {
		refs := refsOf(want, chunk)
		r, err := c.subscribe(ctx, chunk, refs)
		if err != nil {
			return refused, err
		}
		if !r.ok {
			refused = true
			for _, n := range chunk {
				sl.blocked[n] = true
			}
			sl.s.met.subscribeErrs.Inc()
			sl.s.warn("subscribe "+sl.url, "venue refused a subscription; retrying later", "code", r.code, "streams", len(chunk))
			report(refs, sink.Lost)
			continue
		}
		report(refs, sink.Live)
	}
	return refused, nil
}

// replace dials a new connection and subscribes every name old carries, and
// any wanted name it does not. Only when the venue acknowledged them all is
// the new connection returned; the caller then closes old. Names old did
// not carry, or carried for an earlier watch of their symbol (see sync),
// are reported Live; the others never stopped being live.
func (sl *slot) replace(ctx context.Context, old *wsConn, sink venue.Sink) (*wsConn, error) {
	nc, err := sl.dial(ctx, sink)
	if err != nil {
		return nil, err
	}
	want, names := sl.wanted()
	var fresh []streamRef
	for chunk := range slices.Chunk(names, sl.s.preset.NamesPerSubscribe) {
		refs := refsOf(want, chunk)
		for i, n := range chunk {
			if r, on := old.route(n); !on || !r.sameWatch(refs[i]) {
				fresh = append(fresh, refs[i])
			}
		}
		r, err := nc.subscribe(ctx, chunk, refs)
		if err == nil && !r.ok {
			err = fmt.Errorf("subscribe: venue refused with code %d", r.code)
		}
		if err != nil {
			nc.closeNow()
			return nil, err
		}
	}
	report(fresh, sink.Live)
	return nc, nil
}

// refsOf returns what want holds for names, in their order.
func refsOf(want map[string]streamRef, names []string) []streamRef {
	refs := make([]streamRef, len(names))
	for i, n := range names {
		refs[i] = want[n]
	}
	return refs
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// report calls fn once per stream kind with the symbols of refs; the
// all-market ticker stream has no kind and is not reported.
func report(refs []streamRef, fn func(snapshot.Stream, []string)) {
	var by [snapshot.NumStreams][]string
	for _, r := range refs {
		if !r.allMarket && r.kind >= 0 && int(r.kind) < len(by) {
			by[r.kind] = append(by[r.kind], r.symbol)
		}
	}
	for k, syms := range by {
		if len(syms) > 0 {
			fn(snapshot.Stream(k), syms)
		}
	}
}
