package gemini

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unsafe"

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
	// start is the conversation key begun with the system text, when a
	// memo kept it (see recall.KeyStart).
	start *recall.KeyStart
	task  recall.TaskFinder
	// first and newest are the parts of the first and the last user
	// content, where the recall block and the turn's blocks go.
	first, newest parts

	// What reading the contents found so far, content by content.
	users    int  // user contents read
	answered bool // a model content was read
	answers  wire.Answers
	calls    wire.CallChunks[call]
	// lastFrom is where the calls of the latest model content start in
	// calls; done says which of them a response answered (a response
	// with no id answers the next one of its tool not answered). done
	// may be a mark's (doneShared): it is copied before it is written.
	lastFrom   int
	done       []bool
	doneShared bool
	// truncated says the contents array has more than wire.MaxElems
	// elements: it is read as a whole, and not remembered.
	truncated bool

	// detach copies what the turn keeps out of the copy of its contents
	// (nil when that copy is small).
	detach *wire.Detacher

	// The memo (see wire.TurnMemo): the conversation's remembered turn,
	// and what this turn will leave it.
	body     []byte
	resume   wire.Resume[*turnState]
	ref      wire.MemoRef[*turnState] // the conversation in the memo, for Forget
	elems    []wire.Elem              // where each content ends
	marks    wire.Chunks[mark]        // what was read up to the end of each content
	arrayEnd int                      // where the contents array ends; 0 when it is not one
	// verdicts are the verdicts of the tool results before this turn's
	// (their tallies are info.Prior), which remember adds this turn's to.
	verdicts wire.VerdictLog
	// systemBlocks says whether the system value holds a block's
	// opening: the remembered turn's when the value is the same bytes.
	systemBlocks wire.BlockCheck
	// Where the top-level members are after the contents array, relative
	// to its end (the memo keeps them with the bytes they are in).
	after []wire.Span
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

// call is a functionCall part read from a model content: its arguments
// and the content's text before it (its note), as they stand in the body
// (absent when none), and its place in the request's calls.
type call struct {
	id, name   string
	args, note wire.Span
	at         int
}

// CallID implements [wire.Identified].
func (c call) CallID() string { return c.id }

// mark is what was read of a conversation up to the end of one content.
type mark struct {
	tools, calls, toolCount, users, lastFrom int
	answered, later                          bool
	origin                                   string
	task                                     recall.TaskFinder
	first, newest                            parts
	done                                     []bool // shared: never written
}

// turnState is what the memo keeps of a turn: its marks, and the slices
// they index.
type turnState struct {
	marks        wire.Chunks[mark]
	calls        wire.Chunks[call]
	ext          wire.Extension // of marks and calls
	tools        []string
	toolsExt     wire.Extension  // of tools (see wire.ResumedNames)
	verdicts     wire.VerdictLog // what the tool results said, in order
	systemBlocks wire.BlockCheck // of the system value, once checked
	// The system text, the goal and their key, when the system value is
	// known to be the same bytes (before the array: in the head; after:
	// in the tail), and the key begun with the system text (nil when
	// the system memo did not keep it).
	system, goal, key string
	start             *recall.KeyStart
	after             []wire.Span
}

// size estimates the memory s holds but its system text, which the turns
// of a conversation share: the memo counts it once (see
// wire.SharedTexts).
func (s *turnState) size() int {
	n := s.marks.Cap()*int(unsafe.Sizeof(mark{})) + s.calls.Cap()*int(unsafe.Sizeof(call{})) +
		cap(s.tools)*16 + s.verdicts.Size() +
		len(s.goal) + len(s.key) + cap(s.after)*int(unsafe.Sizeof(wire.Span{})) + int(unsafe.Sizeof(*s))
	for i := range s.calls.Len() {
		c := s.calls.At(i)
		n += len(c.id) + len(c.name)
	}
	for _, t := range s.tools {
		n += len(t)
	}
	var prev []bool
	for i := range s.marks.Len() {
		// The marks share their done lists until a response answers.
		if d := s.marks.At(i).done; cap(d) > 0 && unsafe.SliceData(d) != unsafe.SliceData(prev) {
			n += cap(d)
			prev = d
		}
	}
	return n
}

