package gemini

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// The methods of a model the format reads; every other one is passed
// through by the server.
const (
	MethodGenerate = "generateContent"
	MethodStream   = "streamGenerateContent"
)

// request is a Gemini API request as read.
type request struct {
	info wire.Info
	// system is the systemInstruction value (or system_instruction, the
	// name the API also takes), and systemKey the name it has; absent
	// when the request has none.
	system    wire.Span
	systemKey string
	task      recall.TaskFinder
	// first and newest are the parts of the first and the last user
	// content, where the recall block and the turn's blocks go.
	first, newest parts
}

// parts is where a user content's parts are in the body, as the
// placement of blocks needs it.
type parts struct {
	at wire.Span // the parts array; absent when the content has none
	// New parts go at body[keep:end]: end is just after the array's last
	// element (or its '['), keep before the frames of the proxy's that
	// end it, if any (what an earlier injection placed there, taken out
	// and placed anew), and elems says an element comes before keep.
	keep, end int
	elems     bool
}

// Top-level members the proxy reads, in the order of read's spans. The
// API takes each member by its JSON name and by its proto name; both
// spellings of one member are one member.
var topKeys = []string{"contents", "systemInstruction", "system_instruction", "tools"}

// ParsePath reads a path the format serves: "/v1beta/models/{model}:{method}"
// (any version), escaped as it came. It returns the model, unescaped, and
// the method.
func ParsePath(path string) (model, method string, err error) {
	_, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/models/")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i <= 0 || strings.IndexByte(rest, '/') >= 0 {
		return "", "", errors.New("not a Gemini API model path: " + strconv.Quote(path))
	}
	method = rest[i+1:]
	if method != MethodGenerate && method != MethodStream {
		return "", "", errors.New("scarproxy reads the Gemini API's generateContent and streamGenerateContent, not " + strconv.Quote(method))
	}
	if model, err = url.PathUnescape(rest[:i]); err != nil {
		return "", "", errors.New("bad model name in the path")
	}
	return model, method, nil
}

// read reads a request body that came by path: the body is checked
// (JSON, nesting bounded, no member the proxy reads given twice) in one
// pass that also locates the top-level members; the contents are then
// read with gjson from their span, and the system instruction's text
// comes from systems when it holds it (nil: decoded every time).
func read(body []byte, path string, systems *systemMemo) (*request, error) {
	model, method, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	sp, err := wire.Members(body, topKeys...)
	if err != nil {
		return nil, err
	}
	r := &request{system: sp[1], systemKey: topKeys[1]}
	switch {
	case sp[1].OK() && sp[2].OK():
		return nil, &wire.DuplicateKeyError{Key: topKeys[1]}
	case sp[2].OK():
		r.system, r.systemKey = sp[2], topKeys[2]
	}
	in := &r.info
	in.Model, in.Stream = model, method == MethodStream
	var start *recall.KeyStart
	if raw := r.system.Raw(body); raw != nil {
		in.System, start = systems.text(raw)
	}
	if sp[3].OK() {
		in.ToolDefs = sp[3].Raw(body)
	}
	var calls callBook
	contents := sp[0].Value(body)
	if !contents.IsArray() {
		contents = gjson.Result{} // no content the API reads
	}
	base := sp[0].Start // gjson's offsets in contents are from there
	users, answered := 0, false
	contents.ForEach(func(i, c gjson.Result) bool {
		// A model content followed by another is an earlier answer of the
		// model; one that ends the contents is the client's own.
		in.Later = in.Later || answered
		switch c.Get("role").String() {
		case "model":
			answered = true
			calls.model(c, &in.Tools)
			if in.Origin == "" {
				in.Origin = calls.firstID()
			}
		case "user", "":
			p := r.readUser(c, int(i.Int()), &calls, base, body)
			if users++; users == 1 {
				r.first = p
			}
			r.newest = p
		case "function":
			// The API's older role for function responses: the newest
			// turn when it ends the conversation, never its first user
			// turn.
			r.newest = r.readUser(c, int(i.Int()), &calls, base, body)
		}
		return true
	})
	switch {
	case in.Goal == "":
	case start != nil:
		in.Key = start.Key(in.Goal)
	default:
		in.Key = recall.ConversationKey(wire.Strip(in.System), in.Goal)
	}
	return r, nil
}

