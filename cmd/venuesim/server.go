package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"marketfeed/poller/binance"
	"marketfeed/poller/sim"
	"marketfeed/poller/venue"
)

// fault is what the server does instead of answering with data.
type fault struct {
	Status     int           // HTTP status to answer; 0: none
	RetryAfter time.Duration // Retry-After with Status; 0: none
	Delay      time.Duration // wait before answering
	Body       string        // garbage | truncated | html | empty | drip | reset
	Rate       float64       // fraction of calls hit; 0 or 1: all
	// Count heals the fault after it has hit this many calls; 0: never. A
	// single 429 is how a venue's rate limit usually shows, and it makes the
	// pause that follows measurable: every later call is a healthy one.
	Count int
	// Flap switches the fault on and off every Flap, on first, so that a
	// venue that keeps failing and recovering can be played unattended.
	// 0: always on.
	Flap time.Duration
}

func (f fault) active() bool { return f.Status != 0 || f.Delay > 0 || f.Body != "" }

// callLogSize bounds the call log: enough for minutes of polling at full
// cadence, a fixed amount of memory however long the simulator runs.
const callLogSize = 1 << 16

// call is one venue call as the simulator received it.
type call struct {
	At     int64  `json:"at_us"` // arrival, Unix microseconds
	Path   string `json:"path"`
	Weight int    `json:"weight"` // the request weight it was charged
	Fault  bool   `json:"fault"`  // a fault or the weight limit answered it
}

// binanceWeights prices a depth call by its limit as the Binance adapter
// does.
var binanceWeights = binance.New(binance.Binance, binance.Options{})

// weight returns the Binance weight of a GET of path with query q, and false
// for a path the venue does not serve.
func weight(path string, q url.Values) (int, bool) {
	w := binance.Binance.Weights
	switch path {
	case "/fapi/v1/exchangeInfo":
		return w.Catalog, true
	case "/fapi/v1/ticker/24hr":
		return w.Stats, true
	case "/fapi/v1/ticker/bookTicker":
		return w.Quotes, true
	case "/fapi/v1/depth":
		limit := atoi(q.Get("limit"))
		if limit <= 0 {
			limit = 500 // the venue's default
		}
		return binanceWeights.BookWeight(limit), true
	case "/fapi/v1/trades":
		return w.TradeID, true
	case "/fapi/v1/aggTrades", "/fapi/v3/aggTrades": // Binance's path, Aster's
		return w.Trades, true
	case "/fapi/v1/premiumIndex":
		// Binance documents 10 for all symbols and 1 for one; the
		// simulator charges 10 either way, as the adapter plans for.
		return w.Contracts, true
	case "/fapi/v1/openInterest":
		return w.OpenInterest, true
	}
	return 0, false
}

// venueServer answers Binance's market-data paths from a simulated venue.
type venueServer struct {
	venue *sim.Venue
	limit int
	hub   *wsHub // market streams over WebSocket
	// restOnly serves no market streams: their paths answer 404, as a
	// venue (or a proxy in front of one) with a REST API only.
	restOnly bool

	mu      sync.Mutex
	fault   fault
	since   time.Time // when the fault was set: the start of its flapping
	until   time.Time // the fault heals at until; zero: when told
	hits    int       // calls the current fault has hit
	minute  int64     // the venue's current minute
	used    int       // weight used in it
	served  map[string]int
	faulted int
	hidden  map[string]bool // symbols delisted for now
	calls   []call          // ring of the last callLogSize calls
	next    int             // where the next call goes in calls
}

func newVenueServer(v *sim.Venue, limit int) *venueServer {
	return newStreamingServer(v, limit, defaultWSConfig(), slog.New(slog.DiscardHandler))
}

// newStreamingServer is newVenueServer with market streams configured by
// cfg. The streams deliver once the hub is fed (see wsHub.run).
func newStreamingServer(v *sim.Venue, limit int, cfg wsConfig, log *slog.Logger) *venueServer {
	s := &venueServer{venue: v, limit: limit, served: make(map[string]int), hidden: make(map[string]bool)}
	s.hub = newWSHub(cfg, log, s.isHidden)
	return s
}

