package sim

import (
	"context"
	"strings"
	"testing"

	"marketfeed/poller/venue"
)

func TestCatalog(t *testing.T) {
	v := New(Config{})
	c, err := v.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.WeightLimit != 0 {
		t.Errorf("WeightLimit = %d, want 0", c.WeightLimit)
	}
	for call := venue.CallCatalog; call <= venue.CallTrades; call++ {
		if w := v.Weight(call); w != 0 {
			t.Errorf("Weight(%s) = %d, want 0", call, w)
		}
	}
	if v.Name() != "sim" {
		t.Errorf("Name() = %q", v.Name())
	}

	seen := map[string]bool{}
	var tradablePerps, settling, dated, odd, usdc int
	for _, m := range c.Markets {
		if seen[m.Symbol] {
			t.Errorf("duplicate symbol %s", m.Symbol)
		}
		seen[m.Symbol] = true
		fits := assetForm.MatchString(m.Base) && assetForm.MatchString(m.Quote)
		switch {
		case !fits && m.Symbol == "SUPERLONGMEMECOINUSDT":
			odd++
		case !fits:
			t.Errorf("%s: base %q / quote %q do not fit the ticker form", m.Symbol, m.Base, m.Quote)
		}
		switch {
		case !m.Perpetual:
			dated++
			if !strings.HasPrefix(m.Symbol, m.Base+m.Quote+"_") {
				t.Errorf("dated future %s: symbol should be BASEQUOTE_YYMMDD", m.Symbol)
			}
		case !m.Trading:
			settling++
		default:
			if fits {
				tradablePerps++
			}
			if m.Quote == "USDC" {
				usdc++
			}
		}
		if m.Perpetual && m.Symbol != m.Base+m.Quote {
			t.Errorf("perpetual %s is not base+quote (%s+%s)", m.Symbol, m.Base, m.Quote)
		}
	}
	if tradablePerps < 40 {
		t.Errorf("%d publishable perpetuals, want at least 40", tradablePerps)
	}
	if settling < 2 || dated < 2 || odd != 1 || usdc < 2 {
		t.Errorf("settling %d, dated %d, odd %d, usdc %d", settling, dated, odd, usdc)
	}

	for sym, base := range map[string]string{
		"1000PEPEUSDT":   "1000PEPE",
		"1000SHIBUSDT":   "1000SHIB",
		"1MBABYDOGEUSDT": "1MBABYDOGE",
		"1INCHUSDT":      "1INCH",
		"BTCUSDT":        "BTC",
	} {
		m, ok := find(c.Markets, sym)
		if !ok || m.Base != base || m.Quote != "USDT" || !m.Perpetual || !m.Trading {
			t.Errorf("%s: got %+v, want tradable perpetual with base %s", sym, m, base)
		}
	}
	if m, ok := find(c.Markets, "OCEANUSDT"); !ok || !m.Perpetual || m.Trading {
		t.Errorf("OCEANUSDT: %+v, want a non-tradable perpetual", m)
	}
	if m, ok := find(c.Markets, "BTCUSDT_261225"); !ok || m.Perpetual || m.Base != "BTC" {
		t.Errorf("BTCUSDT_261225: %+v, want a dated BTC future", m)
	}

	// The caller owns the slice.
	c.Markets[0].Symbol = "MUTATED"
	if again := catalog(t, v); again[0].Symbol == "MUTATED" {
		t.Error("Catalog shares its slice between calls")
	}
}

func TestDefaultSpot(t *testing.T) {
	ms := catalog(t, New(Config{}))
	tradable := map[string]bool{}
	for _, m := range ms {
		if m.Perpetual && m.Trading {
			tradable[m.Base+"_"+m.Quote] = true
		}
	}
	if len(DefaultSpot) < 10 {
		t.Errorf("DefaultSpot has %d ids, want about 10", len(DefaultSpot))
	}
	for _, id := range DefaultSpot {
		if !tickerForm.MatchString(id) {
			t.Errorf("%q is not a ticker_id", id)
		}
		if id == "PEPE_USDT" {
			if tradable[id] {
				t.Error("PEPE_USDT must have no perpetual of its own")
			}
			continue
		}
		if !tradable[id] {
			t.Errorf("%s has no tradable perpetual", id)
		}
	}
	if !tradable["1000PEPE_USDT"] || !tradable["ADA_USDT"] {
		t.Error("1000PEPE_USDT and ADA_USDT should be tradable")
	}
}
