package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// ensureTools installs wrk and nginx from Debian's packages when missing.
// apt-get's own policy keeps the package from starting a system nginx.
func ensureTools(ctx context.Context, install bool) error {
	if _, err := exec.LookPath("taskset"); err != nil {
		return errors.New("taskset (util-linux) is required")
	}
	var missing []string
	for _, tool := range []string{"wrk", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("missing %s (run without -install=false to apt-get install them)", strings.Join(missing, ", "))
	}
	logf("installing %s", strings.Join(missing, " "))
	if err := runQuiet(ctx, "apt-get", "update"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install: %w\n%s", err, out)
	}
	return nil
}

// describeMachine records what the report must say about the machine.
func describeMachine(ctx context.Context, cfg *config) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, cfg.goCmd, "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "nginx", "-v").CombinedOutput(); err == nil {
		m.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	// wrk -v prints its version and exits 1.
	out, _ := exec.CommandContext(ctx, "wrk", "-v").CombinedOutput()
	if line, _, _ := strings.Cut(string(out), "\n"); line != "" {
		m.Wrk, _, _ = strings.Cut(line, " [")
		m.Wrk = strings.TrimSpace(m.Wrk)
	}
	if out, err := exec.CommandContext(ctx, cfg.goCmd, "list", "-m", "-f", "{{.Version}}", "github.com/tsenart/vegeta/v12").Output(); err == nil {
		m.Vegeta = strings.TrimSpace(string(out))
	}
	return m
}
