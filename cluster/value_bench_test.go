package cluster

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"marketfeed/snapshot"
)

// BenchmarkValueSum puts a full book's value together (header, wire form,
// sum) and reads it back, with this version's checksum and with the SHA-256
// content hash of the version before over the same bytes: a leader does
// the first for every value it publishes, every follower the second
// (put-sha256 adds the SHA-256 to this version's put: what the version
// before spent on top of the wire form).
// go test -run '^$' -bench BenchmarkValueSum ./cluster/
func BenchmarkValueSum(b *testing.B) {
	bids, asks := make([]snapshot.Level, 100), make([]snapshot.Level, 100)
	for i := range bids {
		bids[i] = snapshot.Level{Price: fmt.Sprintf("%d.%02d", 64000-i, i), Size: "1.234"}
		asks[i] = snapshot.Level{Price: fmt.Sprintf("%d.%02d", 64001+i, i), Size: "0.567"}
	}
	book, err := snapshot.NewBook("BTC_USDT", 1767225600456, bids, asks, time.Unix(5, 0))
	if err != nil {
		b.Fatal(err)
	}
	h := header{term: 7, venueTime: 1767225600456, publishedAt: 99}
	buf := appendValue(nil, h, book)
	b.Run("put", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = appendValue(buf[:0], h, book)
		}
	})
	b.Run("put-sha256", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = appendValue(buf[:0], h, book)
			sum := sha256.Sum256(buf[2+sumLen:])
			buf[2] = sum[0]
		}
	})
	v := appendValue(nil, h, book)
	b.Run("apply", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			if _, _, err := parseValue(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	rest := v[2+sumLen:]
	sum := sha256.Sum256(rest)
	v3 := append(append([]byte{valueMagic, versionSHA}, sum[:shaLen]...), rest...)
	b.Run("apply-sha256", func(b *testing.B) {
		b.SetBytes(int64(len(v3)))
		for b.Loop() {
			if _, _, err := parseValue(v3); err != nil {
				b.Fatal(err)
			}
		}
	})
}
