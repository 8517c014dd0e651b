// Package natstest runs an embedded NATS server with JetStream for tests:
// the cluster's tests and the program's end-to-end tests of replicas use
// the same one.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server with JetStream on a loopback port of its own,
// storing in a directory of the test's, until the test ends.
func Start(t testing.TB) *server.Server { return start(t, -1) }

// Restart shuts s down and starts a new server on its port, with nothing
// in it: what a restart of a server holding its streams in memory leaves.
func Restart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	return Stop(t, s)()
}

// Stop shuts s down and returns what starts a new server on its port, with
// nothing in it: NATS away for as long as the caller waits.
func Stop(t testing.TB, s *server.Server) (restart func() *server.Server) {
	t.Helper()
	port := s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	return func() *server.Server {
		t.Helper()
		return start(t, port)
	}
}

func start(t testing.TB, port int) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready within 10s")
	}
	t.Cleanup(s.Shutdown)
	return s
}
