//go:build browser

package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.yaml.in/yaml/v3"

	"marketfeed/internal/wire"
)

// The pages in a real browser: headless Chromium, driven over the DevTools
// protocol, against the built binary (make test-browser; .ci/run installs
// Chromium). Each test skips when no Chromium is installed.

// chromium returns the browser's path, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary and a browser")
	}
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("Chromium is not installed: the browser tests need it (apt-get install -y chromium; make test-browser and .ci/run install it)")
	return ""
}

// browser is one tab of a headless Chromium, with what it saw: every
// request the page sent, every answer and failure, every console error.
type browser struct {
	ctx    context.Context
	origin string // the pages' origin: every request must go there

	mu        sync.Mutex
	requests  []request   // every request, in order
	answers   []apiAnswer // every answer of the API
	problems  []string    // console errors, exceptions, failed requests, other origins
	bookReads []network.RequestID
}

type request struct {
	at  time.Time
	url string
}

type apiAnswer struct {
	url    string
	status int64
}

// newBrowser starts Chromium for origin; it stops when the test ends.
func newBrowser(t *testing.T, origin string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the tests may run as root, as CI does
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{origin: origin}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.event))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	b.ctx = ctx
	return b
}

// event records what the tab reports. It runs on the tab's reader and must
// not block.
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, request{time.Now(), e.Request.URL})
		// data: and blob: URLs are the page's own bytes; anything else
		// must be the origin's.
		if u := e.Request.URL; !strings.HasPrefix(u, b.origin+"/") && !strings.HasPrefix(u, "data:") && !strings.HasPrefix(u, "blob:"+b.origin+"/") {
			b.problems = append(b.problems, "request to another origin: "+e.Request.URL)
		}
	case *network.EventResponseReceived:
		if strings.Contains(e.Response.URL, "/api/public/") {
			b.answers = append(b.answers, apiAnswer{e.Response.URL, e.Response.Status})
		}
		if strings.Contains(e.Response.URL, "/api/public/orderbook") && e.Response.Status == 200 {
			b.bookReads = append(b.bookReads, e.RequestID)
		}
	case *network.EventLoadingFailed:
		b.problems = append(b.problems, fmt.Sprintf("request failed: %s (%s)", e.ErrorText, e.Type))
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			b.problems = append(b.problems, "console error: "+remoteText(e.Args))
		}
	case *runtime.EventExceptionThrown:
		b.problems = append(b.problems, "exception: "+exceptionText(e.ExceptionDetails))
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			b.problems = append(b.problems, fmt.Sprintf("console %s error: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	}
}

func remoteText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if len(a.Value) > 0 {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

// problemsSoFar returns the problems recorded.
func (b *browser) problemsSoFar() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

// requestsBetween counts the requests sent from one time until another,
// in all and by path.
func (b *browser) requestsBetween(from, to time.Time) (n int, byPath map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	byPath = map[string]int{}
	for _, r := range b.requests {
		if !r.at.Before(from) && r.at.Before(to) {
			n++
			u, _ := url.Parse(r.url)
			byPath[u.Path]++
		}
	}
	return n, byPath
}

// statuses returns the statuses the API answered the page with, by status.
func (b *browser) statuses() map[int64]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := map[int64]int{}
	for _, a := range b.answers {
		m[a.status]++
	}
	return m
}

// do runs steps in the tab, failing the test on an error.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page into a T.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is truthy.
func (b *browser) waitFor(t *testing.T, what, expr string, timeout time.Duration) {
	t.Helper()
	b.do(t, "wait for "+what, chromedp.Steps(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond),
			chromedp.WithPollingTimeout(timeout))(ctx, tg)
		return chromedp.Void{}, err
	}))
}

// chart is what the page's depth chart shows, read in one evaluation so
// that a refresh cannot fall between its parts.
type chart struct {
	Timestamp string `json:"timestamp"`
	Bids      int    `json:"bids"`
	Asks      int    `json:"asks"`
	BestBid   string `json:"bestBid"`
	BestAsk   string `json:"bestAsk"`
}

const readChart = `(() => {
  const svg = document.querySelector('#depth');
  const points = (side) => {
    const line = svg.querySelector('polyline.' + side);
    return line ? line.getAttribute('points').trim().split(/\s+/).length : 0;
  };
  return {timestamp: svg.dataset.timestamp || '', bids: points('bids'), asks: points('asks'),
    bestBid: document.querySelector('#best-bid').textContent, bestAsk: document.querySelector('#best-ask').textContent};
})()`

