package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// readAt is the service clock of every fixture read: 2026-01-01T00:00:00.123Z.
var readAt = time.UnixMilli(1767225600123)

// dec is a decimal as the contract publishes it: a JSON string holding a plain
// decimal. Decoding a JSON number, null or a non-plain string fails, so every
// round trip below also checks that no number slipped out unquoted.
type dec string

func (d *dec) UnmarshalJSON(raw []byte) error {
	if len(raw) == 0 || raw[0] != '"' {
		return fmt.Errorf("decimal %s is not a JSON string", raw)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	if !IsPlain(s) {
		return fmt.Errorf("decimal %q is not plain", s)
	}
	*d = dec(s)
	return nil
}

// Timestamps decode into int64: encoding/json refuses a string or a fraction
// there, which is the "integer milliseconds" rule.

type pairJSON struct {
	TickerID    string `json:"ticker_id"`
	Base        string `json:"base"`
	Target      string `json:"target"`
	Kind        string `json:"kind"`
	PriceSource string `json:"price_source"`
}

type tickerJSON struct {
	TickerID       string `json:"ticker_id"`
	BaseCurrency   string `json:"base_currency"`
	TargetCurrency string `json:"target_currency"`
	LastPrice      dec    `json:"last_price"`
	BaseVolume     dec    `json:"base_volume"`
	TargetVolume   dec    `json:"target_volume"`
	Bid            dec    `json:"bid"`
	Ask            dec    `json:"ask"`
	High           dec    `json:"high"`
	Low            dec    `json:"low"`
	Timestamp      int64  `json:"timestamp"`
}

type bookJSON struct {
	TickerID  string  `json:"ticker_id"`
	Timestamp int64   `json:"timestamp"`
	Bids      [][]dec `json:"bids"`
	Asks      [][]dec `json:"asks"`
}

type tradeJSON struct {
	TradeID        string `json:"trade_id"`
	Price          dec    `json:"price"`
	BaseVolume     dec    `json:"base_volume"`
	TargetVolume   dec    `json:"target_volume"`
	TradeTimestamp int64  `json:"trade_timestamp"`
	Type           string `json:"type"`
}

var (
	pairKeys   = []string{"ticker_id", "base", "target", "kind", "price_source"}
	tickerKeys = []string{"ticker_id", "base_currency", "target_currency", "last_price", "base_volume", "target_volume", "bid", "ask", "high", "low", "timestamp"}
	bookKeys   = []string{"ticker_id", "timestamp", "bids", "asks"}
	tradeKeys  = []string{"trade_id", "price", "base_volume", "target_volume", "trade_timestamp", "type"}
)

// decodeStrict decodes body into v, refusing unknown fields and trailing data.
func decodeStrict(t *testing.T, body []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("trailing data after the JSON value in %s", body)
	}
}

// objectKeys returns the keys of a JSON object in the order they appear.
func objectKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", obj)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// checkItems decodes a JSON array of objects into items and checks that every
// object carries exactly keys, in that order: a missing field would decode as
// a zero value and pass the typed check unnoticed.
func checkItems[T any](t *testing.T, body []byte, keys []string) []T {
	t.Helper()
	var raw []json.RawMessage
	decodeStrict(t, body, &raw)
	items := make([]T, len(raw))
	for i, r := range raw {
		if got := objectKeys(t, r); !slices.Equal(got, keys) {
			t.Fatalf("item %d has keys %v, want %v", i, got, keys)
		}
		decodeStrict(t, r, &items[i])
	}
	return items
}

// checkBook decodes a book body and checks its keys and the shape of levels.
func checkBook(t *testing.T, body []byte) bookJSON {
	t.Helper()
	if got := objectKeys(t, body); !slices.Equal(got, bookKeys) {
		t.Fatalf("book has keys %v, want %v", got, bookKeys)
	}
	var b bookJSON
	decodeStrict(t, body, &b)
	if b.Bids == nil || b.Asks == nil {
		t.Fatalf("a side is null instead of an array: %s", body)
	}
	for _, side := range [][][]dec{b.Bids, b.Asks} {
		for i, l := range side {
			if len(l) != 2 {
				t.Fatalf("level %d is %v, want [price, size]", i, l)
			}
		}
	}
	return b
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestAppendStringEscapes(t *testing.T) {
	// Everything published today is ticker-id characters and decimals, but
	// the encoder must still produce valid JSON for any string.
	in := "a\"b\\c\x00\x1f\n\u00e9"
	got := appendString(nil, in)
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("appendString(%q) = %s: %v", in, got, err)
	}
	if back != in {
		t.Errorf("round trip of %q gave %q", in, back)
	}
}

func TestVersionsAreUnique(t *testing.T) {
	// An ETag derived from Version must change with every refresh, even when
	// the content is identical.
	p1 := NewPairs(nil, PairsConfig{Venue: "sim"}, readAt)
	p2 := NewPairs(nil, PairsConfig{Venue: "sim"}, readAt)
	tk, _ := NewTickers(p1, nil, nil, readAt)
	b, err := NewBook("BTC_USDT", 1, nil, nil, readAt)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrades("BTC_USDT", nil, readAt)
	if err != nil {
		t.Fatal(err)
	}
	vs := []uint64{p1.Version(), p2.Version(), tk.Version(), b.Version(), tr.Version()}
	seen := map[uint64]bool{}
	for _, v := range vs {
		if seen[v] {
			t.Fatalf("versions %v repeat", vs)
		}
		seen[v] = true
	}
}
