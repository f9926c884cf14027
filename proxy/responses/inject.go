package responses

import (
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: the memo keeps what was read, once
// the tool results are judged, and the request lets go of the body. What
// the observer reads to remember the chain (the task, the tools, the
// verdicts) stays.
func (r *request) Forwarded(remember bool) {
	if remember && !r.ref.Forgotten() {
		r.remember()
		r.ref.Remembered()
	}
	r.body, r.elems, r.marks, r.calls, r.verdicts = nil, nil, wire.Chunks[mark]{}, wire.CallChunks[call]{}, wire.VerdictLog{}
	r.resume = wire.Resume[*turnState]{}
	r.info.DropBody()
}

// Forget implements [wire.Request].
func (r *request) Forget() { r.ref.Forget() }

// Inject implements [wire.Request].
//
// With p.System the blocks go in front of the instructions, which are
// created when absent; instructions of a type the API does not define are
// left as the client sent them.
//
// Otherwise nothing a provider caches changes (see place): the turn's
// blocks go, framed, into a developer message appended to the input, and
// the recall block, framed, at the end of the conversation's first user
// message.
func (r *request) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	if p.System {
		out, _ := wire.InjectMember(dst, body, r.instructions, "instructions", p.Blocks())
		return out, nil
	}
	return r.place(dst, body, p), nil
}

// places are where a turn's blocks go in a body, found while it is read.
type places struct {
	input     wire.Span // the "input" value
	continued bool      // previous_response_id: the first user message lives on the provider

	items tail // the input's items
	ours  bool // the last item is a developer message the proxy added
	// ourText is the framed text of that message.
	ourText string

	// first is the first user message, once read (nil: not yet). The
	// request that reads it sets it once; the marks after it, and the
	// turns that resume from them, share it unchanged: a mark holds what
	// changes from one item to the next.
	first *firstUser
}

// firstUser is where the first user message is, as the recall block
// needs it.
type firstUser struct {
	user      wire.Span // its content, when the proxy may extend it
	userArray bool      // that content is an array of parts
	// A string content: its text, and the text without any blocks, when
	// it holds some (an earlier recall block, sent back).
	userText, userClean string
	parts               tail   // an array content's parts
	partOurs            bool   // its last part is a frame the proxy added
	partText            string // the framed text of that part
}

// item notes the next input item, at base+item.Index in the body.
func (at *places) item(base int, item gjson.Result) {
	at.items.add(base, item)
	at.ours, at.ourText = false, ""
}

// firstUser reads the content of a user message (the input itself when it
// is a string), at offset at in the body (-1: not located), and returns
// its text without blocks placed in it (the task is read from it). The
// first one is where the recall block goes, unless the request continues
// a stored response: its user messages are then not the conversation's
// first.
func (r *request) firstUser(at int, content gjson.Result) string {
	text := partsText(content)
	clean := wire.StripFramed(text)
	if r.at.first != nil || r.at.continued {
		return clean
	}
	pl := &firstUser{}
	r.at.first, r.firstRead = pl, true
	if at < 0 || !content.IsArray() && content.Type != gjson.String {
		return clean
	}
	pl.user = wire.Span{Start: at, End: at + len(content.Raw)}
	if content.Type == gjson.String {
		if clean != text {
			pl.userText, pl.userClean = text, clean
		}
		return clean
	}
	pl.userArray = true
	content.ForEach(func(_, part gjson.Result) bool {
		pl.parts.add(at-content.Index, part)
		pl.partText, pl.partOurs = ourPart(part)
		return true
	})
	return clean
}

// ourItem reports whether a message of role with content is one the
// proxy placed: a developer message of one input_text part (or a string)
// that holds nothing but framed blocks. It returns the framed text.
func ourItem(role string, content gjson.Result) (string, bool) {
	if role != "developer" || !strings.Contains(content.Raw, frameName) {
		return "", false
	}
	if content.Type == gjson.String {
		if !mayBeFramed(content.Raw) {
			return "", false
		}
		return content.Str, framedOnly(content.Str)
	}
	n := 0
	var part gjson.Result
	content.ForEach(func(_, p gjson.Result) bool {
		n++
		part = p
		return n < 2
	})
	if n != 1 {
		return "", false
	}
	return ourPart(part)
}

