package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"marketfeed/internal/process"
)

// hot measures marketfeed with many hot pairs: it starts one on the
// simulated venue with -sim-extra markets, keeps hotPairs pairs hot by
// asking for each one's /orderbook and /trades every hotEvery, and reads the
// process's CPU time and resident memory from /proc over hotDuration. The
// CPU time includes serving those requests, about 2*hotPairs/hotEvery a
// second on keep-alive connections.
func (b *bench) hot(ctx context.Context) (*hotResult, error) {
	cfg := b.cfg
	p, err := b.startMarketfeed(ctx, "marketfeed hot", "-rate-limit", "0", "-sim-extra", fmt.Sprint(cfg.simExtra))
	if err != nil {
		return nil, err
	}
	base := b.urls["marketfeed hot"]
	body, _, err := get(ctx, base+"/api/public/pairs", nil)
	if err != nil {
		return nil, err
	}
	var pairs []struct {
		TickerID string `json:"ticker_id"`
	}
	if err := json.Unmarshal(body, &pairs); err != nil {
		return nil, err
	}
	if len(pairs) < cfg.hotPairs {
		return nil, fmt.Errorf("marketfeed lists %d pairs, fewer than -hot-pairs %d (raise -sim-extra)", len(pairs), cfg.hotPairs)
	}
	var uris []string
	for _, pr := range pairs[:cfg.hotPairs] {
		id := url.QueryEscape(pr.TickerID)
		uris = append(uris, base+"/api/public/orderbook?ticker_id="+id, base+"/api/public/trades?ticker_id="+id)
	}
	logf("hot pairs: %d pairs, every %s; warming up %s, then measuring %s", cfg.hotPairs, cfg.hotEvery, cfg.hotWarmup, cfg.hotDuration)

	kctx, stop := context.WithCancel(ctx)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { keepHot(kctx, uris, cfg.hotEvery, &ok, &failed) })
	defer func() {
		stop()
		wg.Wait()
	}()

	if err := process.Sleep(ctx, cfg.hotWarmup); err != nil {
		return nil, err
	}
	h := &hotResult{Pairs: cfg.hotPairs, Every: cfg.hotEvery, WarmFailed: failed.Load()}
	okStart, failStart := ok.Load(), failed.Load()
	start := time.Now()
	cpuStart, err := process.ReadStat(p.Pid())
	if err != nil {
		return nil, err
	}
	profiled := make(chan error, 1)
	if cfg.hotProfile != "" {
		secs := int(cfg.hotDuration.Seconds())
		go func() {
			profiled <- saveProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", b.ops["marketfeed hot"], secs), cfg.hotProfile)
		}()
	} else {
		profiled <- nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := start.Add(cfg.hotDuration); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		rss, err := process.ReadVmRSS(p.Pid())
		if err != nil {
			return nil, err
		}
		h.RSSMax, h.RSSLast = max(h.RSSMax, rss), rss
	}
	cpuEnd, err := process.ReadStat(p.Pid())
	if err != nil {
		return nil, err
	}
	h.Window = time.Since(start)
	if err := <-profiled; err != nil {
		return nil, err
	}
	h.CPU = cpuEnd.CPU() - cpuStart.CPU()
	h.Requests = ok.Load() + failed.Load() - okStart - failStart
	h.Failed = failed.Load() - failStart
	logf("hot pairs: CPU %.2fs over %s (%.1f%%), VmRSS peak %.1f MB, %d requests, %d not 200",
		h.CPU.Seconds(), h.Window.Round(time.Millisecond), 100*h.CPUShare(), mb(h.RSSMax), h.Requests, h.Failed)
	return h, nil
}

// keepHot requests every URI once per period, spread evenly over the
// period, from a few keep-alive connections, until ctx is done.
func keepHot(ctx context.Context, uris []string, period time.Duration, ok, failed *atomic.Int64) {
	const workers = 4
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true},
	}
	defer client.CloseIdleConnections()
	work := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for u := range work {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp, err := client.Do(req)
				if err != nil {
					if !errors.Is(ctx.Err(), context.Canceled) {
						failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	defer wg.Wait()
	defer close(work)
	tick := time.NewTicker(period / time.Duration(len(uris)))
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % len(uris) {
		select {
		case <-ctx.Done():
			return
		case work <- uris[i]:
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// saveProfile fetches a pprof profile into path.
func saveProfile(ctx context.Context, u, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
