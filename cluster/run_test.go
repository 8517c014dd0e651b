package cluster

import (
	"context"
	"testing"
	"testing/synctest"
)

// The work handed to a member's run runs under the run's context, and
// closing the run waits for it; outside the run it is refused.
func TestTasksBelongToTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ts tasks
		if ts.Go(func(context.Context) {}) {
			t.Fatal("a task ran before the run began")
		}
		ctx, cancel := context.WithCancel(t.Context())
		ts.open(ctx)
		release, ended := make(chan struct{}), make(chan struct{})
		if !ts.Go(func(ctx context.Context) {
			<-ctx.Done()
			<-release
			close(ended)
		}) {
			t.Fatal("a task was refused during the run")
		}
		cancel()
		closed := make(chan struct{})
		go func() {
			ts.close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("the run closed before its task returned")
		default:
		}
		close(release)
		<-closed
		select {
		case <-ended:
		default:
			t.Fatal("the run closed, yet its task had not returned")
		}
		if ts.Go(func(context.Context) {}) {
			t.Fatal("a task ran after the run closed")
		}
	})
}
