package venue

import (
	"context"
	"errors"
	"net/http"
)

// ErrPaused is returned instead of calling the venue while calls are paused
// after the venue asked us to slow down or kept failing.
var ErrPaused = errors.New("venue calls paused")

// ErrNoBudget is returned instead of calling the venue when the call would
// exceed the weight budget.
var ErrNoBudget = errors.New("venue weight budget spent")

// Outcome classifies the answer to one venue call. It is the one
// classification of venue failures: the back-off decides its pause from it,
// the metrics count it, and a stream-fed pair's failed read waits by it, so
// a dashboard shows why calls paused.
type Outcome int

// The outcomes of a venue call.
const (
	OutcomeOK          Outcome = iota
	OutcomeRateLimited         // 429, 418: paused for Retry-After
	OutcomeForbidden           // 403: paused for minutes
	OutcomeRestricted          // 451: not ready until a call succeeds
	OutcomeServerError         // 5xx, 408: exponential back-off
	OutcomeRefused             // any other status: this request only
	OutcomeBadData             // an answer that could not be used
	OutcomeTimeout             // the call's deadline passed
	OutcomeCanceled            // the poller stopped the call, not the venue
	OutcomeUnreachable         // transport errors
	// NumOutcomes is the number of outcomes, for tables indexed by Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	"ok", "rate_limited", "forbidden", "restricted", "server_error",
	"refused", "bad_data", "timeout", "canceled", "unreachable",
}

// String is the outcome's metric label.
func (o Outcome) String() string {
	if o < 0 || o >= NumOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Transient reports whether the outcome says the venue is failing for a
// while (server errors, timeouts, transport errors): calls back off
// exponentially.
func (o Outcome) Transient() bool {
	return o == OutcomeServerError || o == OutcomeTimeout || o == OutcomeUnreachable
}

// OutcomeOf classifies the error a venue call returned (nil: OutcomeOK).
func OutcomeOf(err error) Outcome {
	var se *StatusError
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &se):
		switch {
		case se.Status == http.StatusTooManyRequests || se.Status == http.StatusTeapot:
			return OutcomeRateLimited
		case se.Status == http.StatusForbidden:
			return OutcomeForbidden
		case se.Status == http.StatusUnavailableForLegalReasons:
			return OutcomeRestricted
		case se.Status >= 500 || se.Status == http.StatusRequestTimeout:
			return OutcomeServerError
		}
		return OutcomeRefused
	case errors.Is(err, ErrBadData):
		return OutcomeBadData
	case errors.Is(err, context.Canceled), errors.Is(err, ErrPaused), errors.Is(err, ErrNoBudget):
		return OutcomeCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return OutcomeTimeout
	}
	return OutcomeUnreachable
}

// Paused reports whether err ended a call for a pause of every venue call:
// the venue's order to stop that started it (429, 418, 403, 451), or a call
// refused while it lasts (ErrPaused). The pause is logged once, with how
// long it lasts, for all the reads it stops; each read's own failure says
// nothing more.
func Paused(err error) bool {
	switch OutcomeOf(err) {
	case OutcomeRateLimited, OutcomeForbidden, OutcomeRestricted:
		return true
	}
	return errors.Is(err, ErrPaused)
}
