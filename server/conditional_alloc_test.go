//go:build !race

package server

import "testing"

// Compression and revalidation are on the hot path too: serving the gzip
// form and answering 304 must cost no allocation either.
func TestZeroAllocsForGzipAnd304(t *testing.T) {
	f := hotFixture(t)
	for _, hc := range hotCases {
		gzipClient := hotClient{"gzip", "192.0.2.1:40000", []string{"Accept-Encoding", "gzip, deflate, br"}}
		ctx, serve := hotCtx(f.srv, gzipClient, hc.uri)
		serve()
		etag := header(&ctx.Response, "ETag")
		if n := testing.AllocsPerRun(1000, serve); n != 0 {
			t.Errorf("%s with gzip accepted: %v allocations per request", hc.name, n)
		}
		revalidate := hotClient{"revalidate", "192.0.2.1:40000",
			[]string{"Accept-Encoding", "gzip, deflate, br", "If-None-Match", "W/\"x\", " + etag}}
		ctx, serve = hotCtx(f.srv, revalidate, hc.uri)
		serve()
		if ctx.Response.StatusCode() != 304 {
			t.Fatalf("%s: status %d, want 304", hc.name, ctx.Response.StatusCode())
		}
		if n := testing.AllocsPerRun(1000, serve); n != 0 {
			t.Errorf("%s 304: %v allocations per request", hc.name, n)
		}
	}
}
