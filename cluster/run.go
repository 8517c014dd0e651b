package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// errDisconnected is a call not made: the connection to NATS is down.
var errDisconnected = errors.New("disconnected from NATS")

// Run takes part in the cluster until ctx is done: it applies the snapshot
// bucket's watch to the store, campaigns for the lease, and while it holds
// it runs lead with a context that ends when the lease is lost, and share
// 1, and puts what the store publishes into the bucket.
//
// When NATS stops answering for longer than the lease's TTL, or its
// buckets are gone, the member steps down and joins again as soon as it
// can, without a restart. If NATS does not answer the first try, the
// member runs lead on its own until it does, with share the inverse of the
// members it last saw: every member that lost NATS reads the venue itself
// with its part of one budget, rather than serving what it holds until
// that is too old to serve. Run returns when ctx is done and lead, every
// read for a follower's load and every stop of a watch it began have
// returned.
func (m *Member) Run(ctx context.Context, lead func(ctx context.Context, share float64)) error {
	var wg sync.WaitGroup
	wg.Go(func() { m.publish(ctx) })
	wg.Go(func() { m.sendWants(ctx) })
	defer wg.Wait()
	m.tasks.open(ctx)
	defer m.tasks.close()
	for {
		m.session(ctx, func(ctx context.Context) { lead(ctx, 1) })
		var alone *part
		stopAlone := func() {
			if alone != nil {
				alone.stop()
				m.alone.Store(false)
			}
		}
		for first := true; ; first = false {
			// The first try is at once: a session that ended because the
			// connection is down goes alone without waiting a period.
			wait := m.cfg.LeaseTTL / periodsPerTTL
			if first {
				wait = 0
			}
			select {
			case <-ctx.Done():
				stopAlone()
				return nil
			case <-time.After(wait):
			}
			err := errDisconnected
			if m.cfg.Conn.IsConnected() {
				_, err = within(ctx, m.cfg.LeaseTTL, func(ctx context.Context) (struct{}, error) {
					return struct{}{}, m.open(ctx)
				})
			}
			if err == nil {
				break
			}
			m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster unreachable: reading the venue alone", "err", err)
			if alone == nil {
				share := 1 / float64(m.Members())
				m.log.Warn("cluster unreachable: reading the venue alone", "share", share)
				m.alone.Store(true)
				m.metrics.alone.Inc()
				alone = startPart(ctx, func(ctx context.Context) { lead(ctx, share) })
			}
		}
		stopAlone()
		m.logs.Forget("cluster")
		m.metrics.rejoins.Inc()
		m.log.Info("cluster joined again")
	}
}

// session is one stretch of membership: a watch of the snapshot bucket and
// the campaign, until ctx is done or the engine is lost.
func (m *Member) session(ctx context.Context, lead func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := m.snaps.WatchAll(ctx)
	if err != nil {
		m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster watch failed", "err", err)
		return
	}
	mw, err := m.members.WatchAll(ctx)
	if err != nil {
		m.stopWatch(w)
		m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster watch failed", "err", err)
		return
	}
	m.synced.Store(false)
	// Revisions begin again on a NATS server that lost the bucket: this
	// member has applied none of the new ones.
	m.appliedRev.Store(0)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel() // a watch that ends ends the session
		m.watch(ctx, w)
	})
	wg.Go(func() { m.watchMembers(ctx, mw) })
	newCampaign(m, lead).run(ctx)
	cancel()
	wg.Wait()
}

// part is one run of a role, which its owner stops and waits for.
type part struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startPart runs role until the part is stopped or ctx is done; a nil role
// is a part that runs nothing.
func startPart(ctx context.Context, role func(ctx context.Context)) *part {
	ctx, cancel := context.WithCancel(ctx)
	p := &part{cancel: cancel, done: make(chan struct{})}
	if role == nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		role(ctx)
	}()
	return p
}

// stop ends the part's run and waits for it; a nil part is not running.
func (p *part) stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// tasks runs work that NATS's handlers or a session hand off under the
// member's run, which waits for it: begun before Run or after it returned,
// it is refused.
type tasks struct {
	mu  sync.Mutex
	ctx context.Context // Run's; nil while it does not run
	wg  sync.WaitGroup
}

// open takes work from now on, under ctx.
func (t *tasks) open(ctx context.Context) {
	t.mu.Lock()
	t.ctx = ctx
	t.mu.Unlock()
}

// Go runs task under the run's context, unless the run is over, and
// reports whether it did.
func (t *tasks) Go(task func(ctx context.Context)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil {
		return false
	}
	ctx := t.ctx
	t.wg.Go(func() { task(ctx) })
	return true
}

// close refuses work from now on and waits for the work begun.
func (t *tasks) close() {
	t.mu.Lock()
	t.ctx = nil
	t.mu.Unlock()
	t.wg.Wait()
}
