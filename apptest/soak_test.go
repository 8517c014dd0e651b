//go:build soak

package apptest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 10*time.Minute, "how long the soak runs")
	soakRate     = flag.Int("soak.rate", 4000, "requests a second the clients aim at, all routes together")
)

// sample is one reading of the server process.
type sample struct {
	at         time.Duration // since the start of the load
	rss        int64         // bytes
	goroutines int
	fds        int
	requests   int64
}

func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func countFDs(pid int) int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries)
}

func readGoroutines(ops string) int {
	resp, err := http.Get("http://" + ops + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	return n
}

// soakFaults is the venue's weather: each for a while, in turn.
var soakFaults = []string{
	"status=503&delay=50ms&flap=3s",
	"body=truncated&rate=0.3&flap=2s",
	"delay=7s&flap=5s",
	"status=429&retry_after=2s&count=1",
	"body=drip&flap=4s",
	"body=reset&rate=0.5&flap=3s",
	"status=502&flap=1s",
	"", // healthy
}

// TestSoak runs the real marketfeed binary against the real venuesim for
// -soak.duration (10 minutes by default) under mixed traffic on every route
// while the venue flaps through every kind of failure, and samples the
// server's resident memory, goroutines and open files every 10 s. Only 200
// and 502 may be answered, a 502 only for a book that was not fresh, and no
// venue byte; resident memory, goroutines and file descriptors must be flat
// between the first minute after warm-up and the last.
//
//	go test -tags soak -run TestSoak -count=1 -v -timeout 30m ./apptest -soak.duration=10m
func TestSoak(t *testing.T) {
	duration := *soakDuration
	dir := t.TempDir()
	venueBin := Build(t, dir, "marketfeed/cmd/venuesim")
	feedBin := Build(t, dir, "marketfeed/cmd/marketfeed")
	venueURL, _ := Start(t, venueBin, "-listen", "127.0.0.1:0", "-weight-limit", "24000")
	venue := &VenueSim{t: t, URL: venueURL}
	const maxStale = 10 * time.Second
	api, ops, pid := StartProcess(t, feedBin, "-venue", "binance", "-venue-url", venueURL,
		"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-spot", "BTC_USDT,ETH_USDT,SOL_USDT,ADA_USDT,DOGE_USDT",
		"-rate-limit", "0", "-max-stale", maxStale.String())
	WaitReady(t, "http://"+ops)

	books := []string{"BTC_USDT", "ETH_USDT", "SOL_USDT", "BNB_USDT", "XRP_USDT", "DOGE_USDT", "ADA_USDT", "LINK_USDT", "AVAX_USDT", "1000PEPE_USDT"}
	var targets []string
	targets = append(targets, "/pairs", "/tickers", "/pairs/", "/tickers?_=1")
	for i, id := range books {
		targets = append(targets,
			"/orderbook?ticker_id="+id+"&depth="+strconv.Itoa(1+i*11%100),
			"/orderbook?ticker_id="+id,
			"/trades?ticker_id="+id+"&limit="+strconv.Itoa(1+i*7%100),
			"/historical_trades?ticker_id="+id+"&type="+[]string{"buy", "sell"}[i%2])
	}

	// The newest venue timestamp of each book the clients have been served,
	// with when that answer arrived: a 502 sent after it, while it was
	// younger than max-stale, is a wrong 502.
	var lastBook sync.Map // ticker_id → *atomic.Int64 (venue ms)
	bookTS := func(id string) *atomic.Int64 {
		v, _ := lastBook.LoadOrStore(id, new(atomic.Int64))
		return v.(*atomic.Int64)
	}

	var (
		total, s200, s502 atomic.Int64
		mu                sync.Mutex
		other             = map[int]int{}
		problems          []string
		nproblems         int
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		nproblems++
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}

	const workers = 32
	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	every := time.Duration(workers) * time.Second / time.Duration(*soakRate)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := w; ctx.Err() == nil && i < 1<<31; i += workers {
				path := targets[i%len(targets)]
				id := ""
				if strings.HasPrefix(path, "/orderbook") {
					id = strings.TrimPrefix(path, "/orderbook?ticker_id=")
					id, _, _ = strings.Cut(id, "&")
				}
				var lastTS int64
				if id != "" {
					lastTS = bookTS(id).Load()
				}
				resp, err := client.Get(api + "/api/public" + path)
				if err != nil {
					if ctx.Err() == nil {
						problem("%s: %v", path, err)
					}
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				total.Add(1)
				switch {
				case err != nil:
					problem("%s: reading the body: %v", path, err)
				case resp.StatusCode == 200:
					s200.Add(1)
					if id != "" {
						if j := bytes.Index(body, []byte(`"timestamp":`)); j >= 0 {
							ts, _ := strconv.ParseInt(string(body[j+12:j+12+bytes.IndexByte(body[j+12:], ',')]), 10, 64)
							for cur := bookTS(id); ; {
								old := cur.Load()
								if ts <= old || cur.CompareAndSwap(old, ts) {
									break
								}
							}
						}
					}
				case resp.StatusCode == 502:
					s502.Add(1)
					if !bytes.Contains(body, []byte(`"code":"UPSTREAM_UNAVAILABLE"`)) {
						problem("%s: 502 body %s", path, body)
					}
					// Two seconds of margin: a book's read time is its round's
					// tick, a little before the venue's timestamp.
					if lastTS != 0 && time.Now().UnixMilli() < lastTS+maxStale.Milliseconds()-2000 {
						problem("%s: 502 although a book %s old had been served", path, time.Since(time.UnixMilli(lastTS)).Round(time.Millisecond))
					}
				default:
					mu.Lock()
					other[resp.StatusCode]++
					mu.Unlock()
					problem("%s: status %d: %.200s", path, resp.StatusCode, body)
				}
				for _, m := range VenueMarkers {
					if bytes.Contains(body, []byte(m)) {
						problem("%s: venue bytes %q in the answer", path, m)
					}
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		})
	}

	// The venue's weather changes every 20 s.
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			if f := soakFaults[i%len(soakFaults)]; f == "" {
				venue.Heal()
			} else {
				venue.Fault(f)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				venue.Heal()
				return
			}
		}
	})

	var samples []sample
	tick := time.NewTicker(10 * time.Second)
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-ctx.Done():
			done = true
		}
		s := sample{at: time.Since(start), rss: readRSS(pid), goroutines: readGoroutines(ops), fds: countFDs(pid), requests: total.Load()}
		samples = append(samples, s)
		t.Logf("%6s  rss %6.1f MiB  goroutines %4d  fds %4d  requests %9d", s.at.Round(time.Second), float64(s.rss)/(1<<20), s.goroutines, s.fds, s.requests)
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)

	// Flat: compare the median of the minute after warm-up with the median
	// of the last minute (a quarter of the run each when it is shorter).
	window := min(time.Minute, duration/4)
	between := func(from, to time.Duration) []sample {
		var out []sample
		for _, s := range samples {
			if s.at >= from && s.at <= to {
				out = append(out, s)
			}
		}
		return out
	}
	median := func(ss []sample, f func(sample) int64) int64 {
		var vs []int64
		for _, s := range ss {
			vs = append(vs, f(s))
		}
		if len(vs) == 0 {
			return 0
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	first, last := between(window, 2*window), between(elapsed-window, elapsed)
	rss := func(s sample) int64 { return s.rss }
	gor := func(s sample) int64 { return int64(s.goroutines) }
	fds := func(s sample) int64 { return int64(s.fds) }
	rss0, rss1 := median(first, rss), median(last, rss)
	g0, g1 := median(first, gor), median(last, gor)
	f0, f1 := median(first, fds), median(last, fds)
	maxRSS := slices.MaxFunc(samples, func(a, b sample) int { return int(a.rss - b.rss) }).rss

	t.Logf("soak: %s, %d requests (%.0f a second): %d × 200, %d × 502, other %v; %d problems",
		elapsed.Round(time.Second), total.Load(), float64(total.Load())/elapsed.Seconds(), s200.Load(), s502.Load(), other, nproblems)
	t.Logf("resident memory %.1f MiB → %.1f MiB (drift %+.1f MiB, peak %.1f MiB); goroutines %d → %d (drift %+d); open files %d → %d (drift %+d)",
		float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss1-rss0)/(1<<20), float64(maxRSS)/(1<<20), g0, g1, g1-g0, f0, f1, f1-f0)
	if nproblems > 0 {
		t.Errorf("%d answers broke the rules, the first:\n%s", nproblems, strings.Join(problems, "\n"))
	}
	if d := rss1 - rss0; d > 32<<20 {
		t.Errorf("resident memory grew by %.1f MiB", float64(d)/(1<<20))
	}
	if d := g1 - g0; d > 100 {
		t.Errorf("goroutines grew by %d", d)
	}
	if d := f1 - f0; d > 100 {
		t.Errorf("open files grew by %d", d)
	}
	if readyz, err := http.Get("http://" + ops + "/healthz"); err != nil || readyz.StatusCode != 200 {
		t.Errorf("the server is not alive after the soak: %v", err)
	} else {
		readyz.Body.Close()
	}
}
