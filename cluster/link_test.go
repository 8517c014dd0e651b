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
// down, not at its timeout; a call is not made while the link is down;
// once the link is back, calls are made and answered, one in flight ends
// with the next loss however often the link was told it is up, and one
// NATS does not answer still ends at its timeout.
func TestLinkEndsTheCallsOfALostConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLink()
		type result struct {
			err  error
			took time.Duration
		}
		hangFor := func(start time.Time) <-chan result {
			done := make(chan result, 1)
			go func() {
				_, err := within(t.Context(), l, time.Minute, hang)
				done <- result{err, time.Since(start)}
			}()
			return done
		}
		done := hangFor(time.Now())
		time.Sleep(3 * time.Second)
		l.set(false)
		if r := <-done; !errors.Is(r.err, context.Canceled) || r.took != 3*time.Second {
			t.Errorf("a call in flight when the link went down: %v after %v, want canceled after 3s", r.err, r.took)
		}

		made := false
		_, err := within(t.Context(), l, time.Minute, func(ctx context.Context) (struct{}, error) { made = true; return hang(ctx) })
		if made || !errors.Is(err, errDisconnected) || l.up() {
			t.Errorf("a call begun while the link is down: made %v, %v, link up %v; want not made, %v", made, err, l.up(), errDisconnected)
		}

		l.set(true)
		answered, err := within(t.Context(), l, time.Second, func(context.Context) (int, error) { return 7, nil })
		if answered != 7 || err != nil || !l.up() {
			t.Errorf("a call once the link is back: %d, %v, link up %v; want 7", answered, err, l.up())
		}
		done = hangFor(time.Now())
		time.Sleep(time.Second / 2)
		l.set(true) // told again, as every status change tells it
		time.Sleep(time.Second / 2)
		l.set(false)
		if r := <-done; !errors.Is(r.err, context.Canceled) || r.took != time.Second {
			t.Errorf("a call in flight across a second \"up\" when the link went down: %v after %v, want canceled after 1s", r.err, r.took)
		}

		l.set(true)
		start := time.Now()
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
	heard := make(chan struct{}, 1)
	if _, err := nc.Subscribe("silent", func(*nats.Msg) { heard <- struct{}{} }); err != nil {
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
	select { // the request reaches the server, which holds it unanswered
	case <-heard:
	case err := <-held:
		t.Fatalf("the silent request ended before the server heard it: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the silent request has not reached the server 10s later")
	}
	restart := natstest.Stop(t, s)
	select {
	case err := <-held:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request held when the server went: %v, want canceled with the link", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request held when the server went still waits 30s later: it waits out its minute")
	}
	if err := request("echo"); !errors.Is(err, errDisconnected) {
		t.Errorf("a request while the server is away: %v, want %v at once", err, errDisconnected)
	}

	restart()
	eventually(t, 10*time.Second, "the link is up again with the connection", l.up)
	if err := request("echo"); err != nil {
		t.Errorf("a request once the server is back: %v", err)
	}
}
