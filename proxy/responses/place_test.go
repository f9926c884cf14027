package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// turnPlacement is a STOP block and a guard block for the newest turn and
// a recall block for the first user message, as the proxy makes them.
func turnPlacement() wire.Placement {
	blocks := agenttest.Blocks()
	stop := wire.NewBlock(guard.StopBlock(guard.Loop{Kind: guard.LoopFailing, Count: 4, Level: guard.LevelStop,
		Calls: []guard.Step{{Tool: "exec_command", Args: `{"cmd":"cat config/settings.json"}`, Output: "cat: config/settings.json: No such file or directory"}}}))
	return wire.Placement{Turn: []wire.Block{stop, blocks[0]}, Recall: blocks[1]}
}

func injectTurn(t testing.TB, body []byte, p wire.Placement) []byte {
	t.Helper()
	r, err := read(body, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Inject(nil, body, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// developerItem is the input item that carries the turn's blocks.
func developerItem(p wire.Placement) []byte {
	return append(append([]byte(`{"type":"message","role":"developer","content":[`), textPart(wire.Framed(p.Turn...))...), "]}"...)
}

// TestInjectTurnGolden places the blocks in every request Codex CLI sent
// (testdata/agents). The rewrite only inserts: the recall block as a last
// input_text part of the first user message (Codex's environment_context),
// and one developer message after the last item; every other byte is
// Codex's. The golden files show the first user message and the end of
// the input as sent.
func TestInjectTurnGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "agents", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	p := turnPlacement()
	recallPart := append([]byte{','}, textPart(wire.Framed(p.Recall))...)
	item := append([]byte{','}, developerItem(p)...)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out := injectTurn(t, body, p)
			if !json.Valid(out) {
				t.Fatal("invalid JSON")
			}
			// Only the two insertions, each once.
			if bytes.Count(out, recallPart) != 1 || bytes.Count(out, item) != 1 {
				t.Fatal("the blocks are not where they belong")
			}
			rest := bytes.Replace(bytes.Replace(out, recallPart, nil, 1), item, nil, 1)
			if !bytes.Equal(rest, body) {
				t.Fatal("a byte of Codex's changed")
			}
			in := gjson.GetBytes(out, "input").Array()
			if last := in[len(in)-1]; last.Raw != string(item[1:]) || !strings.HasSuffix(gjson.GetBytes(out, "input").Raw, string(item[1:])+"]") {
				t.Fatalf("last item %.200s", last.Raw)
			}
			var first gjson.Result
			for _, it := range in {
				if it.Get("role").Str == "user" {
					first = it
					break
				}
			}
			if !strings.HasSuffix(first.Get("content").Raw, string(recallPart)+"]") {
				t.Fatalf("first user message %.300s", first.Raw)
			}
			if gjson.GetBytes(out, "instructions").Exists() || gjson.GetBytes(out, "prompt_cache_key").Raw != gjson.GetBytes(body, "prompt_cache_key").Raw {
				t.Fatal("instructions or prompt_cache_key touched")
			}
			view := `{"first_user_message":` + first.Raw + `,"input_tail":[` + in[len(in)-2].Raw + "," + in[len(in)-1].Raw + "]}"
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(view), "", "  "); err != nil {
				t.Fatal(err)
			}
			agenttest.Golden(t, "inject_turn_"+name+".json", pretty.Bytes())

			// What the proxy reads of the rewrite is what it read of
			// Codex's request, and placing again changes nothing.
			a, b := readInfo(t, body), readInfo(t, out)
			if a.Goal != b.Goal || a.Key != b.Key || a.System != b.System || a.Later != b.Later || len(a.ToolResults) != len(b.ToolResults) {
				t.Fatalf("read back: goal %q key %q later %v, was %q %q %v", b.Goal, b.Key, b.Later, a.Goal, a.Key, a.Later)
			}
			if again := injectTurn(t, out, p); !bytes.Equal(again, out) {
				t.Fatal("placing again changed the body")
			}
			if back := injectTurn(t, out, wire.Placement{}); !bytes.Equal(back, body) {
				t.Fatal("placing nothing does not give Codex's request back")
			}
		})
	}
}

