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
	// msg is the message as found in the body: its content is only looked
	// up (and unescaped) for results not seen before. It refers to the
	// body; releaseBody drops it.
	msg gjson.Result
}

// text returns the tool result's content text.
func (tr *toolResult) text() string { return providers.MessageText(tr.msg.Get("content")) }

// conversation is what the proxy reads of a chat request, in one pass over
// its messages and without decoding the body whole.
type conversation struct {
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

// firstFields reads the first occurrence of each of keys in obj, in one
// pass (a gjson Get per key would scan the object once per key); into[i]
// receives keys[i], as obj.Get(keys[i]) would. obj must be an object.
func firstFields(obj gjson.Result, keys []string, into []gjson.Result) {
	obj.ForEach(func(k, v gjson.Result) bool {
		for i, want := range keys {
			if k.Str == want && !into[i].Exists() {
				into[i] = v
			}
		}
		return true
	})
}

var (
	topKeys = []string{"model", "user", "stream", "messages"}
)

// inspect reads a chat completion request body (valid JSON).
func inspect(body []byte) *conversation {
	var top [4]gjson.Result
	if doc := gjson.ParseBytes(body); doc.IsObject() {
		firstFields(doc, topKeys, top[:])
	}
	c := &conversation{model: strings.Clone(top[0].String()), user: strings.Clone(top[1].String()), stream: top[2].Bool()}
	var names map[string]string // tool_call_id -> tool name
	systemSeen, userSeen := false, false
	var f [5]gjson.Result // role, content, tool_calls, tool_call_id, name
	top[3].ForEach(func(_, msg gjson.Result) bool {
		if !msg.IsObject() {
			return true
		}
		// Fields are looked up one by one, only those the role needs:
		// walking a message with ForEach would unescape every string in
		// it, a tool output of kilobytes included, on every turn.
		f = [5]gjson.Result{}
		f[0] = msg.Get("role")
		switch f[0].String() {
		case "system", "developer", "user":
			f[1] = msg.Get("content")
		case "assistant":
			f[2] = msg.Get("tool_calls")
		case "tool", "function":
			f[3], f[4] = msg.Get("tool_call_id"), msg.Get("name")
		}
		switch f[0].String() {
		case "system", "developer":
			if !systemSeen {
				systemSeen = true
				c.system = ownText(f[1])
			}
		case "user":
			if !userSeen {
				userSeen = true
				c.goal = strings.Clone(strings.TrimSpace(mockDirective.ReplaceAllString(providers.MessageText(f[1]), "")))
			}
		case "assistant":
			f[2].ForEach(func(_, call gjson.Result) bool {
				name := call.Get("function.name").String()
				if name == "" {
					return true
				}
				name = strings.Clone(name)
				c.tools = append(c.tools, name)
				if id := call.Get("id").String(); id != "" {
					if names == nil {
						names = make(map[string]string)
					}
					names[id] = name
				}
				return true
			})
		case "tool", "function":
			id := f[3].String()
			tr := toolResult{msg: msg, name: strings.Clone(f[4].String())}
			if id != "" {
				tr.dedupeKey = "call:" + id
				if n := names[id]; n != "" {
					tr.name = n
				}
			} else {
				sum := sha256.Sum256([]byte(tr.name + "\x00" + msg.Get("content").Raw))
				tr.dedupeKey = "hash:" + hex.EncodeToString(sum[:12])
			}
			c.toolResults = append(c.toolResults, tr)
			c.toolCount++
		}
		return true
	})
	if c.goal != "" {
		c.key = recall.ConversationKey(stripBlocks(c.system), c.goal)
	}
	return c
}

// ownText is providers.MessageText of v, never a substring of the parsed
// body. The strings a conversation keeps must not be: one of them would
// keep the whole body copy in memory for as long as the answer streams.
// gjson returns a string with escapes as an unescaped copy, and one without
// as a substring, which is cloned here.
func ownText(v gjson.Result) string {
	t := providers.MessageText(v)
	if v.Type == gjson.String && strings.IndexByte(v.Raw, '\\') < 0 {
		return strings.Clone(t)
	}
	return t
}

// stripBlocks removes every guard and recall block from text.
func stripBlocks(text string) string {
	return guard.Strip(recall.Strip(text))
}
