package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// turnPlacement is what the proxy places on turn k of a looping
// conversation: a STOP block, a guard block whose count changes every
// turn, and the conversation's recall block.
func turnPlacement(k int) wire.Placement {
	_, r := agenttest.BlockParts()
	stop := guard.StopBlock(guard.Loop{Kind: guard.LoopFailing, Count: k, Level: guard.LevelStop, Calls: []guard.Step{
		{Tool: "run_shell_command", Args: `{"command":"python3 -c \"print(1\""}`, Failed: true, Output: "SyntaxError: '(' was never closed"},
	}})
	g := guard.Block([]guard.Entry{{Pattern: "SYNTAX COMPLIANCE ERROR", Count: k, Hint: "Output must be valid syntax. Check brackets and quotes."}})
	return wire.Placement{Turn: []wire.Block{wire.NewBlock(stop), wire.NewBlock(g)}, Recall: wire.NewBlock(r)}
}

// framed is the text of wire.Framed(blocks...), as it reads in a content.
func framed(blocks ...wire.Block) string { return strings.TrimRight(wire.Framed(blocks...).Text, "\n") }

// placeTurns reads body and places p in its turns.
func placeTurns(t testing.TB, body []byte, p wire.Placement) []byte {
	t.Helper()
	c, err := inspect(body, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Inject(nil, body, p)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	return out
}

func TestAppendFramedIsFramed(t *testing.T) {
	g, r := agenttest.BlockParts()
	for _, blocks := range [][]wire.Block{
		{wire.NewBlock(g)},
		{wire.NewBlock(g), wire.NewBlock(r)},
		{{}, wire.NewBlock("a \"quoted\" line\twith\u2028 tabs\n\n"), {}, wire.NewBlock("<b>é</b>")},
	} {
		want := wire.Framed(blocks...)
		if got := appendFramed(nil, blocks); !bytes.Equal(got, want.JSON) {
			t.Errorf("appendFramed:\n%s\nwire.Framed:\n%s", got, want.JSON)
		}
	}
}

// TestInjectTurnsAgents places a STOP, a guard and a recall block in the
// requests qwen-code, opencode and the Continue CLI sent: on their first
// turn (the last message is the user's) and their third (a tool result).
// The golden files hold the messages that changed; every other byte is
// the client's.
func TestInjectTurnsAgents(t *testing.T) {
	p := turnPlacement(4)
	for _, name := range []string{"qwen-turn1", "qwen-turn3", "opencode-turn1", "opencode-turn3", "cn-turn1", "cn-turn3"} {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "agents", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			out := placeTurns(t, body, p)
			agenttest.SameMembers(t, body, out, "messages")
			in, got := gjson.GetBytes(body, "messages").Array(), gjson.GetBytes(out, "messages").Array()
			if len(got) != len(in) {
				t.Fatalf("%d messages, were %d", len(got), len(in))
			}
			var changed []map[string]any
			for i := range in {
				if got[i].Raw != in[i].Raw {
					changed = append(changed, map[string]any{"index": i, "message": json.RawMessage(got[i].Raw)})
				}
			}
			var pretty bytes.Buffer
			enc := json.NewEncoder(&pretty)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(changed); err != nil {
				t.Fatal(err)
			}
			agenttest.Golden(t, "place_turn_"+name+".json", pretty.Bytes())

			// The recall block is in the first user message, the newest
			// turn's blocks in the last message, once each.
			text := string(out)
			for _, b := range []wire.Block{p.Recall, p.Turn[0], p.Turn[1]} {
				if n := strings.Count(text, string(b.JSON)); n != 1 {
					t.Errorf("block %.40q placed %d times", b.Text, n)
				}
			}
			if !strings.HasSuffix(wire.ContentText(got[len(in)-1].Get("content")), framed(p.Turn...)) {
				t.Errorf("the last message %.80s... does not end with the newest turn's blocks", got[len(in)-1].Raw)
			}
			if first := got[firstIndex(in)]; !strings.Contains(wire.ContentText(first.Get("content")), framed(p.Recall)) {
				t.Errorf("the first user message %.80s... has no recall block", first.Raw)
			}

			// The proxy reads the rewritten body as it read the client's:
			// the same goal and conversation key.
			c0, _ := inspect(body, nil, "")
			c1, _ := inspect(out, nil, "")
			if c1.info.Goal != c0.info.Goal || c1.info.Key != c0.info.Key || c1.info.Later != c0.info.Later {
				t.Errorf("read back: goal %q key %q later %v; the client's: %q %q %v", c1.info.Goal, c1.info.Key, c1.info.Later, c0.info.Goal, c0.info.Key, c0.info.Later)
			}
			// Placing again into the rewritten body changes nothing: the
			// frames found where blocks go are taken out first.
			if again := placeTurns(t, out, p); !bytes.Equal(again, out) {
				t.Errorf("placing twice differs:\n%s", again)
			}
			// System placement keeps its place.
			c, _ := inspect(body, nil, "")
			sys, err := c.Inject(nil, body, wire.Placement{Turn: p.Turn, Recall: p.Recall, System: true})
			if err != nil || !strings.HasPrefix(gjson.GetBytes(sys, "messages.0.content").Str, guard.StopStart) {
				t.Errorf("system placement: %v %.100s", err, gjson.GetBytes(sys, "messages.0.content").Str)
			}
		})
	}
}

