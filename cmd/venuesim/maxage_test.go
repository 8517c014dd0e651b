package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The connection age set at run time closes every connection that reaches
// it, those already open (at once when older) as well as new ones, with
// the close -ws-max-age sends; after its period, or when cleared, the
// configured age is in force again.
func TestMaxAgeSetAtRunTimeClosesOldAndNewConnections(t *testing.T) {
	st := newStreamTest(t, defaultWSConfig())
	old := st.dial(t, "/public/stream")
	request(t, old, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)
	st.advance(30 * time.Second)
	young := st.dial(t, "/market/stream")
	request(t, young, `{"method":"LIST_SUBSCRIPTIONS","id":1}`)

	postControl(t, st.url+"/_control/max-age?age=20s&for=1m")
	if got := closeStatus(t, old); got != websocket.StatusGoingAway {
		t.Fatalf("a connection older than the age: close status %v, want going away", got)
	}
	if r := st.waitClosed(t); r != closeMaxAge {
		t.Fatalf("closed for %q, want %q", r, closeMaxAge)
	}
	if got := request(t, young, `{"method":"LIST_SUBSCRIPTIONS","id":2}`); got != `{"result":[],"id":2}` {
		t.Fatalf("a connection younger than the age: %s", got)
	}
	var stats wsStats
	getJSON(t, st.url+"/_control/ws", &stats)
	if stats.MaxAgeMs != 20_000 {
		t.Errorf("max age in force %d ms, want 20000", stats.MaxAgeMs)
	}

	// A connection opened under a (real) age of 30 ms is closed at it.
	postControl(t, st.url+"/_control/max-age?age=30ms")
	if got := closeStatus(t, young); got != websocket.StatusGoingAway {
		t.Fatalf("young connection under a shorter age: close status %v", got)
	}
	st.waitClosed(t)
	fresh := st.dial(t, "/public/stream")
	if got := closeStatus(t, fresh); got != websocket.StatusGoingAway {
		t.Fatalf("a connection opened under the age: close status %v, want going away", got)
	}
	if r := st.waitClosed(t); r != closeMaxAge {
		t.Fatalf("closed for %q, want %q", r, closeMaxAge)
	}

	// Cleared: the configured age again; so too once its period is over.
	sendControl(t, http.MethodDelete, st.url+"/_control/max-age")
	getJSON(t, st.url+"/_control/ws", &stats)
	if want := defaultWSConfig().MaxAge.Milliseconds(); stats.MaxAgeMs != want {
		t.Errorf("cleared: max age in force %d ms, want the configured %d", stats.MaxAgeMs, want)
	}
	kept := st.dial(t, "/public/stream")
	if got := request(t, kept, `{"method":"LIST_SUBSCRIPTIONS","id":3}`); got != `{"result":[],"id":3}` {
		t.Fatalf("after clearing: %s", got)
	}
	postControl(t, st.url+"/_control/max-age?age=20s&for=1m")
	st.advance(time.Minute)
	getJSON(t, st.url+"/_control/ws", &stats)
	if want := defaultWSConfig().MaxAge.Milliseconds(); stats.MaxAgeMs != want {
		t.Errorf("after its period: max age in force %d ms, want the configured %d", stats.MaxAgeMs, want)
	}
}
