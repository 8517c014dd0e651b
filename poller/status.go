package poller

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Status is what the poller reports to operators.
type Status struct {
	Ready       bool                     // pairs and tickers loaded and the venue not refusing us for good
	Reason      string                   // why not ready, or "ok"
	Hot         [snapshot.NumStreams]int // hot pairs by stream kind
	BudgetLimit int                      // weight per minute the poller may spend; 0: unlimited
	BudgetSpent int                      // weight spent in the last minute
	Stretched   int64
	Pauses      int
	Omitted     int64 // spot tickers left out of the last build
	// Sources says where each part of the data comes from; nil without
	// market streams.
	Sources *Sources
}

// Sources says where each part of the data comes from while the poller
// reads market streams. In JSON, each stream kind's counts go under its
// part's name (see snapshot.Stream.Part): "books", "trades".
type Sources struct {
	Tickers string // "stream" or "rest"
	// Pairs counts the pairs of each stream kind by source: stream,
	// syncing, rest, and budget for a pair without a usable stream whose
	// due REST read the weight budget holds back: it is not being read, and
	// is served only until its last snapshot is older than max-stale.
	Pairs [snapshot.NumStreams]map[string]int
	// BookSync is how the books waiting for a snapshot come back; nil
	// while none waits.
	BookSync *BookSync
}

// MarshalJSON writes the tickers' source, then each kind's counts under
// its part's name, then the book sync, if any.
func (s Sources) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(s.Tickers)
	if err != nil {
		return nil, err
	}
	b = append([]byte(`{"tickers":`), b...)
	for k := range snapshot.NumStreams {
		counts, err := json.Marshal(s.Pairs[k])
		if err != nil {
			return nil, err
		}
		b = append(append(append(append(b, `,"`...), k.Part()...), `":`...), counts...)
	}
	if s.BookSync != nil {
		sync, err := json.Marshal(s.BookSync)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"book_sync":`...), sync...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes; a member it does not know
// is an error, as for a struct decoded with unknown fields disallowed.
func (s *Sources) UnmarshalJSON(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	*s = Sources{}
	for name, raw := range members {
		var err error
		switch name {
		case "tickers":
			err = json.Unmarshal(raw, &s.Tickers)
		case "book_sync":
			err = json.Unmarshal(raw, &s.BookSync)
		default:
			err = fmt.Errorf("sources: unknown member %q", name)
			for k := range snapshot.NumStreams {
				if k.Part() == name {
					err = json.Unmarshal(raw, &s.Pairs[k])
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
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
		BudgetLimit: p.ledger.Limit(),
		BudgetSpent: p.ledger.Spent(time.Now()),
		Stretched:   p.stretched.Load(),
		Pauses:      p.gate.Pauses(),
		Omitted:     p.docs.omitted.Load(),
	}
	for k := range st.Hot {
		st.Hot[k] = p.hot[k].Len()
	}
	if pairs, ok := p.src.Sources(); ok {
		src := &Sources{Tickers: "rest", Pairs: pairs}
		if p.docs.streamed(venue.DocTickers, time.Now()) {
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