func (s *venueServer) setFault(f fault, until time.Time) {
	s.mu.Lock()
	s.fault, s.since, s.until, s.hits = f, time.Now(), until, 0
	s.mu.Unlock()
}

// setListed delists a market or lists it again. A delisted market is left
// out of exchangeInfo and the bulk tickers, and its book and trades answer
// 400 Invalid symbol, as a venue answers for a symbol it no longer has.
func (s *venueServer) setListed(symbol string, listed bool) {
	s.mu.Lock()
	if listed {
		delete(s.hidden, symbol)
	} else {
		s.hidden[symbol] = true
	}
	s.mu.Unlock()
}

func (s *venueServer) isHidden(symbol string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hidden[symbol]
}

// flapOn reports whether a flapping fault is in its on phase. Called with mu
// held.
func (s *venueServer) flapOn(now time.Time) bool {
	if s.fault.Flap <= 0 {
		return true
	}
	return (now.Sub(s.since)/s.fault.Flap)%2 == 0
}

// log records a call in the ring. Called with mu held.
func (s *venueServer) log(c call) {
	if len(s.calls) < callLogSize {
		s.calls = append(s.calls, c)
		return
	}
	s.calls[s.next] = c
	s.next = (s.next + 1) % callLogSize
}

// callsSince returns the logged calls that arrived at or after since, oldest
// first.
func (s *venueServer) callsSince(since time.Time) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]call, 0, 64)
	us := since.UnixMicro()
	for _, c := range s.calls[s.next:] {
		if c.At >= us {
			out = append(out, c)
		}
	}
	for _, c := range s.calls[:s.next] {
		if c.At >= us {
			out = append(out, c)
		}
	}
	return out
}

// admit charges the call's weight and decides its fault. It returns the
// weight used this minute, and whether the limit was exceeded.
func (s *venueServer) admit(path string, weight int) (used int, over bool, f fault, hit bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := now.Unix() / 60; m != s.minute {
		s.minute, s.used = m, 0
	}
	s.used += weight
	s.served[path]++
	if !s.until.IsZero() && now.After(s.until) {
		s.fault, s.until = fault{}, time.Time{}
	}
	f = s.fault
	hit = f.active() && s.flapOn(now) && (f.Rate <= 0 || f.Rate >= 1 || rand.Float64() < f.Rate)
	if hit {
		s.faulted++
		s.hits++
		if f.Count > 0 && s.hits >= f.Count {
			s.fault, s.until = fault{}, time.Time{}
		}
	}
	over = s.limit > 0 && s.used > s.limit
	s.log(call{At: now.UnixMicro(), Path: path, Weight: weight, Fault: hit || over})
	return s.used, over, f, hit
}

