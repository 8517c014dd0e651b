package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
)

// gzipWriters are reused: a gzip writer holds about a megabyte of state, and
// allocating one per snapshot would cost more than compressing.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// compress returns body gzipped. BestSpeed with klauspost's encoder costs
// about 14 µs for a 100-level book and 26 µs for 100 trades
// (BenchmarkCompress); the gzip level buys little more on bodies this small
// and repetitive, and HuffmanOnly saves a third of the time for twice the
// bytes.
func compress(body []byte) []byte {
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	var buf bytes.Buffer
	buf.Grow(len(body)/3 + 64)
	w.Reset(&buf)
	// Writing to a bytes.Buffer cannot fail.
	_, _ = w.Write(body)
	_ = w.Close()
	return bytes.Clone(buf.Bytes())
}

// lazyGzip is the gzip form of a book's or a trade list's default body, or
// of a whole-market document's (the tickers, the contracts and their
// specs), compressed by the first request that takes it and kept for every
// later one. The pair list alone is compressed when built, once per
// catalog read; /contracts is built again every second and read far less
// (see document). Books and trades are not either: every listed pair's book is rebuilt
// about three times a second and its trades every second, and an aggregator
// reading each pair every few seconds reads one value in ten or more, so
// compressing each as it is built spent more CPU than the rest of the
// ingest on bodies nobody took: at 846 pairs, each read every 10 s with
// gzip, 14 % of a core, against 1.3 % compressing only what is read. A value
// is compressed at most once whoever asks, so a pair read thousands of times
// a second costs what it did, one compression per value, and the requests
// after the first one per value still only write bytes. Concurrent first
// requests may each compress; one result is kept. A cluster's members do
// the same: the wire form a leader puts for them carries a value's gzip
// form only when a request here has already compressed it (see peek), and
// each member compresses what its own requests read. Compressing every put
// instead was a quarter of a leader's CPU at 446 pairs, and what made a
// leader cost half as much again as a process alone.
type lazyGzip struct{ form atomic.Pointer[[]byte] }

// peek returns the gzip form if a request has compressed the body, and nil
// if none has: it never compresses.
func (g *lazyGzip) peek() []byte {
	if gz := g.form.Load(); gz != nil {
		return *gz
	}
	return nil
}

// of returns body gzipped, compressing it on the first call.
func (g *lazyGzip) of(body []byte) []byte {
	if gz := g.form.Load(); gz != nil {
		return *gz
	}
	gz := compress(body)
	g.form.CompareAndSwap(nil, &gz)
	return *g.form.Load()
}

// keep makes gz, if any, the value's gzip form: a sender's, which a
// decoded value serves as it is (see appendWireGzip).
func (g *lazyGzip) keep(gz []byte) {
	if gz != nil {
		g.form.Store(&gz)
	}
}

// tagBytes is how much of a body's SHA-256 its entity tag keeps: 96 bits,
// 16 characters of base64url. A pair's values change a few times a second,
// about 10^11 times a year over a thousand pairs, and two of one pair's
// bodies sharing a tag would have a cache keep the older: at 96 bits that
// is about one chance in 10^17 a year.
const tagBytes = 12

// tagLen is the length of an entity tag, unquoted.
var tagLen = base64.RawURLEncoding.EncodedLen(tagBytes)

// appendTag appends the entity tag of body, unquoted: the start of its
// SHA-256 in base64url. A tag is the bytes' alone, not a process's count of
// its values: a restarted process, or another replica behind the same load
// balancer, gives the same bytes the same tag, so a cache revalidating
// anywhere gets a 304, and a value republished unchanged keeps its tag.
// SHA-256 rather than a checksum because it costs no more here (1.4 GB/s
// with the processor's SHA instructions, like CRC-64's tables) and no body
// can be made to collide with another.
func appendTag(dst, body []byte) []byte {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.AppendEncode(dst, sum[:tagBytes])
}

// lazyTag is the entity tag of a book's or a trade list's default body, or
// of a whole-market document's but the pair list's,
// hashed by the first request that needs it and kept for every later one:
// for the reason lazyGzip gives, hashing each value as it is built would
// cost the ingest a SHA-256 of about 21 MB/s at 846 pairs, 1.5 % of a core
// (2.7 µs a book, 10 µs a trade list: BenchmarkCompress), for values of which
// an aggregator reads one in ten or more. Concurrent
// first requests may each hash; the results are equal and one is kept.
type lazyTag struct{ tag atomic.Pointer[[]byte] }

// of returns the tag of body, hashing it on the first call.
func (l *lazyTag) of(body []byte) []byte {
	if tag := l.tag.Load(); tag != nil {
		return *tag
	}
	tag := appendTag(make([]byte, 0, tagLen), body)
	l.tag.CompareAndSwap(nil, &tag)
	return *l.tag.Load()
}

// lazyForms are what requests derive from a default body once per value:
// its gzip form and its entity tag.
type lazyForms struct {
	gz  lazyGzip
	tag lazyTag
}
