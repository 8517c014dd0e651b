package main

import (
	"net/http"
	"strings"
	"testing"

	"marketfeed/apptest"
)

// The public address gives a browser the market page and the reference by
// default; -pages off leaves the API alone, and / and /docs are its 404.
func TestPagesAreServedUnlessTurnedOff(t *testing.T) {
	on, _, _, _ := startApp(t, nil)
	off, _, _, _ := startApp(t, nil, "-pages", "off")
	for _, path := range []string{"/", "/docs", "/assets/market.js"} {
		resp, body := apptest.Get(t, on+path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") == "" || len(body) == 0 {
			t.Errorf("GET %s: %d, policy %q, %d bytes; want the page", path, resp.StatusCode, resp.Header.Get("Content-Security-Policy"), len(body))
		}
		resp, body = apptest.Get(t, off+path)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"NOT_FOUND"`) {
			t.Errorf("GET %s with -pages off: %d %s, want the API's 404", path, resp.StatusCode, body)
		}
	}
	if resp, _ := apptest.Get(t, off+"/api/public/pairs"); resp.StatusCode != http.StatusOK {
		t.Errorf("/api/public/pairs with -pages off: %d", resp.StatusCode)
	}
}
