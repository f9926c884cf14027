package chat

import (
	"bytes"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Turn placement (guard.placement: turn, the default). A provider's prompt
// cache keeps the unchanged prefix of a conversation: the blocks that
// change during it go after the last content the client sent, and the
// recall block, the same bytes on every turn, at the end of the first user
// message. Nothing else of the body changes but earlier blocks stripped
// from the system message (left there by guard.placement: system).
//
// Where the newest turn's blocks go, so that every OpenAI-compatible
// server takes the request: into the content of a message the client sent,
// never into a message of the proxy's own.
//   - The last message is the user's: its content gets them (a string: a
//     blank line, then the text; an array of parts: one more text part).
//     A second user message in a row is refused by templates that want
//     user and assistant to alternate (Mistral, Gemma).
//   - The last message is a tool result (the common case in an agent
//     loop): its content gets them, in the same way. A user message after
//     a tool message is refused by Mistral's templates (Nemo, Large 2: they
//     drop tool messages and assistant tool calls, then want user and
//     assistant to alternate, so user, tools, user breaks it) and by older
//     releases of mistral_common's validator ("Unexpected role 'user' after
//     role 'tool'"), which vLLM uses for Mistral models; Qwen3's template
//     would also stop rendering the reasoning of the turn's tool calls.
//     The frame says the text is the proxy's (wire.Framed), as agents'
//     own reminders in tool results do.
//   - The last messages are the assistant's (a prefill): the message
//     before them, by the same rules.
//   - Any other message there (system, or content the API does not
//     define): a user message of the proxy's own goes right after it,
//     before a prefill.
// System messages are never added: some templates refuse one that is not
// first.

// frameOpen and frameClose are the JSON escape of what wire.Framed puts
// around its blocks: appendFramed writes the frame without making the
// block (TestAppendFramedIsFramed pins them to wire.Framed).
var (
	frameOpen  = jsonEscape(wire.FrameStart + "\n" + wire.FrameNote + "\n\n")
	frameClose = jsonEscape("\n" + wire.FrameEnd)
)

// jsonEscape is the JSON escape of s, without quotes.
func jsonEscape(s string) []byte {
	e := wire.AppendJSONString(nil, s)
	return e[1 : len(e)-1]
}

// appendFramed appends the JSON escape of wire.Framed(blocks...), without
// quotes. blocks holds one with text at least.
func appendFramed(dst []byte, blocks []wire.Block) []byte {
	dst = append(dst, frameOpen...)
	dst = wire.AppendBlocks(dst, blocks)
	return append(dst, frameClose...)
}

// A text part, as the frames go into content given as an array of parts.
const (
	partOpen  = `{"type":"text","text":"`
	partClose = `"}`
)

// A message of the proxy's own, when no message of the client can take
// the newest turn's blocks.
const (
	userOpen  = `{"role":"user","content":"`
	userClose = `"}`
)

// An edit of the body: body[at:to] becomes val, then the frames, in the
// form the content takes.
type edit struct {
	at, to int
	val    []byte // a content re-encoded without old frames, but for its end
	form   int
	// empty says there is nothing before the frames in the content (no
	// text, no part); for formMessage, no message before the new one.
	empty  bool
	recall bool // the recall block's frame first
	turn   bool // then the newest turn's frame
}

// Forms of an edit.
const (
	formString  = iota // at the end of a string content, before its closing quote
	formParts          // at the end of an array of parts, before its closing bracket
	formValue          // a string value, in place of null
	formMember         // a "content" member, first in the message
	formMessage        // a user message of the proxy's own
)

// write appends what the edit puts at e.at.
func (e *edit) write(dst []byte, p *wire.Placement) []byte {
	dst = append(dst, e.val...)
	switch e.form {
	case formValue:
		dst = append(dst, '"')
	case formMember:
		dst = append(dst, `"content":"`...)
	case formMessage:
		if !e.empty {
			dst = append(dst, ',')
		}
		dst = append(dst, userOpen...)
	}
	first := true
	frame := func(blocks []wire.Block) {
		switch {
		case e.form == formParts:
			if !first || !e.empty {
				dst = append(dst, ',')
			}
			dst = append(dst, partOpen...)
		case !first || e.form == formString && !e.empty:
			dst = append(dst, `\n\n`...)
		}
		dst = appendFramed(dst, blocks)
		if e.form == formParts {
			dst = append(dst, partClose...)
		}
		first = false
	}
	if e.recall {
		frame([]wire.Block{p.Recall})
	}
	if e.turn {
		frame(p.Turn)
	}
	switch e.form {
	case formValue:
		dst = append(dst, '"')
	case formMember:
		dst = append(dst, `",`...)
	case formMessage:
		dst = append(dst, userClose...)
		if e.empty {
			dst = append(dst, ',')
		}
	}
	return dst
}

// injectTurns returns body with p's blocks placed in the conversation's
// turns (see above), after stripping the blocks an earlier turn may have
// left in the system message, or in the contents the frames go into. When
// nothing changes it returns body itself; a new body is appended to
// dst[:0], which may be nil. conv is inspect(body).
func injectTurns(dst, body []byte, conv *conversation, p wire.Placement) ([]byte, error) {
	cs := &conv.scan
	if !cs.messages.ok() || body[cs.messages.start] != '[' {
		return body, nil
	}
	src, at, err := withoutSystemBlocks(body, conv)
	if err != nil {
		return body, err
	}
	msgs := cs.msgs
	turn, last, own, known := newestTurnEdit(src, cs, at)
	turn.turn = known && !wire.Empty(p.Turn)
	// The recall's place: the first user message, else with the newest
	// turn's blocks, first.
	var recall edit
	if len(p.Recall.JSON) > 0 {
		first := firstUser(msgs)
		ok := first >= 0 && !(first == last && own)
		if ok {
			recall, ok = contentEdit(src, &msgs[first], at)
		}
		switch {
		case ok:
			recall.recall = true
		case known:
			turn.recall = true
		}
	}
	if !recall.recall && !turn.recall && !turn.turn {
		return src, nil
	}
	out := dst[:0]
	pos := 0
	for _, e := range [2]*edit{&recall, &turn} {
		if !e.recall && !e.turn {
			continue
		}
		out = append(out, src[pos:e.at]...)
		out = e.write(out, &p)
		pos = e.to
	}
	return append(out, src[pos:]...), nil
}

// withoutSystemBlocks returns body without the blocks an earlier turn
// left in its system message (none come there), and where a position of
// body is in it. That is rare: a copy of its own, and the positions after
// the system content move.
func withoutSystemBlocks(body []byte, conv *conversation) ([]byte, func(int) int, error) {
	same := func(pos int) int { return pos }
	if conv.systemAt < 0 || !conv.systemHasBlocks() {
		return body, same, nil
	}
	stripped, err := injectSystem(nil, body, conv)
	if err != nil {
		return body, same, err
	}
	moved, by := conv.scan.msgs[conv.systemAt].content.start, len(stripped)-len(body)
	return stripped, func(pos int) int {
		if pos > moved {
			return pos + by
		}
		return pos
	}, nil
}

// newestTurnEdit finds the newest turn's place: in message last (own
// true), or in a user message of the proxy's own right after it. Past the
// scan's caps the last message is unknown (known false): the newest turn
// gets nothing.
func newestTurnEdit(src []byte, cs *chatScan, at func(int) int) (turn edit, last int, own, known bool) {
	msgs := cs.msgs
	last, known = -1, len(msgs) > 0 && !cs.truncated
	if !known {
		return turn, last, false, false
	}
	last = len(msgs) - 1
	for last >= 0 && msgs[last].obj && msgs[last].kind == roleAssistant {
		last-- // a prefill
	}
	if last >= 0 && msgs[last].obj {
		switch msgs[last].kind {
		case roleUser, roleTool, roleFunction:
			turn, own = contentEdit(src, &msgs[last], at)
		}
	}
	if !own {
		turn = edit{form: formMessage, at: at(cs.messages.start + 1), empty: true}
		if last >= 0 {
			turn = edit{form: formMessage, at: at(msgs[last].end)}
		}
		turn.to = turn.at
	}
	return turn, last, own, true
}

// firstUser returns the index of the first user message, or -1.
func firstUser(msgs []msgSpans) int {
	for i := range msgs {
		if msgs[i].kind == roleUser {
			return i
		}
	}
	return -1
}

// contentEdit returns the edit that puts frames at the end of m's content
// in body (at maps a position the scan found to body), and whether the
// content can take them: a string, an array of parts, null, or none. Old
// frames of the proxy's in it are stripped first (a client that sends back
// what it was sent).
func contentEdit(body []byte, m *msgSpans, at func(int) int) (edit, bool) {
	if !m.content.ok() {
		// No content: one, first in the object (it has a role).
		i := at(m.start) + 1
		return edit{form: formMember, at: i, to: i}, true
	}
	start, end := at(m.content.start), at(m.content.end)
	raw := body[start:end]
	old := bytes.Contains(raw, []byte("system-reminder"))
	switch raw[0] {
	case '"':
		e := edit{form: formString, at: end - 1, to: end - 1, empty: len(raw) == 2}
		if old {
			text := parseRaw(raw).Str
			if stripped := wire.StripFramed(text); stripped != text {
				v := wire.AppendJSONString(nil, stripped)
				e.at, e.val, e.empty = start, v[:len(v)-1], stripped == ""
			}
		}
		return e, true
	case '[':
		e := edit{form: formParts, at: end - 1, to: end - 1, empty: len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0}
		if old {
			if arr, changed, err := rewriteParts(parseRaw(raw), ""); err == nil && changed {
				e.at, e.val, e.empty = start, arr[:len(arr)-1], len(arr) == 2
			}
		}
		return e, true
	case 'n': // null
		return edit{form: formValue, at: start, to: end}, true
	}
	// A content the API does not define (object, number...).
	return edit{}, false
}