func readInfo(t testing.TB, body []byte) *wire.Info {
	t.Helper()
	r, err := read(body, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Info()
}

// TestTurnPlacementKeepsTheCachedPrefix replays an 8-turn loop of Codex
// (gpt-5.5, as captured): each turn appends the model's function_call and
// a function_call_output that fails the same way, and the guard's count
// changes every turn. Everything the provider cached of a turn, up to
// the item the proxy placed at its end, is the start of the next turn,
// and the recall block is the same bytes on every turn.
func TestTurnPlacementKeepsTheCachedPrefix(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "codex-gpt-5.5-turn2.json"))
	if err != nil {
		t.Fatal(err)
	}
	input := gjson.GetBytes(body, "input")
	items := input.Array()
	call, output := items[len(items)-2].Raw, items[len(items)-1].Raw
	if !strings.Contains(call, `"function_call"`) || !strings.Contains(output, "SyntaxError") {
		t.Fatalf("capture changed: %.100s / %.100s", call, output)
	}
	head := make([]string, 0, len(items))
	for _, it := range items[:len(items)-2] {
		head = append(head, it.Raw)
	}
	_, rc := agenttest.BlockParts()
	recallBlock := wire.NewBlock(rc)
	var prev []byte
	var firstUser string
	for k := 1; k <= 8; k++ {
		turnItems := append([]string(nil), head...)
		for i := 1; i < k; i++ {
			id := fmt.Sprintf("call_loop_%d", i)
			turnItems = append(turnItems, strings.Replace(call, `"call_id":"`, `"call_id":"`+id+`_`, 1), strings.Replace(output, `"call_id":"`, `"call_id":"`+id+`_`, 1))
		}
		in := []byte("[" + strings.Join(turnItems, ",") + "]")
		b := append(append(append([]byte(nil), body[:input.Index]...), in...), body[input.Index+len(input.Raw):]...)
		g := wire.NewBlock(guard.Block([]guard.Entry{{Pattern: "SYNTAX COMPLIANCE ERROR", Count: k + 1, Hint: "Output must be valid syntax."}}))
		p := wire.Placement{Turn: []wire.Block{g}, Recall: recallBlock}
		out := injectTurn(t, b, p)
		if !json.Valid(out) {
			t.Fatalf("turn %d: invalid JSON", k)
		}
		if !bytes.Contains(out, []byte(fmt.Sprintf("(Failed %d times)", k+1))) {
			t.Fatalf("turn %d: no guard", k)
		}
		// The first user message, recall block included, is the same
		// bytes on every turn.
		fu := gjson.GetBytes(out, `input.#(role=="user")`).Raw
		if !strings.Contains(fu, recall.BlockStart) {
			t.Fatalf("turn %d: first user message without the recall block: %.200s", k, fu)
		}
		if firstUser == "" {
			firstUser = fu
		} else if fu != firstUser {
			t.Fatalf("turn %d: the first user message changed", k)
		}
		if prev != nil {
			placed := bytes.LastIndex(prev, []byte(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"`+wire.FrameStart))
			if placed < 0 {
				t.Fatalf("turn %d: no placed item in the turn before", k)
			}
			common := 0
			for common < len(prev) && common < len(out) && prev[common] == out[common] {
				common++
			}
			if common < placed {
				t.Fatalf("turn %d: the bytes sent differ from the turn before's at %d, before its placed item at %d: %q", k, common, placed, out[max(0, common-40):common+40])
			}
		}
		prev = out
	}
}

// TestLater: a request holds an earlier answer of the model when it
// continues a stored response or its input holds an item the model made
// (or one that answers it); Codex's first request holds none.
func TestLater(t *testing.T) {
	p := turnPlacement()
	tests := []struct {
		name, body string
		later      bool
	}{
		{"a string", `{"input":"Parse a CSV file"}`, false},
		{"user and developer messages", `{"instructions":"x","input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, false},
		{"an assistant message", `{"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`, true},
		{"a function call's output alone", `{"input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`, true},
		{"reasoning", `{"input":[{"role":"user","content":"hi"},{"type":"reasoning","summary":[]}]}`, true},
		{"an item reference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, true},
		{"previous_response_id", `{"previous_response_id":"resp_1","input":[{"role":"user","content":"next"}]}`, true},
		{"the proxy's own developer message", `{"input":[{"role":"user","content":"hi"},` + string(developerItem(p)) + `]}`, false},
		{"the codex tool mode", `{"input":[{"type":"additional_tools","role":"developer","tools":[]},{"role":"user","content":"hi"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readInfo(t, []byte(tt.body)).Later; got != tt.later {
				t.Fatalf("Later = %v", got)
			}
		})
	}
	for name, later := range map[string]bool{
		"codex-turn1.json": false, "codex-turn2.json": true, "codex-turn3.json": true,
		"codex-gpt-5.5-turn2.json": true, "codex-loop-stop.json": true,
	} {
		body, err := os.ReadFile(filepath.Join("testdata", "agents", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := readInfo(t, body).Later; got != later {
			t.Errorf("%s: Later = %v", name, got)
		}
	}
}

// TestTurnPlacement: where the blocks go in the shapes of input the API
// takes, and what the proxy reads of a body it rewrote.
func TestTurnPlacement(t *testing.T) {
	p := turnPlacement()
	rc := wire.Framed(p.Recall)
	item := string(developerItem(p))
	part := string(textPart(rc))
	rcJSON, _ := json.Marshal(rc.Text)
	old := guard.Block([]guard.Entry{{Pattern: "RATE LIMIT", Count: 3, Hint: "Slow down."}})
	oldJSON, _ := json.Marshal(old + "You are Codex.")
	oldFrame := wire.Framed(wire.NewBlock(old))
	tests := []struct {
		name, body, want string
		p                wire.Placement
	}{
		{"a string becomes the user's message and the blocks'", `{"model":"m","input":"Parse a CSV file"}`,
			`{"model":"m","input":[{"type":"message","role":"user","content":"Parse a CSV file\n\n` + string(rc.JSON) + `"},` + item + `]}`, p},
		{"a string with recall only stays a string", `{"input":"Parse a CSV file"}`,
			`{"input":"Parse a CSV file\n\n` + string(rc.JSON) + `"}`, wire.Placement{Recall: p.Recall}},
		{"string content: the recall block after a blank line", `{"input":[{"role":"user","content":"Fix it"},{"type":"function_call_output","call_id":"c","output":"err"} ]}`,
			`{"input":[{"role":"user","content":"Fix it\n\n` + string(rc.JSON) + `"},{"type":"function_call_output","call_id":"c","output":"err"},` + item + ` ]}`, p},
		{"parts: a part after the last", `{"input":[{"role":"user","content":[{"type":"input_text","text":"Fix it"},{"type":"input_image","image_url":"data:"}]}]}`,
			`{"input":[{"role":"user","content":[{"type":"input_text","text":"Fix it"},{"type":"input_image","image_url":"data:"},` + part + `]},` + item + `]}`, p},
		{"an empty input", `{"input":[ ]}`, `{"input":[ ` + item + `]}`, p},
		{"no input", `{"model":"m"}`, `{"model":"m","input":[` + item + `]}`, p},
		{"a continued response: no recall block", `{"previous_response_id":"resp_1","input":[{"role":"user","content":"next"}]}`,
			`{"previous_response_id":"resp_1","input":[{"role":"user","content":"next"},` + item + `]}`, p},
		{"earlier blocks leave the instructions, none come in", `{"instructions":` + string(oldJSON) + `,"input":[{"role":"user","content":"hi"}]}`,
			`{"instructions":"You are Codex.","input":[{"role":"user","content":"hi"}]}`, wire.Placement{}},
		{"the proxy's item sent back is replaced", `{"input":[{"role":"user","content":"hi"},{"type":"message","role":"developer","content":[{"type":"input_text","text":` + string(rcJSON) + `}]}]}`,
			`{"input":[{"role":"user","content":"hi\n\n` + string(rc.JSON) + `"},` + item + `]}`, p},
		{"and removed when the turn has no block", `{"input":[{"role":"user","content":"hi"},` + item + `]}`,
			`{"input":[{"role":"user","content":"hi"}]}`, wire.Placement{}},
		{"a recall block sent back stays when it is the same", `{"input":[{"role":"user","content":"hi\n\n` + string(rc.JSON) + `"}]}`,
			`{"input":[{"role":"user","content":"hi\n\n` + string(rc.JSON) + `"},` + item + `]}`, p},
		{"and leaves when there is none", `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},` + part + `]}]}`,
			`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, wire.Placement{}},
		{"an empty string content holds the recall block alone", `{"input":[{"role":"user","content":""}]}`,
			`{"input":[{"role":"user","content":"` + string(rc.JSON) + `"},` + item + `]}`, p},
		{"another recall block sent back in a string is replaced", `{"input":[{"role":"user","content":"hi\n\n` + string(oldFrame.JSON) + `"}]}`,
			`{"input":[{"role":"user","content":"hi\n\n` + string(rc.JSON) + `"},` + item + `]}`, p},
		{"a recall part sent back stays when it is the same", `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},` + part + `]}]}`,
			`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},` + part + `]},` + item + `]}`, p},
		{"another recall part sent back is replaced", `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},` + string(textPart(oldFrame)) + `]}]}`,
			`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},` + part + `]},` + item + `]}`, p},
		{"nothing to place", `{"input":[{"role":"user","content":"hi"}]}`, `{"input":[{"role":"user","content":"hi"}]}`, wire.Placement{}},
		{"an input of no type the API takes", `{"input":7}`, `{"input":7}`, p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := injectTurn(t, []byte(tt.body), tt.p)
			if string(out) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", out, tt.want)
			}
			if !json.Valid(out) {
				t.Fatal("invalid JSON")
			}
			if again := injectTurn(t, out, tt.p); !bytes.Equal(again, out) {
				t.Fatalf("placing again:\n%s", again)
			}
		})
	}
	if out := injectTurn(t, []byte(`{"input":"hi"}`), wire.Placement{}); string(out) != `{"input":"hi"}` {
		t.Fatal(string(out))
	}

	// The proxy's item is neither the system text nor the task; a framed
	// recall block is not part of the task.
	b := `{"input":[` + item + `,{"role":"user","content":[{"type":"input_text","text":"Fix the build"},` + part + `]},{"role":"developer","content":"You are Codex."}]}`
	in := readInfo(t, []byte(b))
	if in.System != "You are Codex." || in.Goal != "Fix the build" || in.Key != recall.ConversationKey("You are Codex.", "Fix the build") {
		t.Fatalf("system %q goal %q", in.System, in.Goal)
	}
	if in := readInfo(t, []byte(`{"input":[{"role":"user","content":"<environment_context>x</environment_context>\n\n`+string(rc.JSON)+`"}]}`)); strings.Contains(in.Goal, "RECALL") {
		t.Fatalf("goal %q", in.Goal)
	}
}

// textPart is the input_text part of a framed block, nil for none.
func textPart(frame wire.Block) []byte {
	if len(frame.JSON) == 0 {
		return nil
	}
	return []byte(`{"type":"input_text","text":"` + string(frame.JSON) + `"}`)
}
