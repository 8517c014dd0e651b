package poller

import (
	"time"

	"marketfeed/snapshot"
)

// Status is what the poller reports to operators.
type Status struct {
	Ready       bool   // pairs and tickers loaded and the venue not refusing us for good
	Reason      string // why not ready, or "ok"
	HotBooks    int
	HotTrades   int
	BudgetLimit int // weight per minute the poller may spend; 0: unlimited
	BudgetSpent int // weight spent in the last minute
	Stretched   int64
	Pauses      int
	Omitted     int64 // spot tickers left out of the last build
	// Sources says where each part of the data comes from; nil without
	// market streams.
	Sources *Sources
}

// Sources says where each part of the data comes from while the poller
// reads market streams.
type Sources struct {
	Tickers string         `json:"tickers"` // "stream" or "rest"
	Books   map[string]int `json:"books"`   // pairs by source: stream, syncing, rest
	Trades  map[string]int `json:"trades"`  // the same for trades
}

// Status returns the poller's current state.
func (p *Poller) Status() Status {
	st := Status{
		HotBooks:    p.hot[snapshot.StreamBook].Len(),
		HotTrades:   p.hot[snapshot.StreamTrades].Len(),
		BudgetLimit: p.ledger.Limit(),
		BudgetSpent: p.ledger.Spent(time.Now()),
		Stretched:   p.stretched.Load(),
		Pauses:      p.gate.Pauses(),
		Omitted:     p.omitted.Load(),
	}
	if books, trades := p.src.Sources(); books != nil {
		src := &Sources{Tickers: "rest", Books: books, Trades: trades}
		if p.src.TickersFlowing(time.Now()) {
			src.Tickers = "stream"
		}
		st.Sources = src
	}
	switch perm := p.gate.Permanent(); {
	case perm != "":
		st.Reason = perm
	case p.store.Pairs() == nil:
		st.Reason = "pairs not loaded"
	case p.store.Tickers() == nil:
		st.Reason = "tickers not loaded"
	default:
		st.Ready, st.Reason = true, "ok"
	}
	return st
}
