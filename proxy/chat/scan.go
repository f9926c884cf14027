package chat

import (
	"bytes"
	"errors"
	"slices"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// The chat request body is read once, by scanChat: one pass that checks
// the body is JSON (RFC 8259, as encoding/json.Valid) and notes where the
// values the proxy needs are, as byte offsets. Nothing is decoded or
// copied while scanning; the few values the proxy reads are decoded from
// their spans afterwards, and the rewrite splices at those offsets.

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
// its "function"'s "name" and "arguments" (first occurrences; zero when
// absent or when the call or its function is not an object).
type callSpans struct {
	msg            int // index of the message in chatScan.msgs
	id, name, args span
}

// chatScan locates the top-level values of a chat completion request.
type chatScan struct {
	model, user, stream span
	tools               span        // the tool definitions
	messages            span        // the first "messages" value, whatever its type
	msgs                []msgSpans  // its elements, when it is an array (at most maxScanMessages)
	calls               []callSpans // tool calls of the messages, in order (at most maxScanCalls)
	truncated           bool        // elements or calls past the caps were checked but not located
	knownStart          bool        // the messages before the first user message were a known start, not scanned
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

// scanChat checks that body is JSON and fills cs with the positions of a
// chat request's values. A body that is JSON but not an object leaves cs
// empty.
func scanChat(body []byte, cs *chatScan) error {
	s := scanner{Scanner: wire.Scanner{B: body}}
	return s.document(cs)
}

// scanner reads a chat request: wire.Scanner, with the memo's hooks.
type scanner struct {
	wire.Scanner
	// atUser, when set, is called once, with the offset where the first
	// user message ends, right after that message is scanned. It returns
	// -1, or an offset after an element of messages where the scan goes
	// on (having set cs.msgs and cs.calls for the elements skipped).
	atUser func(end int) int
	// atTail, when set, is called once, with the offset where the first
	// "messages" array ends. When it reports true, what follows is known
	// (valid, and its positions set in cs): the scan ends there.
	atTail func(end int) bool
	// atStart, when set, is called with the offset of the first element
	// of messages. It returns -1, or the offset after an element where
	// the scan goes on (having set cs.msgs for the elements skipped: a
	// known start, see wire.KnownStarts).
	atStart func(first int) int
}

// errTailKnown ends a scan whose atTail knew the rest of the body.
var errTailKnown = errors.New("rest of the body known")

// document scans the whole body; with cs set, a top-level object is read
// as a chat request.
func (s *scanner) document(cs *chatScan) error {
	return s.Document(func() error {
		if cs != nil && s.Peek() == '{' {
			return s.chat(cs)
		}
		return s.Value(0)
	})
}

// chat scans the top-level object of a chat request.
func (s *scanner) chat(cs *chatScan) error {
	err := s.Members(1, func(key []byte) error {
		start := s.I
		var dst *span
		switch string(key) {
		case "model":
			dst = &cs.model
		case "user":
			dst = &cs.user
		case "stream":
			dst = &cs.stream
		case "tools":
			dst = &cs.tools
		case "messages":
			if cs.messages.ok() {
				return &wire.DuplicateKeyError{Key: "messages"}
			}
			if s.Peek() == '[' {
				// About one message per 512 bytes of an agent's body: one
				// allocation for most requests, none when cs.msgs has the
				// room already (see takeWorkSlices). With a memo, room for
				// the head: a turn that resumes gets the remembered
				// turn's messages and room for its own (convMemo.resume),
				// one that does not gets the rest then (see message).
				n := msgRoom(len(s.B))
				if s.atUser != nil {
					n = min(n, headRoom)
				}
				if cap(cs.msgs) >= n {
					cs.msgs = cs.msgs[:0]
				} else {
					cs.msgs = make([]msgSpans, 0, n)
				}
				err := s.Elements(2, func() error {
					if at := s.atStart; at != nil {
						s.atStart = nil
						if next := at(s.I); next > s.I {
							s.I = next
							return nil
						}
					}
					return s.message(cs)
				})
				cs.messages = span{start, s.I}
				if err == nil && s.atTail != nil && s.atTail(s.I) {
					s.I = len(s.B)
					return errTailKnown
				}
				return err
			}
			dst = &cs.messages
		}
		if dst != nil && dst.ok() {
			return &wire.DuplicateKeyError{Key: string(key)}
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
	start := s.I
	if err := s.Value(depth); err != nil {
		return err
	}
	if dst != nil && !dst.ok() {
		*dst = span{start, s.I}
	}
	return nil
}

// message scans one element of "messages" (depth 3 when an object).
func (s *scanner) message(cs *chatScan) error {
	m := msgSpans{start: s.I}
	if s.Peek() != '{' {
		if err := s.Value(2); err != nil {
			return err
		}
		m.end = s.I
		cs.addMsg(m)
		return nil
	}
	m.obj = true
	err := s.Members(3, func(key []byte) error {
		start := s.I
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
			if !m.toolCalls.ok() && s.Peek() == '[' {
				msg := len(cs.msgs)
				err := s.Elements(4, func() error { return s.toolCall(cs, msg) })
				m.toolCalls = span{start, s.I}
				return err
			}
			dst = &m.toolCalls
		}
		if dst != nil && dst.ok() {
			return &wire.DuplicateKeyError{Key: string(key)}
		}
		return s.valueInto(3, dst)
	})
	if err != nil {
		return err
	}
	m.end = s.I
	if m.role.ok() {
		m.kind = roleKind(s.B[m.role.start:m.role.end])
	}
	if !cs.addMsg(m) {
		return nil
	}
	if m.kind == roleUser && s.atUser != nil {
		at := s.atUser
		s.atUser = nil
		if next := at(s.I); next >= s.I {
			s.I = next
		} else {
			cs.msgs = slices.Grow(cs.msgs, max(msgRoom(len(s.B))-len(cs.msgs), 0))
		}
	}
	return nil
}

// msgRoom is the room for the messages of a body of n bytes, at about
// 512 bytes a message.
func msgRoom(n int) int { return min(max(n/512, 8), 256) }

// headRoom is the room a scan with a memo leaves for the messages up to
// the first user message.
const headRoom = 8

// toolCall scans one element of a message's "tool_calls" (depth 5 when an
// object) and notes its id and function name. A member it reads ("id",
// "function", and the function's "name" and "arguments") given twice is
// refused, as the message's own: parsers disagree on which one counts.
func (s *scanner) toolCall(cs *chatScan, msg int) error {
	if s.Peek() != '{' {
		return s.Value(4)
	}
	c := callSpans{msg: msg}
	seenFunction := false
	err := s.Members(5, func(key []byte) error {
		switch string(key) {
		case "id":
			if c.id.ok() {
				return &wire.DuplicateKeyError{Key: "id"}
			}
			return s.valueInto(5, &c.id)
		case "function":
			if seenFunction {
				return &wire.DuplicateKeyError{Key: "function"}
			}
			seenFunction = true
			if s.Peek() == '{' {
				return s.Members(6, func(key []byte) error { return s.function(&c, key) })
			}
		}
		return s.Value(5)
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

// function scans the member named key of a tool call's "function" object,
// noting its name and arguments.
func (s *scanner) function(c *callSpans, key []byte) error {
	var dst *span
	switch string(key) {
	case "name":
		dst = &c.name
	case "arguments":
		dst = &c.args
	}
	if dst != nil && dst.ok() {
		return &wire.DuplicateKeyError{Key: string(key)}
	}
	return s.valueInto(6, dst)
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
