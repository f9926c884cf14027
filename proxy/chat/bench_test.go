package chat

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// The hot pieces of reading and rewriting a chat request, measured on a
// realistic agent request (agenttest.ChatBody).

// BenchmarkInspect reads a 20 KB agent body: "full" with nothing
// remembered (a conversation's first turn, or one the memo dropped),
// "memo" as the next turn of a remembered one, which differs from it in
// its newest round (the case of every request in the load test).
func BenchmarkInspect(b *testing.B) {
	body := agenttest.ChatBody(false, "call_new")
	c, err := inspect(body, nil, "")
	if err != nil || c.info.Goal == "" || len(c.info.ToolResults) != 12 || len(c.info.Tools) != 12 {
		b.Fatalf("inspect read goal %q, %d tool results, %d tools (%v)", c.info.Goal, len(c.info.ToolResults), len(c.info.Tools), err)
	}
	b.Run("full", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			inspect(body, nil, "")
		}
	})
	b.Run("memo", func(b *testing.B) {
		benchInspectMemo(b, agenttest.ChatBody(false, "call_prev"), body)
	})
	// As the handler reads a storm: every turn the remembered one with a
	// new newest round, read and then forwarded.
	b.Run("storm", func(b *testing.B) {
		f := New()
		turns := [][]byte{agenttest.ChatBody(false, "call_a"), agenttest.ChatBody(false, "call_b")}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r, err := f.Read(turns[i%2], wire.Route{Tenant: "t"})
			if err != nil {
				b.Fatal(err)
			}
			r.Forwarded(true)
			i++
		}
	})
	// An agent with a long system prompt (20 KB, as coding agents send).
	long := func(id string) []byte {
		return bytes.Replace(agenttest.ChatBody(false, id), []byte(agenttest.SystemPrompt), []byte(strings.Repeat(agenttest.SystemPrompt, 7)), 1)
	}
	b.Run("memo-longprompt", func(b *testing.B) {
		benchInspectMemo(b, long("call_prev"), long("call_new"))
	})
}

// benchInspectMemo reads body as the next turn of prev.
func benchInspectMemo(b *testing.B, prev, body []byte) {
	memo := newConvMemo(defaultMemoSize)
	c, err := inspect(prev, memo, "t")
	if err != nil {
		b.Fatal(err)
	}
	memo.remember(c, prev)
	if c, _ := inspect(body, memo, "t"); c.from == 0 || len(c.info.ToolResults) != 1 {
		b.Fatalf("read from message %d, %d tool results: the memo was not used", c.from, len(c.info.ToolResults))
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		inspect(body, memo, "t")
	}
}

func BenchmarkInjectSystem(b *testing.B) {
	g, r := agenttest.BlockParts()
	blocks := []wire.Block{wire.NewBlock(g), wire.NewBlock(r)}
	fresh := agenttest.ChatBody(false, "call_new")
	// A body whose system message already holds the blocks of an earlier
	// turn: they are stripped before the new ones go in.
	again, err := rewrite(fresh, g, r)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{{"first", fresh}, {"reinject", again}} {
		b.Run(c.name, func(b *testing.B) {
			conv, err := inspect(c.body, nil, "")
			if err != nil {
				b.Fatal(err)
			}
			out, err := injectSystem(nil, c.body, conv, blocks...)
			if err != nil || !gjson.ValidBytes(out) || !bytes.Contains(out, []byte(guard.BlockStart)) {
				b.Fatalf("injectSystem: %v", err)
			}
			if bytes.Count(out, []byte(guard.BlockStart)) != 1 {
				b.Fatal("the guard block appears more than once")
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				// The handler rewrites into a pooled buffer: reuse one.
				out, _ = injectSystem(out, c.body, conv, blocks...)
			}
		})
	}
}

// BenchmarkInjectTurns places the same blocks as BenchmarkInjectSystem in
// the same body's turns: the guard at the end of its newest tool result,
// the recall at the end of its first user message.
func BenchmarkInjectTurns(b *testing.B) {
	blocks := agenttest.Blocks()
	p := wire.Placement{Turn: blocks[:1], Recall: blocks[1]}
	body := agenttest.ChatBody(false, "call_new")
	conv, err := inspect(body, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	out, err := conv.Inject(nil, body, p)
	if err != nil || !gjson.ValidBytes(out) || bytes.Count(out, []byte(guard.BlockStart)) != 1 {
		b.Fatalf("injectTurns: %v", err)
	}
	if c := gjson.GetBytes(out, "messages.@reverse.0.content").Str; !strings.HasSuffix(c, wire.FrameEnd) {
		b.Fatalf("the newest tool result does not end with the guard: %.100q", c)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = conv.Inject(out, body, p)
	}
}

func BenchmarkObserverSSE(b *testing.B) {
	reads := agenttest.ChatStream(300, "stop")
	total := 0
	for _, r := range reads {
		total += len(r)
	}
	o := newObserver(true, 0)
	for _, r := range reads {
		o.Write(r)
	}
	if !o.done || o.finish != "stop" || o.errMsg != "" || len(o.excerpt) == 0 {
		b.Fatalf("observer: done %v finish %q err %q excerpt %d bytes", o.done, o.finish, o.errMsg, len(o.excerpt))
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		o := newObserver(true, 0)
		for _, r := range reads {
			o.Write(r)
		}
	}
}

func TestInspectKeepsNoSubstringOfTheBody(t *testing.T) {
	body := agenttest.ChatBody(true, "call_new")
	// inspectPadded inspects the body with a 1 MiB assistant message that
	// inspect reads past and keeps nothing of; only the conversation
	// outlives it.
	inspectPadded := func() *conversation {
		pad := `"messages":[{"role":"assistant","content":"` + strings.Repeat("x", 1<<20) + `"},`
		c, err := inspect(bytes.Replace(body, []byte(`"messages":[`), []byte(pad), 1), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := inspectPadded()
	tools, system := len(c.info.ToolResults), c.info.System
	c.release() // done by the handler before forwarding
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.info.Goal == "" || tools != 12 || c.info.ToolCount != 12 || system == "" {
		t.Fatalf("inspect read goal %q, %d tool results", c.info.Goal, tools)
	}
	if c.info.System != "" {
		t.Error("release keeps the system prompt, which only the rewrite reads")
	}
	// What the conversation keeps is about 30 KB; if one kept string were a
	// substring of inspect's copy of the body, the whole copy would stay.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 512<<10 {
		t.Errorf("the heap grew by %d KB while the conversation is alive: it keeps the body copy", grew>>10)
	}
	runtime.KeepAlive(c)
}