func (s *venueServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_control/fault", "/_control/stats", "/_control/market", "/_control/calls":
		s.control(w, r)
		return
	case "/_control/ws", "/_control/drop", "/_control/gap", "/_control/garble", "/_control/silence", "/_control/book", "/_control/fast":
		s.streamControl(w, r)
		return
	case "/_control/max-age":
		s.maxAgeControl(w, r)
		return
	}
	if isStreamPath(r.URL.Path) {
		if s.restOnly {
			writeError(w, http.StatusNotFound, -1000, "unknown path")
			return
		}
		s.hub.ServeHTTP(w, r)
		return
	}
	wt, ok := weight(r.URL.Path, r.URL.Query())
	if !ok || r.Method != http.MethodGet {
		writeError(w, http.StatusNotFound, -1000, "unknown path")
		return
	}
	used, over, f, hit := s.admit(r.URL.Path, wt)
	w.Header().Set("X-MBX-USED-WEIGHT-1M", strconv.Itoa(used))
	if over {
		w.Header().Set("Retry-After", strconv.Itoa(60-int(time.Now().Unix()%60)))
		writeError(w, http.StatusTooManyRequests, -1003, "too many requests")
		return
	}
	if hit && f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if hit && f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, "<html><body><h1>%d</h1>venue fault</body></html>", f.Status)
		return
	}
	body, status := s.answer(r)
	if hit && f.Body != "" {
		s.corrupt(w, r, f.Body, body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// corrupt answers 200 with a broken body.
func (s *venueServer) corrupt(w http.ResponseWriter, r *http.Request, kind string, body []byte) {
	switch kind {
	case "reset":
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
					_ = tc.SetLinger(0) // close with RST, not FIN
				}
				conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusInternalServerError)
		return
	case "html":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html><body>Attention required</body></html>"))
	case "empty":
		w.WriteHeader(http.StatusOK)
	case "truncated":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
	case "drip":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		for _, b := range body {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
		}
	default: // garbage
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"symbols":[{"symbol":1e999,"bids":"NaN"`))
	}
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "msg": msg})
}

// answer renders the venue's data for the request in Binance's shapes.
func (s *venueServer) answer(r *http.Request) ([]byte, int) {
	ctx := r.Context()
	q := r.URL.Query()
	var v any
	var err error
	switch r.URL.Path {
	case "/fapi/v1/exchangeInfo":
		v, err = s.exchangeInfo(ctx)
	case "/fapi/v1/ticker/24hr":
		v, err = s.stats(ctx)
	case "/fapi/v1/ticker/bookTicker":
		v, err = s.quotes(ctx)
	case "/fapi/v1/premiumIndex":
		v, err = s.premiumIndex(ctx, q)
	case "/fapi/v1/openInterest":
		if symbol := q.Get("symbol"); s.isHidden(symbol) {
			err = errDelisted
		} else {
			v, err = s.openInterest(ctx, symbol)
		}
	case "/fapi/v1/depth", "/fapi/v1/trades", "/fapi/v1/aggTrades", "/fapi/v3/aggTrades":
		symbol := q.Get("symbol")
		switch {
		case s.isHidden(symbol):
			err = errDelisted
		case r.URL.Path == "/fapi/v1/depth":
			v, err = s.depth(ctx, symbol, atoi(q.Get("limit")))
		case r.URL.Path == "/fapi/v1/trades":
			v, err = s.trades(ctx, symbol, atoi(q.Get("limit")))
		case q.Has("fromId"):
			from, perr := strconv.ParseInt(q.Get("fromId"), 10, 64)
			if perr != nil || from < 0 {
				return []byte(`{"code":-1100,"msg":"Illegal characters found in parameter 'fromId'; legal range is '^[0-9]{1,20}$'."}`), http.StatusBadRequest
			}
			v, err = aggRows(s.venue.TradesFrom(ctx, symbol, from, atoi(q.Get("limit"))))
		default:
			v, err = aggRows(s.venue.Trades(ctx, symbol, atoi(q.Get("limit"))))
		}
	}
	if err != nil {
		return []byte(`{"code":-1121,"msg":"Invalid symbol."}`), http.StatusBadRequest
	}
	body, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"code":-1000,"msg":"internal"}`), http.StatusInternalServerError
	}
	return body, http.StatusOK
}

// errDelisted is the answer for a market delisted through the control
// endpoint: the venue no longer knows the symbol.
var errDelisted = errors.New("symbol delisted")

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func (s *venueServer) exchangeInfo(ctx context.Context) (any, error) {
	cat, err := s.venue.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	type symbol struct {
		Symbol       string `json:"symbol"`
		ContractType string `json:"contractType"`
		Status       string `json:"status"`
		BaseAsset    string `json:"baseAsset"`
		QuoteAsset   string `json:"quoteAsset"`
	}
	symbols := make([]symbol, 0, len(cat.Markets))
	hidden := s.hiddenSet()
	for _, m := range cat.Markets {
		if hidden[m.Symbol] {
			continue
		}
		ct, st := "PERPETUAL", "TRADING"
		if !m.Perpetual {
			ct = "CURRENT_QUARTER"
		}
		if !m.Trading {
			st = "SETTLING"
		}
		symbols = append(symbols, symbol{m.Symbol, ct, st, m.Base, m.Quote})
	}
	limits := []map[string]any{}
	if s.limit > 0 {
		limits = append(limits, map[string]any{
			"rateLimitType": "REQUEST_WEIGHT", "interval": "MINUTE", "intervalNum": 1, "limit": s.limit,
		})
	}
	return map[string]any{"timezone": "UTC", "rateLimits": limits, "symbols": symbols}, nil
}

// hiddenSet returns a copy of the delisted symbols.
func (s *venueServer) hiddenSet() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.hidden))
	for k := range s.hidden {
		out[k] = true
	}
	return out
}