// readUser reads a user content: its function responses, and, for the
// first user content that has text of its own, the task. It returns
// where the content's parts are: base is the offset in body of the
// contents array, from which gjson counts.
func (r *request) readUser(c gjson.Result, at int, calls *callBook, base int, body []byte) parts {
	in := &r.info
	pv := c.Get("parts")
	p := parts{at: spanOf(pv, base, body)}
	if !p.at.OK() || !pv.IsArray() {
		return parts{}
	}
	p.keep, p.end = p.at.Start+1, p.at.Start+1
	var text []string
	pv.ForEach(func(j, part gjson.Result) bool {
		p.end = base + part.Index + len(part.Raw)
		v := viewPart(part)
		if v.text.Type != gjson.String || !isFrame(part.Raw, v.text) {
			p.keep, p.elems = p.end, true
		}
		switch {
		case v.text.Type == gjson.String:
			if !v.thought {
				text = append(text, v.text.Str)
			}
		case v.response.IsObject():
			r.toolResult(v.response, at, int(j.Int()), calls)
		}
		return true
	})
	if !r.task.Found && len(text) > 0 {
		r.task.Add(wire.StripFramed(strings.Join(text, "\n")), wire.Task)
		in.Goal = r.task.Goal
	}
	return p
}

// part is what the proxy reads of a part, in one pass over its members
// (of a member given twice, the first): its text, whether it is a
// thought, its function response (by its JSON name, else its proto name).
type part struct {
	text, response gjson.Result
	thought        bool
}

func viewPart(p gjson.Result) part {
	var v part
	var seen uint8
	var protoResponse gjson.Result
	p.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "text":
			if seen&1 == 0 {
				v.text, seen = val, seen|1
			}
		case "thought":
			if seen&2 == 0 {
				v.thought, seen = val.Bool(), seen|2
			}
		case "functionResponse":
			if seen&4 == 0 {
				v.response, seen = val, seen|4
			}
		case "function_response":
			if seen&8 == 0 {
				protoResponse, seen = val, seen|8
			}
		}
		return true
	})
	if !v.response.IsObject() {
		v.response = protoResponse
	}
	return v
}

// toolResult reads a function response, part j of the content at.
func (r *request) toolResult(fr gjson.Result, at, j int, calls *callBook) {
	in := &r.info
	var id, name string
	var resp gjson.Result
	var seen uint8
	fr.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "id" && seen&1 == 0:
			id, seen = v.String(), seen|1
		case k.Str == "name" && seen&2 == 0:
			name, seen = v.String(), seen|2
		case k.Str == "response" && seen&4 == 0:
			resp, seen = v, seen|4
		}
		return true
	})
	tr := wire.ToolResult{
		Name:    name,
		IsError: failedResponse(resp),
		At:      at,
		Raw:     []byte(resp.Raw),
		Decode:  responseText,
	}
	if cl, ok := calls.answer(id, name); ok {
		if cl.args != "" {
			tr.Args = []byte(cl.args)
		}
		if cl.note != "" {
			tr.Note = []byte(cl.note)
		}
	}
	if id != "" {
		tr.Key = "call:" + id
	} else {
		// Without an id the same call may give the same response on
		// every turn: where it stands tells the results apart.
		tr.Key = wire.HashKey(name+"\x00"+strconv.Itoa(at)+"."+strconv.Itoa(j), tr.Raw)
	}
	in.ToolResults = append(in.ToolResults, tr)
	in.ToolCount++
}

// call is a functionCall part read from a model content.
type call struct {
	id, name, args, note string // args and note raw JSON, as in the body
	answered             bool
}

// callBook matches function responses with the calls they answer: by id
// when both have one, else in order, the responses of a user content
// answering the calls of the model content before it.
type callBook struct {
	byID map[string]*call
	last []*call // the calls of the latest model content
}