// bookRead returns the book the page was answered with at timestamp ts,
// read back from the browser: the very bytes the chart was drawn from.
func (b *browser) bookRead(t *testing.T, ts string) (wire.Book, bool) {
	t.Helper()
	b.mu.Lock()
	ids := slices.Clone(b.bookReads)
	b.mu.Unlock()
	for _, id := range slices.Backward(ids) {
		res, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetResponseBodyResult, error) {
			return cdp.Call(ctx, tg, network.GetResponseBody, network.GetResponseBodyParams{RequestID: id})
		})
		if err != nil {
			continue // evicted, or still loading
		}
		var book wire.Book
		if json.Unmarshal(res.Body, &book) == nil && fmt.Sprint(book.Timestamp) == ts {
			return book, true
		}
	}
	return wire.Book{}, false
}

// startForBrowser starts the built marketfeed with args and returns its
// base URL.
func startForBrowser(t *testing.T, args ...string) string {
	t.Helper()
	bin := Build(t, t.TempDir(), "marketfeed/cmd/marketfeed")
	api, _ := Start(t, bin, append([]string{"-listen", "127.0.0.1:0", "-ops-listen", ""}, args...)...)
	return api
}

// waitWholeMarket waits until /pairs answers, /contracts lists every pair
// and /tickers every spot pair. At a cold start they answer 502 until the
// catalog and the books' first quotes are in, about a second after the API
// listens, which the page shows as unavailable (TestBrowserUnavailablePair);
// a page opened on a market that is all in must show no such thing.
func waitWholeMarket(t *testing.T, base string) {
	t.Helper()
	if !WaitFor(20*time.Second, func() bool {
		resp, _ := Get(t, base+"/api/public/pairs")
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatal("/pairs did not answer 200 within 20s")
	}
	pairs := ListedPairs(t, base)
	ids := make([]string, len(pairs))
	spot := 0
	for i, p := range pairs {
		ids[i] = p.TickerID
		if p.Kind == "spot" {
			spot++
		}
	}
	WaitContracts(t, base+"/api/public", ids, 20*time.Second)
	var tickers []wire.Ticker
	if !WaitFor(20*time.Second, func() bool {
		resp, body := Get(t, base+"/api/public/tickers")
		if resp.StatusCode != http.StatusOK {
			return false
		}
		Decode(t, body, &tickers)
		return len(tickers) == spot
	}) {
		t.Fatalf("/tickers lists %d of %d spot pairs after 20s", len(tickers), spot)
	}
}

// The live market page on the simulated venue: it loads with no console
// error and no failed request, lists exactly the pairs of /pairs, draws the
// open pair's book point for level with the book's best bid and ask,
// updates within 10 s, and left open for a minute, opening pair after
// pair, stays far under the per-address limit (600 a minute).
func TestBrowserMarketPage(t *testing.T) {
	t.Parallel()
	base := startForBrowser(t)
	waitWholeMarket(t, base)
	b := newBrowser(t, base)
	opened := time.Now()
	b.do(t, "open /", chromedp.Navigate(base+"/#BTC_USDT"))
	b.waitFor(t, "the table and the chart", `document.querySelectorAll('#pairs tbody tr').length > 0 &&
		document.querySelector('#depth polyline.bids') !== null`, 15*time.Second)

	rows := eval[[]string](t, b, `[...document.querySelectorAll('#pairs tbody tr')].map(r => r.dataset.id)`)
	listed := ListedIDs(t, base)
	slices.Sort(rows)
	slices.Sort(listed)
	if !slices.Equal(rows, listed) {
		t.Errorf("the table lists %d pairs %v,\n/pairs %d %v", len(rows), rows, len(listed), listed)
	}
	if n := eval[int](t, b, `[...document.querySelectorAll('#pairs tbody tr')].filter(r => !r.hidden && r.cells[2].textContent !== '—').length`); n != len(listed) {
		t.Errorf("%d of %d rows show a last price", n, len(listed))
	}

	c := eval[chart](t, b, readChart)
	book, ok := b.bookRead(t, c.Timestamp)
	if !ok {
		t.Fatalf("no /orderbook answer of the page has the charted timestamp %q", c.Timestamp)
	}
	if c.Bids != len(book.Bids) || c.Asks != len(book.Asks) || c.Bids == 0 {
		t.Errorf("the chart draws %d bid and %d ask points; the book has %d and %d levels", c.Bids, c.Asks, len(book.Bids), len(book.Asks))
	}
	if c.BestBid != book.Bids[0][0] || c.BestAsk != book.Asks[0][0] {
		t.Errorf("the page shows best bid %s, ask %s; the book's are %s, %s", c.BestBid, c.BestAsk, book.Bids[0][0], book.Asks[0][0])
	}

	b.waitFor(t, "a newer book", `document.querySelector('#depth').dataset.timestamp !== '`+c.Timestamp+`'`, 10*time.Second)
	quoted := eval[string](t, b, `document.querySelector('tr[data-id="ETH_USDT"]').cells[6].textContent`)
	b.waitFor(t, "a quote's age to change", `document.querySelector('tr[data-id="ETH_USDT"]').cells[6].textContent !== '`+quoted+`'`, 10*time.Second)

	if p := b.problemsSoFar(); len(p) > 0 {
		t.Errorf("the page loaded with problems:\n%s", strings.Join(p, "\n"))
	}

	// Sortable and filterable: a filter shows exactly the pairs that hold
	// it, a click on a heading sorts by that column and again reverses it.
	b.do(t, "filter", chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('#filter');
		f.value = 'btc'; f.dispatchEvent(new Event('input')); })()`))
	shown := eval[[]string](t, b, `[...document.querySelectorAll('#pairs tbody tr')].filter(r => !r.hidden).map(r => r.dataset.id)`)
	var btc []string
	for _, id := range listed {
		if strings.Contains(id, "BTC") {
			btc = append(btc, id)
		}
	}
	if slices.Sort(shown); !slices.Equal(shown, btc) {
		t.Errorf("filtered by btc, the table shows %v, want %v", shown, btc)
	}
	b.do(t, "clear the filter", chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('#filter');
		f.value = ''; f.dispatchEvent(new Event('input')); })()`))
	b.do(t, "sort by pair, descending", chromedp.Evaluate[chromedp.Void](`document.querySelector('#pairs th[data-key=id]').click()`))
	ids := eval[[]string](t, b, `[...document.querySelectorAll('#pairs tbody tr')].map(r => r.dataset.id)`)
	want := slices.Sorted(slices.Values(listed))
	slices.Reverse(want)
	if !slices.Equal(ids, want) {
		t.Errorf("sorted by pair, descending, the table reads %v", ids)
	}
	b.do(t, "sort by last price", chromedp.Evaluate[chromedp.Void](`document.querySelector('#pairs th[data-key=last]').click()`))
	prices := eval[[]float64](t, b, `[...document.querySelectorAll('#pairs tbody tr')].map(r => +r.cells[2].textContent)`)
	if !slices.IsSorted(prices) || len(prices) != len(listed) {
		t.Errorf("sorted by last price, the table reads %v", prices)
	}
	// Left open for a minute, a visitor opens one pair after another, once
	// two at once: a second click before the first pair's reads are back.
	opens := 1
	for _, ids := range [][]string{{"SOL_USDT", "ETH_USDT"}, {"1000PEPE_USDT"}, {"ADA_USDT"}, {"BTC_USDT"}} {
		var js []string
		for _, id := range ids {
			js = append(js, `location.hash = '#`+id+`'`)
		}
		opens += len(ids)
		id := ids[len(ids)-1]
		b.do(t, "open "+id, chromedp.Evaluate[chromedp.Void](strings.Join(js, "; ")))
		b.waitFor(t, id+"'s chart", `document.querySelector('#pair-title').textContent.startsWith('`+id+`') &&
			document.querySelector('#depth polyline.asks') !== null`, 10*time.Second)
		time.Sleep(9 * time.Second) // the visitor reads the pair; the page polls meanwhile
	}
	minute := opened.Add(60 * time.Second)
	time.Sleep(time.Until(minute) + 100*time.Millisecond)
	n, byPath := b.requestsBetween(opened, minute)
	t.Logf("requests in the page's first minute: %d %v", n, byPath)
	// The schedule's bound, far under the limit of 600: /pairs once a
	// minute, /tickers and /contracts every 5 s, the open pair's book and
	// trades every 3 s and once more on each opening.
	bound := map[string]int{"/api/public/pairs": 2, "/api/public/tickers": 13, "/api/public/contracts": 13,
		"/api/public/orderbook": 21 + opens, "/api/public/trades": 21 + opens}
	for path, max := range bound {
		if byPath[path] > max {
			t.Errorf("%d requests for %s in the first minute, more than the schedule's %d", byPath[path], path, max)
		}
	}
	if n >= 100 {
		t.Errorf("%d requests in the first minute: %v", n, byPath)
	}
	if s := b.statuses(); s[429] > 0 || s[502] > 0 {
		t.Errorf("the API answered the page %v", s)
	}
	if p := b.problemsSoFar(); len(p) > 0 {
		t.Errorf("problems while the page was open:\n%s", strings.Join(p, "\n"))
	}
}

