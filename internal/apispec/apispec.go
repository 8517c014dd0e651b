// Package apispec checks real answers of the service against
// docs/openapi.yaml (or docs/openapi-ops.yaml), and records which documented
// answers were seen, so that neither the document nor the code can drift
// from the other unnoticed. The server's tests use it for the public API and
// the command's tests for the operator endpoints.
//
// The document's operations are the reads. The answers that are the same on
// every path (the CORS preflight, 405 for other methods, 404 for other paths,
// and the 429, 503 and unreadable-request answers to any of them) are
// described in its prose, not as operations; Check holds them to that prose
// and to the document's error schemas.
package apispec

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Spec is a loaded OpenAPI document and the answers checked against it.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string]int // "GET /api/public/pairs 200", "GET /x default"
}

// Load reads and validates the document at path.
func Load(t testing.TB, path string) *Spec {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", path, err)
	}
	doc.Servers = nil // match routes by path alone: tests do not listen where the document says
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &Spec{doc: doc, router: router, seen: map[string]int{}}
}

// Check validates one answer to req (its status, headers and body, a gzip
// body decompressed first) against the operation the document has for it,
// and records it as seen. what names the request in failures.
func (s *Spec) Check(t testing.TB, what string, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	route, params, err := s.router.FindRoute(req)
	var routeErr *routers.RouteError
	if errors.As(err, &routeErr) && (routeErr.Reason == routers.ErrMethodNotAllowed.Error() || routeErr.Reason == routers.ErrPathNotFound.Error()) {
		s.checkProse(t, what, req, resp, body, routeErr.Reason == routers.ErrMethodNotAllowed.Error())
		return
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	documented := route.Operation.Responses.Status(resp.StatusCode)
	key := fmt.Sprintf("%s %s %d", req.Method, route.Path, resp.StatusCode)
	if documented == nil {
		documented = route.Operation.Responses.Default()
		key = fmt.Sprintf("%s %s default", req.Method, route.Path)
	}
	if documented == nil {
		t.Errorf("%s: status %d is not documented for %s %s", what, resp.StatusCode, req.Method, route.Path)
		return
	}
	s.mu.Lock()
	s.seen[key]++
	s.mu.Unlock()
	// The validator skips 304; its headers are checked here.
	if resp.StatusCode == http.StatusNotModified {
		checkHeaders(t, what, resp, documented.Value.Headers)
	}
	body = gunzip(t, what, resp, body)
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		t.Errorf("%s: %d does not match the OpenAPI document: %v\nbody: %.300s", what, resp.StatusCode, err, body)
	}
}

func gunzip(t testing.TB, what string, resp *http.Response, body []byte) []byte {
	t.Helper()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: gzip: %v", what, err)
	}
	if body, err = io.ReadAll(zr); err != nil {
		t.Fatalf("%s: gzip: %v", what, err)
	}
	return body
}

// proseAnswer is an answer the document describes in its prose: the same
// on every path and method, with a body of one of its error schemas.
type proseAnswer struct {
	schema, code string
	retryAfter   bool
}

// proseAnswers are the statuses any request may get whatever its path and
// method, and the answers to other methods (405) and other paths (404).
var proseAnswers = map[int]proseAnswer{
	http.StatusBadRequest:                  {"Error", "BAD_REQUEST", false},
	http.StatusRequestTimeout:              {"Error", "REQUEST_TIMEOUT", false},
	http.StatusRequestEntityTooLarge:       {"Error", "BODY_TOO_LARGE", false},
	http.StatusRequestHeaderFieldsTooLarge: {"Error", "HEADERS_TOO_LARGE", false},
	http.StatusTooManyRequests:             {"RateLimitError", "RATE_LIMITED", true},
	http.StatusServiceUnavailable:          {"Error", "OVERLOADED", true},
	http.StatusMethodNotAllowed:            {"Error", "METHOD_NOT_ALLOWED", false},
	http.StatusNotFound:                    {"Error", "NOT_FOUND", false},
}

