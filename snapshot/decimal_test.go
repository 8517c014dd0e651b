package snapshot

import (
	"math/big"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// plainRE is the docs/api.md definition of a plain decimal.
var plainRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

func TestIsPlain(t *testing.T) {
	for _, s := range []string{"1", "-1", "0", "-0", "0.5", "01.50", "65000.10", "0.00000001", "123456789012345678901234567890"} {
		if !IsPlain(s) {
			t.Errorf("IsPlain(%q) = false, want true", s)
		}
	}
	for _, s := range []string{
		"", "-", "+1", "1e3", "1E3", "1e-3", " 1", "1 ", ".5", "5.", "-.5", "1..5", "1.5.1",
		"NaN", "nan", "Inf", "-Inf", "Infinity", "0x10", "1,5", "1_000", `"1"`, "١", "1\x00",
	} {
		if IsPlain(s) {
			t.Errorf("IsPlain(%q) = true, want false", s)
		}
	}
}

// rat parses a plain decimal independently of the package's arithmetic.
func rat(t testing.TB, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("big.Rat cannot parse %q", s)
	}
	return r
}

// checkCanonical fails unless s is a plain decimal with no redundant digits:
// no leading zeros, no trailing fractional zeros, no negative zero. Computed
// values are published this way so that one value has one spelling.
func checkCanonical(t testing.TB, s string) {
	t.Helper()
	if !IsPlain(s) {
		t.Fatalf("%q is not a plain decimal", s)
	}
	u := strings.TrimPrefix(s, "-")
	if u != s && strings.Trim(u, "0.") == "" {
		t.Fatalf("%q is a negative zero", s)
	}
	intPart, frac, hasFrac := strings.Cut(u, ".")
	if len(intPart) > 1 && intPart[0] == '0' {
		t.Fatalf("%q has leading zeros", s)
	}
	if hasFrac && strings.HasSuffix(frac, "0") {
		t.Fatalf("%q has trailing zeros", s)
	}
}

// randomDecimal returns a plain decimal of up to 40 integer and 40 fractional
// digits, sometimes negative, sometimes with leading or trailing zeros: long
// enough that any fixed-precision shortcut shows.
func randomDecimal(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(8) == 0 {
		b.WriteByte('-')
	}
	digits := func(n int) {
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	digits(1 + r.IntN(40))
	if r.IntN(4) != 0 {
		b.WriteByte('.')
		digits(1 + r.IntN(40))
	}
	return b.String()
}

func TestMid(t *testing.T) {
	for _, c := range []struct{ bid, ask, want string }{
		{"3100.10", "3100.20", "3100.15"},
		{"65000.0", "65000.1", "65000.05"},
		{"0.00000001", "0.00000002", "0.000000015"},
		{"1", "2", "1.5"},
		{"100", "100", "100"},
		{"0.10", "0.30", "0.2"},
		{"012.50", "12.5", "12.5"},
		// Longer than the 16 digits a default decimal context keeps.
		{"12345678.12345678", "12345678.12345679", "12345678.123456785"},
		{"1000000000000000000000000000000", "1", "500000000000000000000000000000.5"},
		{"123456789012345678901234567890.123456789", "0.000000000000000000000000001", "61728394506172839450617283945.0617283945000000000000000005"},
	} {
		got, err := Mid(c.bid, c.ask)
		if err != nil || got != c.want {
			t.Errorf("Mid(%s, %s) = %q, %v; want %s", c.bid, c.ask, got, err, c.want)
		}
	}
}

func TestMidRejectsNonPlain(t *testing.T) {
	for _, c := range [][2]string{{"1e3", "1"}, {"1", "NaN"}, {"", "1"}, {"+1", "2"}, {"1", "Inf"}} {
		if got, err := Mid(c[0], c[1]); err == nil {
			t.Errorf("Mid(%q, %q) = %q, want an error", c[0], c[1], got)
		}
	}
}

func TestMidMatchesRat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a, b := randomDecimal(r), randomDecimal(r)
		checkMid(t, a, b)
	}
	// Values far beyond any fixed working precision.
	long := strings.Repeat("9", 250)
	checkMid(t, long, long+"1")
	checkMid(t, "0."+long, long+"."+long)
}

func checkMid(t testing.TB, a, b string) {
	t.Helper()
	got, err := Mid(a, b)
	if err != nil {
		t.Fatalf("Mid(%s, %s): %v", a, b, err)
	}
	checkCanonical(t, got)
	want := new(big.Rat).Add(rat(t, a), rat(t, b))
	want.Quo(want, big.NewRat(2, 1))
	if rat(t, got).Cmp(want) != 0 {
		t.Fatalf("Mid(%s, %s) = %s, want %s", a, b, got, want.FloatString(60))
	}
}

