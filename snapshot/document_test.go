package snapshot

import (
	"bytes"
	"testing"
)

// docValues returns a value of every document, built as the poller builds
// them.
func docValues(t *testing.T) [NumDocs]DocValue {
	t.Helper()
	tk, _ := NewTickers(tickerPairs(), tickerStats(), tickerQuotes(), readAt)
	c, _ := NewContracts(contractPairs(), contractInput())
	return [NumDocs]DocValue{DocPairs: contractPairs(), DocTickers: tk, DocContracts: c}
}

// served is what a document's value answers with: its body and tag.
type served interface {
	Body() []byte
	Tag() []byte
}

// Each document's row takes its own values through the wire and the
// store: decoded, put, and then what the store's accessor of the kind
// returns, serving the bytes that were sent.
func TestDocRows(t *testing.T) {
	s := NewStore()
	values := docValues(t)
	held := [NumDocs]func() served{
		DocPairs:     func() served { return s.Pairs() },
		DocTickers:   func() served { return s.Tickers() },
		DocContracts: func() served { return s.Contracts() },
	}
	keys := map[string]bool{}
	catalogs := 0
	for d := range NumDocs {
		v := values[d]
		if v.Doc() != d {
			t.Fatalf("%v: the value says it is of %v", d, v.Doc())
		}
		if keys[d.Key()] || d.String() != d.Key() {
			t.Errorf("%v: key %q is another kind's, or not its name", d, d.Key())
		}
		keys[d.Key()] = true
		if d.Catalog() {
			catalogs++
		}
		decoded, err := d.Decode(v.AppendWire(nil))
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if decoded.Doc() != d {
			t.Fatalf("%v: decoded as %v", d, decoded.Doc())
		}
		s.PutDoc(decoded, readAt)
		got := held[d]()
		if got != decoded.(served) {
			t.Fatalf("%v: the store's accessor holds %v, not the value put", d, got)
		}
		if want := v.(served); !bytes.Equal(got.Body(), want.Body()) || !bytes.Equal(got.Tag(), want.Tag()) {
			t.Errorf("%v: the decoded value serves other bytes than the one sent", d)
		}
		for other := range NumDocs {
			if other == d {
				continue
			}
			if _, err := other.Decode(v.AppendWire(nil)); err == nil {
				t.Errorf("%v's wire form decoded as %v", d, other)
			}
		}
	}
	if catalogs != 1 {
		t.Errorf("%d documents are the catalog, want 1", catalogs)
	}
}

// A document's name is the key other processes keep it under: the
// replication keys stay as a member of an earlier release reads them.
func TestDocKeys(t *testing.T) {
	for d, want := range [NumDocs]string{DocPairs: "pairs", DocTickers: "tickers", DocContracts: "contracts"} {
		if got := Doc(d).Key(); got != want {
			t.Errorf("document %d is keyed %q, want %q", d, got, want)
		}
	}
	if !DocPairs.Catalog() {
		t.Error("the pair list is not the catalog")
	}
}

func TestUnknownDocPanics(t *testing.T) {
	for _, d := range []Doc{-1, NumDocs} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("document %d has a key", int(d))
				}
			}()
			_ = d.Key()
		}()
		if d.String() != "doc(?)" {
			t.Errorf("document %d is named %q", int(d), d)
		}
	}
}
