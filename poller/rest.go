package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"marketfeed/internal/backoff"
	"marketfeed/internal/logkey"
	"marketfeed/poller/budget"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Refresh runs one round of REST reads of stream s over the hot pairs.
func (p *Poller) Refresh(ctx context.Context, s snapshot.Stream) { p.round(ctx, s) }

// streamRow is what differs between a pair's stream kinds on the REST
// path: one row each, so that the steps are written once.
type streamRow struct {
	call venue.Call
	// purpose is what a REST read of the stream spends on; its class is
	// the stream's share of the budget.
	purpose budget.Purpose
	every   func(c *Config) time.Duration
	// read reads one pair over REST and returns its publication.
	read func(p *Poller, ctx context.Context, pair snapshot.Pair, start time.Time) (func(), error)
}

var streamRows = [snapshot.NumStreams]streamRow{
	snapshot.StreamBook: {
		call: venue.CallBook, purpose: budget.PurposePollBook,
		every: func(c *Config) time.Duration { return c.BookEvery },
		read:  (*Poller).readBook,
	},
	snapshot.StreamTrades: {
		call: venue.CallTrades, purpose: budget.PurposePollTrades,
		every: func(c *Config) time.Duration { return c.TradesEvery },
		read:  (*Poller).readTrades,
	},
}

// round reads the stream of every hot pair that is due, oldest read first,
// while the budget allows. A pair is due when its last read began at least
// one period before this round's tick; ticks are aligned to the period, so
// round reads of a pair are spaced by whole periods however late a round runs.
func (p *Poller) round(ctx context.Context, s snapshot.Stream) {
	pairs := p.store.Pairs()
	if pairs == nil {
		return
	}
	now := time.Now()
	row := &streamRows[s]
	every := row.every(&p.cfg)
	tick := alignDown(now, every)
	hot := p.hot[s].snapshot(now.Add(-p.cfg.HotTTL), func(id string) bool {
		_, ok := pairs.Lookup(id)
		return ok
	})
	due := hot[:0]
	polled := 0
	for _, hp := range hot {
		if p.src.Streaming(hp.id, s) {
			hp.deferred.Store(0) // waits for no read
			continue             // the stream keeps it, once synced: see live.Source.Load
		}
		polled++
		if tick-hp.started.Load() >= int64(every) && !hp.reading.Load() {
			due = append(due, hp)
		}
	}
	p.hot[s].polled.Store(int64(polled))
	// The pairs clients keep reading come first, then the rest of the hot
	// pairs, each oldest read first: a pair asked for once stays hot for
	// HotTTL, and after a sweep of many pairs their reads, due as often as
	// those of the pair clients kept reading, took the minute's weight
	// before it, which then went unread for seconds.
	pressed := func(hp *hotPair) bool { return hp.pressed(now) }
	slices.SortFunc(due, func(a, b *hotPair) int {
		if pa, pb := pressed(a), pressed(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.started.Load(), b.started.Load())
	})

	c, purpose := row.call, p.src.PollPurpose(s)
	var wg sync.WaitGroup
	slots := p.slots[s]
dispatch:
	for i, hp := range due {
		if p.blocked() {
			break
		}
		// Slots are shared by overlapping rounds: when reads stuck in
		// earlier rounds hold them all, the rest wait for the next round.
		select {
		case slots <- struct{}{}:
		default:
			break dispatch
		}
		if !hp.reading.CompareAndSwap(false, true) {
			<-slots // a cold load started reading it meanwhile
			continue
		}
		// A read that keeps a pair requests are reading now current may
		// spend the whole class's cap; one of a pair asked for a while ago
		// leaves the fifth kept for requests to the first.
		prio := budget.Background
		if pressed(hp) {
			prio = budget.Waiting
		}
		if !p.ledger.Take(time.Now(), budget.Ask{Purpose: purpose, Weight: p.venue.Weight(c), Priority: prio}) {
			hp.reading.Store(false)
			<-slots
			left := len(due) - i
			p.deferred(s, left)
			for _, d := range due[i:] {
				d.deferred.Store(now.UnixNano())
			}
			p.logs.Log(p.log, slog.LevelInfo, "stretch-"+s.String(), "weight budget stretches cadence",
				slog.String("stream", s.String()), slog.Int("hot", len(hot)), slog.Int("deferred", left))
			break
		}
		p.metrics.weight[purpose].Add(p.venue.Weight(c))
		pair, _ := pairs.Lookup(hp.id)
		hp.started.Store(tick)
		hp.deferred.Store(0)
		wg.Go(func() {
			defer func() { <-slots }()
			defer hp.reading.Store(false)
			if err := p.read(ctx, s, pair, time.Unix(0, tick)); err != nil && !venue.Paused(err) {
				p.logs.Log(p.log, slog.LevelWarn, "read-"+s.String(), "venue read failed",
					slog.String("stream", s.String()), slog.String(logkey.Pair, pair.TickerID), slog.String(logkey.Err, err.Error()))
			}
		})
	}
	wg.Wait()
}

// read reads one pair's stream and publishes it. start is when the read
// began by the service's clock; it becomes the snapshot's read time.
func (p *Poller) read(ctx context.Context, s snapshot.Stream, pair snapshot.Pair, start time.Time) error {
	row := &streamRows[s]
	// The value is built inside the call, so that a venue answer the
	// builder refuses counts as unusable data, not as a good read.
	var publish func()
	err := p.call(ctx, row.call, func(ctx context.Context) (err error) {
		publish, err = row.read(p, ctx, pair, start)
		return err
	})
	if err != nil {
		return fmt.Errorf("read %s %s: %w", s, pair.TickerID, err)
	}
	publish()
	return nil
}

