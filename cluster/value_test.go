package cluster

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"marketfeed/snapshot"
)

// Every whole-market document goes into the bucket under the key a member
// of an earlier release reads it from, and a member applies what comes
// under it into its store, serving the leader's bytes; the pair list, and
// it alone, is the catalog a member applies before the pairs' values.
func TestDocumentsTravelUnderTheirKeys(t *testing.T) {
	now := time.Unix(1767225600, 0)
	pairs := snapshot.NewPairs([]snapshot.Market{{Symbol: "BTCUSDT", Base: "BTC", Quote: "USDT", Perpetual: true, Trading: true}},
		snapshot.PairsConfig{Venue: "sim", Spot: []string{"BTC_USDT"}}, now)
	tk, c := btcDocs(pairs, now)
	store := snapshot.NewStore()
	for _, d := range []struct {
		key     string
		v       snapshot.Published
		body    func() []byte
		catalog bool
	}{
		{"pairs", pairs, func() []byte { return store.Pairs().Body() }, true},
		{"tickers", tk, func() []byte { return store.Tickers().Body() }, false},
		{"contracts", c, func() []byte { return store.Contracts().Body() }, false},
	} {
		if got := keyOf(d.v); got != d.key {
			t.Errorf("%s is put under %q", d.key, got)
		}
		if catalogKey(d.key) != d.catalog {
			t.Errorf("%s: catalog %v, want %v", d.key, !d.catalog, d.catalog)
		}
		if err := applyWire(store, d.key, d.v.AppendWire(nil), false, now.UnixNano()); err != nil {
			t.Fatalf("%s: %v", d.key, err)
		}
		if want := d.v.(interface{ Body() []byte }).Body(); !bytes.Equal(d.body(), want) {
			t.Errorf("%s: the member serves %q, the leader %q", d.key, d.body(), want)
		}
	}
	if err := applyWire(store, "tickers", c.AppendWire(nil), false, now.UnixNano()); err == nil {
		t.Error("contracts under the tickers' key were applied")
	}
	if err := applyWire(store, "ticker", tk.AppendWire(nil), false, now.UnixNano()); !errors.Is(err, errForeign) {
		t.Errorf("a key no document has: %v, want errForeign", err)
	}
}
