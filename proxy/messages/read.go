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
	}
	if sp[5].OK() {
		in.ToolDefs = sp[5].Raw(body)
	}
	calls := map[string]call{} // tool_use id -> the call
	sp[3].Value(body).ForEach(func(i, m gjson.Result) bool {
		switch m.Get("role").String() {
		case "user":
			r.readUser(m, int(i.Int()), calls)
		case "assistant":
			var note string // the message's text before its tool calls
			m.Get("content").ForEach(func(_, b gjson.Result) bool {
				switch b.Get("type").String() {
				case "text":
					if t := b.Get("text"); t.Type == gjson.String && note == "" {
						note = t.Raw
					}
				case "tool_use":
					name := b.Get("name").String()
					if name != "" {
						in.Tools = append(in.Tools, name)
						calls[b.Get("id").String()] = call{name: name, args: b.Get("input").Raw, note: note}
					}
				}
				return true
			})
		}
		return true
	})
	if in.Goal != "" {
		in.Key = recall.ConversationKey(wire.Strip(in.System), in.Goal)
	}
	return r, nil
}

// readUser reads a user message: its tool results, and, for the first
// user message that has text of its own, the task.
func (r *request) readUser(m gjson.Result, at int, calls map[string]call) {
	in := &r.info
	content := m.Get("content")
	if content.Type == gjson.String {
		r.task.Add(content.Str, wire.Task)
		in.Goal = r.task.Goal
		return
	}
	var text []gjson.Result
	content.ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").String() {
		case "text":
			text = append(text, b)
		case "tool_result":
			// One pass over the block's members: its content, often the
			// largest value of the request, is located, not unescaped.
			raw := []byte(b.Raw)
			sp, err := wire.Members(raw, "tool_use_id", "is_error", "content")
			if err != nil {
				return true
			}
			id := sp[0].Value(raw).String()
			cl := calls[id]
			tr := wire.ToolResult{
				Name:    cl.name,
				IsError: sp[1].Value(raw).Bool(),
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
			in.ToolResults = append(in.ToolResults, tr)
			in.ToolCount++
		}
		return true
	})
	if !r.task.Found && len(text) > 0 {
		parts := make([]string, 0, len(text))
		for _, t := range text {
			parts = append(parts, t.Get("text").String())
		}
		r.task.Add(strings.Join(parts, "\n"), wire.Task)
		in.Goal = r.task.Goal
	}
}

// call is a tool_use block read from an assistant message.
type call struct {
	name, args, note string // args and note raw JSON, as in the body
}

// resultText is the text of a tool_result's content: a string, or the
// text of its blocks.
func resultText(raw []byte) string { return wire.ContentText(gjson.ParseBytes(raw)) }
