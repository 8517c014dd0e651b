package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a server process the comparison started: pinned to a core, in
// its own process group (so that nginx's worker goes with its master), and
// killed by the kernel if this program dies first.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the exit status, valid after done
}

// startPinned starts argv on cpu with env added to this process's
// environment. Output goes to logPath.
func startPinned(name string, cpu int, env []string, logPath string, argv ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-c", strconv.Itoa(cpu)}, argv...)
	cmd := exec.Command("taskset", args...)
	cmd.Env = append(withoutEnv(os.Environ(), "GOMAXPROCS"), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// pid is the server's own pid: taskset execs the program in place.
func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// pause stops the process (SIGSTOP) so that its background work does not
// take the server core while another server is measured; resume continues
// it. Neither signals a process that has exited: its pid may be another's.
func (p *proc) pause()  { p.signal(syscall.SIGSTOP) }
func (p *proc) resume() { p.signal(syscall.SIGCONT) }

func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(p.pid(), sig)
	}
}

// stop ends the process group: SIGTERM (nginx and marketfeed both drain and
// exit on it), then SIGKILL if it is still there after a grace period.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	pgid := -p.pid()
	_ = syscall.Kill(pgid, syscall.SIGCONT) // a paused process cannot act on SIGTERM
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// waitHTTP polls url until it answers 200, the process exits, or the
// timeout passes.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v", p.name, url, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// procStat is a process's group and CPU time so far, from /proc/PID/stat.
type procStat struct {
	Pgrp                   int
	UserTicks, SystemTicks int64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// CPU is the total CPU time.
func (s procStat) CPU() time.Duration {
	return time.Duration(s.UserTicks+s.SystemTicks) * time.Second / clockTicks
}

// parseProcStat reads pgrp (field 5), utime and stime (fields 14 and 15)
// from the text of /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseProcStat(text []byte) (procStat, error) {
	i := bytes.LastIndexByte(text, ')')
	if i < 0 {
		return procStat{}, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(text[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return procStat{}, errors.New("/proc stat: too few fields")
	}
	g, err0 := strconv.Atoi(f[2])
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err0, err1, err2); err != nil {
		return procStat{}, fmt.Errorf("/proc stat: %w", err)
	}
	return procStat{Pgrp: g, UserTicks: u, SystemTicks: s}, nil
}

// parseVmRSS reads VmRSS from the text of /proc/PID/status, in bytes.
func parseVmRSS(text []byte) (int64, error) {
	for line := range strings.SplitSeq(string(text), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: VmRSS %q", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmRSS: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("/proc status: no VmRSS line")
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// groupCPU is the CPU time of every process in process group pgid: nginx's
// master and worker together, or a single server process.
func groupCPU(pgid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	found := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // the process ended while we looked
		}
		if st.Pgrp == pgid {
			total += st.CPU()
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no process in group %d", pgid)
	}
	return total, nil
}

func readVmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
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
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	b, err := read()
	if err != nil {
		return 0, err
	}
	return busyShare(a, b), nil
}