// ourPart reports whether a content part is one the proxy placed: an
// input_text of framed blocks only. It returns the part's text.
func ourPart(part gjson.Result) (string, bool) {
	if !strings.Contains(part.Raw, frameName) {
		return "", false // without decoding its text
	}
	t := part.Get("text")
	if t.Type != gjson.String || !mayBeFramed(t.Raw) || part.Get("type").String() != "input_text" {
		return "", false
	}
	return t.Str, framedOnly(t.Str)
}

// frameName is in the JSON of every frame, however its client escapes it.
const frameName = "system-reminder"

// mayBeFramed reports whether the JSON string raw may open with a frame,
// before it is decoded (a client's encoder may escape '<' and '>').
func mayBeFramed(raw string) bool {
	return strings.HasPrefix(raw, `"`+wire.FrameStart) || strings.HasPrefix(raw, `"\u003csystem-reminder\u003e`)
}

// framedOnly reports whether text is nothing but frames of blocks.
func framedOnly(text string) bool {
	return strings.HasPrefix(text, wire.FrameStart) && strings.TrimSpace(wire.StripFramed(text)) == ""
}

// place puts p's blocks where a provider's cached prefix survives them:
//
//   - the instructions lose any earlier blocks and get none;
//   - the turn's blocks go, framed, into one developer message of one
//     input_text part appended to the input: the end of the newest turn,
//     in the form Codex itself uses for its developer messages. A string
//     input (a one-shot request, nothing cached) becomes the array of its
//     user message and that developer message; an absent or null input
//     becomes the array of that message. A developer message the proxy
//     placed, sent back as the last item, is replaced;
//   - the recall block goes, framed, at the end of the conversation's
//     first user message: a new input_text part after its parts, or, for
//     a string content, after a blank line in the same string (the
//     message keeps the shape its client gave it). The recall block is
//     the same on every turn, so that message is re-sent byte for byte.
//     A request that continues a stored response does not hold that
//     message and gets no recall block.
//
// Every other byte is the client's.
func (r *request) place(dst, body []byte, p wire.Placement) []byte {
	var eds wire.Edits
	if sp := r.instructions; sp.OK() && body[sp.Start] == '"' {
		if clean := wire.StripFramed(r.info.System); clean != r.info.System {
			eds.Add(sp.Start, sp.End, wire.AppendJSONString(nil, clean))
		}
	}
	at := &r.at
	// The message, after a comma (without: the first element).
	item := wire.FramedElems{Comma: true, Open: developerOpen, Close: developerClose, Frames: [][]wire.Block{p.Turn}}
	first := item
	first.Comma = false
	has := item.Len() > 0
	in := at.input
	oneShot := in.OK() && body[in.Start] == '"'
	if oneShot && has {
		eds.Add(in.Start, in.Start, []byte(`[{"type":"message","role":"user","content":`))
	}
	at.placeRecall(&eds, p.Recall)
	switch {
	case oneShot:
		if has {
			eds.AddElems(in.End, in.End, []byte("}"), item, "]")
		}
	case in.OK() && body[in.Start] == '[':
		// The text of the turn's frame only to compare with one of the
		// proxy's sent back.
		same := at.ours && at.ourText == wire.Framed(p.Turn...).Text
		at.items.setLast(&eds, in.End, at.ours, same, item)
	case !has:
	case in.OK() && body[in.Start] == 'n': // null
		eds.AddElems(in.Start, in.End, []byte{'['}, first, "]")
	case !in.OK():
		if end, empty := objectEnd(body); end >= 0 {
			member := []byte(`,"input":[`)
			if empty {
				member = member[1:]
			}
			eds.AddElems(end, end, member, first, "]")
		}
	}
	return eds.Apply(dst, body)
}

