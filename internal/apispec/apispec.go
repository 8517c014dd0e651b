// Package apispec checks real answers of the service against
// docs/openapi.yaml, and records which documented answers were seen, so
// that neither the document nor the code can drift from the other
// unnoticed. The server's tests use it for the public API and the
// command's tests for the operator endpoints.
package apispec

import (
	"bytes"
	"compress/gzip"
	"context"
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
	if err != nil {
		t.Errorf("%s: no operation in the OpenAPI document: %v", what, err)
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
	// The validator skips 304 and HEAD; their headers are checked here.
	if resp.StatusCode == http.StatusNotModified || req.Method == http.MethodHead {
		checkHeaders(t, what, resp, documented.Value.Headers)
	}
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: gzip: %v", what, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: gzip: %v", what, err)
		}
	}
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
