package server

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"marketfeed/snapshot"
)

// The query parameters the routes take. Any other parameter (a cache buster,
// page=) is ignored, and so is a known one on a route that does not take it.
const (
	paramTicker = iota
	paramDepth
	paramLimit
	paramType
	numParams
)

// rawQuery is what a query string says about the known parameters: the first
// value of each and how often each was given. The values point into the
// request and are valid only until the handler returns.
type rawQuery struct {
	value [numParams][]byte
	count [numParams]int
}

// readQuery collects the known parameters of a request's query string. It
// counts every occurrence, because a repeated parameter is ambiguous and
// must be refused rather than resolved by picking one.
//
// A query string without '%' or '+', what aggregators send, has nothing to
// decode: it is read in place, as fasthttp's Args reads it (pairs split at
// '&', a key from its value at the first '='), without Args' copy of every
// key and value, a fifth of the handler's own work on /orderbook. Any other
// goes through Args, which decodes keys too (ticker%5Fid is ticker_id).
func readQuery(uri *fasthttp.URI) rawQuery {
	qs := uri.QueryString()
	if bytes.IndexByte(qs, '%') >= 0 || bytes.IndexByte(qs, '+') >= 0 {
		return readArgs(uri.QueryArgs())
	}
	var q rawQuery
	for len(qs) > 0 {
		pair := qs
		if i := bytes.IndexByte(qs, '&'); i >= 0 {
			pair, qs = qs[:i], qs[i+1:]
		} else {
			qs = nil
		}
		key, value := pair, pair[len(pair):] // a key alone has an empty value
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			key, value = pair[:i], pair[i+1:]
		}
		q.add(key, value)
	}
	return q
}

// readArgs collects the known parameters from args, which fasthttp has
// percent-decoded.
func readArgs(args *fasthttp.Args) rawQuery {
	var q rawQuery
	for key, value := range args.All() {
		q.add(key, value)
	}
	return q
}

// add counts one parameter of the query, and keeps its value if it is the
// first of its name; names the routes do not take are ignored.
func (q *rawQuery) add(key, value []byte) {
	var i int
	switch string(key) {
	case "ticker_id":
		i = paramTicker
	case "depth":
		i = paramDepth
	case "limit":
		i = paramLimit
	case "type":
		i = paramType
	default:
		return
	}
	if q.count[i] == 0 {
		q.value[i] = value
	}
	q.count[i]++
}

// bookQuery is a validated /orderbook request.
type bookQuery struct {
	id    []byte
	depth int // 1..snapshot.MaxDepth
}

// tradesQuery is a validated /trades request.
type tradesQuery struct {
	id    []byte
	side  snapshot.Side
	limit int // 1..snapshot.MaxTrades
}

// parseBook validates an /orderbook query. Parameters are checked in a fixed
// order, ticker_id first, and the first failure answers.
func parseBook(q *rawQuery) (bookQuery, *apiError) {
	id, e := tickerID(q)
	if e != nil {
		return bookQuery{}, e
	}
	depth, e := count(q, paramDepth, snapshot.MaxDepth, errDepthRepeated, errDepthSyntax, errDepthNegative)
	if e != nil {
		return bookQuery{}, e
	}
	return bookQuery{id: id, depth: depth}, nil
}

// parseTrades validates a /trades query: ticker_id, then type, then limit.
func parseTrades(q *rawQuery) (tradesQuery, *apiError) {
	id, e := tickerID(q)
	if e != nil {
		return tradesQuery{}, e
	}
	side := snapshot.SideAll
	switch q.count[paramType] {
	case 0:
	case 1:
		switch string(q.value[paramType]) {
		case "buy":
			side = snapshot.SideBuy
		case "sell":
			side = snapshot.SideSell
		default:
			return tradesQuery{}, errType
		}
	default:
		return tradesQuery{}, errTypeRepeated
	}
	limit, e := count(q, paramLimit, snapshot.MaxTrades, errLimitRepeated, errLimitSyntax, errLimitNegative)
	if e != nil {
		return tradesQuery{}, e
	}
	return tradesQuery{id: id, side: side, limit: limit}, nil
}

// tickerID checks ticker_id: present, given once, not empty, of the exact
// form. Whether it is listed is a later question (the /pairs gate), so a
// malformed id is refused even when it is also unknown.
func tickerID(q *rawQuery) ([]byte, *apiError) {
	switch n := q.count[paramTicker]; {
	case n == 0:
		return nil, errTickerMissing
	case n > 1:
		return nil, errTickerRepeated
	}
	id := q.value[paramTicker]
	switch {
	case len(id) == 0:
		return nil, errTickerEmpty
	case !snapshot.ValidTickerID(id):
		return nil, errTickerForm
	}
	return id, nil
}

// count checks depth or limit and returns the number of items to serve,
// 1..ceiling: absent or 0 means the ceiling (aggregators send 0 for "all"),
// and a larger value is clamped to it.
func count(q *rawQuery, param, ceiling int, repeated, syntax, negative *apiError) (int, *apiError) {
	switch q.count[param] {
	case 0:
		return ceiling, nil
	case 1:
	default:
		return 0, repeated
	}
	n, neg, ok := parseCount(q.value[param], ceiling)
	switch {
	case !ok:
		return 0, syntax
	case neg:
		return 0, negative
	case n == 0:
		return ceiling, nil
	}
	return n, nil
}

// parseCount reads an optional '-' followed by one or more ASCII digits,
// leading zeros allowed; nothing else (no '+', no space, no fraction, no
// exponent, no hex) is an integer here. The value saturates just above
// ceiling, so any number of digits parses without overflow and clamps. neg
// reports a negative value; "-0" is zero, not negative.
func parseCount(b []byte, ceiling int) (n int, neg, ok bool) {
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if n <= ceiling {
			n = n*10 + int(c-'0')
		}
	}
	if n > ceiling {
		n = ceiling
	}
	return n, neg && n != 0, true
}
