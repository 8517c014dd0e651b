package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"marketfeed/snapshot"
)

// A value in the snapshot bucket is a header, then a snapshot's wire form
// (snapshot.Book.AppendWire and the like). KV entries carry no headers of
// their own, so the header rides in the value:
//
//	magic (1 byte) | version (1 byte) | checksum (4 bytes) |
//	term (uvarint) | venue time (varint, Unix ms) | published at (varint, Unix ns) | wire form
//
// The term fences a paused ex-leader off: a member drops a value of a term
// older than the newest it has applied. The version names the header's and
// the wire forms' layout: a member of another version drops a value it
// would misread, and counts it, rather than serving it (4: books carry
// their update id, trade lists their venue ids, every served value its
// gzip form, and a pair's depth has a key of its own; 5: a book says which
// of its sides are open, so that a member reads it deeper for the depths
// the leader would, instead of serving it short). The venue time is
// the venue's clock of the value (a book's, a depth's) or, for a value
// without one, when it was read; with the publication time, a member tells
// how old what it applies is at the venue and on the way. The checksum,
// the CRC-32C of everything after it (little-endian), refuses a value
// damaged on the way; a value whose bytes do not sum to it is dropped and
// counted. The processor computes it at memory speed: the SHA-256 the
// version before used took 7 % of a leader's CPU at 446 pairs, on every
// put, to guard against the same damage.
const (
	valueMagic   = 0xb0
	valueVersion = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumLen is the length of a value's checksum.
const sumLen = 4

// maxValue is the largest value a member accepts: a full book or trade list
// is under 20 KB, a depth under 30 KB, and NATS refuses messages above its
// max_payload (1 MB by default) anyway.
const maxValue = 1 << 20

// errBadValue reports a value that is not one a leader writes.
var errBadValue = errors.New("not a snapshot value")

// header is what a value says besides its snapshot.
type header struct {
	term        uint64
	venueTime   int64 // Unix ms
	publishedAt int64 // Unix ns, the leader's clock
	// closed is set for a value of a version whose book wire forms end
	// without the open sides' bits (see versionClosed).
	closed bool
}

// venueTimed is a value that knows the venue's clock of its contents.
type venueTimed interface{ Time() int64 }

// readTimed is a value that knows when it was read, Unix ns.
type readTimed interface{ ReadAt() int64 }

// venueTimeOf is the venue time a value's header carries (see header).
func venueTimeOf(v snapshot.Published) int64 {
	switch v := v.(type) {
	case venueTimed:
		return v.Time()
	case readTimed:
		return v.ReadAt() / int64(time.Millisecond)
	}
	return 0
}

// appendValue appends the value of v published under h, writing v's wire
// form in place after the header, whose checksum is filled in last.
func appendValue(dst []byte, h header, v snapshot.Published) []byte {
	dst = append(dst, valueMagic, valueVersion)
	at := len(dst)
	dst = append(dst, make([]byte, sumLen)...)
	dst = binary.AppendUvarint(dst, h.term)
	dst = binary.AppendVarint(dst, h.venueTime)
	dst = binary.AppendVarint(dst, h.publishedAt)
	dst = v.AppendWire(dst)
	binary.LittleEndian.PutUint32(dst[at:], crc32.Checksum(dst[at+sumLen:], castagnoli))
	return dst
}

// termOf reads the term of a value of this version without checking its
// checksum; ok is false for anything else.
func termOf(v []byte) (term uint64, ok bool) {
	if len(v) < 2+sumLen || v[0] != valueMagic || v[1] != valueVersion {
		return 0, false
	}
	term, n := binary.Uvarint(v[2+sumLen:])
	return term, n > 0
}

// parseValue splits a value into its header and its snapshot's wire form.
func parseValue(v []byte) (header, []byte, error) {
	var h header
	if len(v) > maxValue {
		return h, nil, fmt.Errorf("%w: %d bytes", errBadValue, len(v))
	}
	if len(v) > 0 && v[0] == magicV2 {
		return parseValueV2(v[1:])
	}
	if len(v) < 2 || v[0] != valueMagic {
		return h, nil, fmt.Errorf("%w: no magic byte", errBadValue)
	}
	version := v[1]
	var err error
	switch v[1] {
	case valueVersion, versionClosed:
		v, err = checked(v[2:])
	case versionSHA:
		v, err = checkedSHA(v[2:])
	default:
		return h, nil, fmt.Errorf("%w: version %d, not %d", errBadValue, v[1], valueVersion)
	}
	if err != nil {
		return h, nil, err
	}
	term, n := binary.Uvarint(v)
	if n <= 0 || term == 0 {
		return h, nil, fmt.Errorf("%w: no term", errBadValue)
	}
	v = v[n:]
	venueTime, n := binary.Varint(v)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: no venue time", errBadValue)
	}
	v = v[n:]
	at, n := binary.Varint(v)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: no publication time", errBadValue)
	}
	return header{term: term, venueTime: venueTime, publishedAt: at, closed: version != valueVersion}, v[n:], nil
}

