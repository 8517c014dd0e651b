package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Roles is what a member runs in each part it plays; each runs until its ctx ends.
type Roles struct {
	// OnLead runs while this member holds the lease; ctx ends with the term.
	OnLead func(ctx context.Context)
	// OnFollow runs while this member is in the cluster and does not lead; ctx ends when it leads or leaves.
	OnFollow func(ctx context.Context)
	// OnAlone runs while NATS is unreachable and the member reads the venue on its own; ctx ends when it joins again.
	OnAlone func(ctx context.Context)
}

// errDisconnected is a call not made: the connection to NATS is down.
var errDisconnected = errors.New("disconnected from NATS")

// Run takes part in the cluster until ctx is done: it applies the snapshot
// bucket's watch to the store and campaigns for the lease (see campaign).
// While it is in the cluster and does not hold the lease it runs
// r.OnFollow; while it holds it, r.OnLead, with a context that ends when
// the lease is lost, and it puts what the store publishes into the bucket.
// A nil role is not run.
//
// When NATS stops answering for longer than the lease's TTL, or its
// buckets are gone, the member steps down and joins again as soon as it
// can, without a restart. If NATS does not answer the first try, the
// member runs r.OnAlone until it does, reading the venue with AloneShare
// of the budget: every member that lost NATS reads the venue itself with
// its part of one budget, rather than serving what it holds until that is
// too old to serve. Run returns when ctx is done and every role, every
// read for a follower's load and every stop of a watch it began has
// returned. A watch's stop asks NATS to drop the watch's consumer: while
// NATS is away, that waits out the client's request timeout (5 s), and Run
// returns that much later.
func (m *Member) Run(ctx context.Context, r Roles) error {
	var wg sync.WaitGroup
	statuses := m.cfg.Conn.StatusChanged()
	m.link.set(m.cfg.Conn.IsConnected())
	wg.Go(func() { m.link.follow(ctx, m.cfg.Conn, statuses) })
	wg.Go(func() { m.publish(ctx) })
	wg.Go(func() { m.sendWants(ctx) })
	defer wg.Wait()
	m.tasks.open(ctx)
	defer m.tasks.close()
	for {
		m.session(ctx, r)
		if !m.rejoin(ctx, r.OnAlone) {
			return nil
		}
	}
}

// rejoin binds the member to the cluster's buckets again, trying at once
// and then every renewal period, until it can or ctx is done: a session
// that ended because the connection is down goes alone without waiting a
// period. From the first failed try until it joins, the member runs
// onAlone. It reports whether it joined.
func (m *Member) rejoin(ctx context.Context, onAlone func(ctx context.Context)) bool {
	var alone *roleRun
	for wait := time.Duration(0); ; wait = m.cfg.LeaseTTL / periodsPerTTL {
		select {
		case <-ctx.Done():
			m.endAlone(alone)
			return false
		case <-time.After(wait):
		}
		err := m.reopen(ctx)
		if err == nil {
			break
		}
		m.logs.Log(m.log, slog.LevelWarn, "cluster", "cluster unreachable: reading the venue alone", "err", err)
		if alone == nil {
			m.log.Warn("cluster unreachable: reading the venue alone", "share", m.AloneShare())
			m.alone.Store(true)
			m.metrics.alone.Inc()
			alone = startRoleRun(ctx, onAlone)
		}
	}
	m.endAlone(alone)
	m.logs.Forget("cluster")
	m.metrics.rejoins.Inc()
	m.log.Info("cluster joined again")
	return true
}

// endAlone stops alone's run, if any.
func (m *Member) endAlone(alone *roleRun) {
	if alone != nil {
		alone.stop()
		m.alone.Store(false)
	}
}

// reopen binds the member to the cluster's buckets again, if NATS answers
// within the lease's TTL.
func (m *Member) reopen(ctx context.Context) error {
	_, err := within(ctx, m.link, m.cfg.LeaseTTL, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.open(ctx)
	})
	return err
}

// session is one stretch of membership: a watch of the snapshot bucket and
// of the member bucket, and the campaign, until ctx is done or the engine
// is lost.
func (m *Member) session(ctx context.Context, r Roles) {
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
	newCampaign(m, r).run(ctx)
	cancel()
	wg.Wait()
}

// roleRun is one run of a role, which its owner stops and waits for.
type roleRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startRoleRun runs role until the run is stopped or ctx is done; a nil
// role is a run of nothing.
func startRoleRun(ctx context.Context, role func(ctx context.Context)) *roleRun {
	ctx, cancel := context.WithCancel(ctx)
	p := &roleRun{cancel: cancel, done: make(chan struct{})}
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

// stop ends the run and waits for it; a nil run is not running.
func (p *roleRun) stop() {
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