func TestProduct(t *testing.T) {
	for _, c := range []struct{ x, y, want string }{
		{"65000.1", "0.5", "32500.05"},
		{"0.12345678", "65432.1", "8078.036374638"},
		{"65432.10", "1.23456789", "80780.369635269"},
		{"2.50", "4", "10"},
		{"0", "123.45", "0"},
		{"0.00000001", "0.00000002", "0.0000000000000002"},
		{"99999999999999999999", "99999999999999999999", "9999999999999999999800000000000000000001"},
	} {
		got, err := Product(c.x, c.y)
		if err != nil || got != c.want {
			t.Errorf("Product(%s, %s) = %q, %v; want %s", c.x, c.y, got, err, c.want)
		}
	}
	if got, err := Product("1e2", "1"); err == nil {
		t.Errorf("Product(1e2, 1) = %q, want an error", got)
	}
}

func TestProductMatchesRat(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a, b := randomDecimal(r), randomDecimal(r)
		got, err := Product(a, b)
		if err != nil {
			t.Fatalf("Product(%s, %s): %v", a, b, err)
		}
		checkCanonical(t, got)
		want := new(big.Rat).Mul(rat(t, a), rat(t, b))
		if rat(t, got).Cmp(want) != 0 {
			t.Fatalf("Product(%s, %s) = %s, want %s", a, b, got, want.FloatString(90))
		}
	}
}

// The integer path of Product writes what the decimal library writes, byte
// for byte, for prices and sizes as venues send them (leading and trailing
// zeros, up to 19 significant digits a factor), and leaves to the library
// what it cannot hold.
func TestProductSmallIsProductExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	digits := func(b *strings.Builder, n int) {
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	venueDecimal := func() string {
		var b strings.Builder
		digits(&b, 1+r.IntN(10))
		if r.IntN(3) != 0 {
			b.WriteByte('.')
			digits(&b, 1+r.IntN(12))
		}
		return b.String()
	}
	small := 0
	const n = 20000
	for range n {
		x, y := venueDecimal(), venueDecimal()
		want, err := productExact(x, y)
		if err != nil {
			t.Fatalf("productExact(%s, %s): %v", x, y, err)
		}
		if got, ok := productSmall(x, y); ok {
			small++
			if got != want {
				t.Fatalf("productSmall(%s, %s) = %q, the library's %q", x, y, got, want)
			}
		}
	}
	if small < n/2 {
		t.Errorf("the integer path took %d of %d products of venue-sized decimals", small, n)
	}
	for _, c := range [][2]string{
		{"-1.5", "2"},                 // a sign
		{"99999999999999999999", "1"}, // 20 significant digits
		{"9999999999", "9999999999"},  // a product past 64 bits
		{"1e2", "1"},                  // not plain
		{"0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001", "0.1"}, // past the buffer
	} {
		if got, ok := productSmall(c[0], c[1]); ok {
			t.Errorf("productSmall(%s, %s) = %q, want it left to the library", c[0], c[1], got)
		}
	}
}

func TestBaseVolumeFallback(t *testing.T) {
	for _, c := range []struct{ target, last, want string }{
		{"10", "3", "3.33333333"},
		{"2", "3", "0.66666666"}, // truncated, not rounded to ...67
		{"1", "8", "0.125"},      // exact, trailing zeros trimmed
		{"100", "4", "25"},
		{"1000.00", "10.0", "100"},
		{"7", "7", "1"},
		{"0.00000001", "3", "0"}, // below the eighth place
		{"0", "65000", "0"},
		{"0", "0", "0"},
		{"0.000", "0.0", "0"},
		{"512345678.9012", "0.00001234", "41519098776434.35980551"}, // 22 digits
		{"99999999.99999999", "0.00000001", "9999999999999999"},
	} {
		got, err := baseVolumeFallback(c.target, c.last)
		if err != nil || got != c.want {
			t.Errorf("baseVolumeFallback(%s, %s) = %q, %v; want %s", c.target, c.last, got, err, c.want)
		}
	}
}

func TestBaseVolumeFallbackZeroLastPrice(t *testing.T) {
	// A zero last price cannot turn a nonzero quote volume into a base
	// volume; the ticker must wait for usable values instead.
	for _, c := range [][2]string{{"5", "0"}, {"0.1", "0.000"}, {"1", "-0"}} {
		if got, err := baseVolumeFallback(c[0], c[1]); err == nil {
			t.Errorf("baseVolumeFallback(%s, %s) = %q, want an error", c[0], c[1], got)
		}
	}
}

