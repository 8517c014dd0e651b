package snapshot

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/ericlagergren/decimal"
)

// IsPlain reports whether s is a decimal in plain notation: an optional '-',
// digits, and optionally '.' followed by digits. Exponents, a leading '+',
// spaces, "NaN", "Inf" and the empty string are not plain. Only plain strings
// are ever copied from a venue into a response.
func IsPlain(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != '.' {
		return false
	}
	i++
	start = i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > start && i == len(s)
}

// isPositive reports whether s is a plain decimal greater than zero. It is
// called for every price and size the poller reads, so it checks the form
// and finds a non-zero digit in one pass.
func isPositive(s string) bool {
	nonZero, dot, digits := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			nonZero = nonZero || c != '0'
		case c == '.' && !dot && digits > 0 && i < len(s)-1:
			dot = true
		default:
			return false
		}
	}
	return nonZero
}

// comparePositive compares two non-negative plain decimals without parsing
// them, so that checking a book's order costs no allocation: -1 if a < b,
// 0 if equal, +1 if a > b.
func comparePositive(a, b string) int {
	ai, af := splitPlain(a)
	bi, bf := splitPlain(b)
	ai, bi = trimLeadingZeros(ai), trimLeadingZeros(bi)
	if len(ai) != len(bi) {
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	if ai != bi {
		if ai < bi {
			return -1
		}
		return 1
	}
	n := max(len(af), len(bf))
	for i := 0; i < n; i++ {
		ca, cb := byte('0'), byte('0')
		if i < len(af) {
			ca = af[i]
		}
		if i < len(bf) {
			cb = bf[i]
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return 0
}

func splitPlain(s string) (intPart, frac string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func trimLeadingZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// exactFor returns the arithmetic context of an operation whose exact result
// has at most digits significant digits. Sizing it from the operands keeps
// every sum, half and product exact however long the venue's strings are, and
// its truncating mode makes the base-volume fallback round toward zero as the
// contract requires. A fixed precision would silently round long results.
func exactFor(digits int) decimal.Context {
	return decimal.Context{Precision: max(digits, 1), RoundingMode: decimal.ToZero}
}

func parse(s string) (*decimal.Big, error) {
	if !IsPlain(s) {
		return nil, fmt.Errorf("not a plain decimal: %q", s)
	}
	x, ok := new(decimal.Big).SetString(s)
	if !ok {
		return nil, fmt.Errorf("not a plain decimal: %q", s)
	}
	return x, nil
}

// plain formats x in plain notation with trailing zeros trimmed. Reducing
// goes through ctx: x's own context has the library's default precision of
// 16 digits and would round longer results.
func plain(ctx decimal.Context, x *decimal.Big) (string, error) {
	if !x.IsFinite() {
		return "", fmt.Errorf("decimal arithmetic failed: %v", ctx.Conditions|x.Context.Conditions)
	}
	ctx.Reduce(x)
	if x.Sign() == 0 {
		return "0", nil
	}
	return fmt.Sprintf("%f", x), nil
}

// Mid returns (bid + ask) / 2 exactly, in plain notation. Halving a finite
// decimal always terminates, so no digit is lost.
func Mid(bid, ask string) (string, error) {
	b, err := parse(bid)
	if err != nil {
		return "", err
	}
	a, err := parse(ask)
	if err != nil {
		return "", err
	}
	// The sum has at most one digit more than the longer operand and the half
	// one more again; the two lengths together bound both.
	ctx := exactFor(len(bid) + len(ask) + 1)
	z := new(decimal.Big)
	ctx.Add(z, b, a)
	ctx.Quo(z, z, decimal.New(2, 0))
	return plain(ctx, z)
}

// Product returns x × y exactly, in plain notation.
func Product(x, y string) (string, error) {
	if z, ok := productSmall(x, y); ok {
		return z, nil
	}
	return productExact(x, y)
}

// productSmall is Product for the common case, a price times a size: two
// unsigned plain decimals of at most 19 significant digits whose product
// fits in 64 bits, multiplied as integers without the decimal library's
// allocations. ok is false for anything else, which productExact answers.
func productSmall(x, y string) (string, bool) {
	var buf [maxScaled]byte
	out, ok := appendProductSmall(buf[:0], x, y)
	return string(out), ok
}

// appendProduct appends Product(x, y), written in place where productSmall
// answers, so that a trade's target volume costs no allocation: a trade
// list's every new trade takes one.
func appendProduct(dst []byte, x, y string) ([]byte, error) {
	if out, ok := appendProductSmall(dst, x, y); ok {
		return out, nil
	}
	z, err := productExact(x, y)
	return append(dst, z...), err
}

// appendProductSmall appends what productSmall returns; ok is false, and
// dst unchanged, where productSmall's is.
func appendProductSmall(dst []byte, x, y string) ([]byte, bool) {
	a, as, ok := plainUint(x)
	if !ok {
		return dst, false
	}
	b, bs, ok := plainUint(y)
	if !ok {
		return dst, false
	}
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return dst, false
	}
	return appendScaled(dst, lo, as+bs)
}

// plainUint reads an unsigned plain decimal as the integer of its digits
// and how many of them follow the point; ok is false for a sign, for what
// is not a plain decimal, and past 19 significant digits.
func plainUint(s string) (v uint64, scale int, ok bool) {
	if !IsPlain(s) || s[0] == '-' {
		return 0, 0, false
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			scale = len(s) - i - 1
			continue
		}
		if v == 0 && c == '0' {
			continue // a leading zero
		}
		if digits == 19 {
			return 0, 0, false
		}
		v = v*10 + uint64(c-'0')
		digits++
	}
	return v, scale, true
}

// maxScaled is the longest text appendScaled writes; longer is left to the
// decimal library.
const maxScaled = 96

// appendScaled appends v × 10^-scale in plain notation, trailing zeros
// trimmed, as plain does; ok is false, and dst unchanged, for a text longer
// than maxScaled.
func appendScaled(dst []byte, v uint64, scale int) ([]byte, bool) {
	if v == 0 {
		return append(dst, '0'), true
	}
	for scale > 0 && v%10 == 0 {
		v /= 10
		scale--
	}
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], v, 10)
	if scale+len(d)+2 > maxScaled {
		return dst, false
	}
	out := dst
	switch {
	case scale == 0:
		out = append(out, d...)
	case len(d) > scale:
		out = append(append(append(out, d[:len(d)-scale]...), '.'), d[len(d)-scale:]...)
	default:
		out = append(out, '0', '.')
		for range scale - len(d) {
			out = append(out, '0')
		}
		out = append(out, d...)
	}
	return out, true
}

