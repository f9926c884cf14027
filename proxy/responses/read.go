package responses

import (
	"cmp"
	"strings"
	"unsafe"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// request is a Responses request as read.
type request struct {
	info         wire.Info
	instructions wire.Span // the "instructions" value; absent when none

	tenant string
	chains *chains
	names  map[string]string // call id -> tool name, of the calls of the response continued
	calls  wire.CallChunks[call]
	note   wire.Span // the content of the latest assistant message read
	// answers counts the model's answers read (see wire.Info.Continued).
	answers wire.Answers

	systemSeen bool   // a developer or system message was read
	firstRead  bool   // this request read the first user message (at.first is its own)
	devSystem  string // the text of the first one: the system text without instructions
	task       recall.TaskFinder

	at places // where the blocks of a turn go (see place)

	// The memo (see wire.TurnMemo): the conversation's remembered turn,
	// and what this turn will leave it.
	body     []byte
	detach   *wire.Detacher // copies what the turn keeps out of the copy of its items (nil: that copy is small)
	resume   wire.Resume[*turnState]
	ref      wire.MemoRef[*turnState] // the conversation in the memo, for Forget
	elems    []wire.Elem              // where each input item ends
	marks    wire.Chunks[mark]        // what was read up to the end of each item
	arrayEnd int                      // where the input array ends; 0 when it is not one
	// verdicts are the verdicts of the tool results before this turn's
	// (their tallies are info.Prior), which remember adds this turn's to.
	verdicts wire.VerdictLog
	after    []wire.Span // top-level members after the input, relative to its end
	// unstored says the request asks the provider not to store its
	// response ("store": false, as Codex CLI does): no later request can
	// continue from it, so its chain state is not kept.
	unstored bool
	// continued says the request continues a stored response, truncated
	// that its input has more than wire.MaxElems items: either is read
	// whole, and not remembered.
	continued, truncated bool
}

// call is a tool call read from this body: its arguments and the content
// of the assistant message before it (its note), as they stand in the
// body (absent when none).
type call struct {
	id, name   string
	args, note wire.Span
	builtin    bool
}

// CallID implements [wire.Identified].
func (c call) CallID() string { return c.id }

// mark is what was read of a conversation up to the end of one input
// item.
type mark struct {
	at                      places
	note                    wire.Span
	systemSeen, later       bool
	system, origin          string
	task                    recall.TaskFinder
	tools, calls, toolCount int
}

// turnState is what the memo keeps of a turn: its marks, and the slices
// they index.
type turnState struct {
	marks    wire.Chunks[mark]
	calls    wire.Chunks[call]
	ext      wire.Extension // of marks and calls
	tools    []string
	toolsExt wire.Extension  // of tools (see wire.ResumedNames)
	verdicts wire.VerdictLog // what the tool results said, in order
	// The instructions' text, when the body has a string of them, and
	// the system text, goal and key of the turn.
	instructions, system, goal, key string
	after                           []wire.Span
}

// size estimates the memory s holds but its system text, which the turns
// of a conversation share (the instructions, when set, are the same
// string): the memo counts it once (see wire.SharedTexts).
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
	var prev *firstUser
	for i := range s.marks.Len() {
		// What the marks share: the first user message's places, and
		// their texts.
		if f := s.marks.At(i).at.first; f != nil && f != prev {
			n += int(unsafe.Sizeof(*f)) + len(f.userText) + len(f.userClean) + len(f.partText)
			prev = f
		}
	}
	return n
}

// Top-level members the proxy reads, in the order of read's spans.
var topKeys = []string{"model", "stream", "instructions", "input", "previous_response_id", "user", "safety_identifier", "tools", "prompt_cache_key", "store"}

const (
	keyModel = iota
	keyStream
	keyInstructions
	keyInput
	keyPrevious
	keyUser
	keySafety
	keyTools
	keyCacheKey
	keyStore
)

// read reads a Responses request body without a memo.
func read(body []byte, tenant string, ch *chains) (*request, error) {
	return readTurn(body, tenant, ch, nil)
}

