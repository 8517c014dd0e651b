//go:build race

package server

// abuseScale divides the number of addresses the abuse tests send: under
// the race detector a million requests take minutes, and a tenth of them
// exercises the same code for races. The figures come from runs without it.
const abuseScale = 10