// A pair the venue cannot be read for answers 502: the page shows it as
// unavailable and the rest of the page goes on working. venuesim fails every
// call while the page opens a pair the service has not read yet (REST only,
// so no stream holds its book); the pair it had open keeps its last good
// book for -max-stale.
func TestBrowserUnavailablePair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	venuesim := Build(t, dir, "marketfeed/cmd/venuesim")
	venue, _ := Start(t, venuesim, "-listen", "127.0.0.1:0")
	base := startForBrowser(t, "-venue", "binance", "-venue-url", venue, "-venue-streams", "off",
		"-max-stale", "60s", "-spot", "BTC_USDT,ETH_USDT")
	b := newBrowser(t, base)
	b.do(t, "open /", chromedp.Navigate(base+"/#BTC_USDT"))
	b.waitFor(t, "BTC_USDT's chart", `document.querySelector('#depth polyline.bids') !== null`, 15*time.Second)
	listed := ListedIDs(t, base)

	Post(t, venue+"/_control/fault?status=503")
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, venue+"/_control/fault", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	resp, body := Get(t, base+"/api/public/orderbook?ticker_id=DOGE_USDT")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a cold pair during the fault: %d %s, want 502", resp.StatusCode, body)
	}
	b.do(t, "open SOL_USDT", chromedp.Evaluate[chromedp.Void](`location.hash = '#SOL_USDT'`))
	b.waitFor(t, "SOL_USDT unavailable", `document.querySelector('#pair-status').textContent.includes('unavailable') &&
		document.querySelector('tr[data-id="SOL_USDT"]').classList.contains('unavailable') &&
		document.querySelector('#depth polyline') === null`, 15*time.Second)

	// The rest works: every pair still listed with its price, and the pair
	// that was read before draws its book again.
	if n := eval[int](t, b, `[...document.querySelectorAll('#pairs tbody tr')].filter(r => r.cells[2].textContent !== '—').length`); n != len(listed) {
		t.Errorf("%d of %d pairs show a price during the fault", n, len(listed))
	}
	b.do(t, "open BTC_USDT", chromedp.Evaluate[chromedp.Void](`location.hash = '#BTC_USDT'`))
	b.waitFor(t, "BTC_USDT's chart again", `document.querySelector('#pair-title').textContent.startsWith('BTC_USDT') &&
		document.querySelector('#depth polyline.bids') !== null && document.querySelector('#pair-status').textContent === ''`, 10*time.Second)
	if s := b.statuses(); s[502] == 0 {
		t.Errorf("the page was never answered 502: %v", s)
	}
	// The page itself stays whole: no exception, no request elsewhere. (The
	// browser logs each 502 it is answered with as an error, which is the
	// point of this test.)
	for _, p := range b.problemsSoFar() {
		if !strings.Contains(p, "502") {
			t.Errorf("problem during the fault: %s", p)
		}
	}
}

