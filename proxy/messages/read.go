package messages

import (
	"strings"
	"unsafe"

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

	// What reading the messages array found so far, message by message.
	users    int  // user messages read
	answered bool // an assistant message was read
	answers  wire.Answers
	calls    wire.CallChunks[call]
	// truncated says the messages array has more than wire.MaxElems
	// elements: it is read as a whole, and not remembered.
	truncated bool

	// detach copies what the turn keeps out of the copy of its messages
	// (nil when that copy is small).
	detach *wire.Detacher

	// The memo (see wire.TurnMemo): the conversation's remembered turn,
	// and what this turn will leave it.
	body     []byte
	resume   wire.Resume[*turnState]
	ref      wire.MemoRef[*turnState] // the conversation in the memo, for Forget
	elems    []wire.Elem              // where each message ends
	marks    wire.Chunks[mark]        // what was read up to the end of each message
	arrayEnd int                      // where the messages array ends; 0 when it is not one
	// verdicts are the verdicts of the tool results before this turn's
	// (their tallies are info.Prior), which remember adds this turn's to.
	verdicts wire.VerdictLog
	// systemBlocks says whether the system value holds a block's
	// opening: the remembered turn's when the value is the same bytes.
	systemBlocks wire.BlockCheck
	// Where the top-level members are after the messages array, relative
	// to its end (the memo keeps them with the bytes they are in).
	after []wire.Span
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

// call is a tool_use block read from an assistant message: its arguments
// and the text the assistant wrote before it (its note), as they stand in
// the body (absent when none).
type call struct {
	id, name   string
	args, note wire.Span
}

// CallID implements [wire.Identified].
func (c call) CallID() string { return c.id }

// mark is what was read of a conversation up to the end of one message.
type mark struct {
	tools, calls, toolCount, users int
	answered, later                bool
	origin                         string
	task                           recall.TaskFinder
	first, newest                  content
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
	// in the tail).
	system, goal, key string
	after             []wire.Span
}

// size estimates the memory s holds but its system text, which the turns
// of a conversation share: the memo counts it once (see
// wire.SharedTexts).
func (s *turnState) size() int {
	n := s.marks.Cap()*int(unsafe.Sizeof(mark{})) + s.calls.Cap()*int(unsafe.Sizeof(call{})) +
		cap(s.tools)*16 + s.verdicts.Size() +
		len(s.goal) + len(s.key) + int(unsafe.Sizeof(*s))
	for i := range s.calls.Len() {
		c := s.calls.At(i)
		n += len(c.id) + len(c.name)
	}
	for _, t := range s.tools {
		n += len(t)
	}
	return n
}

// Top-level members the proxy reads, in the order of read's spans.
var topKeys = []string{"model", "stream", "system", "messages", "metadata", "tools"}

const (
	keyModel = iota
	keyStream
	keySystem
	keyMessages
	keyMetadata
	keyTools
)

// read reads a Messages request body without a memo.
func read(body []byte) (*request, error) { return readTurn(body, nil, "") }

// readTurn reads a Messages request body in one pass that checks it (JSON,
// nesting bounded, no member the proxy reads given twice), locates the
// top-level members and the messages, and reads each message with gjson
// from its span. With a memo, the messages of the conversation's
// remembered turn that this body repeats byte for byte are not read again,
// nor are the bytes after the array when they are the same (see
// wire.TurnMemo).
func readTurn(body []byte, memo *wire.TurnMemo[*turnState], tenant string) (*request, error) {
	return readWith(body, memo, nil, tenant)
}

// readWith is readTurn that takes the system text from systems when it
// decodes it (nil: decoded every time): a conversation's first turn,
// which no turn memo knows, does not decode its agent's system blocks
// again.
func readWith(body []byte, memo *wire.TurnMemo[*turnState], systems *wire.SystemMemo, tenant string) (*request, error) {
	r := &request{body: body, resume: wire.NewResume(memo)}
	ts, err := wire.ScanTurn(body, topKeys, keyMessages, &r.resume, tenant, func(p *turnState) []wire.Span { return p.after })
	if err != nil {
		return nil, err
	}
	sp, spans := ts.Top, ts.Elems
	r.elems, r.arrayEnd, r.after, r.truncated = ts.Ends, ts.ArrayEnd, ts.After, ts.Truncated
	r.system = sp[keySystem]
	in := &r.info
	in.Model = sp[keyModel].Value(body).String()
	in.Stream = sp[keyStream].Value(body).Bool()
	if md := sp[keyMetadata].Value(body); md.IsObject() {
		in.User = md.Get("user_id").String()
		in.Run = claudeSession(in.User)
	}
	if sp[keyTools].OK() {
		in.ToolDefs = sp[keyTools].Raw(body)
		if sp[keyTools].Start >= r.arrayEnd {
			in.ToolDefsSum = r.resume.MemberSum("tools")
		}
	}
	prior := r.resume.PriorState()
	switch msgs := sp[keyMessages]; {
	case r.truncated:
		// Read whole, as a body without a memo.
		*r = request{body: body, arrayEnd: r.arrayEnd, truncated: true, system: r.system, info: r.info}
		prior = nil
		msgs.Value(body).ForEach(func(i, m gjson.Result) bool {
			r.message(m, int(i.Int()), msgs.Start, body)
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
		marks, calls, tools := r.marks.Len(), r.calls.Calls.Len(), len(r.info.Tools)
		for i, el := range spans {
			m := gjson.Parse(region[el.Start-spans[0].Start : el.End-spans[0].Start])
			r.message(m, r.resume.From+i, el.Start, body)
			r.marks.Append(r.mark())
		}
		// Nor must it keep the copy alive, with the tool results in it.
		if r.detach = wire.NewDetacher(region); r.detach != nil {
			r.detachNew(marks, calls, tools)
		}
	case msgs.OK():
		// Not an array: no message the API reads, but what it holds is
		// read as it always was.
		msgs.Value(body).ForEach(func(i, m gjson.Result) bool {
			r.message(m, int(i.Int()), msgs.Start, body)
			return true
		})
	}
	r.info.Goal = r.task.Goal
	r.resume.Refer(&r.ref)
	in.Continued = r.resume.Prior != nil && r.answers.One()
	// The system text and the key: the memo's when the system value is
	// the same bytes (before the messages: in the head; after them: in a
	// tail the memo knew, or the same bytes under "system" in one that
	// changed elsewhere).
	known := prior != nil && (r.system.OK() && r.system.End <= sp[keyMessages].Start || r.resume.TailKnown || ts.SameAfter(keySystem))
	var start *recall.KeyStart
	switch sys := sp[keySystem]; {
	case known:
		in.System = prior.system
		r.systemBlocks = prior.systemBlocks
	case sys.OK() && systems != nil:
		in.System, start = systems.Text(sys.Raw(body))
	case sys.OK():
		in.System = systemText(sys.Raw(body))
	}
	switch {
	case in.Goal == "":
	case known && in.Goal == prior.goal && prior.key != "":
		in.Key = prior.key
	case start != nil:
		in.Key = start.Key(in.Goal)
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

// resumeFrom sets what was read up to the last message skipped from p,
// the remembered turn's state, with room for the marks of room messages
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
	var took bool
	r.marks, r.calls.Calls, took = wire.Resumed(&p.ext, &p.marks, &p.calls, last, mk.calls, room)
	r.verdicts, in.Prior = p.verdicts.Resumed(last, took)
}

// mark is what was read so far.
func (r *request) mark() mark {
	return mark{
		tools: len(r.info.Tools), calls: r.calls.Calls.Len(), toolCount: r.info.ToolCount, users: r.users,
		answered: r.answered, later: r.info.Later, origin: r.info.Origin,
		task: r.task, first: r.first, newest: r.newest,
	}
}

// message reads message m, the i-th, at base in body (gjson's offsets in
// m are from there).
func (r *request) message(m gjson.Result, i, base int, body []byte) {
	in := &r.info
	// An assistant message followed by another is an earlier answer of
	// the model; one that ends the messages is the client's prefill.
	in.Later = in.Later || r.answered
	role := m.Get("role").String()
	r.answers.Add(role == "assistant")
	switch role {
	case "user":
		c := r.readUser(m, i, base, body)
		if r.arrayEnd == 0 {
			break // no message the API reads: none gets a block
		}
		if r.users++; r.users == 1 {
			r.first = c
		}
		r.newest = c
	case "assistant":
		r.answered = true
		r.readAssistant(m, base, body)
	}
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
func (r *request) readAssistant(m gjson.Result, base int, body []byte) {
	var note wire.Span
	m.Get("content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").String() {
		case "text":
			if t := b.Get("text"); t.Type == gjson.String && !note.OK() {
				note = spanOf(t, base, body)
			}
		case "tool_use":
			name := b.Get("name").String()
			if name != "" {
				id := b.Get("id").String()
				r.info.Tools = append(r.info.Tools, name)
				r.calls.Add(call{id: id, name: name, args: spanOf(b.Get("input"), base, body), note: note})
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
// message's content is: base is the offset in body of the value m was
// parsed from, from which gjson counts.
func (r *request) readUser(m gjson.Result, at int, base int, body []byte) content {
	in := &r.info
	cv := m.Get("content")
	c := content{at: spanOf(cv, base, body)}
	if cv.Type == gjson.String {
		if !r.task.Found {
			r.task.Add(wire.StripFramed(cv.Str), wire.Task)
		}
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
			if tr, ok := r.toolResult(b, at, base, body); ok {
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
	}
	return c
}

// toolResult reads a tool_result block of the user message at in one
// pass over its members: its content, often the largest value of the
// request, is located, not unescaped.
func (r *request) toolResult(b gjson.Result, at, base int, body []byte) (wire.ToolResult, bool) {
	bs := spanOf(b, base, body)
	if !bs.OK() {
		return wire.ToolResult{}, false
	}
	raw := bs.Raw(body)
	sp, err := wire.Members(raw, "tool_use_id", "is_error", "content")
	if err != nil {
		return wire.ToolResult{}, false
	}
	id := sp[0].Value(raw).String()
	isErr := sp[1].Value(raw)
	tr := wire.ToolResult{
		IsError: isErr.Bool(),
		OK:      isErr.Type == gjson.False,
		At:      at,
		Raw:     sp[2].Raw(raw),
		Decode:  resultText,
	}
	if cl := r.calls.Find(id); cl != nil {
		tr.Name = cl.name
		tr.Args, tr.Note = cl.args.Raw(body), cl.note.Raw(body)
	}
	if id != "" {
		tr.Key = "call:" + id
	} else {
		tr.Key = wire.HashKey(tr.Name, tr.Raw)
	}
	return tr, true
}

// spanOf is where v, read by gjson from the value at base in body, is in
// body; absent when gjson does not say.
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

// resultText is the text of a tool_result's content: a string, or the
// text of its blocks.
func resultText(raw []byte) string { return wire.Decoded(raw, wire.ContentText) }

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
		system:       in.System, goal: in.Goal, key: in.Key,
		after: r.after,
	}
	return r.resume.Remember(r.body, r.elems, r.arrayEnd, st, st.size(), st.system)
}

// systemText is the text of the system value raw: a string, or the text
// of its blocks.
func systemText(raw []byte) string { return wire.Decoded(raw, wire.ContentText) }