// model reads a model content's function calls, each with the content's
// text before it (its note), and adds their names to tools.
func (b *callBook) model(c gjson.Result, tools *[]string) {
	b.last = b.last[:0]
	var note string
	c.Get("parts").ForEach(func(_, part gjson.Result) bool {
		if t := part.Get("text"); t.Type == gjson.String && note == "" && !part.Get("thought").Bool() {
			note = t.Raw
		}
		fc := part.Get("functionCall")
		if !fc.IsObject() {
			fc = part.Get("function_call")
		}
		name := fc.Get("name").String()
		if name == "" {
			return true
		}
		*tools = append(*tools, name)
		cl := &call{id: fc.Get("id").String(), name: name, args: fc.Get("args").Raw, note: note}
		b.last = append(b.last, cl)
		if cl.id != "" {
			if b.byID == nil {
				b.byID = map[string]*call{}
			}
			b.byID[cl.id] = cl
		}
		return true
	})
}

// firstID returns the id of the first call of the model content read
// last that has one ("" when none does): the run's origin (see
// wire.Info.Origin) when it is the conversation's first.
func (b *callBook) firstID() string {
	for _, cl := range b.last {
		if cl.id != "" {
			return cl.id
		}
	}
	return ""
}

// answer returns the call a response of tool name (and id, if any)
// answers.
func (b *callBook) answer(id, name string) (*call, bool) {
	if cl, ok := b.byID[id]; ok && id != "" {
		cl.answered = true
		return cl, true
	}
	// In order: the next call of the latest model content not answered,
	// of the same tool.
	for _, cl := range b.last {
		if !cl.answered && cl.name == name {
			cl.answered = true
			return cl, true
		}
	}
	return nil, false
}

// partsText is the text of a content's parts: their "text" strings
// joined by newlines, thoughts left out. The text of a single part (the
// Gemini CLI's system instruction, tens of KB) is not copied again.
func partsText(ps gjson.Result) string {
	var first string
	var sb strings.Builder
	n := 0
	ps.ForEach(func(_, p gjson.Result) bool {
		if v := viewPart(p); v.text.Type == gjson.String && !v.thought {
			t := v.text
			switch n++; n {
			case 1:
				first = t.Str
				return true
			case 2:
				sb.WriteString(first)
			}
			sb.WriteByte('\n')
			sb.WriteString(t.Str)
		}
		return true
	})
	if n < 2 {
		return first
	}
	return sb.String()
}

// failedResponse reports whether a function response says the call
// failed the way the API defines it: its "error" member, which the API
// reads as the error's details, holds something (a message, an object
// with members, true).
func failedResponse(resp gjson.Result) bool {
	if !resp.IsObject() {
		return false
	}
	e := resp.Get("error")
	switch {
	case e.Type == gjson.String:
		return strings.TrimSpace(e.Str) != ""
	case e.Type == gjson.True:
		return true
	case e.IsObject() || e.IsArray():
		empty := true
		e.ForEach(func(_, _ gjson.Result) bool { empty = false; return false })
		return !empty
	}
	return false
}

// responseText is the text of a function response, as the guard judges
// it and an incident stores it: the error's message when it failed; the
// "output" string when that is all it holds (the Gemini CLI's shape);
// else the response's JSON, whose fields (success, exit codes, output)
// tell whether it failed.
func responseText(raw []byte) string {
	resp := gjson.ParseBytes(raw)
	if !resp.IsObject() {
		return resp.String()
	}
	if failedResponse(resp) {
		e := resp.Get("error")
		switch {
		case e.Type == gjson.String:
			return e.Str
		case e.Get("message").Type == gjson.String:
			return e.Get("message").Str
		}
		return resp.Raw
	}
	n := 0
	resp.ForEach(func(_, _ gjson.Result) bool { n++; return n < 2 })
	if out := resp.Get("output"); n == 1 && out.Type == gjson.String {
		return out.Str
	}
	return resp.Raw
}

// spanOf is where v, read by gjson from the contents array at base in
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

// isFrame reports whether a text part (raw, whose text is t) is a frame
// of the proxy's that holds only blocks.
func isFrame(raw string, t gjson.Result) bool {
	return strings.Contains(raw, frameOpen) && strings.HasPrefix(t.Raw, frameOpen) && strings.TrimSpace(wire.StripFramed(t.Str)) == ""
}
