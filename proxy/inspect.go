package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
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
	msg       int    // index of the message in the body's messages
	failed    bool   // the result says the tool failed (set by recordToolErrors)
	// content is the raw JSON of the message's content, in the body: it is
	// only decoded for results not seen before. release drops it.
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
	key    string // recall.ConversationKey of the conversation's first messages

	system      string // text of the first system/developer message
	goal        string // text of the first user message (mock directives removed)
	systemAt    int    // index of that system message; -1 none
	userSeen    bool
	tools       []string          // tool names the assistant called, in order
	calls       []callName        // the calls of tools that have an id
	names       map[string]string // tool_call_id -> tool name, of calls[:indexed] (see nameOf)
	indexed     int
	toolCount   int          // tool results
	failures    int          // tool results that said the tool failed (set by recordToolErrors)
	marks       []mark       // one per message: what was read up to its end
	toolResults []toolResult // the tool results read (not those of a remembered prefix)

	// The memo: the conversation's name, and from which message on it was
	// read (0 unless a remembered turn's messages were skipped).
	memoKey uint64
	memoOK  bool
	from    int
	hash    maphash.Hash // memo hash of the tenant and the body up to hashed
	hashed  int
	prior   *memoEntry // the conversation's remembered turn, if any
	// The memo hash of the bytes after the messages array, when the memo
	// knew them.
	tailSum   uint64
	tailKnown bool
}

// callName is a tool call read from an assistant message.
type callName struct {
	id, name string
	msg      int
}

// mark is what was read of a conversation up to the end of one message.
type mark struct {
	tools     int // len(tools)
	calls     int // len(calls)
	scanCalls int // calls of scan.calls up to this message
	toolCount int
	failures  int    // set by convMemo.remember
	sum       uint64 // memo hash of the tenant and the body up to the message's end (from the first user message on), set by convMemo.remember
}

// release drops what only reading and rewriting the body needed, the tool
// results that refer to the body and the system prompt included, so an
// answer that streams for minutes keeps only what auto-capture reads.
func (c *conversation) release() {
	c.scan, c.marks, c.calls, c.names, c.toolResults, c.prior = chatScan{}, nil, nil, nil, nil, nil
	c.system = ""
}

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
// when the body is not JSON. With a memo, the messages of a remembered turn
// of the same conversation that this body repeats byte for byte are not
// read again (see convMemo).
func inspect(body []byte, memo *convMemo, tenant string) (*conversation, error) {
	c := &conversation{systemAt: -1}
	cs := &c.scan
	s := scanner{b: body}
	if memo != nil {
		// Called once the first user message is scanned: the bytes up to
		// its end name the conversation.
		s.atUser = func(end int) int {
			memo.name(c, tenant, body, end)
			return memo.resume(c, body, len(cs.msgs)-1)
		}
		s.atTail = func(end int) bool { return memo.resumeTail(c, body, end) }
	}
	if err := s.document(cs); err != nil {
		return nil, err
	}
	c.model = valueAt(body, cs.model).String()
	c.user = valueAt(body, cs.user).String()
	c.stream = valueAt(body, cs.stream).Bool()
	c.read(body)
	if c.goal != "" && c.key == "" {
		c.key = recall.ConversationKey(stripBlocks(c.system), c.goal)
	}
	return c, nil
}

// read reads the messages of c.scan from c.from on.
func (c *conversation) read(body []byte) {
	cs := &c.scan
	call := 0 // index in cs.calls, which are in message order
	if c.from > 0 {
		call = c.marks[c.from-1].scanCalls
	}
	for i := c.from; i < len(cs.msgs); i++ {
		m := &cs.msgs[i]
		switch {
		case !m.obj:
		case m.kind == roleSystem || m.kind == roleDeveloper:
			if c.systemAt < 0 {
				c.systemAt = i
				c.system = providers.MessageText(valueAt(body, m.content))
			}
		case m.kind == roleUser:
			if !c.userSeen {
				c.userSeen = true
				c.goal = strings.TrimSpace(mockDirective.ReplaceAllString(providers.MessageText(valueAt(body, m.content)), ""))
			}
		case m.kind == roleAssistant:
			for ; call < len(cs.calls) && cs.calls[call].msg == i; call++ {
				cl := &cs.calls[call]
				name := valueAt(body, cl.name).String()
				if name == "" {
					continue
				}
				c.tools = append(c.tools, name)
				if id := valueAt(body, cl.id).String(); id != "" {
					c.calls = append(c.calls, callName{id: id, name: name, msg: i})
				}
			}
		case m.kind == roleTool || m.kind == roleFunction:
			tr := toolResult{name: valueAt(body, m.name).String(), msg: i}
			if m.content.ok() {
				tr.content = body[m.content.start:m.content.end]
			}
			if id := valueAt(body, m.toolCallID).String(); id != "" {
				tr.dedupeKey = "call:" + id
				if n := c.nameOf(id); n != "" {
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
		for call < len(cs.calls) && cs.calls[call].msg <= i {
			call++ // the calls of a message that is not the assistant's
		}
		c.marks = append(c.marks, mark{tools: len(c.tools), calls: len(c.calls), scanCalls: call, toolCount: c.toolCount})
	}
}

// nameOf returns the tool name of the latest call read with the given id.
// A tool result most often answers one of the latest calls: they are
// searched first, and a map is built only for a long conversation.
func (c *conversation) nameOf(id string) string {
	const scan = 32
	for i := len(c.calls) - 1; i >= max(c.indexed, len(c.calls)-scan); i-- {
		if c.calls[i].id == id {
			return c.calls[i].name
		}
	}
	if len(c.calls) <= scan {
		return ""
	}
	if c.names == nil {
		c.names = make(map[string]string, len(c.calls))
	}
	for _, cl := range c.calls[c.indexed:] {
		c.names[cl.id] = cl.name
	}
	c.indexed = len(c.calls)
	return c.names[id]
}

// stripBlocks removes every guard and recall block from text.
func stripBlocks(text string) string {
	return guard.Strip(recall.Strip(text))
}
