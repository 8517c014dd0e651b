package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// RateCounts is a member's rate limiter as the cluster shares it;
// *server.Server is one (see server.Server.ShareRateLimit).
type RateCounts interface {
	// DrainRateCounts hands f every client key with the requests the
	// member allowed it since the last drain, and forgets them.
	DrainRateCounts(f func(key uint64, n uint32))
	// ChargeRate records n requests of a client key made at another
	// member.
	ChargeRate(key uint64, n uint32)
}

// RateEvery is how often members exchange their rate counts: a client's
// requests at one member are charged at the others within it, in the
// client's current bucket there (see server.Server.ChargeRate), so a
// client spread over N members by a round-robin balancer gets at most the
// limit in any minute plus what it sends in about one period: 3 or 4
// requests at 15 a second, under 1 % of 600.
const RateEvery = 250 * time.Millisecond

// A rate message is the counts of one member's period, on core NATS: no
// stream keeps them, since a count missed is worth nothing a period later.
//
//	'R' | member name (uvarint length, bytes) | then per key: key (8 bytes, big-endian) | count (uvarint)
//
// A period's counts are cut into messages of at most maxRateMessage bytes.
const (
	rateMagic      = 'R'
	maxRateMessage = 64 << 10
)

var errBadRates = errors.New("not a rate message")

// ShareRateLimit exchanges rate counts with the other members until ctx is
// done: every RateEvery it publishes what rc allowed since the last
// period, and it charges rc with what the others publish. It needs no
// JetStream: while NATS is away, each member limits on its own.
func (m *Member) ShareRateLimit(ctx context.Context, rc RateCounts) error {
	r, err := m.shareRates(rc)
	if err != nil {
		return err
	}
	defer r.stop()
	t := time.NewTicker(RateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r.publish()
	}
}

// rateShare is a member's part in the exchange: a subscription that
// charges rc with the other members' counts, and what publishes rc's.
type rateShare struct {
	m       *Member
	rc      RateCounts
	subject string
	sub     *nats.Subscription
	buf     []byte
	sent    int // keys in buf
}

// shareRates starts charging rc with what the other members publish.
func (m *Member) shareRates(rc RateCounts) (*rateShare, error) {
	r := &rateShare{m: m, rc: rc, subject: m.cfg.Name + ".ratelimit"}
	sub, err := m.cfg.Conn.Subscribe(r.subject, func(msg *nats.Msg) {
		from, n, err := chargeRates(msg.Data, m.cfg.Member, rc)
		switch {
		case err != nil:
			m.metrics.ratesBad.Inc()
		case from != m.cfg.Member:
			m.metrics.ratesCharged.Add(n)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: rate counts: %w", err)
	}
	r.sub = sub
	return r, nil
}

func (r *rateShare) stop() { _ = r.sub.Unsubscribe() }

// publish drains what rc allowed since the last period and publishes it,
// cut into messages of at most maxRateMessage bytes.
func (r *rateShare) publish() {
	r.rc.DrainRateCounts(func(key uint64, n uint32) {
		if len(r.buf) == 0 {
			r.buf = appendRateHead(r.buf, r.m.cfg.Member)
		}
		r.buf = appendRateKey(r.buf, key, n)
		r.sent++
		if len(r.buf) >= maxRateMessage-binary.MaxVarintLen64-8 {
			r.flush()
		}
	})
	r.flush()
}

func (r *rateShare) flush() {
	if len(r.buf) > 0 && r.m.cfg.Conn.Publish(r.subject, r.buf) == nil {
		r.m.metrics.ratesSent.Add(r.sent)
	}
	r.buf, r.sent = r.buf[:0], 0
}

func appendRateKey(dst []byte, key uint64, n uint32) []byte {
	return binary.AppendUvarint(binary.BigEndian.AppendUint64(dst, key), uint64(n))
}

func appendRateHead(dst []byte, member string) []byte {
	dst = binary.AppendUvarint(append(dst, rateMagic), uint64(len(member)))
	return append(dst, member...)
}

// chargeRates charges rc with a rate message's counts unless it is self's
// own, and returns whose it is and how many keys it held. A message cut
// short charges nothing of what follows the cut.
func chargeRates(data []byte, self string, rc RateCounts) (from string, keys int, err error) {
	if len(data) == 0 || data[0] != rateMagic {
		return "", 0, errBadRates
	}
	l, n := binary.Uvarint(data[1:])
	if n <= 0 || l > uint64(len(data)-1-n) {
		return "", 0, errBadRates
	}
	data = data[1+n:]
	from, data = string(data[:l]), data[l:]
	if from == self {
		return from, 0, nil
	}
	for len(data) > 0 {
		if len(data) < 9 {
			return from, keys, errBadRates
		}
		key := binary.BigEndian.Uint64(data)
		count, n := binary.Uvarint(data[8:])
		if n <= 0 || count == 0 || count > 1<<20 {
			return from, keys, errBadRates
		}
		rc.ChargeRate(key, uint32(count))
		keys++
		data = data[8+n:]
	}
	return from, keys, nil
}
