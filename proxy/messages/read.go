package messages

import (
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// request is a Messages request as read.
type request struct {
	info   wire.Info
	system wire.Span // the top-level "system" value; absent when none
	task   recall.TaskFinder
	// first and newest are the contents of the first and the last user
	// message, where the recall block and the turn's blocks go.
	first, newest content
}

// content is where a user message's content is in the body, as the
// placement of blocks needs it.
type content struct {
	at wire.Span // the content value; absent when the message has none
	// An array's new blocks go at body[keep:end]: end is just after its
	// last element (or its '['), keep before the frames of the proxy's
	// that end it, if any (what an earlier injection placed there, taken
	// out and placed anew), and elems says an element comes before keep.
	keep, end int
	elems     bool
}

// Top-level members the proxy reads, in the order of read's spans.
var topKeys = []string{"model", "stream", "system", "messages", "metadata", "tools"}

// read reads a Messages request body: the body is checked (JSON, nesting
// bounded, no member the proxy reads given twice) in one pass that also
// locates the top-level members; the messages are then read with gjson
// from their span.
func read(body []byte) (*request, error) {
	sp, err := wire.Members(body, topKeys...)
	if err != nil {
		return nil, err
	}
	r := &request{system: sp[2]}
	in := &r.info
	in.Model = sp[0].Value(body).String()
	in.Stream = sp[1].Value(body).Bool()
	if sys := sp[2].Value(body); sys.Exists() {
		in.System = wire.ContentText(sys)
	}
	if md := sp[4].Value(body); md.IsObject() {
		in.User = md.Get("user_id").String()
		in.Run = claudeSession(in.User)
	}
	if sp[5].OK() {
		in.ToolDefs = sp[5].Raw(body)
	}
	calls := map[string]call{} // tool_use id -> the call
	msgs := sp[3].Value(body)
	base := sp[3].Start // gjson's offsets in msgs are from there
	users, answered := 0, false
	msgs.ForEach(func(i, m gjson.Result) bool {
		// An assistant message followed by another is an earlier answer of
		// the model; one that ends the messages is the client's prefill.
		in.Later = in.Later || answered
		switch m.Get("role").String() {
		case "user":
			c := r.readUser(m, int(i.Int()), calls, base, body)
			if !msgs.IsArray() {
				break // no message the API reads: none gets a block
			}
			if users++; users == 1 {
				r.first = c
			}
			r.newest = c
		case "assistant":
			answered = true
			r.readAssistant(m, calls)
		}
		return true
	})
	if in.Goal != "" {
		in.Key = recall.ConversationKey(wire.Strip(in.System), in.Goal)
	}
	return r, nil
}

// claudeSession returns the session Claude Code names in
// metadata.user_id: a JSON object's session_id (Claude Code 2), or what
// follows "_session_" (earlier versions: user_…_account_…_session_…).
// "" when it names none.
func claudeSession(userID string) string {
	if strings.HasPrefix(userID, "{") {
		if wire.Valid([]byte(userID)) {
			return gjson.Get(userID, "session_id").String()
		}
		return ""
	}
	if _, s, ok := strings.Cut(userID, "_session_"); ok {
		return s
	}
	return ""
}

// readAssistant reads an assistant message's tool calls, each with the
// message's text before it (its note).
func (r *request) readAssistant(m gjson.Result, calls map[string]call) {
	var note string
	m.Get("content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").String() {
		case "text":
			if t := b.Get("text"); t.Type == gjson.String && note == "" {
				note = t.Raw
			}
		case "tool_use":
			name := b.Get("name").String()
			if name != "" {
				id := b.Get("id").String()
				r.info.Tools = append(r.info.Tools, name)
				calls[id] = call{name: name, args: b.Get("input").Raw, note: note}
				if r.info.Origin == "" {
					r.info.Origin = id
				}
			}
		}
		return true
	})
}