// readTurn reads a Responses request body in one pass that checks it
// (JSON, nesting bounded, no member the proxy reads given twice), locates
// the top-level members and the input items, and reads each item with
// gjson from its span. With a memo, the items of the conversation's
// remembered turn that this body repeats byte for byte are not read
// again, nor are the bytes after the input when they are the same (see
// wire.TurnMemo). A request that continues a stored response is read
// whole.
func readTurn(body []byte, tenant string, ch *chains, memo *wire.TurnMemo[*turnState]) (*request, error) {
	r := &request{body: body, tenant: tenant, chains: ch, resume: wire.NewResume(memo)}
	ts, err := wire.ScanTurn(body, topKeys, keyInput, &r.resume, tenant, func(p *turnState) []wire.Span { return p.after })
	if err != nil {
		return nil, err
	}
	sp := ts.Top
	prev := sp[keyPrevious].Value(body).String()
	whole := ts.Truncated || prev != "" && r.resume.Prior != nil
	if whole {
		// Read whole, as a body without a memo.
		r.resume = wire.Resume[*turnState]{}
	}
	r.elems, r.arrayEnd, r.after = ts.Ends, ts.ArrayEnd, ts.After
	r.continued, r.truncated = prev != "", ts.Truncated
	r.unstored = string(sp[keyStore].Raw(body)) == "false"
	r.instructions = sp[keyInstructions]
	in := &r.info
	in.Model = sp[keyModel].Value(body).String()
	in.Stream = sp[keyStream].Value(body).Bool()
	prior := r.resume.PriorState()
	// The instructions' text: the memo's when their bytes are the same
	// (before the input: in the head; after it: in a tail the memo knew,
	// or the same bytes under "instructions" in one that changed
	// elsewhere).
	ins := r.instructions
	if prior != nil && ins.OK() && (ins.End <= sp[keyInput].Start || r.resume.TailKnown || ts.SameAfter(keyInstructions)) {
		in.System = prior.instructions
	} else {
		in.System = ins.Value(body).String()
	}
	in.User = sp[keyUser].Value(body).String()
	if sp[keyTools].OK() {
		in.ToolDefs = sp[keyTools].Raw(body)
		if sp[keyTools].Start >= r.arrayEnd && r.arrayEnd > 0 {
			in.ToolDefsSum = r.resume.MemberSum("tools")
		}
	}
	if id := sp[keySafety].Value(body).String(); id != "" {
		in.User = id
	}
	// Codex CLI keys the provider's cache by its session: one per run.
	in.Run = sp[keyCacheKey].Value(body).String()
	r.at.input = sp[keyInput]
	if prev != "" {
		// The earlier items, the first user message among them, live on
		// the provider.
		in.Later, r.at.continued = true, true
		if st := ch.get(tenant, prev); st != nil {
			r.task = recall.TaskFinder{Goal: st.goal, Found: st.found}
			in.Goal, in.Key, in.Origin = st.goal, st.key, st.origin
			in.Run = cmp.Or(in.Run, st.run)
			in.Tools = append(in.Tools, st.tools...)
			in.ToolCount, in.Prior = st.toolCount, st.tallies
			r.names = st.names
		}
	}
	input := sp[keyInput]
	switch {
	case ts.ArrayEnd > 0 && !whole:
		if r.resume.From > 0 {
			r.resumeFrom(prior, len(ts.Elems))
		} else {
			r.marks = wire.Chunks[mark]{}
		}
		// One copy of what is read: what is kept of it (names, ids, the
		// task) must not refer to the body, which is reused.
		region, from := "", 0
		if len(ts.Elems) > 0 {
			from = ts.Elems[0].Start
			region = string(body[from:ts.Elems[len(ts.Elems)-1].End])
		}
		marks, calls, tools := r.marks.Len(), r.calls.Calls.Len(), len(in.Tools)
		for i, el := range ts.Elems {
			item := gjson.Parse(region[el.Start-from : el.End-from])
			r.at.item(el.Start, item)
			r.readItem(item, r.resume.From+i, el.Start)
			r.marks.Append(r.mark())
		}
		// Nor must it keep the copy alive, with the tool outputs in it.
		if r.detach = wire.NewDetacher(region); r.detach != nil {
			r.detachNew(marks, calls, tools)
		}
	case input.OK() && body[input.Start] == '"':
		// A one-shot request: the input is its first user message.
		r.task.Add(r.firstUser(input.Start, input.Value(body)), wire.Task)
	default:
		input.Value(body).ForEach(func(i, item gjson.Result) bool {
			r.at.item(input.Start, item)
			r.readItem(item, int(i.Int()), input.Start)
			return true
		})
	}
	r.resume.Refer(&r.ref)
	in.Continued = r.resume.Prior != nil && r.answers.One()
	if !r.instructions.OK() {
		in.System = r.devSystem
	}
	if in.Goal = r.task.Goal; in.Goal != "" && in.Key == "" {
		if prior != nil && in.System == prior.system && in.Goal == prior.goal && prior.key != "" {
			in.Key = prior.key
		} else {
			in.Key = recall.ConversationKey(wire.StripFramed(in.System), in.Goal)
		}
	}
	return r, nil
}