// Top-level members the proxy reads, in the order of read's spans. The
// API takes each member by its JSON name and by its proto name; both
// spellings of one member are one member.
var topKeys = []string{"contents", "systemInstruction", "system_instruction", "tools"}

const (
	keyContents = iota
	keySystem
	keySystemProto
	keyTools
)

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

// read reads a request body that came by path without a turn memo; the
// system instruction's text comes from systems when it holds it (nil:
// decoded every time).
func read(body []byte, path string, systems *wire.SystemMemo) (*request, error) {
	return readTurn(body, path, systems, nil, "")
}

// readTurn reads a request body that came by path in one pass that checks
// it (JSON, nesting bounded, no member the proxy reads given twice),
// locates the top-level members and the contents, and reads each content
// with gjson from its span. With a memo, the contents of the
// conversation's remembered turn that this body repeats byte for byte are
// not read again, nor are the bytes after the array when they are the
// same (see wire.TurnMemo): the Gemini CLI sends its contents first, its
// 30 KB system instruction and its tools after them.
func readTurn(body []byte, path string, systems *wire.SystemMemo, memo *wire.TurnMemo[*turnState], tenant string) (*request, error) {
	model, method, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	r := &request{body: body, resume: wire.NewResume(memo)}
	ts, err := wire.ScanTurn(body, topKeys, keyContents, &r.resume, tenant, func(p *turnState) []wire.Span { return p.after })
	if err != nil {
		return nil, err
	}
	sp, spans := ts.Top, ts.Elems
	r.system, r.systemKey = sp[keySystem], topKeys[keySystem]
	sysKey := keySystem
	switch {
	case sp[keySystem].OK() && sp[keySystemProto].OK():
		return nil, &wire.DuplicateKeyError{Key: topKeys[keySystem]}
	case sp[keySystemProto].OK():
		r.system, r.systemKey, sysKey = sp[keySystemProto], topKeys[keySystemProto], keySystemProto
	}
	r.elems, r.arrayEnd, r.after, r.truncated = ts.Ends, ts.ArrayEnd, ts.After, ts.Truncated
	in := &r.info
	in.Model, in.Stream = model, method == MethodStream
	if sp[keyTools].OK() {
		in.ToolDefs = sp[keyTools].Raw(body)
		if sp[keyTools].Start >= r.arrayEnd {
			in.ToolDefsSum = r.resume.MemberSum(topKeys[keyTools])
		}
	}
	prior := r.resume.PriorState()
	switch contents := sp[keyContents]; {
	case r.truncated:
		// Read whole, as a body without a memo.
		*r = request{body: body, arrayEnd: r.arrayEnd, truncated: true, system: r.system, systemKey: r.systemKey, info: r.info}
		prior = nil
		contents.Value(body).ForEach(func(i, c gjson.Result) bool {
			r.content(c, int(i.Int()), contents.Start, body)
			return true
		})
	case r.arrayEnd > 0:
		if r.resume.From > 0 {
			r.resumeFrom(prior, len(spans))
		} else {
			r.marks = wire.Chunks[mark]{}
		}
		// One copy of what is read: what is kept of it (names, ids, the
		// task) must not refer to the body, which is reused.
		region := ""
		if len(spans) > 0 {
			region = string(body[spans[0].Start:spans[len(spans)-1].End])
		}
		marks, calls, tools := r.marks.Len(), r.calls.Calls.Len(), len(in.Tools)
		for i, el := range spans {
			c := gjson.Parse(region[el.Start-spans[0].Start : el.End-spans[0].Start])
			r.content(c, r.resume.From+i, el.Start, body)
			r.marks.Append(r.mark())
		}
		// Nor must it keep the copy alive, with the responses in it.
		if r.detach = wire.NewDetacher(region); r.detach != nil {
			r.detachNew(marks, calls, tools)
		}
	}
	r.resume.Refer(&r.ref)
	in.Continued = r.resume.Prior != nil && r.answers.One()
	in.Goal = r.task.Goal
	// The system text and the key: the memo's when the system value is
	// the same bytes (before the contents: in the head; after them: in a
	// tail the memo knew, or the same bytes under its name in one that
	// changed elsewhere).
	known := prior != nil && (r.system.OK() && r.system.End <= sp[keyContents].Start || r.resume.TailKnown || ts.SameAfter(sysKey))
	switch raw := r.system.Raw(body); {
	case known:
		in.System, r.start = prior.system, prior.start
		r.systemBlocks = prior.systemBlocks
	case raw != nil:
		if systems != nil {
			in.System, r.start = systems.Text(raw)
		} else {
			in.System = systemText(raw)
		}
	}
	switch {
	case in.Goal == "":
	case known && in.Goal == prior.goal && prior.key != "":
		in.Key = prior.key
	case r.start != nil:
		in.Key = r.start.Key(in.Goal)
	default:
		in.Key = recall.ConversationKey(wire.Strip(in.System), in.Goal)
	}
	return r, nil
}