// productExact is Product through the decimal library, for any size.
func productExact(x, y string) (string, error) {
	a, err := parse(x)
	if err != nil {
		return "", err
	}
	b, err := parse(y)
	if err != nil {
		return "", err
	}
	ctx := exactFor(len(x) + len(y))
	z := new(decimal.Big)
	ctx.Mul(z, a, b)
	return plain(ctx, z)
}

// BaseVolumeDecimals is how many decimal places the computed base-volume
// fallback keeps.
const BaseVolumeDecimals = 8

// baseVolumeFallback returns targetVolume / lastPrice truncated toward zero to
// eight decimal places, for venues that do not send a base volume. With a zero
// last price the answer is "0" when the target volume is zero too, and an
// error otherwise: such a ticker is not published until the venue sends
// usable values.
func baseVolumeFallback(targetVolume, lastPrice string) (string, error) {
	t, err := parse(targetVolume)
	if err != nil {
		return "", err
	}
	p, err := parse(lastPrice)
	if err != nil {
		return "", err
	}
	if p.Sign() == 0 {
		if t.Sign() == 0 {
			return "0", nil
		}
		return "", fmt.Errorf("last price is zero with target volume %s", targetVolume)
	}
	// A nonzero p is at least one unit of its last place, so the quotient has
	// fewer integer digits than the two strings together; the context keeps
	// those and eight decimals more. Truncating to that many significant
	// digits and then to eight places is the same as truncating once to eight
	// places: truncations toward zero compose.
	ctx := exactFor(len(targetVolume) + len(lastPrice) + BaseVolumeDecimals + 1)
	z := new(decimal.Big)
	ctx.Quo(z, t, p)
	ctx.Quantize(z, BaseVolumeDecimals)
	return plain(ctx, z)
}
