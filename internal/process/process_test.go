package process

import (
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and a parenthesis must not shift the fields.
	line := "4242 (mark (x) feed) S 1 4242 4242 0 -1 4194560 1200 0 0 0 731 269 0 0 20 0 6 0 215542 1234567 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	got, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got.Pgrp != 4242 || got.UserTicks != 731 || got.SystemTicks != 269 || got.CPU() != 10*time.Second {
		t.Errorf("ParseStat = %+v (CPU %v), want group 4242, 731 + 269 ticks, 10s", got, got.CPU())
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 269 0"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tmarketfeed\nVmHWM:\t  120000 kB\nVmRSS:\t   98304 kB\nThreads:\t6\n"
	got, err := ParseVmRSS([]byte(status))
	if err != nil || got != 98304<<10 {
		t.Errorf("ParseVmRSS = %d, %v; want %d", got, err, 98304<<10)
	}
	for _, bad := range []string{"", "Name:\tx\n", "VmRSS:\t 12 MB\n", "VmRSS:\t x kB\n"} {
		if _, err := ParseVmRSS([]byte(bad)); err == nil {
			t.Errorf("ParseVmRSS(%q): no error", strings.TrimSpace(bad))
		}
	}
}

// A started process is watched to its end, its log is readable, and Stop
// ends one that would not end by itself.
func TestStartStopAndLog(t *testing.T) {
	p, err := Start("echo", t.TempDir()+"/log", Options{}, "sh", "-c", "echo up")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil || p.LogTail() != "up" {
		t.Fatalf("exit %v, log %q; want a clean exit and %q", err, p.LogTail(), "up")
	}
	s, err := Start("sleeper", t.TempDir()+"/log", Options{}, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(s.Pid())
	if err != nil || st.Pgrp != s.Pid() {
		t.Fatalf("ReadStat = %+v, %v; want its own process group %d", st, err, s.Pid())
	}
	s.Stop()
	if !s.Exited() || s.Err() == nil {
		t.Fatalf("after Stop: exited %v, err %v; want ended by a signal", s.Exited(), s.Err())
	}
}
