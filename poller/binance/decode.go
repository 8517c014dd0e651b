package binance

import (
	stdjson "encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-json"

	"marketfeed/internal/ascii"
	"marketfeed/poller/venue"
)

// This file holds what every decoder of venue bodies and frames shares: the
// field type and its checks. The decoders (decoderest.go, streamdecode.go)
// are pure (bytes in, values out) so that tests and fuzzing reach them
// without HTTP or a connection.
//
// Rules shared by every decoder:
//   - A body that is not JSON, or JSON of the wrong shape (an object where an
//     array belongs, an array of numbers), is bad data.
//   - Unknown fields are ignored; the venue adds fields over time.
//   - A decimal must be a JSON string in plain notation (venue.IsPlainDecimal). A number,
//     an exponent, spaces, quotes, "" or "NaN" is not a decimal.
//   - A field sent as null counts as absent.
//   - Errors name the item and the field, never the value: no venue byte
//     reaches an error string.

// field is one JSON value exactly as the venue sent it. Decoding into fields
// rather than Go strings and numbers keeps what the checks need: an absent
// (or null) field apart from an empty string, a string apart from a number,
// and a decimal's own bytes. It also means a value of the wrong JSON type
// spoils only the item it belongs to, never the decoding of the whole body,
// which is what lets the bulk calls skip a bad item.
type field struct {
	raw string // the JSON value; "" when absent or null
}

// UnmarshalJSON keeps a copy of the value's bytes; it never fails.
func (f *field) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		s = ""
	}
	f.raw = s
	return nil
}

func (f field) present() bool { return f.raw != "" }

// text returns the field when it is a JSON string.
func (f field) text() (string, bool) {
	r := f.raw
	if len(r) < 2 || r[0] != '"' || r[len(r)-1] != '"' {
		return "", false
	}
	if !strings.Contains(r, `\`) {
		return r[1 : len(r)-1], true
	}
	var s string
	if stdjson.Unmarshal([]byte(r), &s) != nil {
		return "", false
	}
	return s, true
}

// decimal returns the field's string when it is a JSON string holding a
// plain decimal. The check runs on the raw bytes: no escape sequence is part
// of a plain decimal, so "\u0031" is refused rather than decoded.
func (f field) decimal() (string, bool) {
	r := f.raw
	if len(r) < 2 || r[0] != '"' || r[len(r)-1] != '"' {
		return "", false
	}
	s := r[1 : len(r)-1]
	return s, venue.IsPlainDecimal(s)
}

// nonNegative returns the field when it is a plain decimal without a sign.
func (f field) nonNegative() (string, bool) {
	s, ok := f.decimal()
	return s, ok && s[0] != '-'
}

// positive returns the field when it is a plain decimal greater than zero.
func (f field) positive() (string, bool) {
	s, ok := f.nonNegative()
	return s, ok && !venue.IsZeroDecimal(s)
}

// natural returns the field when it is a JSON integer without a sign,
// fraction or exponent that fits an int64.
func (f field) natural() (int64, bool) {
	if !ascii.AllDigits(f.raw) {
		return 0, false
	}
	n, err := strconv.ParseInt(f.raw, 10, 64)
	return n, err == nil
}

// boolean returns the field when it is JSON true or false.
func (f field) boolean() (v, ok bool) {
	switch f.raw {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// badData is an error that wraps venue.ErrBadData.
func badData(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), venue.ErrBadData)
}

// unmarshal decodes a venue body whose top-level value must open with kind
// ('{' or '[') into v.
//
// The body is first checked with the standard library's validator so that
// goccy/go-json, which decodes faster, only ever sees well-formed JSON: it
// has had panics and out-of-bounds reads on malformed input, and a venue, or
// whatever answers in its place, may send anything. The recover is the last
// line of the same defence; a decoder panic becomes bad data, not a crash.
func unmarshal(body []byte, kind byte, v any) (err error) {
	if !stdjson.Valid(body) {
		return badData("body is not JSON")
	}
	if first(body) != kind {
		return badData("body is not a JSON %s", kindName(kind))
	}
	defer func() {
		if recover() != nil {
			err = badData("body could not be decoded")
		}
	}()
	if json.Unmarshal(body, v) != nil {
		return badData("body is not of the expected shape")
	}
	return nil
}

// first returns the first byte of valid JSON after leading whitespace.
func first(body []byte) byte {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

func kindName(kind byte) string {
	if kind == '[' {
		return "array"
	}
	return "object"
}
