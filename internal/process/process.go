// Package process starts and watches the server processes that the
// benchmark commands (cmd/loadbench, cmd/sweepbench) run on loopback: each
// in its own process group and killed by the kernel if the benchmark dies
// first, so that nothing is left behind holding a port; and it reads their
// CPU time and memory from /proc.
package process

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

// Options adjust how a process starts. The zero value runs the program as
// it is, with this process's environment.
type Options struct {
	// Pinned runs the program on CPU alone (taskset), with GOMAXPROCS left
	// for the runtime to derive from that.
	Pinned bool
	CPU    int
	// Env is added to this process's environment.
	Env []string
}

// Proc is a started process.
type Proc struct {
	Name    string
	LogPath string // its stdout and stderr
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // the exit status, valid after done
}

// Start runs argv with its output in logPath.
func Start(name, logPath string, opts Options, argv ...string) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if opts.Pinned {
		cmd = exec.Command("taskset", append([]string{"-c", strconv.Itoa(opts.CPU)}, argv...)...)
		cmd.Env = withoutEnv(os.Environ(), "GOMAXPROCS")
	}
	if len(opts.Env) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, opts.Env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
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

// Pid is the program's own pid (taskset execs it in place), which is also
// its process group's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the exit status once the process has ended.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Pause stops the process (SIGSTOP) so that its background work does not
// take a core while something else is measured; Resume continues it.
// Neither signals a process that has exited: its pid may be another's.
func (p *Proc) Pause()  { p.signal(syscall.SIGSTOP) }
func (p *Proc) Resume() { p.signal(syscall.SIGCONT) }

func (p *Proc) signal(sig syscall.Signal) {
	if !p.Exited() {
		_ = syscall.Kill(p.Pid(), sig)
	}
}

// Stop ends the process group: SIGTERM (every server the benchmarks run
// drains and exits on it), then SIGKILL if it is still there after a grace
// period.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	pgid := -p.Pid()
	_ = syscall.Kill(pgid, syscall.SIGCONT) // a paused process cannot act on SIGTERM
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// LogTail is the end of the process's log, for an error message that says
// why it did not come up.
func (p *Proc) LogTail() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	const keep = 1500
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}

// WaitHTTP polls url until it answers 200, the process exits, or the
// timeout passes.
func WaitHTTP(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
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
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready: %v\n%s", p.Name, p.err, p.LogTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v\n%s", p.Name, url, timeout, p.LogTail())
		}
		if err := Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FreeAddr returns a loopback address with a port nothing listens on now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Stat is a process's group and CPU time so far, from /proc/PID/stat.
type Stat struct {
	Pgrp                   int
	UserTicks, SystemTicks int64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// CPU is the total CPU time.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.UserTicks+s.SystemTicks) * time.Second / clockTicks
}

// User is the part of the CPU time spent in user space: the program's own
// work, without the kernel's on its behalf (system calls, the network
// stack), which is the part a program's code decides.
func (s Stat) User() time.Duration {
	return time.Duration(s.UserTicks) * time.Second / clockTicks
}

// ParseStat reads pgrp (field 5), utime and stime (fields 14 and 15) from
// the text of /proc/PID/stat. The command name (field 2) may hold spaces
// and parentheses, so fields are counted from the last ')'.
func ParseStat(text []byte) (Stat, error) {
	i := bytes.LastIndexByte(text, ')')
	if i < 0 {
		return Stat{}, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(text[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return Stat{}, errors.New("/proc stat: too few fields")
	}
	g, err0 := strconv.Atoi(f[2])
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err0, err1, err2); err != nil {
		return Stat{}, fmt.Errorf("/proc stat: %w", err)
	}
	return Stat{Pgrp: g, UserTicks: u, SystemTicks: s}, nil
}

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseVmRSS reads VmRSS from the text of /proc/PID/status, in bytes.
func ParseVmRSS(text []byte) (int64, error) {
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

// ReadVmRSS reads VmRSS from /proc/PID/status, in bytes.
func ReadVmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseVmRSS(b)
}
