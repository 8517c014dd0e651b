package cluster

import (
	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/promhist"
)

// dropReason says why a value of the snapshot bucket was not applied.
type dropReason int

const (
	dropBad      dropReason = iota // not a snapshot value: damaged, oversize, undecodable
	dropStale                      // a term older than the newest applied
	dropForeign                    // a key that is not a snapshot's, or a value not its key's
	dropUnlisted                   // a book or trades of a pair the pair list does not hold
	dropOlder                      // a book or trades read before the one the store holds
	numDropReasons
)

var dropNames = [numDropReasons]string{"bad", "stale_term", "foreign", "unlisted", "older"}

type memberMetrics struct {
	applied   *metrics.Counter
	dropped   [numDropReasons]*metrics.Counter
	puts      *metrics.Counter
	putErrors *metrics.Counter
	takeOvers *metrics.Counter
	stepDowns *metrics.Counter
	rejoins   *metrics.Counter
	alone     *metrics.Counter
	lag       *promhist.Histogram
	// pings counts the pings of the lease's holder by answer; vacated the
	// leases removed because their holder was gone.
	pings   [numPingAnswers]*metrics.Counter
	vacated *metrics.Counter
	// loads counts a follower's loads asked of the leader, loadsServed the
	// leader's, by outcome.
	loads, loadsServed [numLoadResults]*metrics.Counter
	// wants counts the pairs' streams a follower sent as read by its
	// requests, and those the leader marked or refused.
	wants [numWantCounts]*metrics.Counter
	// The rate counts exchanged: client keys sent and charged, messages
	// refused.
	ratesSent, ratesCharged, ratesBad *metrics.Counter
}

// lagBounds are the replication lag's buckets, in seconds: a value is
// applied within milliseconds on a healthy network.
var lagBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

func newMemberMetrics(set *metrics.Set, m *Member) memberMetrics {
	mm := memberMetrics{
		applied:   set.NewCounter(`marketfeed_cluster_values_applied_total`),
		puts:      set.NewCounter(`marketfeed_cluster_values_put_total`),
		putErrors: set.NewCounter(`marketfeed_cluster_put_errors_total`),
		takeOvers: set.NewCounter(`marketfeed_cluster_lease_won_total`),
		stepDowns: set.NewCounter(`marketfeed_cluster_lease_lost_total`),
		rejoins:   set.NewCounter(`marketfeed_cluster_rejoins_total`),
		alone:     set.NewCounter(`marketfeed_cluster_alone_total`),
		vacated:   set.NewCounter(`marketfeed_cluster_leases_vacated_total`),

		ratesSent:    set.NewCounter(`marketfeed_cluster_rate_counts_total{direction="sent"}`),
		ratesCharged: set.NewCounter(`marketfeed_cluster_rate_counts_total{direction="charged"}`),
		ratesBad:     set.NewCounter(`marketfeed_cluster_rate_messages_bad_total`),
		lag:          promhist.New(set, "marketfeed_cluster_replication_lag_seconds", `cluster="`+m.cfg.Name+`"`, lagBounds),
	}
	for a := range numPingAnswers {
		mm.pings[a] = set.NewCounter(`marketfeed_cluster_leader_pings_total{answer="` + pingAnswerNames[a] + `"}`)
	}
	for r := range numLoadResults {
		mm.loads[r] = set.NewCounter(`marketfeed_cluster_loads_total{side="asked",result="` + loadResultNames[r] + `"}`)
		mm.loadsServed[r] = set.NewCounter(`marketfeed_cluster_loads_total{side="served",result="` + loadResultNames[r] + `"}`)
	}
	for c := range numWantCounts {
		mm.wants[c] = set.NewCounter(`marketfeed_cluster_wants_total{result="` + wantCountNames[c] + `"}`)
	}
	for r := range numDropReasons {
		mm.dropped[r] = set.NewCounter(`marketfeed_cluster_values_dropped_total{reason="` + dropNames[r] + `"}`)
	}
	set.NewGauge(`marketfeed_cluster_leader`, func() float64 { return bool01(m.leading()) })
	set.NewGauge(`marketfeed_cluster_term`, func() float64 { return float64(m.NewestTerm()) })
	set.NewGauge(`marketfeed_cluster_synced`, func() float64 { return bool01(m.Synced()) })
	set.NewGauge(`marketfeed_cluster_alone`, func() float64 { return bool01(m.Alone()) })
	set.NewGauge(`marketfeed_cluster_members`, func() float64 { return float64(m.Members()) })
	set.NewGauge(`marketfeed_cluster_last_applied_seconds`, func() float64 { return float64(m.LastApplied()) / 1e9 })
	set.NewGauge(`marketfeed_cluster_last_applied_venue_time_seconds`, func() float64 { return float64(m.lastVenue.Load()) / 1e3 })
	return mm
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