// resumeFrom sets what was read up to the last item skipped from p, the
// remembered turn's state, with room for the marks of room items more.
func (r *request) resumeFrom(p *turnState, room int) {
	last := r.resume.From - 1
	mk := p.marks.At(last)
	in := &r.info
	input := r.at.input
	r.at, r.at.input = mk.at, input
	r.note, r.systemSeen, r.task = mk.note, mk.systemSeen, mk.task
	r.devSystem = mk.system
	in.Later, in.Origin, in.ToolCount = mk.later, mk.origin, mk.toolCount
	// What this turn appends must not write into what the memo's turn
	// holds (wire.Resumed, wire.ResumedNames).
	in.Tools = wire.ResumedNames(p.tools, mk.tools, &p.toolsExt)
	var took bool
	r.marks, r.calls.Calls, took = wire.Resumed(&p.ext, &p.marks, &p.calls, last, mk.calls, room)
	r.verdicts, in.Prior = p.verdicts.Resumed(last, took)
}

// detachNew gives what this turn read and keeps (its marks from marks
// on, its calls from calls on, its tools from tools on, the task, the
// origin, the developer's system text and the places of the first user
// message) bytes of their own (see wire.Detacher).
func (r *request) detachNew(marks, calls, tools int) {
	d := r.detach
	for i := calls; i < r.calls.Calls.Len(); i++ {
		c := r.calls.Calls.At(i)
		c.id, c.name = d.Str(c.id), d.Str(c.name)
	}
	in := &r.info
	d.Strs(in.Tools[tools:])
	in.Origin, r.task.Goal, r.devSystem = d.Str(in.Origin), d.Str(r.task.Goal), d.Str(r.devSystem)
	r.at.ourText = d.Str(r.at.ourText)
	if f := r.at.first; r.firstRead && f != nil {
		// The marks of this turn share it: detached once.
		f.userText, f.userClean, f.partText = d.Str(f.userText), d.Str(f.userClean), d.Str(f.partText)
	}
	for i := marks; i < r.marks.Len(); i++ {
		m := r.marks.At(i)
		m.origin, m.task.Goal, m.system = d.Str(m.origin), d.Str(m.task.Goal), d.Str(m.system)
		m.at.ourText = d.Str(m.at.ourText)
	}
}

// mark is what was read so far.
func (r *request) mark() mark {
	in := &r.info
	mk := mark{
		at: r.at, note: r.note, systemSeen: r.systemSeen, later: in.Later, origin: in.Origin, task: r.task,
		tools: len(in.Tools), calls: r.calls.Calls.Len(), toolCount: in.ToolCount,
	}
	mk.at.input = wire.Span{}
	mk.system = r.devSystem
	return mk
}

