//go:build !race

package server

// abuseScale divides the number of addresses the abuse tests send; see
// abuse_race_test.go.
const abuseScale = 1
