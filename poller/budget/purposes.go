package budget

// This file is the one classification of spend: the purposes, their rules
// as data, and what each priority may borrow. The ledger applies them.

// Purpose says what REST weight is spent on: the one classification of
// spend. Each purpose belongs to one class, whose cap it is held to, says
// what it may borrow of the weight kept back and what it leaves unspent,
// and has a name for metrics (two purposes may share one): see purposes.
type Purpose int

// The purposes of REST calls.
const (
	PurposeCatalog       Purpose = iota // the market list
	PurposeTickers                      // bulk statistics and quotes
	PurposeSnapshot                     // order book snapshots that sync local books
	PurposeDepleted                     // the refresh of a book with a side run dry: from the book share
	PurposeDeepen                       // the refresh of a book started from a seed's or a sync's few levels: from the book share, leaving half the window
	PurposeRefresh                      // deeper snapshots laid under local books in sequence
	PurposeProbe                        // a few levels' read proving a quiet stream-fed book current
	PurposeBackfill                     // trade reads that fill a stream-fed window
	PurposePollBook                     // book reads of pairs served by REST
	PurposePollTrades                   // trade reads of pairs served by REST
	PurposeContracts                    // every perpetual's mark, index and funding, when their stream is quiet
	PurposeOpenInterest                 // one perpetual's open interest: idle weight only (see docs/venues.md)
	PurposeStandInBook                  // book reads of a stream-fed pair while its stream is lost, by REST rounds
	PurposeStandInTrades                // trade reads of a stream-fed pair while its stream is lost, by REST rounds
	// NumPurposes is the number of purposes, for tables indexed by Purpose.
	NumPurposes
)

// purposes is the one table of what each purpose spends, may borrow and
// leaves; the ledger names no purpose but through it. One line a rule: why
// each leaves or keeps what it does is in docs/venues.md ("Why each purpose
// spends as it does"); a rule changes only with testdata/decisions.golden.
var purposes = [NumPurposes]rule{
	PurposeCatalog:       {name: "catalog", class: ClassBulk, borrows: borrowAll},
	PurposeTickers:       {name: "tickers", class: ClassBulk, borrows: borrowAll},
	PurposeSnapshot:      {name: "snapshot", class: ClassBook, borrows: borrowAll},
	PurposeDepleted:      {name: "dry", class: ClassBook, borrows: borrowAll},
	PurposeDeepen:        {name: "deepen", class: ClassBook, borrows: borrowAll, leaves: leave{from: fromWindow, fraction: fraction{1, 2}, of: sizeLimit, upto: Sync, paced: true}},
	PurposeRefresh:       {name: "refresh", class: ClassRefresh, borrows: borrowAll &^ borrowShares},
	PurposeProbe:         {name: "probe", class: ClassProbe, borrows: borrowAll &^ borrowShares},
	PurposeBackfill:      {name: "backfill", class: ClassTrades, borrows: borrowAll, leaves: leave{from: fromWindow, fraction: fraction{1, 1}, of: sizeOf(ClassRefresh), upto: Sync}},
	PurposePollBook:      {name: "poll", class: ClassBook, borrows: borrowAll},
	PurposePollTrades:    {name: "poll", class: ClassTrades, borrows: borrowAll},
	PurposeContracts:     {name: "contracts", class: ClassBulk, borrows: borrowAll},
	PurposeOpenInterest:  {name: "open_interest", class: ClassBulk, borrows: borrowAll, leaves: leave{from: fromWindow, fraction: fraction{1, 2}, of: sizeLimit, upto: Serving}},
	PurposeStandInBook:   {name: "standin", class: ClassBook, borrows: borrowAll, leaves: leave{from: fromWindow, fraction: fraction{1, 2}, of: sizeLimit, upto: Waiting, paced: true}},
	PurposeStandInTrades: {name: "standin", class: ClassTrades, borrows: borrowAll, leaves: leave{from: fromWindow, fraction: fraction{1, 2}, of: sizeLimit, upto: Waiting, paced: true}},
}

// rule is a purpose's row of purposes.
type rule struct {
	// name labels the purpose's metrics; two purposes may share one. The
	// refreshes of dry books and the deepening have names of their own: a
	// new leader's spend could not be told from the refresh share's under
	// one "refresh", which is what took its window.
	name string
	// class is the share the purpose spends: its cap holds the purpose's
	// reads, and its spend counts them.
	class Class
	// borrows is what of the weight kept back from the purpose's class
	// and the window its reads may spend, as far as their priority allows
	// (see lends).
	borrows borrow
	// leaves is what its reads leave unspent for the others; the zero
	// leave, nothing.
	leaves leave
}

// borrow is a set of the parts of the budget kept back from a read that it
// may spend all the same: an ask may spend what both its purpose and its
// priority may borrow.
type borrow uint8

const (
	// borrowIdleFifth: the fifth of a class's cap kept back for
	// requests, once it would otherwise go unused (see Sync).
	borrowIdleFifth borrow = 1 << iota
	// borrowFifth: the fifth of a class's cap kept back for requests.
	borrowFifth
	// borrowShares: beyond its class's cap, whatever the other classes'
	// shares leave of the window.
	borrowShares
	// borrowServing: the serving reserve (see servingReserve).
	borrowServing

	borrowAll = borrowIdleFifth | borrowFifth | borrowShares | borrowServing
)

// lends is what the reads of each priority may borrow (see Priority).
var lends = [NumPriorities]borrow{
	Background: 0,
	Sync:       borrowIdleFifth,
	Waiting:    borrowFifth,
	Requested:  borrowFifth | borrowShares,
	Serving:    borrowFifth | borrowShares | borrowServing,
}

// leave is what a purpose's reads leave unspent: part of a size, kept from
// the window's limit by the asks of priorities up to upto (those above it
// spend it).
type leave struct {
	from     fromWhat
	fraction fraction
	of       size
	upto     Priority
	// paced holds the reads to half of what the leave lets the window
	// hold, counted over the window's last half (everything spent there,
	// theirs or not), so that they spread over the minute rather than
	// fill their part at once (see docs/venues.md, the deepening).
	paced bool
}

// fromWhat is what a leave is kept from.
type fromWhat int

const (
	fromNothing fromWhat = iota // the zero leave: nothing is left
	fromWindow                  // the window's limit
)

// fraction is num/den of a size.
type fraction struct{ num, den int }

// of is the part of v, rounded down.
func (p fraction) of(v int) int { return v * p.num / p.den }

// size is what a fraction is of: the window's limit (sizeLimit) or a class's
// cap (sizeOf).
type size int

// sizeLimit is the window's limit.
const sizeLimit size = -1

// sizeOf is class's cap; a class with no cap of its own has none to leave.
func sizeOf(class Class) size { return size(class) }

// in is the size's weight under caps and limit.
func (s size) in(caps Caps, limit int) int {
	if s == sizeLimit {
		return limit
	}
	return capped(caps[Class(s)])
}

// String is the purpose's metric label.
func (p Purpose) String() string { return purposes[p].name }

// Class is the class whose cap the purpose's spend is held to.
func (p Purpose) Class() Class { return purposes[p].class }
