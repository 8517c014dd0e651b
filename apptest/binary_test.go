package apptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"marketfeed/internal/wire"
)

// repoRoot is the repository's root, seen from this package's directory:
// the tests read the documents, the operator kit and the Makefile there.
const repoRoot = ".."

// TestRealBinaryAgainstVenuesim runs marketfeed -venue binance against
// cmd/venuesim, both real binaries over HTTP, reading REST only: every route
// answers, /contracts and /contract_specs with one contract per listed pair;
// during a 429 pause the venue sees no call, a hot pair keeps its last good
// book and a cold pair is 502; after the pause reads resume. (With
// streams every book is synced within seconds, so no pair stays cold to
// test; TestStreamFaults meets a 429 on the stream path.)
func TestRealBinaryAgainstVenuesim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	dir := t.TempDir()
	venuesim := Build(t, dir, "marketfeed/cmd/venuesim")
	marketfeed := Build(t, dir, "marketfeed/cmd/marketfeed")
	venue, _ := Start(t, venuesim, "-listen", "127.0.0.1:0")
	api, ops := Start(t, marketfeed, "-venue", "binance", "-venue-url", venue, "-venue-streams", "off",
		"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-spot", "BTC_USDT,ETH_USDT,ADA_USDT",
		"-log-level", "debug") // a failed cold load is logged at debug

	WaitReady(t, "http://"+ops)
	base := api + "/api/public"

	resp, body := Get(t, base+"/pairs")
	CheckOK(t, resp)
	var pairs []wire.Pair
	Decode(t, body, &pairs)
	if len(pairs) < 40 || pairs[0].PriceSource != "binance-perp" {
		t.Fatalf("%d pairs, first %+v", len(pairs), pairs[0])
	}
	resp, body = Get(t, base+"/tickers")
	CheckOK(t, resp)
	var tickers []wire.Ticker
	Decode(t, body, &tickers)
	if len(tickers) != 3 {
		t.Fatalf("%d tickers, want one per spot pair (3)", len(tickers))
	}
	contracts, specs := WaitContracts(t, base, ListedIDs(t, api), 10*time.Second)
	if len(specs) != len(contracts) {
		t.Fatalf("%d specifications of %d contracts", len(specs), len(contracts))
	}
	for i, c := range contracts {
		if c.ProductType != "Perpetual" || c.ContractPrice == "" || c.Timestamp <= 0 || c.NextFundingRateTimestamp <= c.Timestamp {
			t.Errorf("contract %+v", c)
		}
		if s := specs[i]; s.TickerID != c.TickerID || s.ContractType != "Vanilla" || s.ContractPriceCurrency != c.TargetCurrency {
			t.Errorf("specification %+v of contract %s", s, c.TickerID)
		}
	}
	for _, route := range []string{"/orderbook?ticker_id=BTC_USDT&depth=3", "/trades?ticker_id=BTC_USDT&limit=3",
		"/historical_trades?ticker_id=BTC_USDT&type=sell"} {
		resp, body := Get(t, base+route)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", route, resp.StatusCode, body)
		}
		CheckOK(t, resp)
	}

	stats := func() map[string]int {
		_, body := Get(t, venue+"/_control/stats")
		var s struct{ Served map[string]int }
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		return s.Served
	}
	total := func(m map[string]int) int {
		n := 0
		for _, v := range m {
			n += v
		}
		return n
	}
	Post(t, venue+"/_control/fault?status=429&retry_after=3s")
	// The next read meets the 429 and pauses every call for 3 s.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body = Get(t, venue+"/_control/stats")
		var s struct{ Faulted int }
		_ = json.Unmarshal(body, &s)
		if s.Faulted > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no venue call met the fault")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pausedAt := time.Now()
	before := total(stats())
	resp, body = Get(t, base+"/orderbook?ticker_id=BTC_USDT&depth=1")
	if resp.StatusCode != 200 {
		t.Fatalf("hot pair during the pause: %d %s, want its last good book", resp.StatusCode, body)
	}
	resp, body = Get(t, base+"/orderbook?ticker_id=SOL_USDT")
	if resp.StatusCode != 502 || !strings.Contains(string(body), "UPSTREAM_UNAVAILABLE") || strings.Contains(string(body), "html") {
		t.Fatalf("cold pair during the pause: %d %s, want 502 UPSTREAM_UNAVAILABLE", resp.StatusCode, body)
	}
	if time.Since(pausedAt) < 2500*time.Millisecond {
		if n := total(stats()) - before; n != 0 {
			t.Fatalf("%d venue calls during the Retry-After pause", n)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, venue+"/_control/fault", nil)
	if _, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, _ := Get(t, base+"/orderbook?ticker_id=SOL_USDT&depth=1")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cold pair still %d 8 s after the venue healed", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ctrl-C on make run stops the program cleanly and make with it, without a
// make error: the terminal's SIGINT reaches make and the program (one
// process group), the program drains and exits 0, and make, itself
// interrupted, ends quietly. Under go run, go exited 1 after the clean stop
// and make printed "make: *** [Makefile: run] Error 1".
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary through make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", repoRoot, "run", "BIN="+t.TempDir(),
		"ARGS=-listen 127.0.0.1:0 -ops-listen 127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []string
	deadline := time.After(3 * time.Minute)
	for serving := false; !serving; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("make run ended before serving:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			serving = servingURL.MatchString(l)
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("make run printed no serving line:\n%s", strings.Join(log, "\n"))
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	for l := range lines {
		log = append(log, l)
	}
	err = cmd.Wait()
	text := strings.Join(log, "\n")
	if strings.Contains(text, "make: ***") {
		t.Errorf("make reported an error after a clean stop:\n%s", text)
	}
	if !strings.Contains(text, "msg=stopped") {
		t.Errorf("the program did not say it stopped:\n%s", text)
	}
	// make ends as an interrupted program does: killed by SIGINT, or 0.
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("make ended with %v, want killed by SIGINT or status 0", err)
		}
	} else if err != nil {
		t.Error(err)
	}
}