// detachNew gives what this turn read and keeps (its marks from marks
// on, its calls from calls on, its tools from tools on, the task and the
// origin) bytes of their own (see wire.Detacher).
func (r *request) detachNew(marks, calls, tools int) {
	d := r.detach
	for i := calls; i < r.calls.Calls.Len(); i++ {
		c := r.calls.Calls.At(i)
		c.id, c.name = d.Str(c.id), d.Str(c.name)
	}
	d.Strs(r.info.Tools[tools:])
	r.info.Origin, r.task.Goal = d.Str(r.info.Origin), d.Str(r.task.Goal)
	for i := marks; i < r.marks.Len(); i++ {
		m := r.marks.At(i)
		m.origin, m.task.Goal = d.Str(m.origin), d.Str(m.task.Goal)
	}
}

// resumeFrom sets what was read up to the last content skipped from p,
// the remembered turn's state, with room for the marks of room contents
// more.
func (r *request) resumeFrom(p *turnState, room int) {
	last := r.resume.From - 1
	mk := *p.marks.At(last)
	in := &r.info
	// What this turn appends must not write into what the memo's turn
	// holds (wire.Resumed, wire.ResumedNames).
	in.Tools = wire.ResumedNames(p.tools, mk.tools, &p.toolsExt)
	in.ToolCount, in.Origin, in.Later = mk.toolCount, mk.origin, mk.later
	r.users, r.answered, r.task = mk.users, mk.answered, mk.task
	r.first, r.newest = mk.first, mk.newest
	r.lastFrom, r.done, r.doneShared = mk.lastFrom, mk.done, true
	var took bool
	r.marks, r.calls.Calls, took = wire.Resumed(&p.ext, &p.marks, &p.calls, last, mk.calls, room)
	r.verdicts, in.Prior = p.verdicts.Resumed(last, took)
}

// mark is what was read so far. Its done list is shared with the request
// until a response answers a call.
func (r *request) mark() mark {
	r.doneShared = true
	return mark{
		tools: len(r.info.Tools), calls: r.calls.Calls.Len(), toolCount: r.info.ToolCount, users: r.users,
		lastFrom: r.lastFrom, answered: r.answered, later: r.info.Later, origin: r.info.Origin,
		task: r.task, first: r.first, newest: r.newest, done: r.done,
	}
}

// content reads content c, the i-th, at base in body (gjson's offsets in
// c are from there).
func (r *request) content(c gjson.Result, i, base int, body []byte) {
	in := &r.info
	// A model content followed by another is an earlier answer of the
	// model; one that ends the contents is the client's own.
	in.Later = in.Later || r.answered
	role := c.Get("role").String()
	r.answers.Add(role == "model")
	switch role {
	case "model":
		r.answered = true
		r.model(c, base, body)
	case "user", "":
		p := r.readUser(c, i, base, body)
		if r.users++; r.users == 1 {
			r.first = p
		}
		r.newest = p
	case "function":
		// The API's older role for function responses: the newest turn
		// when it ends the conversation, never its first user turn.
		r.newest = r.readUser(c, i, base, body)
	}
}

// model reads a model content's function calls, each with the content's
// text before it (its note): they are the latest, which the responses
// that follow answer. The conversation's first call with an id is the
// run's origin (see wire.Info.Origin).
func (r *request) model(c gjson.Result, base int, body []byte) {
	in := &r.info
	r.lastFrom, r.done, r.doneShared = r.calls.Calls.Len(), nil, false
	var note wire.Span
	c.Get("parts").ForEach(func(_, part gjson.Result) bool {
		p := readPart(part)
		if t := p.text; t.Type == gjson.String && !note.OK() && !p.thought.Bool() {
			note = spanOf(t, base, body)
		}
		fc := p.call
		if !fc.IsObject() {
			fc = p.snakeCall
		}
		name := fc.Get("name").String()
		if name == "" {
			return true
		}
		in.Tools = append(in.Tools, name)
		cl := call{id: fc.Get("id").String(), name: name, args: spanOf(fc.Get("args"), base, body), note: note, at: r.calls.Calls.Len()}
		r.calls.Add(cl)
		if in.Origin == "" && cl.id != "" {
			in.Origin = cl.id
		}
		return true
	})
}

