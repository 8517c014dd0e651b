// Package ascii holds the checks of ASCII text that several packages make
// on what they are given (a venue's fields, a request's header), one each.
package ascii

// AllDigits reports whether s is one or more ASCII digits. It allocates
// nothing, for the request path.
func AllDigits[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