func TestBaseVolumeFallbackRejectsNonPlain(t *testing.T) {
	for _, c := range [][2]string{{"1e3", "1"}, {"1", "1E3"}, {"", "1"}, {"1", ""}, {"NaN", "1"}, {"1", "Inf"}, {" 1", "1"}, {"+1", "1"}} {
		if got, err := baseVolumeFallback(c[0], c[1]); err == nil {
			t.Errorf("baseVolumeFallback(%q, %q) = %q, want an error", c[0], c[1], got)
		}
	}
}

// truncated8 is target / last truncated toward zero to eight decimals,
// computed with math/big only.
func truncated8(t testing.TB, target, last string) *big.Rat {
	q := new(big.Rat).Quo(rat(t, target), rat(t, last))
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(BaseVolumeDecimals), nil)
	q.Mul(q, new(big.Rat).SetInt(scale))
	whole := new(big.Int).Quo(q.Num(), q.Denom()) // Quo truncates toward zero
	return new(big.Rat).SetFrac(whole, scale)
}

func checkFallback(t testing.TB, target, last string) {
	t.Helper()
	got, err := baseVolumeFallback(target, last)
	if rat(t, last).Sign() == 0 {
		if rat(t, target).Sign() == 0 && (err != nil || got != "0") {
			t.Fatalf("baseVolumeFallback(%s, %s) = %q, %v; want 0", target, last, got, err)
		}
		if rat(t, target).Sign() != 0 && err == nil {
			t.Fatalf("baseVolumeFallback(%s, %s) = %q; want an error", target, last, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("baseVolumeFallback(%s, %s): %v", target, last, err)
	}
	checkCanonical(t, got)
	if _, frac, _ := strings.Cut(got, "."); len(frac) > BaseVolumeDecimals {
		t.Fatalf("baseVolumeFallback(%s, %s) = %s has more than %d decimals", target, last, got, BaseVolumeDecimals)
	}
	if want := truncated8(t, target, last); rat(t, got).Cmp(want) != 0 {
		t.Fatalf("baseVolumeFallback(%s, %s) = %s, want %s", target, last, got, want.FloatString(BaseVolumeDecimals))
	}
}

func TestBaseVolumeFallbackMatchesRat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		checkFallback(t, randomDecimal(r), randomDecimal(r))
	}
	long := strings.Repeat("9", 250)
	checkFallback(t, long, "1")
	checkFallback(t, long, "0."+strings.Repeat("0", 100)+"3")
	checkFallback(t, "1", "0."+long)
}

func TestComparePositive(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1", "1", 0}, {"1.0", "1", 0}, {"01.50", "1.5", 0}, {"0.001", "0.0010", 0},
		{"9.99", "10", -1}, {"100", "99.999", 1}, {"0.0011", "0.001", 1}, {"0", "0.00000001", -1},
	} {
		if got := comparePositive(c.a, c.b); got != c.want {
			t.Errorf("comparePositive(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := comparePositive(c.b, c.a); got != -c.want {
			t.Errorf("comparePositive(%s, %s) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func FuzzIsPlain(f *testing.F) {
	for _, s := range []string{"1", "-1", "0.5", "01.50", "", "+1", "1e3", ".5", "5.", "NaN", "-", "1.", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsPlain(s), plainRE.MatchString(s); got != want {
			t.Fatalf("IsPlain(%q) = %v, regexp says %v", s, got, want)
		}
	})
}

func FuzzMid(f *testing.F) {
	f.Add("3100.10", "3100.20")
	f.Add("0.00000001", "0.00000002")
	f.Add("-0", "1e3")
	f.Add("12345678.12345678", "12345678.12345679")
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := Mid(a, b)
		if !IsPlain(a) || !IsPlain(b) {
			if err == nil {
				t.Fatalf("Mid(%q, %q) = %q, want an error", a, b, got)
			}
			return
		}
		checkMid(t, a, b)
	})
}

func FuzzBaseVolumeFallback(f *testing.F) {
	f.Add("10", "3")
	f.Add("2", "3")
	f.Add("0", "0")
	f.Add("5", "0.000")
	f.Add("512345678.9012", "0.00001234")
	f.Add("1e3", "1")
	f.Fuzz(func(t *testing.T, target, last string) {
		got, err := baseVolumeFallback(target, last)
		if !IsPlain(target) || !IsPlain(last) {
			if err == nil {
				t.Fatalf("baseVolumeFallback(%q, %q) = %q, want an error", target, last, got)
			}
			return
		}
		checkFallback(t, target, last)
	})
}
