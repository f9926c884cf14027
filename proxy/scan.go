package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"

	"github.com/tidwall/gjson"
)

// The chat request body is read once, by scanChat: one pass that checks
// the body is JSON (RFC 8259, as encoding/json.Valid) and notes where the
// values the proxy needs are, as byte offsets. Nothing is decoded or
// copied while scanning; the few values the proxy reads are decoded from
// their spans afterwards, and the rewrite splices at those offsets.

// maxJSONDepth bounds the nesting of a request body, as encoding/json
// does. A recursive reader without a bound can be made to exhaust its
// goroutine stack (a fatal error, not a panic) by a body of a few MB of
// "[": such a body is refused instead.
const maxJSONDepth = 10000

// span is the position of one JSON value in a body: body[start:end]. The
// zero span means the value is absent (no value ends at offset 0).
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// Role kinds of a message, as found by the scan.
const (
	roleOther = iota
	roleSystem
	roleDeveloper
	roleUser
	roleAssistant
	roleTool
	roleFunction
)

// msgSpans locates one element of "messages". Only the first occurrence of
// a key counts, as with gjson's Get.
type msgSpans struct {
	obj        bool // the element is an object; for any other element only start/end are set
	kind       int  // role kind
	start, end int  // the element
	role       span
	content    span
	toolCallID span
	name       span
	toolCalls  span
}

// callSpans locates one tool call of an assistant message: its "id" and
// its "function"'s "name" (first occurrences; zero when absent or when the
// call or its function is not an object).
type callSpans struct {
	msg      int // index of the message in chatScan.msgs
	id, name span
}

// chatScan locates the top-level values of a chat completion request.
type chatScan struct {
	model, user, stream span
	messages            span        // the first "messages" value, whatever its type
	msgs                []msgSpans  // its elements, when it is an array (at most maxScanMessages)
	calls               []callSpans // tool calls of the messages, in order (at most maxScanCalls)
	truncated           bool        // elements or calls past the caps were checked but not located
}

// A message's positions take about 112 bytes and a tool call's 40, for as
// little as 2 bytes of body ("{}" or "0,"): a 32 MiB body of them would
// take gigabytes. Past these caps the scan still checks the body but
// locates nothing more. Real conversations stay far below them.
const (
	maxScanMessages = 10_000
	maxScanCalls    = 10_000
)

// systemIndex returns the index in msgs of the first system or developer
// message, or -1.
func (cs *chatScan) systemIndex() int {
	for i := range cs.msgs {
		if k := cs.msgs[i].kind; k == roleSystem || k == roleDeveloper {
			return i
		}
	}
	return -1
}

// jsonError is returned when a body is not JSON or nests too deeply.
type jsonError struct {
	offset int
	deep   bool
}

func (e *jsonError) Error() string {
	if e.deep {
		return "JSON nested more than " + strconv.Itoa(maxJSONDepth) + " levels deep at byte " + strconv.Itoa(e.offset)
	}
	return "invalid JSON at byte " + strconv.Itoa(e.offset)
}

// validJSON reports whether b is one JSON value (surrounded by optional
// white space), nested at most maxJSONDepth levels.
func validJSON(b []byte) bool {
	s := scanner{b: b}
	return s.document(nil) == nil
}

// scanChat checks that body is JSON and fills cs with the positions of a
// chat request's values. A body that is JSON but not an object leaves cs
// empty.
func scanChat(body []byte, cs *chatScan) error {
	s := scanner{b: body}
	return s.document(cs)
}

type scanner struct {
	b []byte
	i int
	// atUser, when set, is called once, with the offset where the first
	// user message ends, right after that message is scanned. It returns
	// -1, or an offset after an element of messages where the scan goes
	// on (having set cs.msgs and cs.calls for the elements skipped).
	atUser func(end int) int
	// atTail, when set, is called once, with the offset where the first
	// "messages" array ends. When it reports true, what follows is known
	// (valid, and its positions set in cs): the scan ends there.
	atTail func(end int) bool
}

// errTailKnown ends a scan whose atTail knew the rest of the body.
var errTailKnown = errors.New("rest of the body known")

func (s *scanner) syntax() error { return &jsonError{offset: s.i} }

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// document scans the whole body; with cs set, a top-level object is read
// as a chat request.
func (s *scanner) document(cs *chatScan) error {
	s.ws()
	var err error
	if cs != nil && s.peek() == '{' {
		err = s.chat(cs)
	} else {
		err = s.value(0)
	}
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return s.syntax()
	}
	return nil
}

// chat scans the top-level object of a chat request.
func (s *scanner) chat(cs *chatScan) error {
	err := s.members(1, func(key []byte) error {
		start := s.i
		var dst *span
		switch string(key) {
		case "model":
			dst = &cs.model
		case "user":
			dst = &cs.user
		case "stream":
			dst = &cs.stream
		case "messages":
			if cs.messages.ok() {
				break
			}
			if s.peek() == '[' {
				// About one message per 512 bytes of an agent's body: one
				// allocation for most requests.
				cs.msgs = make([]msgSpans, 0, min(max(len(s.b)/512, 8), 256))
				err := s.elements(2, func() error { return s.message(cs) })
				cs.messages = span{start, s.i}
				if err == nil && s.atTail != nil && s.atTail(s.i) {
					s.i = len(s.b)
					return errTailKnown
				}
				return err
			}
			dst = &cs.messages
		}
		return s.valueInto(1, dst)
	})
	if err == errTailKnown {
		return nil
	}
	return err
}

// valueInto scans a value (depth is that of its container) and, when dst
// is set and still absent, records where it is: the first occurrence of a
// key counts.
func (s *scanner) valueInto(depth int, dst *span) error {
	start := s.i
	if err := s.value(depth); err != nil {
		return err
	}
	if dst != nil && !dst.ok() {
		*dst = span{start, s.i}
	}
	return nil
}