// placeRecall is the edit that ends the first user message with the
// recall block, framed (none: without a block placed earlier).
func (pl *places) placeRecall(eds *wire.Edits, recall wire.Block) {
	var at firstUser
	if pl.first != nil {
		at = *pl.first
	}
	sp := at.user
	one := [1]wire.Block{recall}
	blocks := one[:]
	switch {
	case !sp.OK():
	case at.userArray:
		same := at.partOurs && at.partText == wire.Framed(recall).Text
		at.parts.setLast(eds, sp.End, at.partOurs, same, wire.FramedElems{Comma: true, Open: partOpen, Close: partClose, Frames: [][]wire.Block{blocks}})
	case at.userText != "":
		rc := wire.Framed(recall)
		if at.endsWith(rc) {
			return
		}
		// Other blocks in the string (sent back): its text is rewritten.
		text := at.userClean
		if rc.Text != "" {
			if text = strings.TrimRight(text, "\n"); text != "" {
				text += "\n\n"
			}
			text += rc.Text
		}
		if text != at.userText {
			eds.Add(sp.Start, sp.End, wire.AppendJSONString(nil, text))
		}
	case wire.FramedLen(blocks) == 0:
	case sp.End-sp.Start == 2: // ""
		eds.Add(sp.End-1, sp.End-1, wire.AppendFramed(nil, blocks))
	default: // the blank line and the block go before the closing quote
		sep := `\n\n`
		eds.Add(sp.End-1, sp.End-1, wire.AppendFramed(append(make([]byte, 0, len(sep)+wire.FramedLen(blocks)), sep...), blocks))
	}
}

// endsWith reports whether the first user message's string is one the
// proxy gave the recall block rc: the client's text without blocks, then
// rc after a blank line (or rc alone).
func (at *firstUser) endsWith(rc wire.Block) bool {
	before, ok := strings.CutSuffix(at.userText, rc.Text)
	if !ok || rc.Text == "" || before != "" && !strings.HasSuffix(before, "\n\n") {
		return false
	}
	return wire.StripFramed(before) == before
}

// The JSON around a frame of blocks: a developer message of one
// input_text part, and an input_text part.
const (
	developerOpen  = `{"type":"message","role":"developer","content":[` + partOpen
	developerClose = partClose + `]}`
	partOpen       = `{"type":"input_text","text":"`
	partClose      = `"}`
)

// objectEnd returns the offset of the closing brace of body's top-level
// object, and whether the object is empty; -1 when body is not an object.
func objectEnd(body []byte) (int, bool) {
	s := wire.Scanner{B: body}
	s.WS()
	if s.Peek() != '{' {
		return -1, false
	}
	s.I++
	s.WS()
	empty := s.Peek() == '}'
	end := len(body) - 1
	for end >= 0 && strings.IndexByte(" \t\r\n", body[end]) >= 0 {
		end--
	}
	if end < 0 || body[end] != '}' {
		return -1, false
	}
	return end, empty
}

// tail follows the elements of a JSON array as they are read: how many,
// the last one, and where the one before it ends.
type tail struct {
	n       int
	last    wire.Span
	prevEnd int
}

// add notes the next element, at base+v.Index in the body.
func (t *tail) add(base int, v gjson.Result) {
	t.n++
	t.prevEnd = t.last.End
	t.last = wire.Span{Start: base + v.Index, End: base + v.Index + len(v.Raw)}
}

// setLast is the edit that makes elem (one element, after a comma) the
// array's last element of the proxy's own (none when it has no text), the
// array ending at end. A last element the proxy placed (ours) is
// replaced, unless it is the same (same), or removed with the comma
// before it; otherwise the element is appended after the last element,
// whatever white space follows it staying where it is.
func (t *tail) setLast(eds *wire.Edits, end int, ours, same bool, elem wire.FramedElems) {
	none := elem.Len() == 0
	alone := elem
	alone.Comma = false
	switch {
	case ours && none && t.n > 1:
		eds.Add(t.prevEnd, t.last.End, nil)
	case ours && none:
		eds.Add(t.last.Start, t.last.End, nil)
	case ours && !same:
		eds.AddElems(t.last.Start, t.last.End, nil, alone, "")
	case ours || none:
	case t.n == 0:
		eds.AddElems(end-1, end-1, nil, alone, "")
	default:
		eds.AddElems(t.last.End, t.last.End, nil, elem, "")
	}
}
