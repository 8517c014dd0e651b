package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reports.
type wrkResult struct {
	Requests     int64
	Elapsed      time.Duration
	ReqPerSec    float64
	BytesRead    float64 // approximate: wrk prints it with three digits
	Non2xx       int64   // non-2xx and non-3xx answers
	SocketErrors int64   // connect, read, write and timeout errors
	LatencyAvg   time.Duration
	LatencyMax   time.Duration
	LatencyP50   time.Duration
	LatencyP99   time.Duration

	// ServerCPU is the CPU time the server's processes used during the
	// run, read from /proc (not from wrk); ServerUser is its part in user
	// space, the rest being the kernel's work for the server.
	ServerCPU, ServerUser time.Duration
}

// PerAnswer is the server's CPU time per request answered, in user space
// and in the kernel; 0, 0 when the CPU time is unknown.
func (r wrkResult) PerAnswer() (user, system time.Duration) {
	if r.ServerCPU <= 0 || r.Requests <= 0 {
		return 0, 0
	}
	n := time.Duration(r.Requests)
	return r.ServerUser / n, (r.ServerCPU - r.ServerUser) / n
}

// userPerAnswer is PerAnswer's user part in seconds, as a figure to take
// ratios of.
func userPerAnswer(r wrkResult) float64 {
	u, _ := r.PerAnswer()
	return u.Seconds()
}

// PerCPUSecond is the requests answered per second of server CPU time: the
// server's efficiency, whatever share of its core it got on a shared host.
// 0 when the CPU time is unknown.
func (r wrkResult) PerCPUSecond() float64 {
	if r.ServerCPU <= 0 {
		return 0
	}
	return float64(r.Requests) / r.ServerCPU.Seconds()
}

// Errors is every request that did not end in a 2xx or 3xx answer.
func (r wrkResult) Errors() int64 { return r.Non2xx + r.SocketErrors }

// parseWrk reads wrk's text report (wrk 4, with --latency). Requests/sec is
// required; every other line is optional.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	seenRate := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		var err error
		switch {
		case strings.HasPrefix(line, "Requests/sec:") && len(fields) == 2:
			r.ReqPerSec, err = strconv.ParseFloat(fields[1], 64)
			seenRate = err == nil
		case strings.HasPrefix(line, "Latency ") && len(fields) >= 4:
			if r.LatencyAvg, err = parseWrkDuration(fields[1]); err == nil {
				r.LatencyMax, err = parseWrkDuration(fields[3])
			}
		case strings.HasPrefix(line, "50% ") && len(fields) == 2:
			r.LatencyP50, err = parseWrkDuration(fields[1])
		case strings.HasPrefix(line, "99% ") && len(fields) == 2:
			r.LatencyP99, err = parseWrkDuration(fields[1])
		case strings.Contains(line, " requests in ") && len(fields) >= 5:
			// "114614 requests in 2.01s, 47.33MB read"
			if r.Requests, err = strconv.ParseInt(fields[0], 10, 64); err == nil {
				if r.Elapsed, err = parseWrkDuration(strings.TrimSuffix(fields[3], ",")); err == nil {
					r.BytesRead, err = parseWrkBytes(fields[4])
				}
			}
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			r.Non2xx, err = strconv.ParseInt(fields[len(fields)-1], 10, 64)
		case strings.HasPrefix(line, "Socket errors:"):
			// "Socket errors: connect 0, read 0, write 0, timeout 12"
			for i := 2; i+1 < len(fields); i += 2 {
				n, e := strconv.ParseInt(strings.TrimSuffix(fields[i+1], ","), 10, 64)
				if e != nil {
					err = e
					break
				}
				r.SocketErrors += n
			}
		}
		if err != nil {
			return wrkResult{}, fmt.Errorf("wrk output %q: %w", line, err)
		}
	}
	if !seenRate {
		return wrkResult{}, fmt.Errorf("wrk output has no Requests/sec line:\n%s", out)
	}
	return r, nil
}

// parseWrkDuration reads wrk's durations: a number and us, ms, s, m or h.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(f * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("duration %q: unknown unit", s)
}

// parseWrkBytes reads wrk's byte counts: a number and B, KB, MB, GB or TB
// (powers of 1024).
func parseWrkBytes(s string) (float64, error) {
	units := []struct {
		suffix string
		unit   float64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, err
			}
			return f * u.unit, nil
		}
	}
	return 0, fmt.Errorf("size %q: unknown unit", s)
}

// xffRing is how many distinct X-Forwarded-For addresses the wrk script
// cycles through: more than any one run at these durations sends, so every
// request of a run comes from its own client address.
const xffRing = 1 << 20

// xffScript is a wrk script that gives every request its own
// X-Forwarded-For address (10.0.0.1 upwards). The requests are built once in
// init so that making them costs the load generator nothing during the run:
// building a string per request in Lua would slow wrk down and measure wrk,
// not the server. Its first argument is the ring size.
const xffScript = `-- Every request carries its own client address in X-Forwarded-For.
local reqs, n, i = {}, 0, 0
local band, rshift = bit.band, bit.rshift

function init(args)
  n = tonumber(args[1]) or 1048576
  -- wrk.init has put Host into wrk.headers before it calls init.
  local head = "GET " .. wrk.path .. " HTTP/1.1\r\n"
  for k, v in pairs(wrk.headers) do
    head = head .. k .. ": " .. v .. "\r\n"
  end
  head = head .. "X-Forwarded-For: 10."
  for k = 1, n do
    reqs[k] = head .. band(rshift(k, 16), 255) .. "." .. band(rshift(k, 8), 255) .. "." .. band(k, 255) .. "\r\n\r\n"
  end
end

function request()
  i = i + 1
  if i > n then i = 1 end
  return reqs[i]
end
`

// runWrk runs wrk on the load core against one server and route.
func (b *bench) runWrk(ctx context.Context, c cell, d time.Duration) (wrkResult, error) {
	url := b.urls[c.Server] + b.route(c.Route).URI
	args := []string{"-c", strconv.Itoa(b.cfg.loadCPU), "wrk", "-t1", "-c", strconv.Itoa(b.cfg.connections),
		"-d", fmt.Sprintf("%ds", int(math.Ceil(d.Seconds()))), "--latency"}
	var extra []string
	switch c.Variant {
	case varGzip:
		args = append(args, "-H", "Accept-Encoding: gzip")
	case varXFF:
		script := filepath.Join(b.dir, "xff.lua")
		if err := os.WriteFile(script, []byte(xffScript), 0o644); err != nil {
			return wrkResult{}, err
		}
		args = append(args, "-s", script)
		extra = []string{"--", strconv.Itoa(xffRing)}
	}
	args = append(append(args, url), extra...)
	pgid := b.owners[c.Server].Pid()
	userBefore, before, err := groupCPU(pgid)
	if err != nil {
		return wrkResult{}, err
	}
	out, err := exec.CommandContext(ctx, "taskset", args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", url, err, out)
	}
	userAfter, after, err := groupCPU(pgid)
	if err != nil {
		return wrkResult{}, err
	}
	res, err := parseWrk(string(out))
	res.ServerCPU, res.ServerUser = after-before, userAfter-userBefore
	return res, err
}
