package server

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"github.com/valyala/fasthttp"

	"marketfeed/internal/ascii"
)

// clientIP decides which address a request is counted against.
//
// The TCP peer is the client unless the peer is a trusted proxy; only then is
// the configured header believed. A client can write anything into a header,
// so a header is worth exactly as much as the peer that passed it on.
type clientIP struct {
	trusted []netip.Prefix
	header  []byte // canonical header name
	xff     bool   // header is X-Forwarded-For: a list, read from the right
}

// peerAddr returns the TCP peer of a request (see tcpPeer): the one its
// connection took once, when the request came through the server's
// listener, rather than converting the same address on every request.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	if c, ok := ctx.Conn().(*cappedConn); ok {
		return c.peer
	}
	return tcpPeer(ctx.RemoteAddr())
}

// tcpPeer returns a TCP peer's address, IPv4-mapped IPv6 unmapped. A peer
// that is not TCP (a unix socket, an in-memory pipe) is the zero Addr, so
// every such request shares one key.
func tcpPeer(addr net.Addr) netip.Addr {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(tcp.IP)
	return a.Unmap()
}

// addr returns the client's address.
func (c *clientIP) addr(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := peerAddr(ctx)
	if !c.isTrusted(peer) {
		return peer
	}
	if !c.xff {
		if a, ok := parseIP(ctx.Request.Header.PeekCanonical(c.header)); ok {
			return a
		}
		return peer
	}
	// Several X-Forwarded-For lines are one list in order, so the rightmost
	// hop is the last element of the last line. Each trusted proxy appended
	// the address it saw; the first one from the right that is not a trusted
	// proxy is the client. Anything to its left was written by the client
	// and proves nothing.
	lines := ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor)
	var last netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for len(line) > 0 {
			var hop []byte
			if j := bytes.LastIndexByte(line, ','); j >= 0 {
				hop, line = line[j+1:], line[:j]
			} else {
				hop, line = line, nil
			}
			hop = bytes.TrimSpace(hop)
			if len(hop) == 0 {
				continue
			}
			a, ok := parseIP(hop)
			if !ok {
				return peer
			}
			if !c.isTrusted(a) {
				return a
			}
			last = a
		}
	}
	if last.IsValid() {
		return last // every hop is a trusted proxy: the leftmost is the client
	}
	return peer
}

func (c *clientIP) isTrusted(a netip.Addr) bool {
	return containsAddr(c.trusted, a)
}

func containsAddr(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// normalizePrefixes drops invalid prefixes, masks the rest and writes
// IPv4-mapped IPv6 prefixes as IPv4, so that they match the unmapped
// addresses they are compared with.
func normalizePrefixes(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		if !p.IsValid() {
			continue
		}
		if a := p.Addr(); a.Is4In6() {
			bits := p.Bits() - 96
			if bits < 0 {
				bits = 0
			}
			p = netip.PrefixFrom(a.Unmap(), bits)
		}
		out = append(out, p.Masked())
	}
	return out
}

// parseIP reads one address from a header: a bare IPv4 or IPv6 address, an
// IPv4 address with a port, or a bracketed IPv6 address with or without a
// port. Zones and anything that is not an address are refused. A multicast
// or unspecified address is never the source of a connection and is refused
// too (ff00::/8 also holds the IPv4 keys, see key).
//
// The bytes are parsed through a string view without copying; ParseAddr
// keeps no reference to it once it returns, and its error, which would, is
// dropped at once.
func parseIP(b []byte) (netip.Addr, bool) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := b[end+1:]; len(rest) > 0 && (rest[0] != ':' || !ascii.AllDigits(rest[1:])) {
			return netip.Addr{}, false
		}
		b = b[1:end]
	} else if i := bytes.IndexByte(b, ':'); i >= 0 && bytes.IndexByte(b[i+1:], ':') < 0 {
		if !ascii.AllDigits(b[i+1:]) {
			return netip.Addr{}, false
		}
		b = b[:i] // a single colon: IPv4 with a port
	}
	if len(b) == 0 || len(b) > 45 { // 45: the longest textual IPv6 address
		return netip.Addr{}, false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':') {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(unsafe.String(&b[0], len(b)))
	if err != nil {
		return netip.Addr{}, false
	}
	a = a.Unmap()
	if a.IsMulticast() || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}

// key is the rate-limit key of an address. IPv6 is keyed by its /64, the
// smallest block one subscriber usually holds, so that one host cannot take
// a fresh allowance per address. IPv4 is keyed by the address and placed in
// ff00::/8 (multicast, never the source of a connection) so that it cannot
// collide with an IPv6 /64.
func key(a netip.Addr) uint64 {
	if a.Is4() {
		v4 := a.As4()
		return 0xffffffff_00000000 | uint64(binary.BigEndian.Uint32(v4[:]))
	}
	v6 := a.As16()
	return binary.BigEndian.Uint64(v6[:8])
}
