package snapshot

import "slices"

// document is a pre-serialized JSON array served as it is, whole: the
// /tickers, /contracts and /contract_specs responses.
type document struct {
	body    []byte
	gzipped []byte
	tag     []byte
	count   int
	readAt  int64
	version uint64
}

func newDocument(body []byte, count int, readAt int64) document {
	return wireDocument(body, nil, count, readAt)
}

// Body is the response.
func (d *document) Body() []byte { return d.body }

// Gzip is Body compressed with gzip.
func (d *document) Gzip() []byte { return d.gzipped }

// Tag is the entity tag of the value, unquoted.
func (d *document) Tag() []byte { return d.tag }

// Len is how many items the value holds.
func (d *document) Len() int { return d.count }

// ReadAt is when the venue was read, in Unix nanoseconds.
func (d *document) ReadAt() int64 { return d.readAt }

// Version identifies the value among every value the process has built.
func (d *document) Version() uint64 { return d.version }

func wireDocument(body, gz []byte, count int, readAt int64) document {
	body = slices.Clone(body)
	if gz == nil {
		gz = compress(body)
	}
	return document{body: body, gzipped: gz, tag: appendTag(nil, body), count: count, readAt: readAt, version: nextVersion()}
}
