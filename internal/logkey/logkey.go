// Package logkey holds the log attribute keys of every component: one key
// per meaning across the program's logs, as litestream does, so that a
// query for an attribute finds every line that carries it whichever
// component wrote it: "err" and never "error", "pair" for a ticker_id.
// They are what operators query, so a key changes only with the docs.
package logkey

// The keys, one per meaning.
const (
	Err       = "err"       // an error
	Pair      = "pair"      // one ticker_id
	Pairs     = "pairs"     // how many ticker_ids
	Component = "component" // the part of the service that wrote the line
	Stream    = "stream"    // a stream kind
	Panic     = "panic"     // what a recovered panic carried
	Method    = "method"    // an HTTP method
	URI       = "uri"       // a request's URI
	Stack     = "stack"     // a goroutine's stack
	Source    = "source"    // the library that wrote the line (fasthttp)
	URL       = "url"       // a URL
	Venue     = "venue"     // the -venue name
	Ops       = "ops"       // the operator endpoints' address; empty: off
	Version   = "version"   // the build's version
	File      = "file"      // a file read
	Var       = "variable"  // an environment variable
	Meant     = "meant"     // the variable a misspelt one is nearest to
)
