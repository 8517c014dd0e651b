// Package snapshot owns the immutable, pre-serialized values the service
// publishes (pairs, tickers, one order book and one trade list per pair, and,
// for a cluster's members only, each book's deeper Depth), the
// rules that decide what is published, the exact decimal arithmetic behind
// computed values, and the Store that hands the current values to readers.
//
// A value is built once per venue read by the poller and never mutated after
// Store publishes it. Each carries its response bytes together with the
// offsets that let the server answer a smaller depth, a smaller limit or one
// trade side by slicing, so that no request computes JSON.
package snapshot
