package binance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"marketfeed/poller/venue"
)

// errInvalidBaseURL reports a base URL that cannot make a request; it is a
// configuration error, not a venue failure.
var errInvalidBaseURL = errors.New("invalid venue base URL")

// userAgent names the service to the venue, whose operators may need to
// tell its traffic apart.
const userAgent = "marketfeed"

// drainLimit is how much of a non-200 body is read and thrown away so the
// connection can be reused; a longer body costs a new connection instead.
const drainLimit = 64 << 10

// maxRetryAfter caps the venue's Retry-After. A ban lasts at most three
// days; the cap only keeps an absurd value from overflowing a Duration.
const maxRetryAfter = 7 * 24 * time.Hour

// get sends one GET for path?query and returns the body of a 200 answer,
// at most limit bytes. Every answer's used-weight header is recorded first,
// whatever its status, because a 429 or 418 reports it too.
func (c *Client) get(ctx context.Context, path, query string, limit int64) ([]byte, error) {
	// The caller's deadline owns the call (the poller sets one on every
	// call); the client's own bounds only a caller that set none, so that
	// two deadlines never nest and the shorter silently win.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}

	u := c.base + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		// The error would quote the URL back; the configured URL is known.
		return nil, errInvalidBaseURL
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)

	resp, err := c.hc.Do(req)
	if err != nil {
		// *url.Error: the URL (password stripped) and the cause, which
		// unwraps to the context's error on a timeout or cancellation.
		return nil, err
	}
	defer resp.Body.Close()
	c.noteUsedWeight(resp.Header)

	if resp.StatusCode != http.StatusOK {
		// The body is read only to free the connection; it is never kept.
		_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
		return nil, &venue.StatusError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("body of %d bytes exceeds %d: %w", resp.ContentLength, limit, venue.ErrBadData)
	}
	// One byte over the cap tells an oversize body from one that fits.
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, readError(ctx, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("body exceeds %d bytes: %w", limit, venue.ErrBadData)
	}
	return body, nil
}

// readError wraps a failure while reading a 200 body. It is a transport
// failure (reset, truncated transfer, deadline), not bad data: the body never
// arrived whole. When the deadline or a cancellation caused it, the context's
// error is made findable with errors.Is whatever the transport reported.
func readError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("read body: %v: %w", err, cerr)
	}
	return fmt.Errorf("read body: %w", err)
}

// noteUsedWeight records X-MBX-USED-WEIGHT-1M when it is a non-negative
// integer; anything else leaves the last value in place.
func (c *Client) noteUsedWeight(h http.Header) {
	v := strings.TrimSpace(h.Get("X-MBX-USED-WEIGHT-1M"))
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		c.used.Store(n)
	}
}

// retryAfter reads Retry-After as whole seconds. Binance sends seconds; an
// absent, negative or otherwise unreadable value is 0, which leaves the
// pause to the poller's own rule for the status.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	if n > int64(maxRetryAfter/time.Second) {
		return maxRetryAfter
	}
	return time.Duration(n) * time.Second
}
