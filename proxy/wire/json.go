package wire

import (
	"encoding/binary"
	"math/bits"
	"strconv"

	"github.com/tidwall/gjson"
)

// MaxDepth bounds the nesting of a request body, as encoding/json does. A
// recursive reader without a bound can be made to exhaust its goroutine
// stack (a fatal error, not a panic) by a body of a few MB of "[": such a
// body is refused instead.
const MaxDepth = 10000

// JSONError is returned when a body is not JSON or nests too deeply.
type JSONError struct {
	Offset int
	Deep   bool // nested more than MaxDepth levels
}

func (e *JSONError) Error() string {
	if e.Deep {
		return "JSON nested more than " + strconv.Itoa(MaxDepth) + " levels deep at byte " + strconv.Itoa(e.Offset)
	}
	return "invalid JSON at byte " + strconv.Itoa(e.Offset)
}

// Valid reports whether b is one JSON value (surrounded by optional white
// space), nested at most MaxDepth levels. It accepts what encoding/json's
// Valid accepts.
func Valid(b []byte) bool {
	s := Scanner{B: b}
	return s.Document(func() error { return s.Value(0) }) == nil
}

// NotAnObject reports whether b is one JSON value (see Valid) other than
// an object: null, an array, a string, a number or a boolean. Every API
// the proxy reads takes an object.
func NotAnObject(b []byte) bool {
	s := Scanner{B: b}
	s.WS()
	return s.Peek() != '{' && Valid(b)
}

// Scanner reads JSON in one pass without decoding it: a format's reader
// walks the members it needs and notes where their values are, as byte
// offsets, while every other value is only checked. B is the input, I the
// offset of the next byte to read.
type Scanner struct {
	B []byte
	I int
}

// Document scans the whole input: white space, the value top scans, white
// space, and nothing after it.
func (s *Scanner) Document(top func() error) error {
	s.WS()
	if err := top(); err != nil {
		return err
	}
	s.WS()
	if s.I != len(s.B) {
		return s.Syntax()
	}
	return nil
}

// Syntax is the error at the current offset.
func (s *Scanner) Syntax() error { return &JSONError{Offset: s.I} }

