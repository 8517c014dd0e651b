package cluster

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A lease's TTL bounds how long a leader that stops renewing holds the
// cluster without one: nothing is published meanwhile, and every book served
// ages by as much. A leader that died (a crash, a SIGKILL, a lost host) need
// not be waited out, as NATS drops its connection, and with it its
// subscriptions, at once. So the leader answers on a subject of its term
// (see leaderSubject), subscribed before its lease names that term, and each
// follower asks it every pingEvery: a holder NATS finds no subscriber for
// (it says "no responders" at once) pingMisses times in a row is gone, and
// the follower removes its lease, if it still names that term, and
// campaigns at once. A leader that is alive but slow (a pause, a full CPU)
// times out instead, which proves nothing: its lease runs out as before,
// and a paused leader that wakes finds it lost (see campaign).
const (
	pingEvery   = 250 * time.Millisecond
	pingTimeout = 100 * time.Millisecond
	// pingMisses is two, so that a new leader's subscription has reached
	// every server of a NATS cluster before it can be missed.
	pingMisses = 2
)

// pingAnswer is how a ping of the lease's holder ended.
type pingAnswer int

const (
	pingAnswered pingAnswer = iota
	pingNoResponders
	pingTimedOut
	numPingAnswers
)

var pingAnswerNames = [numPingAnswers]string{"answered", "no_responders", "timeout"}

// leaderSubject is the subject the leader of term answers on.
func leaderSubject(cluster string, term uint64) string {
	return cluster + ".leader." + strconv.FormatUint(term, 10)
}

// answerPings has this member answer the pings of term's leader, and the
// followers' loads (see Member.Load), until the subscription ends.
func (m *Member) answerPings(term uint64) (*nats.Subscription, error) {
	return m.cfg.Conn.Subscribe(leaderSubject(m.cfg.Name, term), m.answer)
}

// holder is the lease's holder as a following member last read it.
type holder struct {
	term   uint64 // 0: no holder known
	misses int    // pings in a row NATS had no responder for
}

// see records that the lease names term (0: no lease).
func (h *holder) see(term uint64) {
	if term != h.term {
		*h = holder{term: term}
	}
}

// gone pings h's leader and reports whether it is gone: missing for the
// pingMisses-th time in a row.
func (m *Member) gone(ctx context.Context, h *holder) bool {
	if h.term == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	_, err := m.cfg.Conn.RequestWithContext(ctx, leaderSubject(m.cfg.Name, h.term), nil)
	switch {
	case err == nil:
		m.metrics.pings[pingAnswered].Inc()
		h.misses = 0
	case errors.Is(err, nats.ErrNoResponders):
		m.metrics.pings[pingNoResponders].Inc()
		h.misses++
	default:
		m.metrics.pings[pingTimedOut].Inc()
		h.misses = 0
	}
	return h.misses >= pingMisses
}

// vacate removes the lease if it still names term, and reports whether it
// did.
func (m *Member) vacate(ctx context.Context, term uint64) bool {
	e, err := within(ctx, m.link, pingTimeout, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return m.lease.Get(ctx, leaseKey)
	})
	if err != nil {
		return false
	}
	name, held, ok := parseLease(e.Value())
	if !ok || held != term {
		return false
	}
	if _, err := within(ctx, m.link, pingTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.lease.Delete(ctx, leaseKey, jetstream.LastRevision(e.Revision()))
	}); err != nil {
		return false
	}
	m.metrics.vacated.Inc()
	m.log.Warn("leader gone: its lease removed", "leader", name, "term", term)
	return true
}

// await waits for the campaign's next period (tick), pinging the lease's
// holder at every ping while the member follows; it returns true at the
// tick, or at once once the holder is gone and its lease removed, and false
// when ctx is done.
func (m *Member) await(ctx context.Context, tick, ping <-chan time.Time, h *holder, following bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-ping:
			if following && m.gone(ctx, h) && m.vacate(ctx, h.term) {
				h.see(0)
				return true
			}
		}
	}
}
