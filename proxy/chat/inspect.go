package chat

import (
	"sync/atomic"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// contentText decodes a message's content (a string, or text parts) as
// text.
func contentText(raw []byte) string { return wire.Decoded(raw, wire.ContentText) }

// conversation is what the proxy reads of a chat request, in one pass over
// the body (scanChat) and without decoding it whole.
type conversation struct {
	scan chatScan // where the body's values are, for the rewrite

	// What was read: System is the text of the first system or developer
	// message, Goal that of the first user message (mock directives
	// removed). Its ToolResults are those of the messages read (not those
	// of a remembered prefix); At is the message's index.
	info wire.Info

	body []byte    // the body read, until release
	memo *convMemo // where the conversation is remembered; nil for none

	systemAt int // index of the system message; -1 none
	// start is the conversation key begun with the system text, when the
	// system memo decoded it (see wire.SystemMemo).
	start *recall.KeyStart
	// system says what systemFramed found of info.System (unknown until
	// asked, or the remembered turn's answer for the same string).
	system systemCheck
	// The task: the first user message with words of the user's own
	// (recall.TaskFinder), read at message taskAt (-1 until found);
	// provisional is the first user message's text, the goal until then.
	task        recall.TaskFinder
	taskAt      int
	provisional string
	calls       wire.CallIndex[callName] // the calls of tools that have an id
	marks       []mark                   // one per message: what was read up to its end
	// verdicts are the verdicts of the tool results before this turn's
	// (their tallies are info.Prior), which the entry the turn leaves
	// adds its own to.
	verdicts wire.VerdictLog

	// The memo: the conversation's name, and from which message on it was
	// read (0 unless a remembered turn's messages were skipped).
	memoKey uint64
	memoOK  bool
	// forgot is set by Forget: the turn is not remembered, or is
	// forgotten again.
	forgot atomic.Bool
	from   int
	sum    uint64 // memo sum of the tenant and the body up to summed
	summed int
	prior  *memoEntry  // the conversation's remembered turn, if any
	work   *workSlices // where the working slices came from (see giveBack)
	// The memo sum of the bytes after the messages array, when the memo
	// knew them.
	tailSum   uint64
	tailKnown bool
}

// systemCheck is whether a system text holds blocks of the proxy's: not
// known yet, or known.
type systemCheck uint8

const (
	systemUnchecked systemCheck = iota
	systemClean
	systemFramed
)

// systemHasBlocks reports whether the system text holds blocks an earlier
// turn left there. The text is scanned once a conversation: the memo
// keeps the answer with the string (qwen-code's is 38 KB).
func (c *conversation) systemHasBlocks() bool {
	if c.system == systemUnchecked {
		c.system = systemClean
		if wire.StripFramed(c.info.System) != c.info.System {
			c.system = systemFramed
		}
	}
	return c.system == systemFramed
}

// callName is a tool call read from an assistant message.
type callName struct {
	id, name string
	msg      int  // the assistant message that made the call
	args     span // the call's arguments
}

// CallID implements [wire.Identified].
func (c callName) CallID() string { return c.id }

// mark is what was read of a conversation up to the end of one message.
type mark struct {
	tools     int // len(tools)
	calls     int // len(calls)
	scanCalls int // calls of scan.calls up to this message
	toolCount int
	sum       uint64 // memo sum of the tenant and the body up to the message's end (from the first user message on), set by convMemo.remember
}

// release drops what only reading and rewriting the body needed, the tool
// results that refer to the body and the system prompt included, so an
// answer that streams for minutes keeps only what auto-capture reads.
func (c *conversation) release() {
	c.scan, c.marks, c.calls, c.prior, c.verdicts, c.start = chatScan{}, nil, wire.CallIndex[callName]{}, nil, wire.VerdictLog{}, nil
	c.body = nil
	c.info.System = ""
	c.info.DropBody()
}

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
	c := &conversation{systemAt: -1, taskAt: -1, body: body, memo: memo}
	c.takeWorkSlices()
	cs := &c.scan
	s := scanner{Scanner: wire.Scanner{B: body}}
	if memo != nil {
		// A body that starts as a known start does (an agent's system
		// message, seen twice) is not scanned there: its messages are
		// where they were.
		var known *wire.KnownStart[msgSpans]
		s.atStart = func(first int) int {
			known = memo.starts.Find(tenant, body, first)
			if known == nil {
				return -1
			}
			cs.msgs, cs.knownStart = append(cs.msgs, known.Elems...), true
			return known.End
		}
		// Called once the first user message is scanned: the messages
		// before it are offered as a start, and the bytes up to its end
		// name the conversation.
		s.atUser = func(end int) int {
			cut, sum := 0, uint64(0)
			if head := cs.msgs[:len(cs.msgs)-1]; len(head) > 0 {
				cut = head[len(head)-1].end
				sum = memo.starts.StartSum(memo.seed, tenant, body, known, head[0].start, cut, head, !cs.knownStart && len(cs.calls) == 0)
			}
			memo.name(c, tenant, body, cut, end, sum)
			return memo.resume(c, body, len(cs.msgs)-1)
		}
		s.atTail = func(end int) bool { return memo.resumeTail(c, body, end) }
	}
	if err := s.document(cs); err != nil {
		return nil, err
	}
	c.info.Model = valueAt(body, cs.model).String()
	c.info.User = valueAt(body, cs.user).String()
	c.info.Stream = valueAt(body, cs.stream).Bool()
	c.read(body)
	if cs.tools.ok() {
		c.info.ToolDefs = body[cs.tools.start:cs.tools.end]
		if c.tailKnown && cs.tools.start >= cs.messages.end {
			c.info.ToolDefsSum = c.tailSum
		}
	}
	switch {
	case c.info.Goal == "" || c.info.Key != "":
	case c.start != nil:
		c.info.Key = c.start.Key(c.info.Goal)
	default:
		c.info.Key = recall.ConversationKey(wire.StripFramed(c.info.System), c.info.Goal)
	}
	c.info.Later = c.answered()
	if cs := &c.scan; len(cs.calls) > 0 {
		c.info.Origin = valueAt(body, cs.calls[0].id).String()
	}
	return c, nil
}

