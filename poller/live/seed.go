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
type Seed struct {
	Book   *snapshot.Book   // nil: none; one without an update id is not used
	Trades *snapshot.Trades // nil: none
}

// seed starts a new pair from cfg.Seed's values, if any. Called before the
// pair is shared, so without its lock.
func (s *Source) seed(lp *pair) {
	if s.cfg.Seed == nil {
		return
	}
	seed := s.cfg.Seed(lp.tickerID)
	if b := seed.Book; b != nil && b.Seq() > 0 {
		bids, asks := b.Sides()
		// The published levels are an exact prefix of the venue's book,
		// and the venue may have more beyond them on either side: both
		// are cut to the shorter one's length, which the book then takes
		// as continuing beyond its edge, as with a snapshot of that limit.
		if n := min(len(bids), len(asks)); n > 0 {
			snap := venue.Book{Time: b.Time(), LastUpdateID: b.Seq(), Bids: bids[:n], Asks: asks[:n]}
			if lp.book.Sync(snap, n) == nil {
				lp.book.Suspend()
				lp.seeded = true
				s.metrics.seeded[snapshot.StreamBook].Inc()
			}
		}
	}
	if t := seed.Trades; t != nil {
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
