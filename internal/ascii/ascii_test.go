package ascii

import "testing"

func TestAllDigits(t *testing.T) {
	for s, want := range map[string]bool{"": false, "0": true, "0123456789": true, "12a": false, " 1": false, "-1": false, "1.5": false, "٣": false} {
		if got := AllDigits(s); got != want {
			t.Errorf("AllDigits(%q) = %v, want %v", s, got, want)
		}
		if got := AllDigits([]byte(s)); got != want {
			t.Errorf("AllDigits([]byte(%q)) = %v, want %v", s, got, want)
		}
	}
}
