// Package venuetruth judges a served order book against the venue's true
// book: venuesim knows its book at every update id (GET /_control/book), so
// the benches and end-to-end tests can tell a book that is the venue's from
// one that only looks current. A book is equal to the venue's when each
// side holds exactly min(depth asked, the venue's levels) levels, every one
// the venue's price and size in the venue's order: an exact prefix that is
// shorter than that (a side that ran through what it vouched for) is a
// wrong answer, since an aggregator would publish a thinner market than the
// venue's.
package venuetruth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Level is one price level as the API and the venue write it: price and
// size, as decimal strings.
type Level = [2]string

// Verdict is the outcome of comparing one served book with the venue's.
type Verdict int

const (
	// Equal: both sides are the venue's, level for level, to the depth
	// asked.
	Equal Verdict = iota
	// Short: every level served is the venue's, but a side holds fewer
	// levels than min(depth asked, the venue's levels).
	Short
	// Differs: a level's price or size is not the venue's, or a side holds
	// more levels than it should.
	Differs
)

// String names the verdict as the benches print it.
func (v Verdict) String() string {
	switch v {
	case Equal:
		return "equal"
	case Short:
		return "short"
	}
	return "differs"
}

// Compare judges a served book's sides against the venue's sides at the
// book's update id, for a request that asked depth levels a side. venue
// may hold more levels than depth (only its first depth count).
func Compare(bids, asks, venueBids, venueAsks []Level, depth int) Verdict {
	return max(compareSide(bids, venueBids, depth), compareSide(asks, venueAsks, depth))
}

// compareSide judges one side.
func compareSide(served, venue []Level, depth int) Verdict {
	want := min(depth, len(venue))
	if len(served) > want {
		return Differs
	}
	for i, l := range served {
		if l != venue[i] {
			return Differs
		}
	}
	if len(served) < want {
		return Short
	}
	return Equal
}

// Tally counts the verdicts of a set of sampled books.
type Tally struct {
	Sampled, Equal, Short, Differs int
	// Failed counts samples the venue could not judge (its control
	// endpoint failed or the book did not decode); they are not Sampled.
	// Err is the first such failure.
	Failed int
	Err    error
}

// Add counts one verdict.
func (t *Tally) Add(v Verdict) {
	t.Sampled++
	switch v {
	case Equal:
		t.Equal++
	case Short:
		t.Short++
	default:
		t.Differs++
	}
}

// Merge adds o's counts to t.
func (t *Tally) Merge(o Tally) {
	t.Sampled += o.Sampled
	t.Equal += o.Equal
	t.Short += o.Short
	t.Differs += o.Differs
	t.Failed += o.Failed
	if t.Err == nil {
		t.Err = o.Err
	}
}

// AllEqual reports whether something was sampled and every sample was
// equal to the venue's book.
func (t Tally) AllEqual() bool { return t.Sampled > 0 && t.Equal == t.Sampled && t.Failed == 0 }

