package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// capture reads marketfeed's answer on every benchmarked route, identity and
// gzip. The two must be the same snapshot (the gzip form decompresses to
// the identity body), so a pair of reads that straddles a refresh is read
// again.
func (b *bench) capture(ctx context.Context, base string) ([]captured, error) {
	var caps []captured
	for _, rt := range b.routes {
		var c captured
		ok := false
		for try := 0; try < 50 && !ok; try++ {
			body, h, err := get(ctx, base+rt.URI, nil)
			if err != nil {
				return nil, err
			}
			c = captured{Key: rt.Key, URI: rt.URI, Body: body, Header: h}
			gz, gh, err := get(ctx, base+rt.URI, map[string]string{"Accept-Encoding": "gzip"})
			if err != nil {
				return nil, err
			}
			if gh.Get("Content-Encoding") != "gzip" {
				ok = bytes.Equal(gz, body)
				continue
			}
			plain, err := gunzip(gz)
			if err != nil {
				return nil, fmt.Errorf("%s: gzip answer: %w", rt.URI, err)
			}
			c.Gzip, c.GzipHeader = gz, gh
			ok = bytes.Equal(plain, body)
		}
		if !ok {
			return nil, fmt.Errorf("%s: identity and gzip answers never came from one snapshot", rt.URI)
		}
		if ct := c.Header.Get("Content-Type"); ct != "application/json" {
			return nil, fmt.Errorf("%s: Content-Type %q", rt.URI, ct)
		}
		caps = append(caps, c)
	}
	return caps, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// httpClient does not ask for gzip on its own, so that what get returns is
// what the server sent.
var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
}

// get fetches url and requires a 200.
func get(ctx context.Context, url string, headers map[string]string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	return body, resp.Header, nil
}

// verify checks that the references answer what marketfeed answered: nginx
// the very bytes and headers, the peer the same headers and the same JSON
// shape (it read its data a moment later, so prices may differ).
func (b *bench) verify(ctx context.Context, caps []captured) error {
	for _, c := range caps {
		for _, name := range []string{srvStatic, srvMemory} {
			body, h, err := get(ctx, b.urls[name]+c.URI, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if !bytes.Equal(body, c.Body) {
				return fmt.Errorf("%s %s: body differs from marketfeed's", name, c.URI)
			}
			if err := sameHeaders(c.Header, h); err != nil {
				return fmt.Errorf("%s %s: %w", name, c.URI, err)
			}
		}
		if c.Gzip != nil {
			body, h, err := get(ctx, b.urls[srvStatic]+c.URI, map[string]string{"Accept-Encoding": "gzip"})
			if err != nil {
				return err
			}
			if !bytes.Equal(body, c.Gzip) || h.Get("Content-Encoding") != "gzip" {
				return fmt.Errorf("nginx static %s: gzip answer differs from marketfeed's", c.URI)
			}
			if err := sameHeaders(c.GzipHeader, h); err != nil {
				return fmt.Errorf("nginx static %s, gzip: %w", c.URI, err)
			}
		}
		body, h, err := get(ctx, b.urls[srvPeer]+c.URI, nil)
		if err != nil {
			return fmt.Errorf("the Go peer: %w", err)
		}
		for _, name := range []string{"Content-Type", "Cache-Control", "Access-Control-Allow-Origin"} {
			if h.Get(name) != c.Header.Get(name) {
				return fmt.Errorf("the Go peer %s: %s %q, marketfeed %q", c.URI, name, h.Get(name), c.Header.Get(name))
			}
		}
		if err := sameShape(body, c.Body); err != nil {
			return fmt.Errorf("the Go peer %s: %w", c.URI, err)
		}
	}
	return nil
}

// sameShape reports whether two JSON documents have the same structure:
// the same object keys in every object and the same array lengths, with
// any scalar values. The peer reads its data a moment after the capture,
// so its numbers may differ while its shape may not.
func sameShape(a, b []byte) error {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if !reflect.DeepEqual(shape(x), shape(y)) {
		return errors.New("JSON shape differs from marketfeed's")
	}
	return nil
}

// shape replaces every scalar with its kind, keeping structure.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = shape(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = shape(e)
		}
		return out
	default:
		return fmt.Sprintf("%T", v)
	}
}

// sameHeaders checks that got carries every header of want that nginx is
// told to copy, with the same value, and the same Content-Type.
func sameHeaders(want, got http.Header) error {
	for name, vals := range want {
		if !copiedHeader(name) && name != "Content-Type" && name != "Content-Encoding" {
			continue
		}
		if g := strings.Join(got.Values(name), ", "); g != strings.Join(vals, ", ") {
			return fmt.Errorf("header %s: %q, marketfeed %q", name, g, strings.Join(vals, ", "))
		}
	}
	return nil
}