// partFields are the members of a content's part that the proxy reads,
// each its first occurrence (as gjson's Get finds it).
type partFields struct {
	text, thought   gjson.Result
	call, snakeCall gjson.Result // functionCall, function_call
}

// readPart reads part's members in one pass: a part may hold a thought
// signature of kilobytes, which a Get of each member would skip once a
// member.
func readPart(part gjson.Result) partFields {
	var p partFields
	part.ForEach(func(k, v gjson.Result) bool {
		var f *gjson.Result
		switch k.Str {
		case "text":
			f = &p.text
		case "thought":
			f = &p.thought
		case "functionCall":
			f = &p.call
		case "function_call":
			f = &p.snakeCall
		default:
			return true
		}
		if !f.Exists() {
			*f = v
		}
		return true
	})
	return p
}

// answer returns the call a response of tool name (and id, if any)
// answers: by id, else in order, the next call of the latest model
// content not answered, of the same tool.
func (r *request) answer(id, name string) *call {
	if id != "" {
		if cl := r.calls.Find(id); cl != nil {
			r.answerAt(cl.at)
			return cl
		}
	}
	for i := r.lastFrom; i < r.calls.Calls.Len(); i++ {
		if cl := r.calls.Calls.At(i); cl.name == name && !r.answeredAt(i) {
			r.answerAt(i)
			return cl
		}
	}
	return nil
}

// answeredAt reports whether call i, of the latest model content, was
// answered.
func (r *request) answeredAt(i int) bool {
	i -= r.lastFrom
	return i < len(r.done) && r.done[i]
}

// answerAt notes that call i was answered, when it is one of the latest
// model content's.
func (r *request) answerAt(i int) {
	n := r.calls.Calls.Len() - r.lastFrom
	if i -= r.lastFrom; i < 0 || i >= n {
		return
	}
	if r.doneShared || len(r.done) < n {
		done := make([]bool, n)
		copy(done, r.done)
		r.done, r.doneShared = done, false
	}
	r.done[i] = true
}

// readUser reads a user content: its function responses, and, for the
// first user content that has text of its own, the task. It returns
// where the content's parts are: base is the offset in body of the
// content, from which gjson counts.
func (r *request) readUser(c gjson.Result, at int, base int, body []byte) parts {
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
			r.toolResult(v.response, at, int(j.Int()), body)
		}
		return true
	})
	if !r.task.Found && len(text) > 0 {
		r.task.Add(wire.StripFramed(strings.Join(text, "\n")), wire.Task)
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
func (r *request) toolResult(fr gjson.Result, at, j int, body []byte) {
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
	if cl := r.answer(id, name); cl != nil {
		tr.Args, tr.Note = cl.args.Raw(body), cl.note.Raw(body)
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

// remember keeps the turn in the memo, once its tool results are judged.
func (r *request) remember() bool {
	if r.arrayEnd == 0 || r.truncated || r.marks.Len() != len(r.elems) {
		return false
	}
	if !r.resume.Keeps(r.elems) {
		return false // a retry or a replaced step: the remembered turn stays
	}
	in := &r.info
	st := &turnState{
		marks: r.marks, calls: r.calls.Calls, tools: in.Tools,
		verdicts:     r.verdicts.Add(in.Prior, in.ToolResults, r.detach),
		systemBlocks: r.systemBlocks,
		system:       in.System, goal: in.Goal, key: in.Key, start: r.start,
		after: r.after,
	}
	return r.resume.Remember(r.body, r.elems, r.arrayEnd, st, st.size(), st.system)
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
func responseText(raw []byte) string { return wire.Decoded(raw, responseTextOf) }

// responseTextOf is responseText of the parsed response.
func responseTextOf(resp gjson.Result) string {
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