func (s *venueServer) stats(ctx context.Context) (any, error) {
	stats, err := s.venue.Stats(ctx)
	if err != nil {
		return nil, err
	}
	type item struct {
		Symbol      string  `json:"symbol"`
		LastPrice   string  `json:"lastPrice"`
		HighPrice   string  `json:"highPrice"`
		LowPrice    string  `json:"lowPrice"`
		Volume      *string `json:"volume,omitempty"`
		QuoteVolume string  `json:"quoteVolume"`
		CloseTime   int64   `json:"closeTime"`
	}
	now := time.Now().UnixMilli()
	out := make([]item, 0, len(stats))
	hidden := s.hiddenSet()
	for _, st := range stats {
		if hidden[st.Symbol] {
			continue
		}
		it := item{Symbol: st.Symbol, LastPrice: st.LastPrice, HighPrice: st.High, LowPrice: st.Low, QuoteVolume: st.QuoteVolume, CloseTime: now}
		if st.BaseVolume != "" {
			vol := st.BaseVolume
			it.Volume = &vol
		}
		out = append(out, it)
	}
	return out, nil
}

func (s *venueServer) quotes(ctx context.Context) (any, error) {
	quotes, err := s.venue.Quotes(ctx)
	if err != nil {
		return nil, err
	}
	type item struct {
		Symbol   string `json:"symbol"`
		BidPrice string `json:"bidPrice"`
		BidQty   string `json:"bidQty"`
		AskPrice string `json:"askPrice"`
		AskQty   string `json:"askQty"`
		Time     int64  `json:"time"`
	}
	now := time.Now().UnixMilli()
	out := make([]item, 0, len(quotes))
	hidden := s.hiddenSet()
	for _, q := range quotes {
		if hidden[q.Symbol] {
			continue
		}
		out = append(out, item{q.Symbol, q.Bid, "1", q.Ask, "1", now})
	}
	return out, nil
}

func (s *venueServer) depth(ctx context.Context, symbol string, limit int) (any, error) {
	if limit <= 0 {
		limit = 500
	}
	b, err := s.venue.Book(ctx, symbol, limit)
	if err != nil {
		return nil, err
	}
	return depthBody(b), nil
}

// depthBody renders a book as /fapi/v1/depth does.
func depthBody(b venue.Book) map[string]any {
	levels := func(ls []venue.Level) [][2]string {
		out := make([][2]string, len(ls))
		for i, l := range ls {
			out[i] = [2]string{l.Price, l.Size}
		}
		return out
	}
	return map[string]any{
		"lastUpdateId": b.LastUpdateID, "E": b.Time + 3, "T": b.Time,
		"bids": levels(b.Bids), "asks": levels(b.Asks),
	}
}

// aggRows renders the venue's trades, oldest first, as aggregate-trade
// rows (the simulator takes a limit that is not positive as 500, as
// Binance does). Each simulated trade is its own aggregate, so f and l are
// its id.
func aggRows(trades []venue.Trade, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 96*len(trades))
	b = append(b, '[')
	for i, t := range trades {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendAggRow(append(b, '{'), t), '}')
	}
	return json.RawMessage(append(b, ']')), nil
}

