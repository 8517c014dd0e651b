package live

import (
	"time"

	"marketfeed/poller/venue"
)

// ContractsFlowing reports whether the mark price stream delivers recently
// enough that the premiumIndex read need not stand in. The source reads no
// mark price stream yet: never.
func (s *Source) ContractsFlowing(time.Time) bool { return false }

// StreamContracts returns the mark price stream's rows and when they last
// arrived; ok is false before any did, as now, while the source reads no
// mark price stream.
func (s *Source) StreamContracts() (rows []venue.Contract, at time.Time, ok bool) {
	return nil, time.Time{}, false
}
