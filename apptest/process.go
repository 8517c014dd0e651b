// Package apptest runs marketfeed's binaries as an operator would, and
// speaks to them as a client: it builds the commands, starts them on
// loopback, reads their "serving" line and stops them when the test ends;
// it drives venuesim through its control endpoints; and it reads the API
// over HTTP the way an aggregator does. The system tests that build and
// run the binaries live in this package too, beside their harness (the
// layout of VictoriaMetrics' apptest); the in-process tests of
// cmd/marketfeed use the same harness for what they share with them.
package apptest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds a command of this module (its import path, e.g.
// "marketfeed/cmd/venuesim") into dir and returns the binary's path.
func Build(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

var (
	servingURL = regexp.MustCompile(`msg=serving .*?url=(http://[0-9.:]+)`)
	opsAddr    = regexp.MustCompile(` ops=([0-9.:]+)`)
)

// Start starts a built command and returns the URL (and ops address)
// from its "serving" log line. The process is stopped with SIGTERM when the
// test ends, and must exit cleanly.
func Start(t *testing.T, bin string, args ...string) (url, ops string) {
	t.Helper()
	url, ops, _ = StartProcess(t, bin, args...)
	return url, ops
}

// StartProcess is Start that also returns the process id, for reading
// the process's resident memory.
func StartProcess(t *testing.T, bin string, args ...string) (url, ops string, pid int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan [2]string, 1)
	// The log's last lines say why a process did not stop cleanly.
	var tailMu sync.Mutex
	var tail []string
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() { // drains the log for as long as the process runs
			tailMu.Lock()
			tail = append(tail[max(len(tail)-19, 0):], sc.Text())
			tailMu.Unlock()
			if m := servingURL.FindStringSubmatch(sc.Text()); m != nil && !sent {
				var o string
				if m := opsAddr.FindStringSubmatch(sc.Text()); m != nil {
					o = m[1]
				}
				found <- [2]string{m[1], o}
				sent = true
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-drained
		err := cmd.Wait()
		tailMu.Lock()
		defer tailMu.Unlock()
		switch {
		case err != nil:
			t.Errorf("%s did not stop cleanly on SIGTERM: %v; its log ended:\n%s", filepath.Base(bin), err, strings.Join(tail, "\n"))
		case t.Failed():
			t.Logf("%s's log ended:\n%s", filepath.Base(bin), strings.Join(tail, "\n"))
		}
	})
	select {
	case m := <-found:
		return m[0], m[1], cmd.Process.Pid
	case <-time.After(20 * time.Second):
		t.Fatalf("%s printed no serving line", filepath.Base(bin))
		return "", "", 0
	}
}