// Peek returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// WS skips white space.
func (s *Scanner) WS() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Value scans any value; depth is the nesting of the container holding it.
func (s *Scanner) Value(depth int) error {
	switch c := s.Peek(); {
	case c == '"':
		_, err := s.Str()
		return err
	case c == '{':
		return s.Members(depth+1, func([]byte) error { return s.Value(depth + 1) })
	case c == '[':
		return s.Elements(depth+1, func() error { return s.Value(depth + 1) })
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.Syntax()
}

// Members scans an object (s.I at '{') at the given depth. For each member
// it calls member with the key, s.I at the value, which member must scan.
// The key is unescaped only when it holds escapes; member must not keep it.
func (s *Scanner) Members(depth int, member func(key []byte) error) error {
	if depth > MaxDepth {
		return &JSONError{Offset: s.I, Deep: true}
	}
	s.I++
	s.WS()
	if s.Peek() == '}' {
		s.I++
		return nil
	}
	for {
		if s.Peek() != '"' {
			return s.Syntax()
		}
		start := s.I
		esc, err := s.Str()
		if err != nil {
			return err
		}
		raw := s.B[start:s.I]
		key := raw[1 : len(raw)-1]
		if esc {
			key = []byte(gjson.ParseBytes(raw).Str)
		}
		s.WS()
		if s.Peek() != ':' {
			return s.Syntax()
		}
		s.I++
		s.WS()
		if err := member(key); err != nil {
			return err
		}
		s.WS()
		switch s.Peek() {
		case ',':
			s.I++
			s.WS()
		case '}':
			s.I++
			return nil
		default:
			return s.Syntax()
		}
	}
}

// Elements scans an array (s.I at '[') at the given depth, calling elem
// with s.I at each element, which elem must scan.
func (s *Scanner) Elements(depth int, elem func() error) error {
	if depth > MaxDepth {
		return &JSONError{Offset: s.I, Deep: true}
	}
	s.I++
	s.WS()
	if s.Peek() == ']' {
		s.I++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.WS()
		switch s.Peek() {
		case ',':
			s.I++
			s.WS()
		case ']':
			s.I++
			return nil
		default:
			return s.Syntax()
		}
	}
}

func (s *Scanner) literal(lit string) error {
	if len(s.B)-s.I < len(lit) || string(s.B[s.I:s.I+len(lit)]) != lit {
		return s.Syntax()
	}
	s.I += len(lit)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) number() error {
	b, i := s.B, s.I
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		s.I = i
		return s.Syntax()
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			s.I = i
			return s.Syntax()
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			s.I = i
			return s.Syntax()
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.I = i
	return nil
}

// plain returns the index of the first byte at or after i that ends the
// fast part of a string scan, or len(b). Short runs (a string of code has
// an escape every few bytes) are fastest a byte at a time; long ones
// eight bytes at a time.
func plain(b []byte, i int) int {
	for end := min(i+16, len(b)); i < end; i++ {
		if stopByte[b[i]] {
			return i
		}
	}
	for i+8 <= len(b) {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && !stopByte[b[i]] {
		i++
	}
	return i
}

// Eight bytes at a time: a word holds a byte that ends the fast part of a
// string scan ('"', '\\' or a control character) when special is not 0
// (the classic has-zero-byte and has-less-than tests).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func special(x uint64) uint64 {
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return (((q - ones) &^ q) | ((bs - ones) &^ bs) | ((x - ones*0x20) &^ x)) & highs
}

// stopByte marks the bytes that end the fast part of a string scan.
var stopByte = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// Str scans a string (s.I at its opening quote) and reports whether it
// holds escapes. Bytes of 0x80 and above are not checked for UTF-8, as
// encoding/json does not.
func (s *Scanner) Str() (esc bool, err error) {
	b := s.B
	i := s.I + 1
	for {
		i = plain(b, i)
		if i >= len(b) {
			s.I = i
			return esc, s.Syntax()
		}
		switch b[i] {
		case '"':
			s.I = i + 1
			return esc, nil
		case '\\':
			esc = true
			if i+1 >= len(b) {
				s.I = i
				return esc, s.Syntax()
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.I = i
					return esc, s.Syntax()
				}
				i += 6
			default:
				s.I = i
				return esc, s.Syntax()
			}
		default: // a control character
			s.I = i
			return esc, s.Syntax()
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// Span is where one JSON value is in a body: body[Start:End]. The zero
// Span means the value is absent (no value ends at offset 0).
type Span struct{ Start, End int }

// OK reports whether the value is present.
func (s Span) OK() bool { return s.End > 0 }

// DuplicateKeyError is returned when a member the proxy reads appears
// twice in a request object: JSON parsers disagree on which one counts
// (the first, the last), so the proxy and the provider could read two
// different requests.
type DuplicateKeyError struct{ Key string }

func (e *DuplicateKeyError) Error() string {
	return "The JSON body of your request has the member " + strconv.Quote(e.Key) + " more than once: parsers disagree on which one counts, so it is refused."
}

// Members scans body, which must be one JSON value, and returns where the
// members named keys of its top-level object are (zero spans for those
// absent, and for every key when the value is not an object). A body that
// is not JSON gives a *JSONError, a key present twice a
// *DuplicateKeyError.
func Members(body []byte, keys ...string) ([]Span, error) {
	spans, dup, err := firstMembers(body, keys)
	if err != nil {
		return nil, err
	}
	if dup != "" {
		return nil, &DuplicateKeyError{Key: dup}
	}
	return spans, nil
}

// firstMembers scans body, which must be one JSON value, and returns where
// the first value of each of keys in its top-level object is, and the
// first of keys found twice ("" for none).
func firstMembers(body []byte, keys []string) (spans []Span, dup string, err error) {
	spans = make([]Span, len(keys))
	s := Scanner{B: body}
	err = s.Document(func() error {
		if s.Peek() != '{' {
			return s.Value(0)
		}
		return s.Members(1, func(key []byte) error {
			start := s.I
			if err := s.Value(1); err != nil {
				return err
			}
			for i, k := range keys {
				if string(key) != k {
					continue
				}
				if !spans[i].OK() {
					spans[i] = Span{start, s.I}
				} else if dup == "" {
					dup = k
				}
			}
			return nil
		})
	})
	return spans, dup, err
}

// Raw returns body[sp.Start:sp.End], nil when sp is absent.
func (sp Span) Raw(body []byte) []byte {
	if !sp.OK() {
		return nil
	}
	return body[sp.Start:sp.End]
}

// Value is the JSON value at sp in body, parsed from a copy: nothing kept
// from it refers to the body. It does not exist when sp is absent.
func (sp Span) Value(body []byte) gjson.Result {
	if !sp.OK() {
		return gjson.Result{}
	}
	return gjson.ParseBytes(sp.Raw(body))
}
