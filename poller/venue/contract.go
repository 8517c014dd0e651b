package venue

import (
	"context"

	"marketfeed/snapshot"
)

// Contract and OpenInterest are snapshot's types, as Stat and Quote are:
// the venue's values become a /contracts publication without a copy.
type (
	// Contract is one perpetual's mark price, index and funding.
	Contract = snapshot.Contract
	// OpenInterest is one perpetual's open interest.
	OpenInterest = snapshot.OpenInterest
)

// ContractReader is implemented by venues that read perpetual contract data
// over REST. Like Venue's methods, each call reads the venue once and
// neither retries nor sleeps.
type ContractReader interface {
	// Contracts returns the mark price, index and funding of every
	// perpetual the venue lists, and how many of its rows were unusable
	// (a field missing, not a plain decimal, or out of range): one bad row
	// never spoils the others, and the count is the caller's to report.
	Contracts(ctx context.Context) (rows []Contract, invalid int, err error)
	// OpenInterest returns one contract's open interest.
	OpenInterest(ctx context.Context, symbol string) (OpenInterest, error)
	// ContractsWeight and OpenInterestWeight are what one call of each
	// costs against the venue's per-minute weight limit; 0 for a venue
	// without one.
	ContractsWeight() int
	OpenInterestWeight() int
}
