package apptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"marketfeed/internal/wire"
)

// WaitReady polls /readyz under ops until the first catalog and tickers
// are loaded.
func WaitReady(t *testing.T, ops string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ops + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a real process for readiness, not synchronising test logic
	}
	t.Fatal("not ready within 10s")
}

// WaitFor polls cond every 20 ms until it holds or limit passes.
func WaitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a running process with a deadline
	}
	return true
}

// Get sends a GET for url and returns its response and whole body.
func Get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, req)
}

// Do sends req and returns its response and whole body.
func Do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// Post sends an empty POST to url and fails t unless it is answered 2xx.
func Post(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

// Decode decodes body into v, refusing a field v does not have: an answer
// carries exactly what the document says.
func Decode(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// CheckOK fails t unless resp is a 200 with the headers every API read
// carries.
func CheckOK(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", resp.Request.URL, resp.StatusCode)
	}
	for h, want := range map[string]string{
		"Content-Type":                "application/json",
		"Cache-Control":               "public, max-age=5",
		"Access-Control-Allow-Origin": "*",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %s = %q, want %q", resp.Request.URL, h, got, want)
		}
	}
}

// RequestPairs sends one request for the pair list on c and reads the
// answer; c stays open.
func RequestPairs(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /api/public/pairs HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// ListedPairs returns the pairs /pairs lists.
func ListedPairs(t *testing.T, api string) []wire.Pair {
	t.Helper()
	resp, body := Get(t, api+"/api/public/pairs")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/pairs: %d", resp.StatusCode)
	}
	var pairs []wire.Pair
	Decode(t, body, &pairs)
	return pairs
}

// ListedIDs returns the ticker ids /pairs lists.
func ListedIDs(t *testing.T, api string) []string {
	t.Helper()
	pairs := ListedPairs(t, api)
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = p.TickerID
	}
	return ids
}

// ReadContracts reads /contracts or /contract_specs into v; it reports
// whether the answer was a 200 and its ETag.
func ReadContracts(t *testing.T, url string, v any) (ok bool, etag string) {
	t.Helper()
	resp, body := Get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %d %s", url, resp.StatusCode, body)
		return false, ""
	}
	Decode(t, body, v)
	return true, resp.Header.Get("ETag")
}

// WaitContracts waits until /contracts under base lists exactly the
// pairs ids, in their order, and returns that answer and the
// /contract_specs read after it.
func WaitContracts(t *testing.T, base string, ids []string, limit time.Duration) ([]wire.Contract, []wire.ContractSpec) {
	t.Helper()
	var items []wire.Contract
	if !WaitFor(limit, func() bool {
		resp, body := Get(t, base+"/contracts")
		if resp.StatusCode != http.StatusOK {
			return false
		}
		CheckOK(t, resp)
		Decode(t, body, &items)
		return slices.Equal(ContractIDs(items), ids)
	}) {
		t.Fatalf("/contracts did not list every pair within %s: %v", limit, ContractIDs(items))
	}
	resp, body := Get(t, base+"/contract_specs")
	CheckOK(t, resp)
	var specs []wire.ContractSpec
	Decode(t, body, &specs)
	return items, specs
}

// ContractIDs returns the ticker ids of a /contracts answer, in its order.
func ContractIDs(items []wire.Contract) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.TickerID
	}
	return ids
}
