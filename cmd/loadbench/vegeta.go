package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// vegetaReport is the part of `vegeta report -type json` the comparison
// uses. Latencies are in nanoseconds.
type vegetaReport struct {
	Latencies struct {
		Mean int64 `json:"mean"`
		P50  int64 `json:"50th"`
		P90  int64 `json:"90th"`
		P95  int64 `json:"95th"`
		P99  int64 `json:"99th"`
		Max  int64 `json:"max"`
	} `json:"latencies"`
	Requests    int64          `json:"requests"`
	Rate        float64        `json:"rate"`       // requests sent per second
	Throughput  float64        `json:"throughput"` // successful answers per second
	Success     float64        `json:"success"`    // fraction of 2xx/3xx answers
	StatusCodes map[string]int `json:"status_codes"`
	Errors      []string       `json:"errors"`
}

// latencyResult is one open-loop run, in the units the report prints.
type latencyResult struct {
	Target   float64 // requested rate, req/s
	Rate     float64 // rate vegeta actually sent
	P50, P99 time.Duration
	Max      time.Duration
	Success  float64
	Statuses string // "200:49992", every code seen
}

// parseVegeta reads a vegeta JSON report.
func parseVegeta(out []byte, target float64) (latencyResult, error) {
	var rep vegetaReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return latencyResult{}, fmt.Errorf("vegeta report: %w", err)
	}
	if rep.Requests == 0 {
		return latencyResult{}, fmt.Errorf("vegeta report: no requests: %s", out)
	}
	codes := make([]string, 0, len(rep.StatusCodes))
	for code, n := range rep.StatusCodes {
		codes = append(codes, fmt.Sprintf("%s:%d", code, n))
	}
	sort.Strings(codes)
	return latencyResult{
		Target:   target,
		Rate:     rep.Rate,
		P50:      time.Duration(rep.Latencies.P50),
		P99:      time.Duration(rep.Latencies.P99),
		Max:      time.Duration(rep.Latencies.Max),
		Success:  rep.Success,
		Statuses: strings.Join(codes, " "),
	}, nil
}

// runVegeta runs one vegeta attack on the load core with one worker thread.
// Workers and connections are capped well below the servers' connection
// limits; a server that falls behind then shows as a lower rate sent.
func (b *bench) runVegeta(ctx context.Context, url string, rate float64) (latencyResult, error) {
	targets := filepath.Join(b.dir, "targets.txt")
	if err := os.WriteFile(targets, []byte("GET "+url+"\n"), 0o644); err != nil {
		return latencyResult{}, err
	}
	results := filepath.Join(b.dir, "vegeta.bin")
	if err := runQuiet(ctx, "taskset", "-c", strconv.Itoa(b.cfg.loadCPU), b.vegeta, "-cpus", "1", "attack",
		"-targets", targets, "-rate", fmt.Sprintf("%d/1s", int(rate)), "-duration", b.cfg.latencyDuration.String(),
		"-max-workers", "1024", "-max-connections", "1024", "-max-body", "0", "-timeout", "5s", "-output", results); err != nil {
		return latencyResult{}, err
	}
	out, err := exec.CommandContext(ctx, b.vegeta, "report", "-type", "json", results).Output()
	if err != nil {
		return latencyResult{}, fmt.Errorf("vegeta report: %w", err)
	}
	return parseVegeta(out, float64(int(rate)))
}
