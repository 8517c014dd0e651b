package server

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// fakePages answers /page and counts the paths it is asked about.
type fakePages struct{ asked []string }

func (p *fakePages) Page(ctx *fasthttp.RequestCtx) bool {
	p.asked = append(p.asked, string(ctx.Path()))
	if string(ctx.Path()) != "/page" {
		return false
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyString("a page")
	return true
}

// The pages are asked only about paths that are no API route, after the
// API's routing: an API request never reaches them, and a path they do not
// know is the API's 404.
func TestPagesAnswerOnlyWhatIsNotTheAPI(t *testing.T) {
	pages := &fakePages{}
	f := newFixture(t, func(c *Config) { c.Pages = pages })
	for _, uri := range []string{"/api/public/pairs", "/api/public/orderbook?ticker_id=BTC_USDT", "/api/public/nope"} {
		serveOne(f.srv, request{uri: uri})
	}
	if len(pages.asked) != 0 {
		t.Fatalf("the pages were asked about %q", pages.asked)
	}
	if resp := serveOne(f.srv, request{uri: "/page"}); resp.StatusCode() != 200 || string(resp.Body()) != "a page" {
		t.Errorf("/page: %d %q, want the page", resp.StatusCode(), resp.Body())
	}
	resp := f.get(t, "/elsewhere")
	if resp.StatusCode() != 404 || !strings.Contains(string(resp.Body()), `"NOT_FOUND"`) {
		t.Errorf("/elsewhere: %d %s, want the API's 404", resp.StatusCode(), resp.Body())
	}
	if want := []string{"/page", "/elsewhere"}; strings.Join(pages.asked, " ") != strings.Join(want, " ") {
		t.Errorf("the pages were asked about %q, want %q", pages.asked, want)
	}
}

// Without pages (-pages off), a page's path is the API's 404.
func TestNoPagesIs404(t *testing.T) {
	f := newFixture(t, nil)
	if resp := f.get(t, "/page"); resp.StatusCode() != 404 {
		t.Errorf("/page without pages: %d, want 404", resp.StatusCode())
	}
}

// A page counts against the client's rate limit like an API request: the
// page's own reads and its files share one allowance.
func TestPagesCountAgainstTheRateLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Pages = &fakePages{}; c.RateLimit = 2 })
	for i, want := range []int{200, 200, 429} {
		uri := "/page"
		if i == 1 {
			uri = "/api/public/pairs"
		}
		if got := serveOne(f.srv, request{uri: uri}).StatusCode(); got != want {
			t.Errorf("request %d (%s): %d, want %d", i+1, uri, got, want)
		}
	}
}