// answered reports whether an assistant message follows the user message
// the goal was read from (the task's, else the first): the model answered
// the conversation before, this request is not its first (wire.Info.Later).
// An assistant message before it is the client's own: qwen-code opens
// every conversation with a context message, a made-up "Got it. Thanks
// for the context!", then the task.
func (c *conversation) answered() bool {
	msgs := c.scan.msgs
	from := c.taskAt
	if from < 0 {
		from = firstUser(msgs)
	}
	for i := len(msgs) - 1; i > from; i-- {
		if msgs[i].kind == roleAssistant {
			return true
		}
	}
	return false
}

// read reads the messages of c.scan from c.from on.
func (c *conversation) read(body []byte) {
	cs := &c.scan
	call := 0 // index in cs.calls, which are in message order
	if c.from > 0 {
		call = c.marks[c.from-1].scanCalls
	}
	var answers wire.Answers
	for i := c.from; i < len(cs.msgs); i++ {
		m := &cs.msgs[i]
		answers.Add(m.obj && m.kind == roleAssistant)
		switch {
		case !m.obj:
		case m.kind == roleSystem || m.kind == roleDeveloper:
			if c.systemAt < 0 {
				c.systemAt = i
				if c.memo != nil && m.content.ok() {
					c.info.System, c.start = c.memo.systems.Text(body[m.content.start:m.content.end])
				} else {
					c.info.System = wire.ContentText(valueAt(body, m.content))
				}
				if p := c.prior; p != nil && p.system == c.info.System {
					// The remembered turns' string (the memo counts it
					// once), and what they found of it.
					c.info.System, c.system = p.system, p.check
				}
			}
		case m.kind == roleUser:
			c.readUser(body, i, m)
		case m.kind == roleAssistant:
			call = c.readCalls(body, i, call)
		case m.kind == roleTool || m.kind == roleFunction:
			c.readResult(body, i, m)
		}
		for call < len(cs.calls) && cs.calls[call].msg <= i {
			call++ // the calls of a message that is not the assistant's
		}
		c.marks = append(c.marks, mark{tools: len(c.info.Tools), calls: len(c.calls.Calls), scanCalls: call, toolCount: c.info.ToolCount})
	}
	c.info.Continued = c.prior != nil && answers.One()
}

// readUser reads user message i: the task, until it is found.
func (c *conversation) readUser(body []byte, i int, m *msgSpans) {
	if c.task.Found {
		return
	}
	first := c.task.Goal == ""
	// A frame of the proxy's is not the user's words (a client may send
	// back what it was sent).
	c.task.Add(wire.StripFramed(wire.ContentText(valueAt(body, m.content))), wire.Task)
	c.info.Goal = c.task.Goal
	if first {
		c.provisional = c.task.Goal
	}
	if c.task.Found {
		c.taskAt = i
	}
}

// readCalls reads the tool calls of assistant message i, from cs.calls[call]
// on, and returns the index of the first call of a later message.
func (c *conversation) readCalls(body []byte, i, call int) int {
	cs := &c.scan
	for ; call < len(cs.calls) && cs.calls[call].msg == i; call++ {
		cl := &cs.calls[call]
		name := valueAt(body, cl.name).String()
		if name == "" {
			continue
		}
		c.info.Tools = append(c.info.Tools, name)
		if id := valueAt(body, cl.id).String(); id != "" {
			c.calls.Add(callName{id: id, name: name, msg: i, args: cl.args})
		}
	}
	return call
}

// readResult reads tool message i: its result, tied to its call by id.
func (c *conversation) readResult(body []byte, i int, m *msgSpans) {
	tr := wire.ToolResult{Name: valueAt(body, m.name).String(), At: i, Decode: contentText}
	if m.content.ok() {
		tr.Raw = body[m.content.start:m.content.end]
	}
	if id := valueAt(body, m.toolCallID).String(); id != "" {
		tr.Key = "call:" + id
		if cl := c.calls.Find(id); cl != nil {
			tr.Name = cl.name
			if cl.args.ok() {
				tr.Args = body[cl.args.start:cl.args.end]
			}
			if cm := &c.scan.msgs[cl.msg]; cm.content.ok() {
				tr.Note = body[cm.content.start:cm.content.end]
			}
		}
	} else {
		tr.Key = wire.HashKey(tr.Name, tr.Raw)
	}
	c.info.ToolResults = append(c.info.ToolResults, tr)
	c.info.ToolCount++
}
