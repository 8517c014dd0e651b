package live

import (
	"time"

	"marketfeed/snapshot"
)

// Seed is what another process last published for a pair, for a source
// that takes over reading the venue to start the pair from instead of REST
// reads: a cluster member that becomes the leader starts every book and
// trade window from the leader's last values, which it already holds.
//
// Neither is served as it is: a seeded book is suspended at the update id
// the seed was current at, and the first event of its own diff stream
// either continues that chain (the book goes on, with no snapshot read) or
// does not (it is synced from REST as any other); a seeded window is taken
// as having possibly missed trades since, and answers once the first trade
// of its stream, or a read of the trades after its newest, says whether it
// did (see tradesState.tradesLost). Either way, nothing the seed cannot vouch for
// is published, and what it saves is the weight of the reads: a snapshot
// for every book, a backfill for every window.
//
// A book starts from Depth when there is one: five times as many levels
// as Book, so that the book can follow the price a long way before it needs
// a snapshot read of its own. It is older than Book (a leader publishes it
// every few seconds), and its chain goes on only if the events since its
// update id are still held; those who hold events for a takeover (see
// standby.Held) hold them from the depth's update id for that reason.
type Seed struct {
	// Values are the pair's values by stream kind, nil for none: a
	// *snapshot.Book (one without an update id is not used) and a
	// *snapshot.Trades.
	Values [snapshot.NumStreams]snapshot.PairValue
	Depth  *snapshot.Depth // nil: none; preferred to the book
}

// SeedFrom returns a Config.Seed that starts a pair from what store holds
// of it that may still be served: on a member that has just been elected,
// the last leader's values. A depth is taken whatever its age if continues
// says the events since its update id are held (see standby.Relay), which
// bring it up to date; they may not be, if the depth arrived after a book
// that covered more (the events up to the book are gone), and the book is
// the seed then. A value older than maxStale is no seed.
func SeedFrom(store *snapshot.Store, continues func(tickerID string, seq int64) bool, maxStale time.Duration) func(tickerID string) Seed {
	return func(id string) Seed {
		now := time.Now().UnixNano()
		var seed Seed
		if d := store.Depth([]byte(id)); d != nil && continues(id, d.Seq()) {
			seed.Depth = d
		}
		for k := range snapshot.NumStreams {
			if store.FreshAt(k, []byte(id), now, maxStale) {
				seed.Values[k], _ = store.Pair(k, []byte(id), now)
			}
		}
		return seed
	}
}

// seed starts a new pair from cfg.Seed's values, if any: each kind's state
// from its own (see kind.seed). Called before the pair is shared, so without
// its lock.
func (s *Source) seed(lp *pair) {
	if s.cfg.Seed == nil {
		return
	}
	seed := s.cfg.Seed(lp.tickerID)
	for k, row := range kinds {
		if row.of(lp).seed(s, lp, seed) {
			s.metrics.seeded[k].Inc()
		}
	}
}