// firstIndex is the index of the first user message of msgs, or -1.
func firstIndex(msgs []gjson.Result) int {
	for i, m := range msgs {
		if m.Get("role").Str == "user" {
			return i
		}
	}
	return -1
}

// TestInjectTurnsForms: where the blocks go, message by message, for every
// form of content and every last message.
func TestInjectTurnsForms(t *testing.T) {
	rec, turn := wire.NewBlock("RECALL"), wire.NewBlock("TURN")
	p := wire.Placement{Turn: []wire.Block{turn}, Recall: rec}
	r, tu := jsonText(framed(rec)), jsonText(framed(turn))
	part := func(s string) string { return `{"type":"text","text":"` + s + `"}` }
	g, _ := agenttest.BlockParts()
	oldSystem := jsonText(strings.TrimRight(g, "\n") + "\n\nBe terse.")
	tests := []struct {
		name, in, want string
		p              wire.Placement
	}{
		{"user string", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"do it"}]}`,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"do it\n\n` + r + `\n\n` + tu + `"}]}`, p},
		{"user empty string", `{"messages":[{"role":"user","content":""}]}`,
			`{"messages":[{"role":"user","content":"` + r + `\n\n` + tu + `"}]}`, p},
		{"user parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"do it"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"do it"},` + part(r) + `,` + part(tu) + `]}]}`, p},
		{"user empty parts", `{"messages":[{"role":"user","content":[ ]}]}`,
			`{"messages":[{"role":"user","content":[ ` + part(r) + `,` + part(tu) + `]}]}`, p},
		{"tool string", `{"messages":[{"role":"user","content":"do it"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"sh"}}]},{"role":"tool","tool_call_id":"a","content":"failed"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"sh"}}]},{"role":"tool","tool_call_id":"a","content":"failed\n\n` + tu + `"}]}`, p},
		{"tool parts", `{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":[{"type":"text","text":"failed"}]}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"tool","content":[{"type":"text","text":"failed"},` + part(tu) + `]}]}`, p},
		{"tool null", `{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":null}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"tool","content":"` + tu + `"}]}`, p},
		{"function without content", `{"messages":[{"role":"user","content":"do it"},{"role":"function","name":"f"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"content":"` + tu + `","role":"function","name":"f"}]}`, p},
		{"prefill", `{"messages":[{"role":"user","content":"do it"},{"role":"assistant","content":"Sure,"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `\n\n` + tu + `"},{"role":"assistant","content":"Sure,"}]}`, p},
		{"system only", `{"messages":[{"role":"system","content":"s"}]}`,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"` + r + `\n\n` + tu + `"}]}`, p},
		{"system then prefill", `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"a"}]}`,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"` + r + `\n\n` + tu + `"},{"role":"assistant","content":"a"}]}`, p},
		{"only assistants", `{"messages":[ {"role":"assistant","content":"a"}]}`,
			`{"messages":[{"role":"user","content":"` + r + `\n\n` + tu + `"}, {"role":"assistant","content":"a"}]}`, p},
		{"undefined content", `{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":{"x":1}}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"tool","content":{"x":1}},{"role":"user","content":"` + tu + `"}]}`, p},
		{"recall only", `{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"tool","content":"x"}]}`, wire.Placement{Recall: rec}},
		{"recall only, one message", `{"messages":[{"role":"user","content":"do it"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"}]}`, wire.Placement{Recall: rec}},
		{"turn only", `{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"do it"},{"role":"tool","content":"x\n\n` + tu + `"}]}`, wire.Placement{Turn: []wire.Block{{}, turn}}},
		{"old blocks in the system message", `{"messages":[{"role":"system","content":"` + oldSystem + `"},{"role":"user","content":"do it"}]}`,
			`{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"do it\n\n` + r + `\n\n` + tu + `"}]}`, p},
		{"old blocks in the system message, nothing placed", `{"messages":[{"role":"user","content":"do it"},{"role":"developer","content":[{"type":"text","text":"` + oldSystem + `"}]},{"role":"tool","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"do it"},{"role":"developer","content":[{"type":"text","text":"Be terse."}]},{"role":"tool","content":"x"}]}`, wire.Placement{}},
		{"old blocks in the system message after the user's", `{"messages":[{"role":"user","content":"do it"},{"role":"system","content":"` + oldSystem + `"},{"role":"tool","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"do it\n\n` + r + `"},{"role":"system","content":"Be terse."},{"role":"tool","content":"x\n\n` + tu + `"}]}`, p},
		{"nothing to place", `{"messages":[{"role":"user","content":"do it"}]}`, `{"messages":[{"role":"user","content":"do it"}]}`, wire.Placement{Turn: []wire.Block{{}}}},
		{"no messages", `{"messages":[]}`, `{"messages":[]}`, p},
		{"messages not an array", `{"messages":{"role":"user"}}`, `{"messages":{"role":"user"}}`, p},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := placeTurns(t, []byte(tc.in), tc.p)
			if string(out) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", out, tc.want)
			}
			if tc.in == tc.want {
				c, _ := inspect([]byte(tc.in), nil, "")
				body := []byte(tc.in)
				if out, _ := c.Inject(nil, body, tc.p); &out[0] != &body[0] {
					t.Error("nothing changed, but a new body was made")
				}
			}
		})
	}
}

