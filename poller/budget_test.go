package poller

import (
	"testing"
	"time"
)

// A refresh is held to its own share and to the book share it is part of:
// books waiting to sync may use the book share, and refreshes then wait;
// what refreshes spend leaves that much less for other book reads.
func TestRefreshSpendsWithinItsShareAndTheBookShare(t *testing.T) {
	b := newBudget()
	b.setLimit(1000)
	now := time.Unix(1_000_000, 0)
	const refreshCap, bookCap = 50, 100
	if !b.take(now, 80, classBook, bookCap) {
		t.Fatal("a sync within the book share was refused")
	}
	if !b.takeWithin(now, 20, classRefresh, refreshCap, bookCap) {
		t.Fatal("a refresh within both shares was refused")
	}
	if b.takeWithin(now, 20, classRefresh, refreshCap, bookCap) {
		t.Fatal("a refresh past the book share was taken though its own share had room")
	}
	if b.take(now, 10, classBook, bookCap) {
		t.Fatal("a book read did not see what the refresh spent of the book share")
	}
	if at := b.freeAt(now, 10, classBook, bookCap); !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("book share free at %v, want when the minute's spending expires", at.Sub(now))
	}
	later := now.Add(time.Minute + time.Second)
	for i := range 2 {
		if !b.takeWithin(later, 20, classRefresh, refreshCap, bookCap) {
			t.Fatalf("refresh %d of a new minute refused", i+1)
		}
	}
	if b.takeWithin(later, 20, classRefresh, refreshCap, bookCap) {
		t.Fatal("a third refresh of 20 fitted a share of 50")
	}
	if !b.take(later, 60, classBook, bookCap) || b.Spent(later) != 100 {
		t.Fatalf("the book share's rest went unused: spent %d", b.Spent(later))
	}
}