// message scans one element of "messages" (depth 3 when an object).
func (s *scanner) message(cs *chatScan) error {
	m := msgSpans{start: s.i}
	if s.peek() != '{' {
		if err := s.value(2); err != nil {
			return err
		}
		m.end = s.i
		cs.addMsg(m)
		return nil
	}
	m.obj = true
	err := s.members(3, func(key []byte) error {
		start := s.i
		var dst *span
		switch string(key) {
		case "role":
			dst = &m.role
		case "content":
			dst = &m.content
		case "tool_call_id":
			dst = &m.toolCallID
		case "name":
			dst = &m.name
		case "tool_calls":
			if !m.toolCalls.ok() && s.peek() == '[' {
				msg := len(cs.msgs)
				err := s.elements(4, func() error { return s.toolCall(cs, msg) })
				m.toolCalls = span{start, s.i}
				return err
			}
			dst = &m.toolCalls
		}
		return s.valueInto(3, dst)
	})
	if err != nil {
		return err
	}
	m.end = s.i
	if m.role.ok() {
		m.kind = roleKind(s.b[m.role.start:m.role.end])
	}
	if !cs.addMsg(m) {
		return nil
	}
	if m.kind == roleUser && s.atUser != nil {
		at := s.atUser
		s.atUser = nil
		if next := at(s.i); next >= s.i {
			s.i = next
		}
	}
	return nil
}

// toolCall scans one element of a message's "tool_calls" (depth 5 when an
// object) and notes its id and function name.
func (s *scanner) toolCall(cs *chatScan, msg int) error {
	if s.peek() != '{' {
		return s.value(4)
	}
	c := callSpans{msg: msg}
	seenFunction := false // only the first "function" counts
	err := s.members(5, func(key []byte) error {
		switch string(key) {
		case "id":
			return s.valueInto(5, &c.id)
		case "function":
			first := !seenFunction
			seenFunction = true
			if first && s.peek() == '{' {
				return s.members(6, func(key []byte) error {
					var dst *span
					if string(key) == "name" {
						dst = &c.name
					}
					return s.valueInto(6, dst)
				})
			}
		}
		return s.value(5)
	})
	if err != nil {
		return err
	}
	if len(cs.calls) >= maxScanCalls || len(cs.msgs) >= maxScanMessages {
		cs.truncated = true
		return nil
	}
	cs.calls = append(cs.calls, c)
	return nil
}

// addMsg records m, unless the cap is reached; it reports whether it did.
func (cs *chatScan) addMsg(m msgSpans) bool {
	if len(cs.msgs) >= maxScanMessages {
		cs.truncated = true
		return false
	}
	cs.msgs = append(cs.msgs, m)
	return true
}

// roleKind classifies a role value (any JSON value).
func roleKind(raw []byte) int {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return roleNamed(raw[1 : len(raw)-1])
	}
	return roleNamed([]byte(gjson.ParseBytes(raw).String()))
}

func roleNamed(name []byte) int {
	switch string(name) { // no allocation
	case "system":
		return roleSystem
	case "developer":
		return roleDeveloper
	case "user":
		return roleUser
	case "assistant":
		return roleAssistant
	case "tool":
		return roleTool
	case "function":
		return roleFunction
	}
	return roleOther
}

// value scans any value; depth is the nesting of the container holding it.
func (s *scanner) value(depth int) error {
	switch c := s.peek(); {
	case c == '"':
		_, err := s.str()
		return err
	case c == '{':
		return s.members(depth+1, func([]byte) error { return s.value(depth + 1) })
	case c == '[':
		return s.elements(depth+1, func() error { return s.value(depth + 1) })
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.syntax()
}

// members scans an object (s.i at '{') at the given depth. For each member
// it calls member with the key, s.i at the value, which member must scan.
// The key is unescaped only when it holds escapes; member must not keep it.
func (s *scanner) members(depth int, member func(key []byte) error) error {
	if depth > maxJSONDepth {
		return &jsonError{offset: s.i, deep: true}
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.syntax()
		}
		start := s.i
		esc, err := s.str()
		if err != nil {
			return err
		}
		raw := s.b[start:s.i]
		key := raw[1 : len(raw)-1]
		if esc {
			key = []byte(gjson.ParseBytes(raw).Str)
		}
		s.ws()
		if s.peek() != ':' {
			return s.syntax()
		}
		s.i++
		s.ws()
		if err := member(key); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

// elements scans an array (s.i at '[') at the given depth, calling elem
// with s.i at each element, which elem must scan.
func (s *scanner) elements(depth int, elem func() error) error {
	if depth > maxJSONDepth {
		return &jsonError{offset: s.i, deep: true}
	}
	s.i++
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.syntax()
	}
	s.i += len(lit)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	b, i := s.b, s.i
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
		s.i = i
		return s.syntax()
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			s.i = i
			return s.syntax()
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
			s.i = i
			return s.syntax()
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
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

// str scans a string (s.i at its opening quote) and reports whether it
// holds escapes. Bytes of 0x80 and above are not checked for UTF-8, as
// encoding/json does not.
func (s *scanner) str() (esc bool, err error) {
	b := s.b
	i := s.i + 1
	for {
		i = plain(b, i)
		if i >= len(b) {
			s.i = i
			return esc, s.syntax()
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return esc, nil
		case '\\':
			esc = true
			if i+1 >= len(b) {
				s.i = i
				return esc, s.syntax()
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i = i
					return esc, s.syntax()
				}
				i += 6
			default:
				s.i = i
				return esc, s.syntax()
			}
		default: // a control character
			s.i = i
			return esc, s.syntax()
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
