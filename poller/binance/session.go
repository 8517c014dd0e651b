package binance

import (
	"context"
	"time"

	"github.com/coder/websocket"

	"marketfeed/internal/backoff"
	"marketfeed/poller/venue"
)

// A slot's connection goes through named states, each a method of its
// session that returns the next state (as the lease does, cluster/lease.go):
// what its life holds (its timers, its back-offs, whether it was healthy)
// is the session's, not a loop's locals.
type connState int

const (
	// connSyncing brings the connection's subscriptions in line with the
	// slot, then waits.
	connSyncing connState = iota
	// connWaiting waits for the slot to change, the refused names' retry,
	// the replacement's turn, the connection's close or the end.
	connWaiting
	// connReplacing replaces the connection at its turn, then syncs.
	connReplacing
	// connClosed is a connection the venue or the slot closed: the session
	// is over. It and connStopped, the states that end a session, come
	// last (see connSteps).
	connClosed
	// connStopped is a session whose context is done.
	connStopped
)

// session is the life of a slot's connection and the ones that replace
// it as planned (see serve).
type session struct {
	sl   *slot
	c    *wsConn // the connection now, the last replacement
	sink venue.Sink
	bo   *backoff.Retries // the slot's reconnections' back-off
	// since is when the session began: a replacement's age for the
	// back-off is the session's.
	since time.Time
	// The replacement is due at the slot's turn (see replaceAt), which moves
	// when the venue's closes teach a closing age; after a replacement
	// failed, not before retryAt. armed is when ageTimer fires.
	armed, retryAt time.Time
	ageTimer       *time.Timer
	rotate         backoff.Retries  // failed replacements' back-off
	refusals       backoff.Retries  // refused subscriptions' back-off
	retry          <-chan time.Time // fires when refused names are tried again; nil: none waits
	// healthy is set when the session ended healthy (see serve).
	healthy bool
}

// serve keeps c, or the connection that replaced it, subscribed to the
// slot's names until the connection closes or ctx is done, and returns once
// its reader has ended. A closed connection's streams are reported Lost.
// healthy reports a connection (with the ones it replaced as planned) that
// served longer than backoffMax before the venue closed it, or that the
// venue closed on its schedule.
func (sl *slot) serve(ctx context.Context, c *wsConn, sink venue.Sink, bo *backoff.Retries) (healthy bool) {
	se := &session{sl: sl, c: c, sink: sink, bo: bo, since: time.Now(),
		ageTimer: time.NewTimer(time.Hour), rotate: reconnects(), refusals: reconnects()}
	defer se.ageTimer.Stop()
	sl.blocked = make(map[string]bool)
	state := connSyncing
	for state < connClosed {
		state = connSteps[state](se, ctx)
	}
	if state == connStopped {
		se.c.closeNow()
		return false
	}
	se.closed(ctx)
	return se.healthy
}

// connSteps is what each state of a running session does: each returns the
// next state. connClosed and connStopped end the session (see serve).
var connSteps = [connClosed]func(*session, context.Context) connState{
	connSyncing:   (*session).sync,
	connWaiting:   (*session).wait,
	connReplacing: (*session).replace,
}

// sync subscribes the connection to what the slot wants, breaking it if the
// venue does not answer, and arms the replacement's timer for its turn.
func (se *session) sync(ctx context.Context) connState {
	sl, c := se.sl, se.c
	refused, err := sl.sync(ctx, c, se.sink)
	switch {
	case err != nil && ctx.Err() == nil:
		sl.s.slotDown(sl)
		sl.s.warn("sync "+sl.url, "market stream connection broken", "url", sl.url, "err", err)
		c.broken.Store(true)
		_ = c.ws.CloseNow()
	case refused && se.retry == nil:
		se.retry = time.After(se.refusals.Next())
	case !refused && se.retry == nil:
		se.refusals.Reset()
	}
	if err == nil {
		sl.s.slotUp(sl) // subscribed: the end of its outage, if it had one
	}
	now := time.Now()
	if at := later(sl.s.replaceAt(sl, c.opened, now), se.retryAt); !at.Equal(se.armed) {
		se.armed = at
		se.ageTimer.Reset(at.Sub(now))
	}
	return connWaiting
}

// wait waits for what ends the wait: the end, the connection's close, a
// change to the slot, the refused names' retry, the replacement's turn.
func (se *session) wait(ctx context.Context) connState {
	select {
	case <-ctx.Done():
		return connStopped
	case <-se.c.done:
		return connClosed
	case <-se.sl.wake:
	case <-se.retry:
		se.retry = nil
		clear(se.sl.blocked)
	case <-se.ageTimer.C:
		se.armed = time.Time{}
		return connReplacing
	}
	return connSyncing
}

// closed learns from the connection's close: a connection that lived long
// enough was healthy, and so was one the venue closed on its schedule: the
// next one starts the back-off afresh. One the slot broke itself teaches
// nothing. Its streams are reported Lost.
func (se *session) closed(ctx context.Context) {
	sl, c := se.sl, se.c
	scheduled := sl.s.closedBy(c)
	lived := time.Since(se.since)
	if se.healthy = scheduled || lived > backoffMax; se.healthy || lived > healthyAge {
		se.bo.Reset()
	}
	sl.s.met.closed.Inc()
	if ctx.Err() == nil {
		sl.s.slotDown(sl)
	}
	sl.s.warn("closed "+sl.url, "market stream connection closed", "url", sl.url, "err", c.err)
	c.reportLost(se.sink)
	if websocket.CloseStatus(c.err) == websocket.StatusPolicyViolation {
		n := sl.s.shrink(sl)
		sl.s.log.Warn("the venue closed a market stream connection for breaking its rules; fewer streams a connection from now on",
			"url", sl.url, "streams_per_connection", n)
	}
}

// replace replaces the connection at its turn; after a failure, the old one
// is kept and the next try waits for the rotation's back-off.
func (se *session) replace(ctx context.Context) connState {
	sl := se.sl
	nc, err := sl.replace(ctx, se.c, se.sink)
	if err != nil {
		if ctx.Err() != nil {
			return connSyncing
		}
		sl.s.met.refused.Inc()
		sl.s.warn("replace "+sl.url, "market stream replacement failed; keeping the old connection", "url", sl.url, "err", err)
		se.retryAt = time.Now().Add(se.rotate.Next())
		return connSyncing
	}
	se.rotate.Reset()
	se.retryAt = time.Time{}
	sl.s.met.rotated.Inc()
	// The replacement carries on the same service without a break: its age
	// for the back-off is the session's, not its own, or a venue close soon
	// after a planned rotation would wait out a back-off and lose events as
	// a failing connection would.
	old := se.c
	se.c = nc
	old.catchUp(time.Now())
	select {
	case <-old.done:
		// The venue closed old before its replacement was acknowledged:
		// its streams may have missed events in between, which the books
		// must be told, as after any close, before they hear them live
		// again.
		old.reportLost(se.sink)
		report(se.c.refs(), se.sink.Live)
	default:
	}
	sl.handOver(ctx, old)
	return connSyncing
}
