package apptest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"marketfeed/internal/apiclient"
	"marketfeed/internal/opsclient"
)

// The Go clients generated from the OpenAPI documents, as SDK authors
// generate them, and the document each comes from.
var generatedClients = []struct{ dir, doc string }{
	{filepath.Join(repoRoot, "internal", "apiclient"), filepath.Join(repoRoot, "docs", "openapi.yaml")},
	{filepath.Join(repoRoot, "internal", "opsclient"), filepath.Join(repoRoot, "docs", "openapi-ops.yaml")},
}

var outputLine = regexp.MustCompile(`(?m)^output: .*$`)

// TestGeneratedClientsAreCurrent regenerates each committed client with the
// pinned oapi-codegen and its committed configuration: a document change
// must come with the client it generates, so that the tests below run
// against what the document says now.
func TestGeneratedClientsAreCurrent(t *testing.T) {
	for _, g := range generatedClients {
		cfg, err := os.ReadFile(filepath.Join(g.dir, "oapi-codegen.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		out := filepath.Join(dir, "client.gen.go")
		cfg = outputLine.ReplaceAll(cfg, []byte("output: "+out))
		if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		doc, err := filepath.Abs(g.doc)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), doc)
		cmd.Dir = g.dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("oapi-codegen %s: %v\n%s", g.doc, err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join(g.dir, "client.gen.go"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("%s/client.gen.go is not what %s generates: run go generate ./internal/...", g.dir, g.doc)
		}
	}
}

// TestGeneratedClientAgainstTheBinary runs the real binary on loopback and
// reads it through the generated clients, as an aggregator's SDK would:
// every operation with every parameter the document declares, then every
// status a read can get (200, 304, 400, 404, 429, 502, 503), each decoded
// by the generated code into the generated types.
func TestGeneratedClientAgainstTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := Build(t, t.TempDir(), "marketfeed/cmd/marketfeed")
	// start runs the binary with args and returns a client of its API, the
	// API's address and the operator listener's URL.
	start := func(args ...string) (c *apiclient.ClientWithResponses, addr, ops string) {
		t.Helper()
		url, ops := Start(t, bin, append([]string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0"}, args...)...)
		base := strings.TrimSuffix(url, "/api/public/pairs")
		c, err := apiclient.NewClientWithResponses(base)
		if err != nil {
			t.Fatal(err)
		}
		return c, strings.TrimPrefix(base, "http://"), "http://" + ops
	}
	api, _, ops := start()
	limited, _, limitedOps := start("-rate-limit", "3")
	dead, _, _ := start("-venue", "binance", "-venue-url", "http://127.0.0.1:1", "-venue-streams", "off")
	_, cappedAddr, cappedOps := start("-max-conns", "1")
	WaitReady(t, ops)
	WaitReady(t, limitedOps)
	WaitReady(t, cappedOps)
	ctx := context.Background()
	// Readiness waits for the pairs and tickers; the contracts are first
	// published at the poller's first contracts round, up to a second later.
	if !WaitFor(10*time.Second, func() bool {
		resp, err := api.GetContractsWithResponse(ctx, nil)
		return err == nil && statusOf(resp) == http.StatusOK
	}) {
		t.Fatal("/contracts did not answer 200 within 10 s")
	}

	t.Run("every operation", func(t *testing.T) {
		callEveryOperation(t, api, generatedClients[0].doc)
		callEveryOperation(t, opsclientFor(t, ops), generatedClients[1].doc)
	})

	t.Run("200 and 304", func(t *testing.T) {
		for _, r := range reads(ctx, api) {
			etag := expect(t, r.name, 200)(r.call(nil)).etag
			// A book or a trade list may change between two reads: then the
			// answer is a 200 with the new tag, and the next read may be 304.
			for i := 0; ; i++ {
				resp, err := r.call(&etag)
				if err == nil && statusOf(resp) == http.StatusOK && i < 10 {
					etag = expect(t, r.name, 200)(resp, err).etag
					continue
				}
				expect(t, r.name+" revalidated", 304)(resp, err)
				break
			}
		}
		pairs, err := api.GetPairsWithResponse(ctx, nil)
		expect(t, "pairs", 200)(pairs, err)
		for _, p := range *pairs.JSON200 {
			if !p.Kind.Valid() || p.Base+"_"+p.Target != p.TickerId {
				t.Errorf("pair %+v", p)
			}
		}
		tickers, err := api.GetTickersWithResponse(ctx, nil)
		expect(t, "tickers", 200)(tickers, err)
		for _, tk := range *tickers.JSON200 {
			if tk.Bid != tk.Ask || tk.LastPrice == "" || tk.Timestamp <= 0 {
				t.Errorf("ticker %+v", tk)
			}
		}
		contracts, err := api.GetContractsWithResponse(ctx, nil)
		expect(t, "contracts", 200)(contracts, err)
		specs, err := api.GetContractSpecsWithResponse(ctx, nil)
		expect(t, "contract_specs", 200)(specs, err)
		if len(*contracts.JSON200) != len(*pairs.JSON200) || len(*specs.JSON200) != len(*contracts.JSON200) {
			t.Errorf("%d contracts and %d specifications of %d pairs", len(*contracts.JSON200), len(*specs.JSON200), len(*pairs.JSON200))
		} else {
			for i, c := range *contracts.JSON200 {
				s := (*specs.JSON200)[i]
				if c.TickerId != (*pairs.JSON200)[i].TickerId || !c.ProductType.Valid() || !c.ContractType.Valid() ||
					c.ContractPrice == "" || (c.OpenInterest == nil) != (c.OpenInterestTimestamp == nil) || c.EndTimestamp != nil {
					t.Errorf("contract %+v", c)
				}
				if s.TickerId != c.TickerId || s.ContractType != c.ContractType || s.ContractPriceCurrency != c.ContractPriceCurrency {
					t.Errorf("specification %+v of contract %s", s, c.TickerId)
				}
			}
		}
		book, err := api.GetOrderBookWithResponse(ctx, &apiclient.GetOrderBookParams{TickerId: "BTC_USDT", Depth: ptr(3)})
		expect(t, "orderbook depth 3", 200)(book, err)
		if b := book.JSON200; len(b.Bids) == 0 || len(b.Bids) > 3 || len(b.Asks) > 3 || len(b.Bids[0]) != 2 {
			t.Errorf("book at depth 3: %+v", b)
		}
		trades, err := api.GetTradesWithResponse(ctx, &apiclient.GetTradesParams{TickerId: "BTC_USDT", Type: ptr(apiclient.SideSell), Limit: ptr(5)})
		expect(t, "trades of one side", 200)(trades, err)
		for _, tr := range *trades.JSON200 {
			if tr.Type != apiclient.SideSell {
				t.Errorf("trade %+v of the other side", tr)
			}
		}
		ready, err := opsclientFor(t, ops).GetReadinessWithResponse(ctx)
		if err != nil || ready.JSON200 == nil || !ready.JSON200.Ready {
			t.Errorf("readiness: %v %+v", err, ready)
		}
	})

	t.Run("400 and 404", func(t *testing.T) {
		for _, c := range []struct {
			name string
			call func() (any, error)
		}{
			{"orderbook depth -1", func() (any, error) {
				return api.GetOrderBookWithResponse(ctx, &apiclient.GetOrderBookParams{TickerId: "BTC_USDT", Depth: ptr(-1)})
			}},
			{"trades of a lowercase ticker_id", func() (any, error) {
				return api.GetTradesWithResponse(ctx, &apiclient.GetTradesParams{TickerId: "btc_usdt"})
			}},
			{"historical_trades limit -1", func() (any, error) {
				return api.GetHistoricalTradesWithResponse(ctx, &apiclient.GetHistoricalTradesParams{TickerId: "BTC_USDT", Limit: ptr(-1)})
			}},
		} {
			if got := expect(t, c.name, 400)(c.call()); got.code != apiclient.ErrorCodeValidation {
				t.Errorf("%s: code %q, want %s", c.name, got.code, apiclient.ErrorCodeValidation)
			}
		}
		for _, r := range reads(ctx, api) {
			if r.ticker == "" {
				continue // a list: no pair to be unknown
			}
			r.ticker = "NOPE_USDT"
			if got := expect(t, r.name+" of an unlisted pair", 404)(r.call(nil)); got.code != "UNKNOWN_TICKER" {
				t.Errorf("%s: error %q, want UNKNOWN_TICKER", r.name, got.code)
			}
		}
	})

	t.Run("429", func(t *testing.T) {
		for range 3 { // -rate-limit 3: all three may be spent at once
			pairs, err := limited.GetPairsWithResponse(ctx, nil)
			expect(t, "pairs within the limit", 200)(pairs, err)
		}
		for _, r := range reads(ctx, limited) {
			got := expect(t, r.name+" over the limit", 429)(r.call(nil))
			if got.code != apiclient.ErrorCodeRateLimited || got.retryAfter < 1 {
				t.Errorf("%s: code %q, Retry-After %d", r.name, got.code, got.retryAfter)
			}
		}
	})

	t.Run("502", func(t *testing.T) {
		for _, r := range reads(ctx, dead) {
			if got := expect(t, r.name+" of a dead venue", 502)(r.call(nil)); got.code != apiclient.ErrorCodeUpstreamUnavailable {
				t.Errorf("%s: code %q", r.name, got.code)
			}
		}
	})

	t.Run("503", func(t *testing.T) {
		held := holdConnection(t, cappedAddr)
		defer held.Close()
		// The refusal is written as soon as the connection is accepted. Go's
		// transport reads a connection before its request is written and may
		// take an answer that comes first for an unsolicited one, so this
		// client writes the request before reading.
		capped, err := apiclient.NewClientWithResponses("http://"+cappedAddr, apiclient.WithHTTPClient(writeFirst{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reads(ctx, capped) {
			got := expect(t, r.name+" over the connection cap", 503)(r.call(nil))
			if got.code != apiclient.ErrorCodeOverloaded || got.retryAfter < 1 {
				t.Errorf("%s: code %q, Retry-After %d", r.name, got.code, got.retryAfter)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

func opsclientFor(t *testing.T, ops string) *opsclient.ClientWithResponses {
	t.Helper()
	c, err := opsclient.NewClientWithResponses(ops)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// holdConnection opens a connection to addr and has one request answered
// on it, so that the server counts it open until it is closed.
func holdConnection(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	RequestPairs(t, c)
	return c
}

// writeFirst sends each request on a new connection and reads the answer
// only once the request is written.
type writeFirst struct{}

func (writeFirst) Do(req *http.Request) (*http.Response, error) {
	c, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := req.Write(c); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

// read is one read operation of the generated client, with a valid query.
type read struct {
	name   string
	ticker string
	do     func(ticker string, ifNoneMatch *string) (any, error)
}

func (r read) call(ifNoneMatch *string) (any, error) { return r.do(r.ticker, ifNoneMatch) }

// reads are the seven reads; the per-pair ones come last.
func reads(ctx context.Context, c *apiclient.ClientWithResponses) []read {
	return []read{
		{"pairs", "", func(_ string, inm *string) (any, error) {
			return c.GetPairsWithResponse(ctx, &apiclient.GetPairsParams{IfNoneMatch: inm})
		}},
		{"tickers", "", func(_ string, inm *string) (any, error) {
			return c.GetTickersWithResponse(ctx, &apiclient.GetTickersParams{IfNoneMatch: inm})
		}},
		{"contracts", "", func(_ string, inm *string) (any, error) {
			return c.GetContractsWithResponse(ctx, &apiclient.GetContractsParams{IfNoneMatch: inm})
		}},
		{"contract_specs", "", func(_ string, inm *string) (any, error) {
			return c.GetContractSpecsWithResponse(ctx, &apiclient.GetContractSpecsParams{IfNoneMatch: inm})
		}},
		{"orderbook", "BTC_USDT", func(id string, inm *string) (any, error) {
			return c.GetOrderBookWithResponse(ctx, &apiclient.GetOrderBookParams{TickerId: id, IfNoneMatch: inm})
		}},
		{"trades", "BTC_USDT", func(id string, inm *string) (any, error) {
			return c.GetTradesWithResponse(ctx, &apiclient.GetTradesParams{TickerId: id, IfNoneMatch: inm})
		}},
		{"historical_trades", "ETH_USDT", func(id string, inm *string) (any, error) {
			return c.GetHistoricalTradesWithResponse(ctx, &apiclient.GetHistoricalTradesParams{TickerId: id, IfNoneMatch: inm})
		}},
	}
}

// decoded is what the generated code made of an answer.
type decoded struct {
	etag       string              // a 200's ETag header
	code       apiclient.ErrorCode // an error body's code (error, for UNKNOWN_TICKER)
	retryAfter int                 // the Retry-After header, where declared
}

// expect returns a function that takes what a generated XxxWithResponse
// method returned and requires the call to have succeeded with status, and
// the answer to have been decoded into the generated field for that status
// (JSON<status>, or JSONDefault; none for 304 and text): the generated parser, not
// this test, decodes it. It returns what was decoded.
func expect(t *testing.T, what string, status int) func(resp any, err error) decoded {
	return func(resp any, err error) decoded {
		t.Helper()
		var d decoded
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return d
		}
		v := reflect.ValueOf(resp).Elem()
		if got := statusOf(resp); got != status {
			t.Errorf("%s: status %d, want %d: %.200s", what, got, status, v.FieldByName("Body").Bytes())
			return d
		}
		if status == http.StatusNotModified {
			return d
		}
		body := v.FieldByName("JSON" + strconv.Itoa(status))
		if !body.IsValid() {
			body = v.FieldByName("JSONDefault")
		}
		if !body.IsValid() {
			return d // no JSON body is declared (the metrics' text)
		}
		if body.IsNil() {
			t.Errorf("%s: the %d answer was not decoded into a generated type", what, status)
			return d
		}
		if f := body.Elem(); f.Kind() == reflect.Struct {
			for _, name := range []string{"Code", "Error"} {
				if c := f.FieldByName(name); c.IsValid() {
					d.code = apiclient.ErrorCode(c.String())
				}
			}
		}
		if h := v.FieldByName("Headers" + strconv.Itoa(status)); h.IsValid() && !h.IsNil() {
			if f := h.Elem().FieldByName("ETag"); f.IsValid() {
				d.etag = f.String()
			}
			if f := h.Elem().FieldByName("RetryAfter"); f.IsValid() {
				d.retryAfter = int(f.Int())
			}
		}
		return d
	}
}

// statusOf is the status of what a generated XxxWithResponse method returned.
func statusOf(resp any) int {
	return reflect.ValueOf(resp).Elem().FieldByName("HTTPResponse").Interface().(*http.Response).StatusCode
}

// callEveryOperation calls, through the generated client c, every operation
// of the document at path, with every parameter the document declares set
// to the example it gives, as an SDK user filling in every field would.
// Each must answer 200 and be decoded by the generated code.
func callEveryOperation(t *testing.T, c any, path string) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	client := reflect.ValueOf(c)
	paths := doc.Paths.InMatchingOrder()
	slices.Sort(paths)
	for _, p := range paths {
		for method, op := range doc.Paths.Value(p).Operations() {
			what := method + " " + p
			name := strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:] + "WithResponse"
			m := client.MethodByName(name)
			if !m.IsValid() {
				t.Errorf("%s: the generated client has no %s", what, name)
				continue
			}
			args := []reflect.Value{reflect.ValueOf(context.Background())}
			if m.Type().NumIn() > 2 { // ctx, params, request editors
				params := reflect.New(m.Type().In(1).Elem())
				for _, param := range op.Parameters {
					if err := setParam(params.Elem(), param.Value); err != nil {
						t.Errorf("%s: %v", what, err)
					}
				}
				args = append(args, params)
			}
			out := m.Call(args)
			err, _ := out[1].Interface().(error)
			expect(t, fmt.Sprintf("%s (%s)", what, name), http.StatusOK)(out[0].Interface(), err)
		}
	}
}

// setParam sets the field of a generated XxxParams struct that stands for
// p to the example the document gives for p.
func setParam(params reflect.Value, p *openapi3.Parameter) error {
	example := p.Example
	if example == nil && p.Schema != nil {
		example = p.Schema.Value.Example
	}
	if example == nil {
		return fmt.Errorf("parameter %s has no example in the document", p.Name)
	}
	for i := range params.NumField() {
		name, _, _ := strings.Cut(params.Type().Field(i).Tag.Get("json"), ",")
		if name != p.Name {
			continue
		}
		f := params.Field(i)
		if f.Kind() == reflect.Pointer {
			f.Set(reflect.New(f.Type().Elem()))
			f = f.Elem()
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprint(example))
		case reflect.Int, reflect.Int64:
			n, err := strconv.ParseInt(fmt.Sprint(example), 10, 64)
			if err != nil {
				return fmt.Errorf("parameter %s: example %v: %v", p.Name, example, err)
			}
			f.SetInt(n)
		default:
			return fmt.Errorf("parameter %s: field of kind %s", p.Name, f.Kind())
		}
		return nil
	}
	return fmt.Errorf("parameter %s has no field in %s", p.Name, params.Type())
}