// /docs shows every path of docs/openapi.yaml and /docs/ops every path of
// docs/openapi-ops.yaml, rendered by the embedded Redoc with nothing from
// another origin and no console error.
func TestBrowserReferences(t *testing.T) {
	t.Parallel()
	base := startForBrowser(t)
	b := newBrowser(t, base)
	for page, doc := range map[string]string{"/docs": "docs/openapi.yaml", "/docs/ops": "docs/openapi-ops.yaml"} {
		var d struct {
			Paths map[string]any `yaml:"paths"`
		}
		spec, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(spec, &d); err != nil {
			t.Fatal(err)
		}
		b.do(t, "open "+page, chromedp.Navigate(base+page))
		// Redoc has hydrated once its menu reacts: the rendered document
		// holds the operations' paths.
		b.waitFor(t, page+" rendered", `document.querySelectorAll('#redoc [role=menuitem], #redoc li[data-item-id]').length > 0`, 15*time.Second)
		// Styled, not bare markup: Redoc's styles are in the page (the
		// build's server-side rendering) or written as it renders.
		if rules := eval[int](t, b, `[...document.styleSheets].reduce((n, s) => n + s.cssRules.length, 0)`); rules < 100 {
			t.Errorf("%s is rendered with %d style rules: unstyled", page, rules)
		}
		if w := eval[float64](t, b, `document.querySelector('#redoc svg').getBoundingClientRect().width`); w > 100 {
			t.Errorf("%s draws its first icon %.0f px wide: unstyled", page, w)
		}
		text := eval[string](t, b, `document.querySelector('#redoc').textContent`)
		for path := range d.Paths {
			if !strings.Contains(text, path) {
				t.Errorf("%s does not show the path %s of %s", page, path, doc)
			}
		}
	}
	if p := b.problemsSoFar(); len(p) > 0 {
		t.Errorf("the references loaded with problems:\n%s", strings.Join(p, "\n"))
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return d.Text
}
