package cluster

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"marketfeed/internal/natstest"
)

// hang is a call NATS never answers: it ends with its context.
func hang(ctx context.Context) (struct{}, error) {
	<-ctx.Done()
	return struct{}{}, ctx.Err()
}

// A call the connection's loss leaves hanging ends when the link goes
// down, not at its timeout; one begun while the link is down fails at
// once; once the link is back, calls are answered, and one that is not
// still ends at its timeout.
func TestLinkEndsTheCallsOfALostConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLink()
		type result struct {
			err  error
			took time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			_, err := within(t.Context(), l, time.Minute, hang)
			done <- result{err, time.Since(start)}
		}()
		time.Sleep(3 * time.Second)
		l.set(false)
		if r := <-done; !errors.Is(r.err, context.Canceled) || r.took != 3*time.Second {
			t.Errorf("a call in flight when the link went down: %v after %v, want canceled after 3s", r.err, r.took)
		}

		start = time.Now()
		if _, err := within(t.Context(), l, time.Minute, hang); !errors.Is(err, context.Canceled) || time.Since(start) != 0 {
			t.Errorf("a call begun while the link is down: %v after %v, want canceled at once", err, time.Since(start))
		}

		l.set(true)
		l.set(true) // a second "up" keeps the context the first began
		answered, err := within(t.Context(), l, time.Second, func(context.Context) (int, error) { return 7, nil })
		if answered != 7 || err != nil {
			t.Errorf("a call once the link is back: %d, %v, want 7", answered, err)
		}
		start = time.Now()
		if _, err := within(t.Context(), l, time.Second, hang); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("an unanswered call on a link that is up: %v after %v, want its timeout after 1s", err, time.Since(start))
		}
	})
}

// The link follows a real connection: a request NATS holds when its
// server shuts down ends then, with the link, rather than at its timeout
// (the client keeps it while it reconnects); when the server is back, the
// link is up again and requests are answered.
func TestLinkFollowsTheConnection(t *testing.T) {
	s := natstest.Start(t)
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// One subject is heard and never answered, the other answered.
	if _, err := nc.Subscribe("silent", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	l := newLink()
	statuses := nc.StatusChanged()
	l.set(nc.IsConnected())
	ctx, cancel := context.WithCancel(t.Context())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		l.follow(ctx, nc, statuses)
	}()
	t.Cleanup(func() { cancel(); <-followed })

	request := func(subject string) error {
		_, err := within(t.Context(), l, time.Minute, func(ctx context.Context) (*nats.Msg, error) {
			return nc.RequestWithContext(ctx, subject, []byte("x"))
		})
		return err
	}
	if err := request("echo"); err != nil {
		t.Fatalf("a request on a link that is up: %v", err)
	}
	held := make(chan error, 1)
	go func() { held <- request("silent") }()
	restart := natstest.Stop(t, s)
	select {
	case err := <-held:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request held when the server went: %v, want canceled with the link", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request held when the server went still waits 30s later: it waits out its minute")
	}
	if err := request("echo"); !errors.Is(err, context.Canceled) {
		t.Errorf("a request while the server is away: %v, want canceled at once", err)
	}

	restart()
	deadline := time.Now().Add(10 * time.Second)
	for !nc.IsConnected() || l.current().Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("10s after the server came back: connected %v, link down %v", nc.IsConnected(), l.current().Err() != nil)
		}
		time.Sleep(10 * time.Millisecond) // polling a real connection, not synchronising test logic
	}
	if err := request("echo"); err != nil {
		t.Errorf("a request once the server is back: %v", err)
	}
}
