package live

import (
	"time"

	"marketfeed/poller/venue"
)

// contractRow is a mark price stream row and when it arrived.
type contractRow struct {
	row venue.Contract
	at  time.Time
}

// Contracts keeps the rows of the all-market mark price stream, the newest
// per catalog symbol; rows for symbols outside the catalog are dropped.
func (s *Source) Contracts(rows []venue.Contract) {
	now := time.Now()
	pairs := *s.pairs.Load()
	s.contractsMu.Lock()
	defer s.contractsMu.Unlock()
	s.contractsAt = now
	for _, r := range rows {
		if _, listed := pairs[r.Symbol]; !listed {
			continue
		}
		if old, ok := s.contracts[r.Symbol]; ok && old.row.Time > r.Time {
			continue // a late copy from the other line
		}
		s.contracts[r.Symbol] = contractRow{r, now}
	}
}

// ContractsFlowing reports whether the mark price stream has delivered
// recently enough (see Config.Fresh) that the premiumIndex read need not
// stand in for it.
func (s *Source) ContractsFlowing(now time.Time) bool {
	s.contractsMu.Lock()
	defer s.contractsMu.Unlock()
	return !s.contractsAt.IsZero() && now.Sub(s.contractsAt) <= s.cfg.Fresh
}

// StreamContracts returns the mark price stream's rows that arrived
// recently (see Config.Fresh), and when the oldest of them arrived: a
// symbol the stream has stopped sending while it sends the others is left
// out, for a REST read to stand in, long before its row would be too old
// to serve; ok is false while there is none.
func (s *Source) StreamContracts() (rows []venue.Contract, at time.Time, ok bool) {
	now := time.Now()
	s.contractsMu.Lock()
	defer s.contractsMu.Unlock()
	at = now
	for sym, r := range s.contracts {
		if now.Sub(r.at) > s.cfg.Fresh {
			delete(s.contracts, sym)
			continue
		}
		rows = append(rows, r.row)
		if r.at.Before(at) {
			at = r.at
		}
	}
	return rows, at, len(rows) > 0
}
