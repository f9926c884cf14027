package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// toolResult is one role:"tool" message of a chat request.
type toolResult struct {
	dedupeKey string // "call:" + tool_call_id, or "hash:" + content hash
	name      string // tool name, from the assistant call it answers
	// content is the raw JSON of the message's content, in the body: it is
	// only decoded for results not seen before. releaseBody drops it.
	content []byte
}

// text returns the tool result's content text.
func (tr *toolResult) text() string { return providers.MessageText(parseRaw(tr.content)) }

// conversation is what the proxy reads of a chat request, in one pass over
// the body (scanChat) and without decoding it whole.
type conversation struct {
	scan chatScan // where the body's values are, for the rewrite

	model  string
	user   string
	stream bool

	system string // text of the first system/developer message
	goal   string // text of the first user message (mock directives removed)
	key    string // recall.ConversationKey of the conversation's first messages

	tools       []string // tool names the assistant called, in order
	toolResults []toolResult
	toolCount   int // tool results, kept after releaseBody
	failures    int // tool results that said the tool failed (set by recordToolErrors)
}

// releaseBody drops what still refers to the request body, so an answer
// that streams for minutes does not keep the body alive.
func (c *conversation) releaseBody() { c.toolResults = nil }

// usedTools reports whether the conversation called at least one tool.
func (c *conversation) usedTools() bool { return len(c.tools) > 0 || c.toolCount > 0 }

var mockDirective = regexp.MustCompile(`\[\[mock:[^\]]*\]\]`)

// parseRaw parses one JSON value of the body. The result never refers to
// the body: gjson.ParseBytes works on a copy of raw, so a string kept from
// it does not keep the body alive.
func parseRaw(raw []byte) gjson.Result {
	if len(raw) == 0 {
		return gjson.Result{}
	}
	return gjson.ParseBytes(raw)
}

// valueAt is the value at sp in body (absent when sp is).
func valueAt(body []byte, sp span) gjson.Result {
	if !sp.ok() {
		return gjson.Result{}
	}
	return parseRaw(body[sp.start:sp.end])
}

// inspect reads a chat completion request body. It returns a *jsonError
// when the body is not JSON.
func inspect(body []byte) (*conversation, error) {
	c := &conversation{}
	cs := &c.scan
	if err := scanChat(body, cs); err != nil {
		return nil, err
	}
	c.model = valueAt(body, cs.model).String()
	c.user = valueAt(body, cs.user).String()
	c.stream = valueAt(body, cs.stream).Bool()
	var names map[string]string // tool_call_id -> tool name
	systemSeen, userSeen := false, false
	call := 0 // next in cs.calls
	for i := range cs.msgs {
		m := &cs.msgs[i]
		if !m.obj {
			continue
		}
		switch m.kind {
		case roleSystem, roleDeveloper:
			if !systemSeen {
				systemSeen = true
				c.system = providers.MessageText(valueAt(body, m.content))
			}
		case roleUser:
			if !userSeen {
				userSeen = true
				c.goal = strings.TrimSpace(mockDirective.ReplaceAllString(providers.MessageText(valueAt(body, m.content)), ""))
			}
		case roleAssistant:
			for ; call < len(cs.calls) && cs.calls[call].msg <= i; call++ {
				cl := &cs.calls[call]
				if cl.msg < i {
					continue
				}
				name := valueAt(body, cl.name).String()
				if name == "" {
					continue
				}
				c.tools = append(c.tools, name)
				if id := valueAt(body, cl.id).String(); id != "" {
					if names == nil {
						names = make(map[string]string)
					}
					names[id] = name
				}
			}
		case roleTool, roleFunction:
			tr := toolResult{name: valueAt(body, m.name).String()}
			if m.content.ok() {
				tr.content = body[m.content.start:m.content.end]
			}
			if id := valueAt(body, m.toolCallID).String(); id != "" {
				tr.dedupeKey = "call:" + id
				if n := names[id]; n != "" {
					tr.name = n
				}
			} else {
				h := sha256.New()
				h.Write([]byte(tr.name))
				h.Write([]byte{0})
				h.Write(tr.content)
				tr.dedupeKey = "hash:" + hex.EncodeToString(h.Sum(nil)[:12])
			}
			c.toolResults = append(c.toolResults, tr)
			c.toolCount++
		}
	}
	if c.goal != "" {
		c.key = recall.ConversationKey(stripBlocks(c.system), c.goal)
	}
	return c, nil
}

// stripBlocks removes every guard and recall block from text.
func stripBlocks(text string) string {
	return guard.Strip(recall.Strip(text))
}
