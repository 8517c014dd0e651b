package snapshot

import (
	"fmt"
	"slices"
	"time"
)

// Doc names one kind of whole-market document: a value the whole venue
// makes at once, published whole and served as it is (/pairs, /tickers,
// /contracts with /contract_specs). A kind is a value: the table below is
// the one description of it that the packages which store and replicate
// documents read, so that none of them asks "pairs, tickers or contracts?"
// of its own; Stream is the same for the per-pair snapshots.
type Doc int

// The whole-market documents.
const (
	DocPairs     Doc = iota // the pair list, the catalog (see Doc.Catalog)
	DocTickers              // the spot pairs' tickers
	DocContracts            // the contracts and their specs
	// NumDocs is the number of documents, for tables indexed by Doc.
	NumDocs
)

// DocValue is a published whole-market document of some kind: *Pairs,
// *Tickers or *Contracts. Like every published value it is never mutated.
type DocValue interface {
	Published
	// Doc is the kind of the value.
	Doc() Doc
}

// Doc returns DocPairs: a pair list is the catalog's value.
func (p *Pairs) Doc() Doc { return DocPairs }

// Doc returns DocTickers.
func (t *Tickers) Doc() Doc { return DocTickers }

// Doc returns DocContracts.
func (c *Contracts) Doc() Doc { return DocContracts }

// docRow is everything that differs between the kinds of document: its
// name, how its wire form is read and how it is put into a Store. Built by
// docKind from typed functions, so that a row cannot mix one kind's value
// with another's.
type docRow struct {
	// key is the document's name and the key a replica's bucket keeps it
	// under (see Doc.Key).
	key string
	// catalog marks the one document the per-pair values hang off (see
	// Doc.Catalog).
	catalog bool
	decode  func(wire []byte) (DocValue, error)
	// put publishes the value at now, in the store's place of its kind.
	put func(s *Store, v DocValue, now time.Time)
}

var docRows = [NumDocs]docRow{
	DocPairs:     docKind("pairs", true, DecodePairs, (*Store).putPairs),
	DocTickers:   docKind("tickers", false, DecodeTickers, putAlone[*Tickers]),
	DocContracts: docKind("contracts", false, DecodeContracts, putAlone[*Contracts]),
}

// docKind builds a document's row from its value type's functions.
func docKind[V DocValue](key string, catalog bool, decode func([]byte) (V, error), put func(*Store, V, time.Time)) docRow {
	return docRow{
		key:     key,
		catalog: catalog,
		decode: func(wire []byte) (DocValue, error) {
			v, err := decode(wire)
			if err != nil {
				return nil, err
			}
			return v, nil
		},
		// A value of another kind is a programming error, not data: the
		// assertion panics.
		put: func(s *Store, v DocValue, now time.Time) { put(s, v.(V), now) },
	}
}

// putAlone is the put of a document that stands alone: it takes the place
// of the one before, whenever it was built.
func putAlone[V DocValue](s *Store, v V, _ time.Time) { s.keepDoc(v) }

// row returns the document's row; a Doc that names no document panics: it
// can only come from a programming error.
func (d Doc) row() *docRow {
	if d < 0 || d >= NumDocs {
		panic(fmt.Sprintf("snapshot: document kind %d is not one of the %d kinds", int(d), NumDocs))
	}
	return &docRows[d]
}

func (d Doc) String() string {
	if d < 0 || d >= NumDocs {
		return "doc(?)"
	}
	return docRows[d].key
}

// Key is the key a replica keeps the document under ("pairs", "tickers",
// "contracts").
func (d Doc) Key() string { return d.row().key }

// Catalog reports whether d is the pair list: the document whose pairs
// the per-pair values belong to (see PutDoc), which a replica applies
// before them and puts none of them across, and whose new values end what
// a leader knew of the pairs it no longer holds. One document is.
func (d Doc) Catalog() bool { return d.row().catalog }

// Decode decodes the wire form of a document of kind d (see wire.go).
func (d Doc) Decode(wire []byte) (DocValue, error) { return d.row().decode(wire) }

// PutDoc publishes v at now, in place of the store's document of its kind.
// The catalog's put, the pair list's, keeps the cells of the pairs it
// still holds and of those it drops for a while after now (see putPairs);
// the others stand alone.
func (s *Store) PutDoc(v DocValue, now time.Time) { v.Doc().row().put(s, v, now) }

// keepDoc puts v in its kind's place and hands it on.
func (s *Store) keepDoc(v DocValue) {
	s.docs[v.Doc()].Store(v)
	s.notify(v)
}

// loadDoc returns the store's document of kind d, nil before the first:
// the typed accessors' one load, which allocates nothing.
func loadDoc[V DocValue](s *Store, d Doc) V {
	v, _ := s.docs[d].Load().(V)
	return v
}

// Pairs returns the current pair list, or nil before the first catalog read.
func (s *Store) Pairs() *Pairs { return loadDoc[*Pairs](s, DocPairs) }

// Tickers returns the current tickers, or nil before the first read.
func (s *Store) Tickers() *Tickers { return loadDoc[*Tickers](s, DocTickers) }

// Contracts returns the current contracts, or nil before the first
// publication.
func (s *Store) Contracts() *Contracts { return loadDoc[*Contracts](s, DocContracts) }

// document is a pre-serialized JSON array served as it is, whole: the
// /tickers, /contracts and /contract_specs responses. Its gzip form and
// its entity tag are made by the first request that needs them (see
// lazyForms): /contracts is built again every second and an aggregator
// reads it every minute or so, so compressing and hashing each build spent
// more than building it (1.7 ms and 0.4 ms of 2.9 for 846 contracts,
// BenchmarkNewContracts) on values nobody took.
type document struct {
	body    []byte
	later   *lazyForms
	count   int
	readAt  int64
	version uint64
}

// newDocument returns the document of body, which it keeps: the caller
// built it and does not touch it again.
func newDocument(body []byte, count int, readAt int64) document {
	return document{body: body, later: new(lazyForms), count: count, readAt: readAt, version: nextVersion()}
}

// Body is the response.
func (d *document) Body() []byte { return d.body }

// Gzip is Body compressed with gzip, compressed by the first call.
func (d *document) Gzip() []byte { return d.later.gz.of(d.body) }

// Tag is the entity tag of the value, unquoted, hashed by the first call.
func (d *document) Tag() []byte { return d.later.tag.of(d.body) }

// Len is how many items the value holds.
func (d *document) Len() int { return d.count }

// ReadAt is when the venue was read, in Unix nanoseconds.
func (d *document) ReadAt() int64 { return d.readAt }

// Version identifies the value among every value the process has built.
func (d *document) Version() uint64 { return d.version }

// wireDocument returns the document a wire form holds: a copy of body,
// with the sender's gzip form gz when it sent one (nil: compressed here
// when a request takes it).
func wireDocument(body, gz []byte, count int, readAt int64) document {
	d := newDocument(slices.Clone(body), count, readAt)
	d.later.gz.keep(gz)
	return d
}
