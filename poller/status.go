package poller

import (
	"math"
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
	// BookSync is how the books waiting for a snapshot come back; nil
	// while none waits.
	BookSync *BookSync `json:"book_sync,omitempty"`
}

// BookSync is the progress of the books out of sequence: a cold start, or
// the resync of books that missed events.
type BookSync struct {
	Waiting   int     `json:"waiting"`     // books waiting for a snapshot
	PerMinute float64 `json:"per_minute"`  // books coming into sequence a minute, smoothed
	ETA       float64 `json:"eta_seconds"` // until the last at that pace; -1: no pace yet
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
		if sp := p.src.SyncProgress(); sp.Behind > 0 {
			src.BookSync = &BookSync{Waiting: sp.Behind, PerMinute: math.Round(sp.PerMinute), ETA: -1}
			if sp.ETA >= 0 {
				src.BookSync.ETA = math.Round(sp.ETA.Seconds())
			}
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
