package snapshot

import (
	"strconv"
	"sync/atomic"
)

// appendString appends s as a JSON string. Everything the service writes is
// already restricted to ticker-id characters, plain decimals and fixed words,
// but escaping keeps the output valid JSON whatever a future caller passes.
func appendString(dst []byte, s string) []byte {
	return append(appendEscaped(append(dst, '"'), s), '"')
}

// appendQuoted appends the strings of parts, one after another, as one
// JSON string: "BTC", "-", "USDT" as "BTC-USDT", without joining them
// first.
func appendQuoted(dst []byte, parts ...string) []byte {
	dst = append(dst, '"')
	for _, s := range parts {
		dst = appendEscaped(dst, s)
	}
	return append(dst, '"')
}

// appendEscaped appends s escaped as the inside of a JSON string.
func appendEscaped(dst []byte, s string) []byte {
	// Nearly every string needs no escape: check first, then copy it whole,
	// which the poller's profile showed is twice as fast as byte by byte.
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return append(dst, s...)
	}
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendField appends `"name":` preceded by a comma unless it opens the object.
func appendKey(dst []byte, name string, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

func appendStringField(dst []byte, name, value string, first bool) []byte {
	return appendString(appendKey(dst, name, first), value)
}

func appendIntField(dst []byte, name string, value int64, first bool) []byte {
	return strconv.AppendInt(appendKey(dst, name, first), value, 10)
}

// versions numbers every value the process builds, so that two values never
// share a version and an ETag derived from it changes with every refresh.
var versions atomic.Uint64

func nextVersion() uint64 { return versions.Add(1) }
