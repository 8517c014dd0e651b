package standby

import (
	"time"

	"marketfeed/snapshot"
)

// HeldBy returns the Held of a member whose values are store's: what they
// cover of a pair's stream (see snapshot.Store.Covered). For a book that is
// its depth's update id when there is one, since a new leader's book is
// seeded from that (see live.SeedFrom), and the events past it are what
// carry the book on.
func HeldBy(store *snapshot.Store) Held {
	return func(kind snapshot.Stream, tickerID string) int64 {
		return store.Covered(kind, []byte(tickerID), time.Now().UnixNano())
	}
}
