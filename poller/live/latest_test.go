package live

import (
	"reflect"
	"testing"
	"time"

	"marketfeed/poller/venue"
)

// The ticker stream's rows of listed symbols lie over the REST rows seeded
// under them; rows of symbols outside the catalog are dropped, and a seed
// never replaces a row the stream sent.
func TestTickerRowsOverTheSeed(t *testing.T) {
	s, _, _ := newSourceOf(t, Config{}, perpetual("AAAUSDT", "AAA"), perpetual("BBBUSDT", "BBB"))
	if _, _, ok := s.StreamRows(venue.DocTickers); ok || s.Flowing(venue.DocTickers, time.Now()) {
		t.Fatal("ticker rows before the stream delivered any")
	}
	s.SeedRows(venue.TickerRows([]venue.Stat{{Symbol: "AAAUSDT", LastPrice: "1"}, {Symbol: "BBBUSDT", LastPrice: "2"}}))
	before := time.Now()
	s.Rows(venue.TickerRows([]venue.Stat{{Symbol: "AAAUSDT", LastPrice: "3"}, {Symbol: "ZZZUSDT", LastPrice: "9"}}))
	s.SeedRows(venue.TickerRows([]venue.Stat{{Symbol: "AAAUSDT", LastPrice: "4"}}))

	rows, at, ok := s.StreamRows(venue.DocTickers)
	if !ok || at.Before(before) || !s.Flowing(venue.DocTickers, time.Now()) {
		t.Fatalf("ok %v, at %v (delivered after %v), flowing %v", ok, at, before, s.Flowing(venue.DocTickers, time.Now()))
	}
	got := map[string]string{}
	for _, r := range rows.Stats() {
		got[r.Symbol] = r.LastPrice
	}
	if want := map[string]string{"AAAUSDT": "3", "BBBUSDT": "2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ticker rows %v, want %v", got, want)
	}
}

// A mark price row older than the one held is a late copy from the other
// line, and is dropped.
func TestMarkRowsKeepTheNewest(t *testing.T) {
	s, _, _ := newSourceOf(t, Config{}, perpetual("AAAUSDT", "AAA"))
	s.Rows(venue.MarkRows([]venue.Contract{{Symbol: "AAAUSDT", MarkPrice: "2", Time: 2000}, {Symbol: "ZZZUSDT", MarkPrice: "9", Time: 2000}}))
	s.Rows(venue.MarkRows([]venue.Contract{{Symbol: "AAAUSDT", MarkPrice: "1", Time: 1000}}))
	rows, _, ok := s.StreamRows(venue.DocMarks)
	if want := []venue.Contract{{Symbol: "AAAUSDT", MarkPrice: "2", Time: 2000}}; !ok || !reflect.DeepEqual(rows.Contracts(), want) {
		t.Fatalf("mark rows %+v (ok %v), want %+v", rows.Contracts(), ok, want)
	}
}