// readBook reads one pair's book over REST and returns its publication.
func (p *Poller) readBook(ctx context.Context, pair snapshot.Pair, start time.Time) (func(), error) {
	book, err := p.venue.Book(ctx, pair.Symbol, snapshot.MaxDepth)
	if err != nil {
		return nil, err
	}
	b, err := snapshot.NewBook(pair.TickerID, book.Time, book.Bids, book.Asks, start)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", venue.ErrBadData, err)
	}
	return func() { p.store.PutBook(b) }, nil
}

// readTrades reads one pair's trades over REST and returns their
// publication.
func (p *Poller) readTrades(ctx context.Context, pair snapshot.Pair, start time.Time) (func(), error) {
	trades, err := p.venue.Trades(ctx, pair.Symbol, snapshot.MaxTrades)
	if err != nil {
		return nil, err
	}
	prev, _ := p.store.Trades([]byte(pair.TickerID), time.Now().UnixNano())
	t, err := snapshot.NewTradesAfter(prev, pair.TickerID, trades, start)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", venue.ErrBadData, err)
	}
	return func() { p.store.PutTrades(t) }, nil
}

// Want marks a pair's stream as asked for by a request at now (Unix ns),
// keeping it hot. now is the request's time, taken by the server, which
// calls Want on every /orderbook and /trades request: reading the clock
// here again was a tenth of the handler's own work. It does not allocate
// once the pair is hot.
func (p *Poller) Want(id []byte, s snapshot.Stream, now int64) { p.hot[s].want(id, now) }

// ErrUnlisted is returned by Load for a pair the current pair list lacks.
var ErrUnlisted = errors.New("pair not listed")

// ErrStopped is returned by Load once Run has ended.
var ErrStopped = errors.New("poller stopped")

// Load reads a pair's stream now and returns once it is published or the
// read failed, or ctx is done. For a book, depth is the levels a side must
// serve (see snapshot.Book.Serves; outside 1..MaxDepth, MaxDepth): a fresh
// book that vouches for fewer is read deeper: at a served book's priority
// when streams keep it and it holds more than the published levels (see
// live.Source.Load), as a cold one is otherwise. Concurrent callers for
// the same pair and stream share one read, which runs to its end even if
// they stop waiting; a caller that needs more levels than the read in
// flight was for waits for it, then reads again if its book is still
// short. The read keeps the venue's spacing for the pair and the weight
// budget: it waits for both rather than calling early.
func (p *Poller) Load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	start := time.Now()
	defer func() { p.metrics.coldWait[s].Observe(time.Since(start)) }()
	if depth <= 0 || depth > snapshot.MaxDepth {
		depth = snapshot.MaxDepth
	}
	key := flightKey{s, id}
	for {
		p.flights.mu.Lock()
		f := p.flights.m[key]
		if f == nil {
			f = &flight{done: make(chan struct{}), depth: depth}
			p.flights.m[key] = f
			if !p.spawn(func(ctx context.Context) {
				f.err = p.load(ctx, id, s, f.depth)
				failed := 0
				if f.err != nil {
					failed = 1
				}
				p.metrics.coldLoads[s][failed].Inc()
				p.flights.mu.Lock()
				delete(p.flights.m, key)
				p.flights.mu.Unlock()
				close(f.done)
			}) {
				delete(p.flights.m, key)
				p.flights.mu.Unlock()
				return ErrStopped
			}
		}
		p.flights.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !s.Deep() || f.depth >= depth || f.err != nil || p.served(id, s, depth) {
			return f.err
		}
	}
}

func (p *Poller) load(ctx context.Context, id string, s snapshot.Stream, depth int) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	if streamed, err := p.src.Load(ctx, id, s, depth); streamed {
		return err
	}
	pairs := p.store.Pairs()
	if pairs == nil {
		return ErrUnlisted
	}
	pair, ok := pairs.Lookup(id)
	if !ok {
		return ErrUnlisted
	}
	row := &streamRows[s]
	every := row.every(&p.cfg)
	hp := p.hot[s].get(id)
	if hp != nil {
		if wait := time.Until(time.Unix(0, hp.started.Load()).Add(every)); wait > 0 {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		// A round may have read the pair while we waited.
		if p.served(id, s, depth) {
			return nil
		}
	}
	if p.blocked() {
		return fmt.Errorf("load %s %s: %w", s, id, venue.ErrPaused)
	}
	ask := budget.Ask{Purpose: row.purpose, Weight: p.venue.Weight(row.call), Priority: budget.Requested}
	for {
		now := time.Now()
		if p.ledger.Take(now, ask) {
			p.metrics.weight[ask.Purpose].Add(ask.Weight)
			break
		}
		at := p.ledger.FreeAt(now, ask.Weight)
		if at.IsZero() {
			return fmt.Errorf("load %s %s: %w", s, id, venue.ErrNoBudget)
		}
		if err := backoff.Sleep(ctx, at.Sub(now)); err != nil {
			return fmt.Errorf("load %s %s: %w: %w", s, id, venue.ErrNoBudget, err)
		}
	}
	start := time.Now()
	if hp != nil {
		hp.started.Store(start.UnixNano())
		if hp.reading.CompareAndSwap(false, true) {
			defer hp.reading.Store(false)
		}
	}
	return p.read(ctx, s, pair, start)
}

// served reports whether the store holds a snapshot of the stream read
// within max-stale that serves depth (see snapshot.PairValue.Serves).
func (p *Poller) served(id string, s snapshot.Stream, depth int) bool {
	now := time.Now().UnixNano()
	v, listed := p.store.Pair(s, []byte(id), now)
	return listed && v.FreshAt(now, p.cfg.MaxStale) && v.Serves(depth)
}
