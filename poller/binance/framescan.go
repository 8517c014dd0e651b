package binance

import (
	"strings"

	"marketfeed/poller/venue"
)

// This file is the JSON reader under the stream-frame decoder. A frame is
// read once, front to back: the reader checks the syntax as it goes and the
// decoder takes the values it needs on the way, so no frame is validated in
// one pass and decoded in another.
//
// The reader accepts exactly what encoding/json.Valid accepts, because that
// is what decided which frames were JSON before it: whitespace is space,
// tab, CR and LF; numbers follow the JSON grammar to the letter; strings may
// not hold control characters and know only the JSON escapes; bytes from
// 0x80 up are taken inside strings whether or not they are valid UTF-8
// (json.Valid does not check them either); and arrays and objects nest at
// most maxDepth deep.

// maxDepth is encoding/json's nesting limit, so that the same frames are
// refused for nesting too deeply.
const maxDepth = 10000

// syntaxError is what the reader panics with when the frame is not JSON.
// Failing by panic keeps the reading code a plain description of the
// grammar; decodeFrame recovers it into bad data.
type syntaxError struct{}

// scanner reads one frame. src is the frame; pos the next byte to read.
type scanner struct {
	src   string
	pos   int
	depth int // arrays and objects open at pos
}

func (s *scanner) fail() { panic(syntaxError{}) }

// ws skips whitespace.
func (s *scanner) ws() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos == len(s.src) {
		return 0
	}
	return s.src[s.pos]
}

// expect skips whitespace and reads c.
func (s *scanner) expect(c byte) {
	if s.peek() != c {
		s.fail()
	}
	s.pos++
}

// end checks that nothing but whitespace follows the value read.
func (s *scanner) end() {
	if s.peek() != 0 || s.pos != len(s.src) {
		s.fail()
	}
}

// open reads the opening '{' or '[' of a container and reports whether a
// member or element follows; more reads on after each one. Together they
// make a loop over the container that checks its commas and its end:
//
//	for ok := s.open('['); ok; ok = s.more(']') { ...read one element... }
func (s *scanner) open(c byte) bool {
	s.expect(c)
	if s.depth++; s.depth > maxDepth {
		s.fail()
	}
	closing := byte('}')
	if c == '[' {
		closing = ']'
	}
	if s.peek() == closing {
		s.pos++
		s.depth--
		return false
	}
	return true
}

// more reads the comma before another member or element and reports true,
// or reads the container's closing byte and reports false.
func (s *scanner) more(closing byte) bool {
	switch s.peek() {
	case ',':
		s.pos++
		return true
	case closing:
		s.pos++
		s.depth--
		return false
	}
	s.fail()
	return false
}

// key reads an object member's key and the colon after it, and returns the
// key's text, unescaped as encoding/json unescapes it.
func (s *scanner) key() string {
	s.ws()
	start := s.pos
	escaped := s.str()
	raw := s.src[start:s.pos]
	s.expect(':')
	if !escaped {
		return raw[1 : len(raw)-1]
	}
	k, _ := field{raw: raw}.text()
	return k
}

// value reads any value and returns it as sent; null comes back absent, as
// field.UnmarshalJSON makes it, so that the field checks apply unchanged.
// An array or object is read through to its end, every byte of it checked.
func (s *scanner) value() field {
	c := s.peek()
	start := s.pos
	switch {
	case c == '"':
		s.str()
	case c == '{':
		for ok := s.open('{'); ok; ok = s.more('}') {
			s.ws()
			s.str()
			s.expect(':')
			s.value()
		}
	case c == '[':
		for ok := s.open('['); ok; ok = s.more(']') {
			s.value()
		}
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
		return field{}
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	default:
		s.fail()
	}
	return field{raw: s.src[start:s.pos]}
}