// readItem reads one input item, the at-th, at base in the body (gjson's
// offsets in item are from there): a message (the first user message
// with text is the task), a tool call, or a tool call's output.
func (r *request) readItem(item gjson.Result, at, base int) {
	in := &r.info
	typ := item.Get("type").String()
	switch {
	case typ == "message" || typ == "" && item.Get("role").Exists():
		role := item.Get("role").String()
		r.answers.Add(role == "assistant")
		switch role {
		case "user":
			content, cat := item.Get("content"), -1
			if content.Index > 0 {
				cat = base + content.Index
			}
			r.task.Add(r.firstUser(cat, content), wire.Task)
		case "assistant":
			in.Later = true
			r.note = spanOf(item.Get("content"), base)
		case "developer", "system":
			content := item.Get("content")
			if text, ok := ourItem(role, content); ok {
				// Blocks the proxy placed, sent back: not the client's.
				r.at.ours, r.at.ourText = true, text
				break
			}
			// Without instructions (Codex sends none), the system text is
			// the first developer or system message.
			if !r.systemSeen {
				r.systemSeen = true
				r.devSystem = partsText(content)
			}
		}
	case typ != "" && typ != "additional_tools":
		// Any other kind is the model's output or answers it (calls and
		// their outputs, reasoning, item references...); Codex's
		// additional_tools item is its first request's own.
		in.Later = true
		r.answers.Add(modelItem(typ))
		r.readOutput(typ, item, at, base)
	default:
		r.answers.Add(false)
	}
}

// modelItem reports whether an input item of kind typ, not a message, is
// the model's output (reasoning, a call) rather than what answers it (a
// call's output, an approval) or refers to it. The kinds that answer a
// call end in "_output"; any other kind not named here counts as the
// model's.
func modelItem(typ string) bool {
	switch {
	case strings.HasSuffix(typ, "_output"), typ == "mcp_approval_response", typ == "item_reference":
		return false
	}
	return true
}

// spanOf is where v, read by gjson from the value at base in the body,
// is; absent when gjson does not say.
func spanOf(v gjson.Result, base int) wire.Span {
	if v.Index <= 0 || v.Raw == "" {
		return wire.Span{}
	}
	return wire.Span{Start: base + v.Index, End: base + v.Index + len(v.Raw)}
}

// readOutput reads an input item of a kind the model made or that answers
// it, the at-th, at base in the body: a tool call or a tool call's
// output.
func (r *request) readOutput(typ string, item gjson.Result, at, base int) {
	switch {
	case typ == "mcp_call":
		// A call and its result in one item.
		name := item.Get("name").String()
		r.call(item.Get("id").String(), name, item, base, false)
		out, e := item.Get("output"), item.Get("error")
		isErr := e.Exists() && e.Type != gjson.Null && e.String() != ""
		if isErr {
			out = e
		}
		if out.Exists() && out.Type != gjson.Null {
			r.result(item.Get("id").String(), name, isErr, out, at, base)
		}
	case strings.HasSuffix(typ, "_call_output"):
		id := callID(item)
		isErr := item.Get("status").String() == "failed"
		out := item.Get("output")
		if out.IsArray() {
			out.ForEach(func(_, o gjson.Result) bool {
				// shell_call_output: one outcome per command; Codex's exec
				// tool: a text part holding its command's result as JSON.
				if c := o.Get("outcome.exit_code"); c.Exists() && c.Int() != 0 {
					isErr = true
				}
				if code, _, ok := commandResult(o.Get("text").String()); ok && code != 0 {
					isErr = true
				}
				return true
			})
		}
		name := r.names[id]
		if cl := r.calls.Find(id); cl != nil {
			name = cl.name
		}
		r.result(id, name, isErr, out, at, base)
	case strings.HasSuffix(typ, "_call"):
		name, builtin := item.Get("name").String(), false
		if name == "" {
			// local_shell_call, computer_call, shell_call...: the tool is
			// the item's kind.
			name, builtin = strings.TrimSuffix(typ, "_call"), true
		}
		r.call(callID(item), name, item, base, builtin)
	}
}