// jsonText is s escaped as in a JSON string, without quotes.
func jsonText(s string) string { return string(jsonEscape(s)) }

// TestInjectTurnsStripsOldFrames: a client that sends back a body the
// proxy rewrote (another proxy in front, a replay) gets each frame once,
// where it goes; text of its own in a frame-like tag stays.
func TestInjectTurnsStripsOldFrames(t *testing.T) {
	p := turnPlacement(3)
	body := []byte(`{"messages":[{"role":"user","content":"do it\n\n<system-reminder>\nmine, not the proxy's\n</system-reminder>"},{"role":"tool","content":[{"type":"text","text":"x"}]}]}`)
	once := placeTurns(t, body, p)
	moved := placeTurns(t, once, turnPlacement(4))
	want := placeTurns(t, body, turnPlacement(4))
	if !bytes.Equal(moved, want) {
		t.Fatalf("placing into a placed body\n%s\nwant\n%s", moved, want)
	}
	if !strings.Contains(string(want), `mine, not the proxy's`) {
		t.Fatal("the client's own tag was taken out")
	}
}

// loopTurns are the bodies qwen-code sends in a loop of n turns: its first
// request, then every turn one more call of the same command failing the
// same way, as the agent resends its whole conversation.
func loopTurns(t testing.TB, n int) [][]byte {
	first, err := os.ReadFile(filepath.Join("testdata", "agents", "qwen-turn1.json"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join("testdata", "agents", "qwen-turn2.json"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(second, "messages").Array()
	call, result := msgs[len(msgs)-2].Raw, msgs[len(msgs)-1].Raw
	id := msgs[len(msgs)-2].Get("tool_calls.0.id").Str
	end := int(gjson.GetBytes(first, "messages").Index) + len(gjson.GetBytes(first, "messages").Raw) - 1
	turns := [][]byte{first}
	for k := 2; k <= n; k++ {
		prev := turns[len(turns)-1]
		round := strings.ReplaceAll(","+call+","+result, id, fmt.Sprintf("call_%d", k))
		next := append(append(append([]byte(nil), prev[:end]...), round...), prev[end:]...)
		end += len(round)
		turns = append(turns, next)
	}
	return turns
}

// TestTurnPlacementKeepsThePrefix: in an 8-turn loop of qwen-code whose
// guard changes every turn, everything a provider's prompt cache kept of a
// turn is sent again, byte for byte, on the next: the longest common
// prefix of two turns reaches where the newest turn's blocks started, and
// the recall block is the same on every turn. Each turn is read through
// the Format, as the proxy reads it: the memo remembers what the client
// sent, not what the proxy forwarded.
func TestTurnPlacementKeepsThePrefix(t *testing.T) {
	f := New()
	turns := loopTurns(t, 8)
	var prevOut []byte
	prevStart, prevMsgs := 0, 0
	var recallBytes []byte
	for k, body := range turns {
		k++
		p := turnPlacement(k)
		client := bytes.Clone(body)
		r, err := f.Read(body, wire.Route{Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		c := r.(*conversation)
		full, _ := inspect(body, nil, "")
		if k > 1 && c.from != prevMsgs {
			t.Errorf("turn %d: read from message %d: the memo did not resume the %d messages of the turn before", k, c.from, prevMsgs)
		}
		prevMsgs = len(c.scan.msgs)
		if c.info.Goal != full.info.Goal || c.info.Key != full.info.Key || c.info.Later != (k > 1) || len(c.info.Tools) != k-1 {
			t.Errorf("turn %d: goal %q key %q later %v tools %v; read in full: %q %q", k, c.info.Goal, c.info.Key, c.info.Later, c.info.Tools, full.info.Goal, full.info.Key)
		}
		out, err := r.Inject(nil, body, p)
		if err != nil || !json.Valid(out) {
			t.Fatalf("turn %d: %v", k, err)
		}
		// Where the recall block ends and the newest turn's blocks start:
		// the same body with the recall block alone agrees with out up to
		// there.
		recallOnly, err := r.Inject(nil, body, wire.Placement{Recall: p.Recall})
		if err != nil {
			t.Fatal(err)
		}
		r.Forwarded(true)
		if !bytes.Equal(body, client) {
			t.Fatalf("turn %d: the client's body changed", k)
		}
		at := agenttest.CommonPrefix(body, recallOnly)
		rec := recallOnly[at : at+len(recallOnly)-len(body)]
		if !bytes.Contains(rec, p.Recall.JSON) {
			t.Fatalf("turn %d: the recall block is not where the body first changes: %.200s", k, rec)
		}
		if recallBytes == nil {
			recallBytes = rec
		} else if !bytes.Equal(rec, recallBytes) {
			t.Errorf("turn %d: the recall block's bytes changed:\n%s\n%s", k, rec, recallBytes)
		}
		start := agenttest.CommonPrefix(recallOnly, out)
		if !bytes.Contains(out[start:], p.Turn[1].JSON) {
			t.Fatalf("turn %d: the guard block is not after offset %d", k, start)
		}
		if k > 1 {
			if lcp := agenttest.CommonPrefix(prevOut, out); lcp < prevStart {
				t.Errorf("turn %d: the prefix shared with turn %d ends at byte %d, before byte %d where the newest turn's blocks started (%q | %q)",
					k, k-1, lcp, prevStart, prevOut[max(lcp-40, 0):lcp+40], out[max(lcp-40, 0):lcp+40])
			}
		}
		prevOut, prevStart = out, start
	}
}

// TestInfoLater: a request is later when the model answered its
// conversation before: an assistant message after the user message its
// task was read from.
func TestInfoLater(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"first request", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"fix the loader"}]}`, false},
		{"an answer", `{"messages":[{"role":"user","content":"fix the loader"},{"role":"assistant","content":"done"},{"role":"user","content":"thanks"}]}`, true},
		{"a tool round", `{"messages":[{"role":"user","content":"fix the loader"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"sh"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}]}`, true},
		{"the client's exchange before the task", `{"messages":[{"role":"user","content":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"},{"role":"assistant","content":"Got it."},{"role":"user","content":"fix the loader"}]}`, false},
		{"a prefill", `{"messages":[{"role":"user","content":"fix the loader"},{"role":"assistant","content":"Sure,"}]}`, true},
		{"no user message", `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"a"}]}`, true},
		{"no messages", `{"model":"m"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := inspect([]byte(tc.body), nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if c.info.Later != tc.want {
				t.Errorf("Later = %v, want %v", c.info.Later, tc.want)
			}
		})
	}
	// The captured agents: qwen-code's first request opens with its
	// context and a made-up answer to it, and is still the first.
	for _, agent := range []string{"qwen", "opencode", "cn"} {
		f := New()
		for turn := 1; turn <= 3; turn++ {
			body, err := os.ReadFile(filepath.Join("testdata", "agents", fmt.Sprintf("%s-turn%d.json", agent, turn)))
			if err != nil {
				t.Fatal(err)
			}
			r, err := f.Read(body, wire.Route{Tenant: "t"}) // through the memo from the second turn on
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Info().Later; got != (turn > 1) {
				t.Errorf("%s turn %d: Later = %v", agent, turn, got)
			}
			r.Forwarded(true)
		}
	}
}

// checkTurnPlacement checks the turn placement of p in body (valid JSON,
// as FuzzInject reads it): the result is valid JSON; with nothing to
// place it is body, but for earlier blocks stripped from the system
// message as the system placement strips them; otherwise every byte of
// the client's stays, and what is added is the frames, each once: the
// newest turn's at the end of the last message that is not the
// assistant's (or in a user message of its own right after it), the
// recall's at the end of the first user message or first with them.
func checkTurnPlacement(t *testing.T, body []byte, p wire.Placement) {
	t.Helper()
	conv, err := inspect(body, nil, "")
	if err != nil {
		return
	}
	out, err := conv.Inject(nil, body, p)
	if err != nil {
		return // the proxy then forwards the original bytes
	}
	if !gjson.ValidBytes(out) {
		t.Fatalf("turn placement: invalid JSON from %q: %q", body, out)
	}
	base, err := injectSystem(nil, body, conv) // earlier blocks stripped, nothing added
	if err != nil {
		t.Fatalf("the system strip failed (%v) but the turn placement did not", err)
	}
	if p.Empty() {
		if !bytes.Equal(out, base) {
			t.Fatalf("nothing placed, yet\n%s\nis not\n%s", out, base)
		}
		if bytes.Equal(base, body) && len(body) > 0 && &out[0] != &body[0] {
			t.Fatal("nothing changed, but a new body was made")
		}
		return
	}
	// The top-level members, in order, but messages.
	members := func(doc []byte) (kv []string) {
		gjson.ParseBytes(doc).ForEach(func(k, v gjson.Result) bool {
			if k.String() != "messages" {
				kv = append(kv, k.Raw, v.Raw)
			}
			return true
		})
		return kv
	}
	if a, b := members(base), members(out); !slices.Equal(a, b) {
		t.Fatalf("top-level members changed: %q -> %q", a, b)
	}
	in, got := gjson.GetBytes(base, "messages").Array(), gjson.GetBytes(out, "messages").Array()
	if len(got) != len(in) && len(got) != len(in)+1 {
		t.Fatalf("%d messages -> %d", len(in), len(got))
	}
	if bytes.Contains(base, []byte("system-reminder")) || conv.scan.truncated {
		return // frames of old are stripped; past the caps nothing is placed in the newest turn
	}
	rec, turn := framed(p.Recall), framed(p.Turn...)
	// frames cuts a text into frames separated by blank lines.
	frames := func(text string) []string {
		fs := strings.Split(text, "\n\n"+wire.FrameStart)
		for k := 1; k < len(fs); k++ {
			fs[k] = wire.FrameStart + fs[k]
		}
		return fs
	}
	// added returns the frames added to content a (absent for a new
	// message), giving b, in order; it fails t unless b is a followed by
	// frames.
	added := func(a, b gjson.Result) []string {
		switch {
		case a.Type == gjson.String:
			if b.Type != gjson.String || !strings.HasPrefix(b.Raw, a.Raw[:len(a.Raw)-1]) {
				t.Fatalf("content %s -> %s", a.Raw, b.Raw)
			}
			rest := b.Str
			if a.Str != "" {
				var ok bool
				if rest, ok = strings.CutPrefix(b.Str, a.Str+"\n\n"); !ok {
					t.Fatalf("content %q -> %q: not the text, a blank line, then frames", a.Str, b.Str)
				}
			}
			return frames(rest)
		case !a.Exists() || a.Type == gjson.Null:
			if b.Type != gjson.String {
				t.Fatalf("content %s -> %s", a.Raw, b.Raw)
			}
			return frames(b.Str)
		case a.IsArray():
			ap, bp := a.Array(), b.Array()
			if !b.IsArray() || len(bp) <= len(ap) || !strings.HasPrefix(b.Raw, a.Raw[:len(a.Raw)-1]) {
				t.Fatalf("content %s -> %s", a.Raw, b.Raw)
			}
			var texts []string
			for _, part := range bp[len(ap):] {
				if part.Get("type").Str != "text" || len(part.Map()) != 2 {
					t.Fatalf("added part %s", part.Raw)
				}
				texts = append(texts, part.Get("text").Str)
			}
			return texts
		}
		t.Fatalf("content %s, which the API does not define, -> %s", a.Raw, b.Raw)
		return nil
	}
	// Which frames went where, by index in got.
	recallAt, turnAt, newAt := -1, -1, -1
	note := func(j int, frames []string) {
		for _, f := range frames {
			switch {
			case f == rec && recallAt < 0 && turnAt < 0:
				recallAt = j
			case f == turn && turnAt < 0:
				turnAt = j
			default:
				t.Fatalf("message %d: added %q, not the recall's frame, then the newest turn's, once each", j, frames)
			}
		}
	}
	others := func(m gjson.Result) (kv []string) {
		m.ForEach(func(k, v gjson.Result) bool {
			if k.String() != "content" {
				kv = append(kv, k.Raw, v.Raw)
			}
			return true
		})
		return kv
	}
	// A message of the proxy's own goes right after the last message that
	// is not the assistant's.
	if len(got) > len(in) {
		newAt = len(in)
		for newAt > 0 && in[newAt-1].IsObject() && in[newAt-1].Get("role").String() == "assistant" {
			newAt--
		}
	}
	i := 0
	for j := range got {
		switch {
		case j == newAt:
			if got[j].Get("role").Str != "user" || len(got[j].Map()) != 2 {
				t.Fatalf("message %d added: %s", j, got[j].Raw)
			}
			note(j, added(gjson.Result{}, got[j].Get("content")))
			continue
		case got[j].Raw == in[i].Raw:
		case !in[i].IsObject() || !slices.Equal(others(in[i]), others(got[j])):
			t.Fatalf("message %d changed: %s -> %s", i, in[i].Raw, got[j].Raw)
		default:
			note(j, added(in[i].Get("content"), got[j].Get("content")))
		}
		i++
	}
	if len(in) == 0 {
		return
	}
	if (recallAt >= 0) != (len(p.Recall.JSON) > 0) || (turnAt >= 0) != !wire.Empty(p.Turn) {
		t.Fatalf("recall placed at %d, newest turn's blocks at %d:\n%s", recallAt, turnAt, out)
	}
	// The newest turn's blocks, and the recall's when it is not in the
	// first user message, go after every message but the assistant's.
	newest := func(what string, at int) {
		for _, m := range got[at+1:] {
			if m.Get("role").String() != "assistant" || !m.IsObject() {
				t.Fatalf("the %s in message %d, before %s", what, at, m.Raw)
			}
		}
	}
	if turnAt >= 0 {
		newest("newest turn's blocks", turnAt)
	}
	if recallAt >= 0 && recallAt != firstIndex(got) {
		newest("recall block, not in the first user message,", recallAt)
	}
}