// checked returns what follows a value's checksum, if it sums to it.
func checked(v []byte) ([]byte, error) {
	if len(v) < sumLen {
		return nil, fmt.Errorf("%w: no checksum", errBadValue)
	}
	if binary.LittleEndian.Uint32(v) != crc32.Checksum(v[sumLen:], castagnoli) {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadValue)
	}
	return v[sumLen:], nil
}

// The keys of the snapshot bucket: one per pair and stream (the stream's
// snapshot.Stream.KeyPrefix, then the ticker_id), one per pair for its
// depth (see snapshot.Depth), and one per whole-market document, its
// snapshot.Doc.Key. A ticker_id is letters, digits and one underscore, all
// valid in a key.
const keyDepthPrefix = "depth."

// pairOfKey returns the ticker_id a per-pair key names.
func pairOfKey(key string) (id string, ok bool) {
	if _, id, ok := streamOfKey(key); ok {
		return id, true
	}
	return strings.CutPrefix(key, keyDepthPrefix)
}

// streamOfKey returns the stream and the ticker_id a key of a pair's
// stream names.
func streamOfKey(key string) (s snapshot.Stream, id string, ok bool) {
	for s := range snapshot.NumStreams {
		if id, ok := strings.CutPrefix(key, s.KeyPrefix()); ok {
			return s, id, true
		}
	}
	return 0, "", false
}

// keyOfStream is the key a pair's stream is published under.
func keyOfStream(s snapshot.Stream, tickerID string) string { return s.KeyPrefix() + tickerID }

// docOfKey returns the whole-market document a key names.
func docOfKey(key string) (snapshot.Doc, bool) {
	for d := range snapshot.NumDocs {
		if key == d.Key() {
			return d, true
		}
	}
	return 0, false
}

// catalogKey reports whether key is the catalog's, the pair list the
// per-pair values hang off (see snapshot.Doc.Catalog).
func catalogKey(key string) bool {
	d, ok := docOfKey(key)
	return ok && d.Catalog()
}

// keyOf returns the key a published snapshot goes under.
func keyOf(v snapshot.Published) string {
	switch v := v.(type) {
	case snapshot.PairValue:
		return keyOfStream(v.Stream(), v.TickerID())
	case *snapshot.Depth:
		return keyDepthPrefix + v.TickerID()
	case snapshot.DocValue:
		return v.Doc().Key()
	}
	return ""
}

// applyWire decodes wire as the snapshot key names and publishes it into
// store. A book or trades value must be the pair its key names. closed
// says the value's version wrote books without their open sides' bits
// (see versionClosed): such a book is read with both sides closed.
func applyWire(store *snapshot.Store, key string, wire []byte, closed bool, now int64) error {
	if d, ok := docOfKey(key); ok {
		v, err := d.Decode(wire)
		if err != nil {
			return err
		}
		store.PutDoc(v, time.Unix(0, now))
		return nil
	}
	if id, ok := strings.CutPrefix(key, keyDepthPrefix); ok {
		return applyDepth(store, id, wire)
	}
	if st, id, ok := streamOfKey(key); ok {
		if closed && st == snapshot.StreamBook {
			wire = append(wire[:len(wire):len(wire)], 0)
		}
		return applyPair(store, st, id, wire)
	}
	return fmt.Errorf("%w: key %q", errForeign, key)
}

// applyPair decodes one pair's snapshot of st and publishes it, if it is
// the pair id its key names, the pair is listed, and it was read no earlier
// than what the store holds: a member that read the venue alone while NATS
// was away holds newer values than the bucket it finds again.
func applyPair(store *snapshot.Store, st snapshot.Stream, id string, wire []byte) error {
	v, err := st.Decode(wire)
	if err != nil {
		return err
	}
	if v.TickerID() != id {
		return fmt.Errorf("%w: a value of %s under %s's key", errForeign, v.TickerID(), id)
	}
	if held, _ := store.ReadAt(st, []byte(id)); v.ReadAt() < held {
		return fmt.Errorf("%w: %s read at %d, the store's at %d", errOlder, id, v.ReadAt(), held)
	}
	if !store.Put(v) {
		return errUnlisted
	}
	return nil
}

// applyDepth decodes a pair's depth and keeps it in store, if it is the
// pair id its key names, the pair is listed, and the store holds none at a
// later update id.
func applyDepth(store *snapshot.Store, id string, wire []byte) error {
	d, err := snapshot.DecodeDepth(wire)
	if err != nil {
		return err
	}
	if d.TickerID() != id {
		return fmt.Errorf("%w: a depth of %s under %s's key", errForeign, d.TickerID(), id)
	}
	if !store.PutDepth(d) {
		if held := store.Depth([]byte(id)); held != nil {
			return fmt.Errorf("%w: %s's depth at update id %d, the store's at %d", errOlder, id, d.Seq(), held.Seq())
		}
		return errUnlisted
	}
	return nil
}

var (
	errForeign  = errors.New("foreign key or value")
	errUnlisted = errors.New("pair not listed")
	errOlder    = errors.New("older than the value held")
)
