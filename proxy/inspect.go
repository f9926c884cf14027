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
	content   string
}

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
}

// usedTools reports whether the conversation called at least one tool.
func (c *conversation) usedTools() bool { return len(c.tools) > 0 || len(c.toolResults) > 0 }

var mockDirective = regexp.MustCompile(`\[\[mock:[^\]]*\]\]`)

// inspect reads a chat completion request body (valid JSON).
func inspect(body []byte) *conversation {
	top := gjson.GetManyBytes(body, "model", "user", "stream", "messages")
	c := &conversation{model: top[0].String(), user: top[1].String(), stream: top[2].Bool()}
	var names map[string]string // tool_call_id -> tool name
	systemSeen, userSeen := false, false
	top[3].ForEach(func(_, msg gjson.Result) bool {
		f := msg.Get("role")
		switch f.String() {
		case "system", "developer":
			if !systemSeen {
				systemSeen = true
				c.system = providers.MessageText(msg.Get("content"))
			}
		case "user":
			if !userSeen {
				userSeen = true
				c.goal = strings.TrimSpace(mockDirective.ReplaceAllString(providers.MessageText(msg.Get("content")), ""))
			}
		case "assistant":
			msg.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				name := call.Get("function.name").String()
				if name == "" {
					return true
				}
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
			text := providers.MessageText(msg.Get("content"))
			id := msg.Get("tool_call_id").String()
			tr := toolResult{content: text, name: msg.Get("name").String()}
			if id != "" {
				tr.dedupeKey = "call:" + id
				if n := names[id]; n != "" {
					tr.name = n
				}
			} else {
				sum := sha256.Sum256([]byte(tr.name + "\x00" + text))
				tr.dedupeKey = "hash:" + hex.EncodeToString(sum[:12])
			}
			c.toolResults = append(c.toolResults, tr)
		}
		return true
	})
	if c.goal != "" {
		c.key = recall.ConversationKey(stripBlocks(c.system), c.goal)
	}
	return c
}

// stripBlocks removes every guard and recall block from text.
func stripBlocks(text string) string {
	return guard.Strip(recall.Strip(text))
}
