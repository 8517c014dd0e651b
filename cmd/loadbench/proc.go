package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"marketfeed/internal/process"
)

// groupCPU is the CPU time of every process in process group pgid: nginx's
// master and worker together, or a single server process. user is the part
// of total spent in user space.
func groupCPU(pgid int) (user, total time.Duration, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := process.ReadStat(pid)
		if err != nil {
			continue // the process ended while we looked
		}
		if st.Pgrp == pgid {
			user += st.User()
			total += st.CPU()
			found = true
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("no process in group %d", pgid)
	}
	return user, total, nil
}

// cpuTimes is the first line of /proc/stat: time every CPU together spent
// busy and idle, in ticks.
type cpuTimes struct {
	Busy, Idle int64
}

// parseCPUTimes reads the aggregate "cpu" line of /proc/stat. Idle counts
// idle and iowait; everything else (user, nice, system, irq, softirq,
// steal) is busy. Guest time is already inside user time.
func parseCPUTimes(text []byte) (cpuTimes, error) {
	line, _, _ := bytes.Cut(text, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, errors.New("/proc/stat: no aggregate cpu line")
	}
	var t cpuTimes
	for i, s := range f[1:9] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		if i == 3 || i == 4 { // idle, iowait
			t.Idle += n
		} else {
			t.Busy += n
		}
	}
	return t, nil
}

// busyShare is the fraction of all CPU time that was busy between two
// readings.
func busyShare(a, b cpuTimes) float64 {
	busy, total := b.Busy-a.Busy, b.Busy-a.Busy+b.Idle-a.Idle
	if total <= 0 {
		return 0
	}
	return float64(busy) / float64(total)
}

// machineBusy samples how busy the whole machine is over d.
func machineBusy(ctx context.Context, d time.Duration) (float64, error) {
	read := func() (cpuTimes, error) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return cpuTimes{}, err
		}
		return parseCPUTimes(b)
	}
	a, err := read()
	if err != nil {
		return 0, err
	}
	if err := process.Sleep(ctx, d); err != nil {
		return 0, err
	}
	b, err := read()
	if err != nil {
		return 0, err
	}
	return busyShare(a, b), nil
}