// String is the figure the benches print: "equal / sampled", and why the
// others were not.
func (t Tally) String() string {
	s := fmt.Sprintf("%d / %d", t.Equal, t.Sampled)
	var why []string
	if t.Short > 0 {
		why = append(why, fmt.Sprintf("%d short", t.Short))
	}
	if t.Differs > 0 {
		why = append(why, fmt.Sprintf("%d differ", t.Differs))
	}
	if t.Failed > 0 {
		why = append(why, fmt.Sprintf("%d not judged", t.Failed))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

// Book is a served /api/public/orderbook answer, as far as the judge reads
// it.
type Book struct {
	TickerID  string  `json:"ticker_id"`
	Timestamp int64   `json:"timestamp"`
	Bids      []Level `json:"bids"`
	Asks      []Level `json:"asks"`
}

// Judge asks venuesim for its true book at a served book's venue time
// (the timestamp of a 200 book is the venue's clock for it, which venuesim
// maps to the update id in force then) and compares the two.
type Judge struct {
	venueURL string
	client   *http.Client
}

// NewJudge returns a judge that asks the venuesim at venueURL
// ("http://host:port").
func NewJudge(venueURL string, client *http.Client) *Judge {
	return &Judge{venueURL: strings.TrimSuffix(venueURL, "/"), client: client}
}

// Symbol is the venue's symbol of a ticker_id: BTC_USDT is BTCUSDT.
func Symbol(tickerID string) string { return strings.ReplaceAll(tickerID, "_", "") }

// Check decodes a served 200 /orderbook body and judges it against the
// venue's book for a request that asked depth levels a side.
func (j *Judge) Check(ctx context.Context, body []byte, depth int) (Verdict, error) {
	var b Book
	if err := json.Unmarshal(body, &b); err != nil {
		return Differs, fmt.Errorf("orderbook: %w", err)
	}
	if b.TickerID == "" || b.Timestamp <= 0 {
		return Differs, fmt.Errorf("orderbook: no ticker_id or timestamp")
	}
	return j.CheckBook(ctx, b, depth)
}

// CheckBook judges a decoded served book.
func (j *Judge) CheckBook(ctx context.Context, b Book, depth int) (Verdict, error) {
	truth, err := j.TrueBook(ctx, Symbol(b.TickerID), b.Timestamp, depth)
	if err != nil {
		return Differs, err
	}
	return Compare(b.Bids, b.Asks, truth.Bids, truth.Asks, depth), nil
}

// TrueBook reads venuesim's book of symbol at venue time timeMs (ms since
// the epoch), depth levels a side at most.
func (j *Judge) TrueBook(ctx context.Context, symbol string, timeMs int64, depth int) (Book, error) {
	q := url.Values{"symbol": {symbol}, "time_ms": {strconv.FormatInt(timeMs, 10)}, "depth": {strconv.Itoa(depth)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.venueURL+"/_control/book?"+q.Encode(), nil)
	if err != nil {
		return Book{}, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return Book{}, fmt.Errorf("venue book: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Book{}, fmt.Errorf("venue book: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Book{}, fmt.Errorf("venue book of %s at %d: status %d: %s", symbol, timeMs, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var truth Book
	if err := json.Unmarshal(body, &truth); err != nil {
		return Book{}, fmt.Errorf("venue book: %w", err)
	}
	return truth, nil
}

// Sampler keeps every every-th served book handed to it, to be judged
// later against the venue (the venue keeps every past book, so the
// judging need not keep up with the reads), filed under the phase current
// when it was served.
type Sampler struct {
	every int
	mu    sync.Mutex
	seen  int
	phase string
	kept  []sample
}

type sample struct {
	phase string
	body  []byte
}

// NewSampler keeps one 200 book in every (at least 1).
func NewSampler(every int) *Sampler { return &Sampler{every: max(every, 1)} }

// SetPhase files the books offered from now on under phase.
func (s *Sampler) SetPhase(phase string) {
	s.mu.Lock()
	s.phase = phase
	s.mu.Unlock()
}

// Offer hands the sampler a served 200 /orderbook body; it keeps a copy of
// one in every.
func (s *Sampler) Offer(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	if s.seen%s.every != 0 || s.phase == "" {
		return
	}
	s.kept = append(s.kept, sample{s.phase, append([]byte(nil), body...)})
}

// Keep keeps a copy of a served 200 /orderbook body whatever the sampling
// rate, filed under the current phase: for books a check follows closely.
func (s *Sampler) Keep(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != "" {
		s.kept = append(s.kept, sample{s.phase, append([]byte(nil), body...)})
	}
}

// Judge judges every kept book against the venue, for requests of depth
// levels a side, and returns the tallies by phase. Samples judged are
// dropped, so a later call judges only the books kept since.
func (s *Sampler) Judge(ctx context.Context, j *Judge, depth int) map[string]Tally {
	s.mu.Lock()
	kept := s.kept
	s.kept = nil
	s.mu.Unlock()
	out := map[string]Tally{}
	for _, k := range kept {
		t := out[k.phase]
		if v, err := j.Check(ctx, k.body, depth); err != nil {
			t.Failed++
			if t.Err == nil {
				t.Err = err
			}
		} else {
			t.Add(v)
		}
		out[k.phase] = t
	}
	return out
}