func (s *scanner) literal(word string) {
	if !strings.HasPrefix(s.src[s.pos:], word) {
		s.fail()
	}
	s.pos += len(word)
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() {
	s.skip('-')
	if !s.skip('0') {
		s.digits()
	}
	if s.skip('.') {
		s.digits()
	}
	if s.skip('e') || s.skip('E') {
		if !s.skip('+') {
			s.skip('-')
		}
		s.digits()
	}
}

// skip reads c if it is next, without skipping whitespace first.
func (s *scanner) skip(c byte) bool {
	if s.pos < len(s.src) && s.src[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// digits reads one or more decimal digits.
func (s *scanner) digits() {
	start := s.pos
	for s.pos < len(s.src) && s.src[s.pos] >= '0' && s.src[s.pos] <= '9' {
		s.pos++
	}
	if s.pos == start {
		s.fail()
	}
}

// str reads a string, the quotes included, and reports whether it holds an
// escape sequence.
func (s *scanner) str() (escaped bool) {
	if !s.skip('"') {
		s.fail()
	}
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		s.pos++
		switch {
		case c == '"':
			return escaped
		case c == '\\':
			escaped = true
			s.escape()
		case c < 0x20:
			s.fail()
		}
	}
	s.fail()
	return false
}

// escape reads what follows a backslash: one of "\/bfnrt, or u and four
// hexadecimal digits (any four: a lone surrogate is valid JSON).
func (s *scanner) escape() {
	if s.pos == len(s.src) {
		s.fail()
	}
	c := s.src[s.pos]
	s.pos++
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
	case 'u':
		for range 4 {
			if s.pos == len(s.src) || !isHex(s.src[s.pos]) {
				s.fail()
			}
			s.pos++
		}
	default:
		s.fail()
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// lookup returns the index of the name that an object key sets, or -1.
// names lists what a Go struct would declare, in its order, and the key
// goes where encoding/json (and goccy/go-json, which follows it) would put
// it: to the name it equals, or else to the first name it equals without
// regard to case, Unicode's simple folding included ("ſ" is an "s").
func lookup(names []string, key string) int {
	for i, n := range names {
		if n == key {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(n, key) {
			return i
		}
	}
	return -1
}

// keyList is a list of names as lookup takes them, with an index that
// finds the name a key equals without comparing strings: a key of up to
// seven bytes is packed into a word (see packKey), the word picks a slot by
// a multiplicative hash chosen, when the list is made, so that no two names
// share a slot, and the slot's name is the key when its word is the key's.
// Any other key, one in another case or one no name has, goes to lookup,
// so a key lands where lookup would put it. A depth event's ten keys, each
// compared with the names one by one, were a quarter of reading the event.
type keyList struct {
	names []string
	words []uint64 // the names packed; a name too long to pack has no slot
	mul   uint64
	// slots holds at a name's slot its index in names plus one; 0 is no
	// name.
	slots [1 << keySlotBits]uint8
}

// keySlotBits sizes a keyList's index: 256 slots, so that a multiplier
// that spreads two dozen names apart is found in a few tries; maxKeyNames
// keeps that search short, and keySeeds ends it: 64 random names take a
// few thousand tries (20141 the most of twenty lists), and the chance that
// none of the first 65536 spreads them is about e⁻²⁵. A list that no
// multiplier tried spreads goes without slots, every key through lookup:
// slower, with the same answers.
const (
	keySlotBits = 8
	maxKeyNames = 64
	keySeeds    = 1 << 16
)

// newKeyList indexes names, at most maxKeyNames of them.
func newKeyList(names []string) *keyList { return indexKeys(names, keySeeds) }

// indexKeys indexes names with the first of seeds multipliers that spreads
// them, or without slots when none does.
func indexKeys(names []string, seeds uint64) *keyList {
	if len(names) > maxKeyNames {
		panic("binance: too many key names to index")
	}
	l := &keyList{names: names, words: make([]uint64, len(names))}
	first := make(map[uint64]int) // word → the first name packed to it
	for i, n := range names {
		if w, ok := packKey(n); ok {
			l.words[i] = w
			if _, dup := first[w]; !dup {
				first[w] = i
			}
		}
	}
	// The multiplier is the first of a fixed sequence of odd numbers
	// (splitmix64's) under which the names' slots differ: the same every
	// run.
	for seed := uint64(1); seed <= seeds; seed++ {
		l.mul = splitmix(seed) | 1
		clear(l.slots[:])
		clash := false
		for w, i := range first {
			h := l.slot(w)
			if l.slots[h] != 0 {
				clash = true
				break
			}
			l.slots[h] = uint8(i + 1)
		}
		if !clash {
			return l
		}
	}
	clear(l.slots[:])
	return l
}

// splitmix is splitmix64's output for seed: well-mixed bits from a counter.
func splitmix(seed uint64) uint64 {
	z := seed * 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// packKey packs a key of up to seven bytes into a word, its length in the
// top byte so that keys of different lengths differ; ok is false for a
// longer key.
func packKey(key string) (w uint64, ok bool) {
	if len(key) > 7 {
		return 0, false
	}
	w = uint64(len(key)) << 56
	for i := range len(key) {
		w |= uint64(key[i]) << (8 * i)
	}
	return w, true
}

func (l *keyList) slot(w uint64) uint64 { return (w * l.mul) >> (64 - keySlotBits) }

// find returns the index of the name key sets, or -1, as lookup does.
func (l *keyList) find(key string) int {
	if w, ok := packKey(key); ok {
		if i := l.slots[l.slot(w)]; i != 0 && l.words[i-1] == w {
			return int(i) - 1
		}
	}
	return lookup(l.names, key)
}

// plainLevel reads, at the '[' next, a depth level sent as the venue sends
// them, ["price","quantity"] without whitespace, whose price is a positive
// plain decimal and quantity one without a sign: one pass over its bytes
// reads and checks it, where the general path reads its strings and then
// checks their decimals (see levelOf, which it agrees with). Anything else
// leaves the scanner where it was and reports false, for that path.
func (s *scanner) plainLevel() (venue.Level, bool) {
	if s.depth >= maxDepth {
		return venue.Level{}, false
	}
	price, p, nonZero := plainAt(s.src, s.pos+1)
	if p < 0 || !nonZero || p == len(s.src) || s.src[p] != ',' {
		return venue.Level{}, false
	}
	size, p, _ := plainAt(s.src, p+1)
	if p < 0 || p == len(s.src) || s.src[p] != ']' {
		return venue.Level{}, false
	}
	s.pos = p + 1
	return venue.Level{Price: price, Size: size}, true
}

// plainAt reads the string at src[p:] when it holds a plain decimal
// without a sign (digits, and a point and digits): it returns the decimal,
// the position after the closing quote (-1 when src[p:] is no such string)
// and whether a digit of it is not zero.
func plainAt(src string, p int) (string, int, bool) {
	if p >= len(src) || src[p] != '"' {
		return "", -1, false
	}
	p++
	start := p
	var digits byte // every digit's value or'ed together
	for p < len(src) && src[p]-'0' <= 9 {
		digits |= src[p] - '0'
		p++
	}
	if p == start {
		return "", -1, false
	}
	if p < len(src) && src[p] == '.' {
		p++
		frac := p
		for p < len(src) && src[p]-'0' <= 9 {
			digits |= src[p] - '0'
			p++
		}
		if p == frac {
			return "", -1, false
		}
	}
	if p == len(src) || src[p] != '"' {
		return "", -1, false
	}
	return src[start:p], p + 1, digits != 0
}