func (s *venueServer) trades(ctx context.Context, symbol string, limit int) (any, error) {
	if limit <= 0 {
		limit = 500
	}
	trades, err := s.venue.Trades(ctx, symbol, limit)
	if err != nil {
		return nil, err
	}
	type item struct {
		ID           int64  `json:"id"`
		Price        string `json:"price"`
		Qty          string `json:"qty"`
		QuoteQty     string `json:"quoteQty,omitempty"`
		Time         int64  `json:"time"`
		IsBuyerMaker bool   `json:"isBuyerMaker"`
	}
	out := make([]item, len(trades))
	for i, t := range trades {
		// The taker sold when the resting buyer was the maker.
		out[i] = item{ID: t.ID, Price: t.Price, Qty: t.Size, QuoteQty: t.QuoteQty, Time: t.Time, IsBuyerMaker: t.Sell}
	}
	return out, nil
}

// control sets, clears and reports faults, delists and relists markets, and
// reports the calls served.
func (s *venueServer) control(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_control/stats" && r.Method == http.MethodGet:
		s.mu.Lock()
		hidden := make([]string, 0, len(s.hidden))
		for k := range s.hidden {
			hidden = append(hidden, k)
		}
		slices.Sort(hidden)
		body, _ := json.Marshal(map[string]any{"served": s.served, "faulted": s.faulted, "used_weight": s.used, "delisted": hidden})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case r.URL.Path == "/_control/calls" && r.Method == http.MethodGet:
		var since time.Time
		if v := r.URL.Query().Get("since_us"); v != "" {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				http.Error(w, "since_us: "+err.Error(), http.StatusBadRequest)
				return
			}
			since = time.UnixMicro(us)
		}
		body, _ := json.Marshal(map[string]any{"calls": s.callsSince(since)})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case r.URL.Path == "/_control/market" && r.Method == http.MethodPost:
		q := r.URL.Query()
		listed, err := strconv.ParseBool(q.Get("listed"))
		if err != nil || q.Get("symbol") == "" {
			http.Error(w, "want symbol=S&listed=true|false", http.StatusBadRequest)
			return
		}
		s.setListed(q.Get("symbol"), listed)
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_control/market":
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.Method == http.MethodDelete:
		s.setFault(fault{}, time.Time{})
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost:
		q := r.URL.Query()
		var f fault
		var err error
		parse := func(name string, into func(string) error) {
			if v := q.Get(name); v != "" && err == nil {
				if e := into(v); e != nil {
					err = fmt.Errorf("%s: %w", name, e)
				}
			}
		}
		var lasting time.Duration
		parse("status", func(v string) (e error) { f.Status, e = strconv.Atoi(v); return })
		parse("retry_after", func(v string) (e error) { f.RetryAfter, e = time.ParseDuration(v); return })
		parse("delay", func(v string) (e error) { f.Delay, e = time.ParseDuration(v); return })
		parse("rate", func(v string) (e error) { f.Rate, e = strconv.ParseFloat(v, 64); return })
		parse("for", func(v string) (e error) { lasting, e = time.ParseDuration(v); return })
		parse("count", func(v string) (e error) { f.Count, e = strconv.Atoi(v); return })
		parse("flap", func(v string) (e error) { f.Flap, e = time.ParseDuration(v); return })
		f.Body = q.Get("body")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var until time.Time
		if lasting > 0 {
			until = time.Now().Add(lasting)
		}
		s.setFault(f, until)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// isStreamPath reports whether path is one of the market-stream paths; the
// hub answers 404 for those the configured layout does not serve.
func isStreamPath(path string) bool {
	for _, p := range []string{"", "/public", "/market"} {
		rest, ok := strings.CutPrefix(path, p)
		if ok && (rest == "/stream" || rest == "/ws" || strings.HasPrefix(rest, "/ws/")) {
			return true
		}
	}
	return false
}

