package poller

// Log attribute keys, one per meaning, for every log line of the poller.
const (
	logKeyErr  = "err"
	logKeyPair = "pair"
)