// call notes a tool call the assistant made, in an item at base in the
// body.
func (r *request) call(id, name string, item gjson.Result, base int, builtin bool) {
	if name == "" {
		return
	}
	r.info.Tools = append(r.info.Tools, name)
	if id != "" {
		if r.info.Origin == "" {
			r.info.Origin = id
		}
		// The arguments: a function's JSON string, a custom tool's
		// free-form input, a built-in's action.
		args := item.Get("arguments")
		if !args.Exists() {
			args = item.Get("input")
		}
		if !args.Exists() {
			args = item.Get("action")
		}
		r.calls.Add(call{id: id, name: name, args: spanOf(args, base), note: r.note, builtin: builtin})
	}
}

// result notes a tool call's output, in an item at base in the body.
func (r *request) result(id, name string, isErr bool, out gjson.Result, at, base int) {
	body := r.body
	tr := wire.ToolResult{Name: name, IsError: isErr, At: at, Raw: spanOf(out, base).Raw(body), Decode: outputText}
	if id != "" {
		tr.Key = "call:" + id
		if cl := r.calls.Find(id); cl != nil {
			tr.Args, tr.Builtin, tr.Note = cl.args.Raw(body), cl.builtin, cl.note.Raw(body)
		}
	} else {
		tr.Key = wire.HashKey(name, tr.Raw)
	}
	r.info.ToolResults = append(r.info.ToolResults, tr)
	r.info.ToolCount++
}

// remember keeps the turn in the memo, once its tool results are judged.
func (r *request) remember() bool {
	if r.arrayEnd == 0 || r.truncated || r.continued || r.marks.Len() != len(r.elems) {
		return false
	}
	if !r.resume.Keeps(r.elems) {
		return false // a retry or a replaced step: the remembered turn stays
	}
	in := &r.info
	st := &turnState{
		marks: r.marks, calls: r.calls.Calls, tools: in.Tools,
		verdicts: r.verdicts.Add(in.Prior, in.ToolResults, r.detach),
		system:   in.System, goal: in.Goal, key: in.Key,
		after: r.after,
	}
	if r.instructions.OK() {
		st.instructions = in.System
	}
	return r.resume.Remember(r.body, r.elems, r.arrayEnd, st, st.size(), st.system)
}

// callID is the id that ties a call to its output: call_id, or id for the
// kinds that have only that.
func callID(item gjson.Result) string {
	if id := item.Get("call_id").String(); id != "" {
		return id
	}
	return item.Get("id").String()
}

// outputText is the text of a tool output: a string, or the text of its
// parts (input_text, output_text; the output of a command result), or the
// stdout and stderr of a shell call's outputs.
func outputText(raw []byte) string { return wire.Decoded(raw, partsText) }

// commandResult reads a command's result that Codex's exec tool returns
// as a JSON text: {"exit_code":1,"output":"..."}.
func commandResult(text string) (code int64, output string, ok bool) {
	if len(text) < 2 || text[0] != '{' || !strings.Contains(text, `"exit_code"`) || !wire.Valid([]byte(text)) {
		return 0, "", false
	}
	res := gjson.GetMany(text, "exit_code", "output")
	if res[0].Type != gjson.Number {
		return 0, "", false
	}
	return res[0].Int(), res[1].String(), true
}

// partsText is the text of a string or of an array of content parts,
// joined by newlines.
func partsText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	if !v.IsArray() {
		return ""
	}
	var parts []string
	v.ForEach(func(_, p gjson.Result) bool {
		for _, k := range []string{"text", "stdout", "stderr"} {
			if t := p.Get(k); t.Type == gjson.String && t.Str != "" {
				if _, out, ok := commandResult(t.Str); ok {
					t.Str = out
				}
				parts = append(parts, t.Str)
			}
		}
		return true
	})
	return strings.Join(parts, "\n")
}
