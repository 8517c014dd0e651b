package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// link is the member's connection to NATS as its calls see it: a context
// that ends when the connection goes down, and a new one once it is back
// up. The client holds a request made while it reconnects until the
// request's own timeout, and a server that shuts down stops answering
// JetStream's calls before it closes its connections: a follower in its
// period's calls when NATS went would wait out one call's timeout (a
// period) after another before it found itself cut off, and serve its
// leader's last values seconds longer than the period it allows itself
// (see campaign.runCutOff).
type link struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// newLink returns a link that is up until told otherwise.
func newLink() *link {
	l := &link{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// current is the context of the connection as it is now: done if it is
// down.
func (l *link) current() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx
}

// up reports whether the connection is up, as the calls see it: the
// campaign asks this rather than the client, so that it never finds the
// connection up and then its calls failing for a link not yet told.
func (l *link) up() bool { return l.current().Err() == nil }

// set records whether the connection is up: down ends the current
// context; up after down begins a new one.
func (l *link) set(up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !up:
		l.cancel()
	case l.ctx.Err() != nil:
		l.ctx, l.cancel = context.WithCancel(context.Background())
	}
}

// follow keeps the link up or down with conn until ctx is done. statuses
// is conn's status listener, registered before the caller read conn's
// state, so that no change is missed between the two; follow removes it.
// Each change reads conn's state again rather than trusting the event: the
// client drops events a full listener has no room for.
func (l *link) follow(ctx context.Context, conn *nats.Conn, statuses chan nats.Status) {
	defer conn.RemoveStatusListener(statuses)
	for {
		select {
		case <-ctx.Done():
			return
		case <-statuses:
			l.set(conn.IsConnected())
		}
	}
}

// within runs one call to NATS with d to answer: a call it does not answer
// in time fails, rather than waiting out the client's default timeout, so
// that a lost engine is noticed within the lease's TTL; a call the
// connection's loss leaves hanging fails then (see link). A call is not
// made while the link is down: the client would keep its request and send
// it once it reconnects, when the campaign has moved on (a lease created
// for a member that no longer answers its pings).
func within[T any](ctx context.Context, l *link, d time.Duration, call func(ctx context.Context) (T, error)) (T, error) {
	conn := l.current()
	if conn.Err() != nil {
		var zero T
		return zero, errDisconnected
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(conn, cancel)
	defer stop()
	return call(ctx)
}
