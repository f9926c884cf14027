package responses

import (
	"cmp"
	"maps"
	"strings"

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
	names  map[string]string // call id -> tool name, of the calls read so far
	calls  map[string]call   // call id -> the call, of the calls in this body
	note   string            // the content of the latest assistant message read, raw

	systemSeen bool // a developer or system message was read as the system text
	task       recall.TaskFinder

	at places // where the blocks of a turn go (see place)
}

// Top-level members the proxy reads, in the order of read's spans.
var topKeys = []string{"model", "stream", "instructions", "input", "previous_response_id", "user", "safety_identifier", "tools", "prompt_cache_key"}

// read reads a Responses request body: the body is checked (JSON, nesting
// bounded, no member the proxy reads given twice) in one pass that also
// locates the top-level members; the input items are then read with gjson
// from their span.
func read(body []byte, tenant string, ch *chains) (*request, error) {
	sp, err := wire.Members(body, topKeys...)
	if err != nil {
		return nil, err
	}
	r := &request{instructions: sp[2], tenant: tenant, chains: ch, names: map[string]string{}, calls: map[string]call{}}
	in := &r.info
	in.Model = sp[0].Value(body).String()
	in.Stream = sp[1].Value(body).Bool()
	in.System = sp[2].Value(body).String()
	in.User = sp[5].Value(body).String()
	if sp[7].OK() {
		in.ToolDefs = sp[7].Raw(body)
	}
	if id := sp[6].Value(body).String(); id != "" {
		in.User = id
	}
	// Codex CLI keys the provider's cache by its session: one per run.
	in.Run = sp[8].Value(body).String()
	r.at.input = sp[3]
	if prev := sp[4].Value(body).String(); prev != "" {
		// The earlier items, the first user message among them, live on
		// the provider.
		in.Later, r.at.continued = true, true
		if st := ch.get(tenant, prev); st != nil {
			r.task = recall.TaskFinder{Goal: st.goal, Found: st.found}
			in.Goal, in.Key, in.Origin = st.goal, st.key, st.origin
			in.Run = cmp.Or(in.Run, st.run)
			in.Tools = append(in.Tools, st.tools...)
			in.ToolCount, in.Prior = st.toolCount, st.tallies
			maps.Copy(r.names, st.names)
		}
	}
	input := sp[3].Value(body)
	if input.Type == gjson.String {
		// A one-shot request: the input is its first user message.
		r.task.Add(r.firstUser(sp[3].Start, input), wire.Task)
		in.Goal = r.task.Goal
	} else {
		input.ForEach(func(i, item gjson.Result) bool {
			r.at.item(sp[3].Start, item)
			r.readItem(item, int(i.Int()))
			return true
		})
	}
	if in.Goal != "" && in.Key == "" {
		in.Key = recall.ConversationKey(wire.StripFramed(in.System), in.Goal)
	}
	return r, nil
}

// readItem reads one input item: a message (the first user message with
// text is the task), a tool call, or a tool call's output.
func (r *request) readItem(item gjson.Result, at int) {
	in := &r.info
	typ := item.Get("type").String()
	switch {
	case typ == "message" || typ == "" && item.Get("role").Exists():
		switch role := item.Get("role").String(); role {
		case "user":
			content, at := item.Get("content"), -1
			if content.Index > 0 {
				at = r.at.input.Start + content.Index
			}
			r.task.Add(r.firstUser(at, content), wire.Task)
			in.Goal = r.task.Goal
		case "assistant":
			in.Later = true
			r.note = item.Get("content").Raw
		case "developer", "system":
			content := item.Get("content")
			if text, ok := ourItem(role, content); ok {
				// Blocks the proxy placed, sent back: not the client's.
				r.at.ours, r.at.ourText = true, text
				break
			}
			// Without instructions (Codex sends none), the system text is
			// the first developer or system message.
			if !r.instructions.OK() && !r.systemSeen {
				r.systemSeen = true
				in.System = partsText(content)
			}
		}
	case typ != "" && typ != "additional_tools":
		// Any other kind is the model's output or answers it (calls and
		// their outputs, reasoning, item references...); Codex's
		// additional_tools item is its first request's own.
		in.Later = true
		r.readOutput(typ, item, at)
	}
}

// readOutput reads an input item of a kind the model made or that answers
// it: a tool call or a tool call's output.
func (r *request) readOutput(typ string, item gjson.Result, at int) {
	switch {
	case typ == "mcp_call":
		// A call and its result in one item.
		name := item.Get("name").String()
		r.call(item.Get("id").String(), name, item, false)
		out, e := item.Get("output"), item.Get("error")
		isErr := e.Exists() && e.Type != gjson.Null && e.String() != ""
		if isErr {
			out = e
		}
		if out.Exists() && out.Type != gjson.Null {
			r.result(item.Get("id").String(), name, isErr, out, at)
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
		r.result(id, r.names[id], isErr, out, at)
	case strings.HasSuffix(typ, "_call"):
		name, builtin := item.Get("name").String(), false
		if name == "" {
			// local_shell_call, computer_call, shell_call...: the tool is
			// the item's kind.
			name, builtin = strings.TrimSuffix(typ, "_call"), true
		}
		r.call(callID(item), name, item, builtin)
	}
}

// call is a tool call read from this body.
type call struct {
	args, note string // raw JSON, as in the body
	builtin    bool
}

// call notes a tool call the assistant made.
func (r *request) call(id, name string, item gjson.Result, builtin bool) {
	if name == "" {
		return
	}
	r.info.Tools = append(r.info.Tools, name)
	if id != "" {
		if r.info.Origin == "" {
			r.info.Origin = id
		}
		r.names[id] = name
		// The arguments: a function's JSON string, a custom tool's
		// free-form input, a built-in's action.
		args := item.Get("arguments")
		if !args.Exists() {
			args = item.Get("input")
		}
		if !args.Exists() {
			args = item.Get("action")
		}
		r.calls[id] = call{args: args.Raw, note: r.note, builtin: builtin}
	}
}

// result notes a tool call's output.
func (r *request) result(id, name string, isErr bool, out gjson.Result, at int) {
	tr := wire.ToolResult{Name: name, IsError: isErr, At: at, Raw: []byte(out.Raw), Decode: outputText}
	if id != "" {
		tr.Key = "call:" + id
		if cl, ok := r.calls[id]; ok {
			tr.Args, tr.Builtin = []byte(cl.args), cl.builtin
			if cl.note != "" {
				tr.Note = []byte(cl.note)
			}
		}
	} else {
		tr.Key = wire.HashKey(name, tr.Raw)
	}
	r.info.ToolResults = append(r.info.ToolResults, tr)
	r.info.ToolCount++
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
func outputText(raw []byte) string { return partsText(gjson.ParseBytes(raw)) }

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