// readUser reads a user message: its tool results, and, for the first
// user message that has text of its own, the task. It returns where the
// message's content is: base is the offset in body of the messages
// array, from which gjson counts.
func (r *request) readUser(m gjson.Result, at int, calls map[string]call, base int, body []byte) content {
	in := &r.info
	cv := m.Get("content")
	c := content{at: spanOf(cv, base, body)}
	if cv.Type == gjson.String {
		r.task.Add(wire.StripFramed(cv.Str), wire.Task)
		in.Goal = r.task.Goal
		return c
	}
	if c.at.OK() && cv.IsArray() {
		c.keep, c.end = c.at.Start+1, c.at.Start+1
	}
	var text []gjson.Result
	cv.ForEach(func(_, b gjson.Result) bool {
		typ := b.Get("type").String()
		if c.end > 0 {
			c.end = base + b.Index + len(b.Raw)
			if typ != "text" || !isFrame(b) {
				c.keep, c.elems = c.end, true
			}
		}
		switch typ {
		case "text":
			text = append(text, b)
		case "tool_result":
			if tr, ok := toolResult(b, at, calls); ok {
				in.ToolResults = append(in.ToolResults, tr)
				in.ToolCount++
			}
		}
		return true
	})
	if !r.task.Found && len(text) > 0 {
		parts := make([]string, 0, len(text))
		for _, t := range text {
			parts = append(parts, t.Get("text").String())
		}
		r.task.Add(wire.StripFramed(strings.Join(parts, "\n")), wire.Task)
		in.Goal = r.task.Goal
	}
	return c
}

// toolResult reads a tool_result block of the user message at in one
// pass over its members: its content, often the largest value of the
// request, is located, not unescaped.
func toolResult(b gjson.Result, at int, calls map[string]call) (wire.ToolResult, bool) {
	raw := []byte(b.Raw)
	sp, err := wire.Members(raw, "tool_use_id", "is_error", "content")
	if err != nil {
		return wire.ToolResult{}, false
	}
	id := sp[0].Value(raw).String()
	cl := calls[id]
	isErr := sp[1].Value(raw)
	tr := wire.ToolResult{
		Name:    cl.name,
		IsError: isErr.Bool(),
		OK:      isErr.Type == gjson.False,
		At:      at,
		Raw:     sp[2].Raw(raw),
		Decode:  resultText,
	}
	if cl.args != "" {
		tr.Args = []byte(cl.args)
	}
	if cl.note != "" {
		tr.Note = []byte(cl.note)
	}
	if id != "" {
		tr.Key = "call:" + id
	} else {
		tr.Key = wire.HashKey(tr.Name, tr.Raw)
	}
	return tr, true
}

// spanOf is where v, read by gjson from the messages array at base in
// body, is in body; absent when gjson does not say.
func spanOf(v gjson.Result, base int, body []byte) wire.Span {
	start, end := base+v.Index, base+v.Index+len(v.Raw)
	if v.Index <= 0 || v.Raw == "" || end > len(body) || body[start] != v.Raw[0] || body[end-1] != v.Raw[len(v.Raw)-1] {
		return wire.Span{}
	}
	return wire.Span{Start: start, End: end}
}

// frameOpen is how a frame of the proxy's opens in a JSON string.
var frameOpen = strings.TrimSuffix(string(wire.AppendJSONString(nil, wire.FrameStart+"\n"+wire.FrameNote+"\n")), `"`)

// isFrame reports whether b, a text block, is a frame of the proxy's that
// holds only blocks. Only a block that holds the frame's opening is
// decoded.
func isFrame(b gjson.Result) bool {
	if !strings.Contains(b.Raw, frameOpen) {
		return false
	}
	t := b.Get("text")
	return strings.HasPrefix(t.Raw, frameOpen) && strings.TrimSpace(wire.StripFramed(t.Str)) == ""
}

// call is a tool_use block read from an assistant message.
type call struct {
	name, args, note string // args and note raw JSON, as in the body
}

// resultText is the text of a tool_result's content: a string, or the
// text of its blocks.
func resultText(raw []byte) string { return wire.ContentText(gjson.ParseBytes(raw)) }