// checkProse checks an answer that no operation describes against the
// document's prose: a documented path asked with another method
// (methodOnly), or a path the document does not have.
func (s *Spec) checkProse(t testing.TB, what string, req *http.Request, resp *http.Response, body []byte, methodOnly bool) {
	t.Helper()
	header := func(name, want string) {
		t.Helper()
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %d header %s = %q, want %q", what, resp.StatusCode, name, got, want)
		}
	}
	header("Access-Control-Allow-Origin", "*")
	if methodOnly && req.Method == http.MethodOptions && resp.StatusCode == http.StatusNoContent {
		header("Access-Control-Allow-Methods", "GET")
		header("Access-Control-Allow-Headers", req.Header.Get("Access-Control-Request-Headers"))
		header("Access-Control-Max-Age", "86400")
		header("Vary", "Access-Control-Request-Headers")
		header("Cache-Control", "public, max-age=5")
		header("Content-Type", "")
		if len(body) > 0 {
			t.Errorf("%s: the preflight has a body: %.100s", what, body)
		}
		return
	}
	want, ok := proseAnswers[resp.StatusCode]
	switch {
	case !ok,
		resp.StatusCode == http.StatusMethodNotAllowed && (!methodOnly || req.Method == http.MethodOptions),
		resp.StatusCode == http.StatusNotFound && methodOnly,
		resp.StatusCode == http.StatusTooManyRequests && req.Method == http.MethodOptions:
		t.Errorf("%s: status %d is not an answer the OpenAPI document gives to %s %s", what, resp.StatusCode, req.Method, req.URL.Path)
		return
	}
	header("Cache-Control", "no-store")
	header("Content-Type", "application/json")
	if resp.StatusCode == http.StatusMethodNotAllowed {
		header("Allow", "GET, OPTIONS")
	}
	if want.retryAfter {
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("%s: %d Retry-After = %q, want whole seconds", what, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if req.Method == http.MethodHead {
		if len(body) > 0 {
			t.Errorf("%s: the answer to HEAD has a body: %.100s", what, body)
		}
		return
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: %d body is not JSON: %v\nbody: %.300s", what, resp.StatusCode, err, body)
		return
	}
	schema := s.doc.Components.Schemas[want.schema]
	if schema == nil {
		t.Fatalf("the OpenAPI document has no schema %s", want.schema)
	}
	if err := schema.Value.VisitJSON(v); err != nil {
		t.Errorf("%s: %d body does not match schema %s: %v\nbody: %.300s", what, resp.StatusCode, want.schema, err, body)
	}
	if v["code"] != want.code {
		t.Errorf("%s: %d code %v, want %s", what, resp.StatusCode, v["code"], want.code)
	}
}

func checkHeaders(t testing.TB, what string, resp *http.Response, headers openapi3.Headers) {
	t.Helper()
	for name, h := range headers {
		v := resp.Header.Get(name)
		if v == "" {
			if h.Value.Required {
				t.Errorf("%s: %d lacks documented header %s", what, resp.StatusCode, name)
			}
			continue
		}
		var value any = v
		if h.Value.Schema.Value.Type.Is(openapi3.TypeInteger) {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Errorf("%s: %d header %s = %q, want an integer", what, resp.StatusCode, name, v)
			}
			value = float64(n)
		}
		if err := h.Value.Schema.Value.VisitJSON(value); err != nil {
			t.Errorf("%s: %d header %s = %q: %v", what, resp.StatusCode, name, v, err)
		}
	}
}

// Unseen returns the documented answers of the paths under prefix that no
// checked answer produced, as "METHOD PATH STATUS", except those in skip
// (each with the reason it cannot be produced).
func (s *Spec) Unseen(prefix string, skip map[string]string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for path, item := range s.doc.Paths.Map() {
		if !strings.HasPrefix(path, prefix) {
			continue
		}
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				key := method + " " + path + " " + status
				if s.seen[key] == 0 && skip[key] == "" {
					missing = append(missing, key)
				}
			}
		}
	}
	slices.Sort(missing)
	return missing
}