// streamControl serves the market-stream switches and reports.
func (s *venueServer) streamControl(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	method := http.MethodPost
	if r.URL.Path == "/_control/ws" || r.URL.Path == "/_control/book" {
		method = http.MethodGet
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/_control/ws":
		writeJSON(w, s.hub.stats())
	case "/_control/drop":
		var id int64
		if v := q.Get("conn"); v != "" {
			var err error
			if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
				http.Error(w, "conn: want a connection id from /_control/ws", http.StatusBadRequest)
				return
			}
		}
		var outage time.Duration
		if v := q.Get("for"); v != "" {
			var err error
			if outage, err = time.ParseDuration(v); err != nil || outage <= 0 {
				http.Error(w, "for: want a positive duration", http.StatusBadRequest)
				return
			}
		}
		line := q.Get("line")
		if n := s.hub.drop(id, line, outage); n == 0 && id != 0 {
			http.Error(w, "conn: no such connection", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "/_control/gap", "/_control/garble":
		n := 1
		if v := q.Get("events"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				http.Error(w, "events: want a positive count", http.StatusBadRequest)
				return
			}
		}
		if q.Get("symbol") == "" {
			http.Error(w, "want symbol=S", http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/_control/gap" {
			s.hub.gap(q.Get("symbol"), n)
		} else {
			s.hub.garble(q.Get("symbol"), n)
		}
		w.WriteHeader(http.StatusNoContent)
	case "/_control/silence":
		d, err := time.ParseDuration(q.Get("for"))
		stream, symbol := q.Get("stream"), q.Get("symbol")
		if err != nil || d <= 0 || (stream == "") == (symbol == "") {
			http.Error(w, "want stream=NAME&for=DURATION or symbol=S&for=DURATION", http.StatusBadRequest)
			return
		}
		if symbol != "" {
			s.hub.muteSymbol(symbol, d)
		} else {
			s.hub.silence(stream, d)
		}
		w.WriteHeader(http.StatusNoContent)
	case "/_control/fast":
		levels, err := strconv.Atoi(q.Get("levels"))
		d, derr := time.ParseDuration(q.Get("for"))
		side := q.Get("side")
		if err != nil || levels < 1 || derr != nil || d <= 0 || q.Get("symbol") == "" || side != "" && side != "bids" && side != "asks" {
			http.Error(w, "want symbol=S&levels=N&for=DURATION[&side=bids|asks]", http.StatusBadRequest)
			return
		}
		if side != "asks" {
			levels = -levels // the bids are taken: the price falls
		}
		if err := s.venue.FastMarket(q.Get("symbol"), levels, d); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "/_control/book":
		// The book is asked for at an update id, or at a venue time (ms):
		// a served book carries the venue's time, not its update id, and
		// the book in force then is the one of the heartbeat it falls in.
		symbol := q.Get("symbol")
		id, err := strconv.ParseInt(q.Get("update_id"), 10, 64)
		at, errAt := strconv.ParseInt(q.Get("time_ms"), 10, 64)
		if symbol == "" || (err == nil) == (errAt == nil) || (errAt == nil && at <= 0) {
			http.Error(w, "want symbol=S and update_id=N or time_ms=T[&depth=D]", http.StatusBadRequest)
			return
		}
		depth := 100
		if v := q.Get("depth"); v != "" {
			if depth, err = strconv.Atoi(v); err != nil || depth < 1 {
				http.Error(w, "depth: want a positive count", http.StatusBadRequest)
				return
			}
		}
		if errAt == nil {
			if id, err = s.venue.UpdateID(symbol, sim.Heartbeat(time.UnixMilli(at))); err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
		}
		b, err := s.venue.BookAt(symbol, id, depth)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, depthBody(b))
	}
}

// maxAgeControl sets the age at which the venue closes stream connections
// (POST ?age=20s[&for=60s]) or restores the configured one (DELETE).
func (s *venueServer) maxAgeControl(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		q := r.URL.Query()
		age, err := time.ParseDuration(q.Get("age"))
		if err != nil || age <= 0 {
			http.Error(w, "age: want a positive duration", http.StatusBadRequest)
			return
		}
		var lasting time.Duration
		if v := q.Get("for"); v != "" {
			if lasting, err = time.ParseDuration(v); err != nil || lasting <= 0 {
				http.Error(w, "for: want a positive duration", http.StatusBadRequest)
				return
			}
		}
		s.hub.setMaxAge(age, lasting)
	case http.MethodDelete:
		s.hub.setMaxAge(0, 0)
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
