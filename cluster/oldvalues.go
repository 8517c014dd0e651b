package cluster

// This file reads the value versions before this one, apart from the
// current one so that each can be dropped on its own. A member reads a
// version older than its own only for a rolling upgrade (followers first,
// leader last, see docs/deploy.md): while the last leader that writes it
// still runs beside upgraded followers. So each may be dropped by the
// release after the first that writes the version following it: once a
// cluster has run that release, no leader writes the old one. Dropping one
// is deleting its constant, its case in parseValue and its reader here, and
// its test; docs/deploy.md says how many versions before a member reads.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// versionClosed is the version before, whose book wire forms end without
// the open sides' bits (see snapshot.Open) and is otherwise this version's.
// A member reads it, its books' sides closed as that leader served them.
// May be dropped by the release after the first that writes version 5
// (commit cf470e0, "a book short of the depth asked is read for it").
const versionClosed = 4

// versionSHA is two versions before, whose header carries the first 128
// bits of the SHA-256 of what follows (shaLen bytes) where this version
// has its checksum, and is otherwise versionClosed's. May be dropped by
// the release after the first that writes version 4 (commit 594c8ae, "a
// value's checksum is CRC-32C").
const (
	versionSHA = 3
	shaLen     = 16
)

// A leader of three versions before wrote magicV2 | term (uvarint) | published
// at (varint) | CRC32-C of the wire form (4 bytes, little-endian) | wire
// form, whose wire forms are versionClosed's but for the gzip form they end
// with (an empty one is added: the member compresses what it serves). May
// be dropped by the release after the first that writes version 3 (commit
// 3c3a5e3, "values carry a version, the venue time and a content hash").
const magicV2 = 0xb2

// checkedSHA returns what follows the content hash of a value of the
// version before (see versionSHA), if it hashes to it.
func checkedSHA(v []byte) ([]byte, error) {
	if len(v) < shaLen {
		return nil, fmt.Errorf("%w: no content hash", errBadValue)
	}
	if sum := sha256.Sum256(v[shaLen:]); !bytes.Equal(sum[:shaLen], v[:shaLen]) {
		return nil, fmt.Errorf("%w: content hash mismatch", errBadValue)
	}
	return v[shaLen:], nil
}

// parseValueV2 parses what follows the magic byte of a value of the
// version before (see magicV2); its venue time is its publication time's.
func parseValueV2(v []byte) (header, []byte, error) {
	term, n := binary.Uvarint(v)
	if n <= 0 || term == 0 {
		return header{}, nil, fmt.Errorf("%w: no term", errBadValue)
	}
	v = v[n:]
	at, n := binary.Varint(v)
	if n <= 0 {
		return header{}, nil, fmt.Errorf("%w: no publication time", errBadValue)
	}
	v = v[n:]
	if len(v) < 4 {
		return header{}, nil, fmt.Errorf("%w: no checksum", errBadValue)
	}
	sum, wire := binary.LittleEndian.Uint32(v), v[4:]
	if crc32.Checksum(wire, castagnoli) != sum {
		return header{}, nil, fmt.Errorf("%w: checksum mismatch", errBadValue)
	}
	// The form ends before the gzip form this version's forms end with:
	// an empty one says there is none.
	return header{term: term, venueTime: at / int64(time.Millisecond), publishedAt: at, closed: true}, append(wire[:len(wire):len(wire)], 0), nil
}
