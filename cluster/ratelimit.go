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
// requests at one member are charged at the others within it, so a client
// spread over N members by a round-robin balancer gets at most what it may
// plus what it sends in one period.
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
	subject := m.cfg.Name + ".ratelimit"
	sub, err := m.cfg.Conn.Subscribe(subject, func(msg *nats.Msg) {
		from, n, err := chargeRates(msg.Data, m.cfg.Member, rc)
		switch {
		case err != nil:
			m.metrics.ratesBad.Inc()
		case from != m.cfg.Member:
			m.metrics.ratesCharged.Add(n)
		}
	})
	if err != nil {
		return fmt.Errorf("cluster: rate counts: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := time.NewTicker(RateEvery)
	defer t.Stop()
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		buf = buf[:0]
		sent := 0
		flush := func() {
			if len(buf) > 0 && m.cfg.Conn.Publish(subject, buf) == nil {
				m.metrics.ratesSent.Add(sent)
			}
			buf, sent = buf[:0], 0
		}
		rc.DrainRateCounts(func(key uint64, n uint32) {
			if len(buf) == 0 {
				buf = appendRateHead(buf, m.cfg.Member)
			}
			buf = appendRateKey(buf, key, n)
			sent++
			if len(buf) >= maxRateMessage-binary.MaxVarintLen64-8 {
				flush()
			}
		})
		flush()
	}
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
