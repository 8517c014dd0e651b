package live

import (
	"marketfeed/poller/venue"
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
// did (see pair.tradesLost). Either way, nothing the seed cannot vouch for
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

// seed starts a new pair from cfg.Seed's values, if any. Called before the
// pair is shared, so without its lock.
func (s *Source) seed(lp *pair) {
	if s.cfg.Seed == nil {
		return
	}
	seed := s.cfg.Seed(lp.tickerID)
	var snap venue.Book
	b, _ := seed.Values[snapshot.StreamBook].(*snapshot.Book)
	switch d := seed.Depth; {
	case d != nil:
		snap.Bids, snap.Asks = d.Sides()
		snap.Time, snap.LastUpdateID = d.Time(), d.Seq()
	case b != nil && b.Seq() > 0:
		snap.Bids, snap.Asks = b.Sides()
		snap.Time, snap.LastUpdateID = b.Time(), b.Seq()
	}
	// The published levels are an exact prefix of the venue's book, and
	// the venue may have more beyond them on either side: both are cut to
	// the shorter one's length, which the book then takes as continuing
	// beyond its edge, as with a snapshot of that limit.
	if n := min(len(snap.Bids), len(snap.Asks)); n > 0 {
		snap.Bids, snap.Asks = snap.Bids[:n], snap.Asks[:n]
		if lp.book.Sync(snap, n) == nil {
			lp.book.Suspend()
			// A depth's hundreds of levels a side hold more than are
			// published: such a seed is as deep as a refresh, and a
			// side of it that runs dry is refreshed (tierDepleted), not
			// read again from 100 levels as a book synced from them.
			lp.shallow = n <= snapshot.MaxDepth
			s.metrics.seeded[snapshot.StreamBook].Inc()
		}
	}
	if t, _ := seed.Values[snapshot.StreamTrades].(*snapshot.Trades); t != nil {
		if trades, err := t.VenueTrades(); err == nil && len(trades) > 0 {
			lp.window.merge(trades)
			// The next publication numbers the trades it shares with
			// the seed as the seed did.
			lp.trades.pub = t
			lp.backfilled = true
			lp.tradesLost, lp.losses = true, lp.losses+1
			s.metrics.seeded[snapshot.StreamTrades].Inc()
		}
	}
}
