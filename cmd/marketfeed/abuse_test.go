package main

import (
	"io"
	"net/http"
	"testing"
)

// getAs sends GET /api/public/pairs with X-Forwarded-For xff (none if
// empty) and returns the status and Retry-After.
func getAs(t *testing.T, api, xff string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api+"/api/public/pairs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestClientAddressOverTheWire checks, through the real program on a real
// socket, who a request is counted against: the TCP peer, unless the peer
// is a trusted proxy; then the address in X-Forwarded-For, IPv6 by its /64.
func TestClientAddressOverTheWire(t *testing.T) {
	t.Run("X-Forwarded-For from an untrusted peer is ignored", func(t *testing.T) {
		api, _, _, _ := startApp(t, nil, "-rate-limit", "3", "-trusted-proxies", "10.0.0.0/8")
		for i, xff := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
			if st, _ := getAs(t, api, xff); st != 200 {
				t.Fatalf("request %d: %d", i+1, st)
			}
		}
		if st, ra := getAs(t, api, "198.51.100.4"); st != 429 || ra == "" {
			t.Fatalf("fourth request with a fourth claimed address: %d Retry-After %q, want 429: the peer is the client", st, ra)
		}
	})
	t.Run("behind a trusted proxy each client has its own allowance", func(t *testing.T) {
		api, _, _, _ := startApp(t, nil, "-rate-limit", "3", "-trusted-proxies", "127.0.0.1/32,::1/128")
		for range 3 {
			if st, _ := getAs(t, api, "198.51.100.1"); st != 200 {
				t.Fatalf("client A: %d", st)
			}
		}
		if st, _ := getAs(t, api, "198.51.100.1"); st != 429 {
			t.Fatalf("client A's fourth request: %d, want 429", st)
		}
		// A spoofed hop on the left is the client's own writing: the proxy
		// appended the real address on the right.
		if st, _ := getAs(t, api, "203.0.113.50, 198.51.100.1"); st != 429 {
			t.Fatalf("client A with a spoofed hop: %d, want 429", st)
		}
		if st, _ := getAs(t, api, "198.51.100.2"); st != 200 {
			t.Fatalf("client B: %d, want its own allowance", st)
		}
		// IPv6: one /64 is one client, whatever the host part.
		for _, a := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:fffe"} {
			if st, _ := getAs(t, api, a); st != 200 {
				t.Fatalf("%s: %d", a, st)
			}
		}
		if st, _ := getAs(t, api, "2001:db8:1:2:abcd::9"); st != 429 {
			t.Fatalf("a fourth address of the same /64: %d, want 429", st)
		}
		if st, _ := getAs(t, api, "2001:db8:1:3::1"); st != 200 {
			t.Fatalf("the next /64: %d, want its own allowance", st)
		}
	})
}
