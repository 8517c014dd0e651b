package server

import "bytes"

// route is one of the API's resources.
type route int

const (
	routeNone route = iota
	routePairs
	routeTickers
	routeBook
	routeTrades // /trades and /historical_trades: one handler, one cache
	routeContracts
	routeContractSpecs
)

var apiPrefix = []byte("/api/public/")

// routeOf maps a request path to its route. The path is the one fasthttp has
// already percent-decoded and normalised (no "//", no dot segments). One
// trailing slash names the same route as none. Matching is exact and
// case-sensitive; anything else, including /api/public/fees, is routeNone.
func routeOf(path []byte) route {
	name, ok := bytes.CutPrefix(path, apiPrefix)
	if !ok {
		return routeNone
	}
	if n := len(name); n > 0 && name[n-1] == '/' {
		name = name[:n-1]
	}
	switch string(name) { // a switch on a converted []byte does not allocate
	case "pairs":
		return routePairs
	case "tickers":
		return routeTickers
	case "orderbook":
		return routeBook
	case "trades", "historical_trades":
		return routeTrades
	case "contracts":
		return routeContracts
	case "contract_specs":
		return routeContractSpecs
	}
	return routeNone
}
