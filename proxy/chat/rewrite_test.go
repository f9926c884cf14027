package chat

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// testBlocks is a guard block followed by a recall block, as the proxy
// composes them.
func testBlocks() string {
	g, r := testBlockParts()
	return wire.Compose(g, r)
}

// testBlockParts are the guard block and the recall block of testBlocks.
func testBlockParts() (string, string) {
	g := guard.Block([]guard.Entry{{Pattern: "SYNTAX COMPLIANCE ERROR", Count: 2, Hint: "Output must be valid syntax."}})
	r := recall.Block([]recall.Match{{Similarity: 0.68, Solution: store.Solution{
		Goal: "Parse the config", Approach: "yaml.v3 with KnownFields", Outcome: "works", Confidence: 0.9,
	}}})
	return g, r
}

// rewrite inspects body and injects blocks into it, as the handler does.
func rewrite(body []byte, blocks ...string) ([]byte, error) {
	conv, err := inspect(body, nil, "")
	if err != nil {
		return nil, err
	}
	parts := make([]wire.Block, len(blocks))
	for i, b := range blocks {
		parts[i] = wire.NewBlock(b)
	}
	return injectSystem(nil, body, conv, parts...)
}

func TestInjectGolden(t *testing.T) {
	blocks := testBlocks()
	tests := []struct{ name, body string }{
		{"string_system", `{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`},
		{"developer_first", `{"model":"m","messages":[{"role":"developer","content":"Follow the spec."},{"role":"user","content":"hi"}]}`},
		{"parts_system", `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"Part one."},{"type":"text","text":"Part two."}]},{"role":"user","content":"hi"}]}`},
		{"no_system", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"null_content_system", `{"model":"m","messages":[{"role":"system","content":null},{"role":"user","content":"hi"}]}`},
		{"empty_messages", `{"model":"m","messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rewrite([]byte(tc.body), blocks)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, out, "", "  ")
			agenttest.Golden(t, "inject_"+tc.name+".json", pretty.Bytes())

			// Injecting again into the rewritten body changes nothing:
			// old blocks are stripped first, so a block never appears twice.
			again, err := rewrite(out, blocks)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, out) {
				t.Fatalf("re-injection is not stable:\n%s\n%s", out, again)
			}
			// Injecting nothing removes the blocks again.
			stripped, _ := rewrite(out, "")
			if strings.Contains(string(stripped), guard.BlockStart) || strings.Contains(string(stripped), recall.BlockStart) {
				t.Fatalf("blocks left after strip: %s", stripped)
			}
		})
	}
}

func TestInjectNothingKeepsBytes(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`,
		`{"model":"m",  "messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":"not an array"}`,
	} {
		out, err := rewrite([]byte(body), "")
		if err != nil || string(out) != body {
			t.Fatalf("changed %s -> %s (%v)", body, out, err)
		}
	}
}

// FuzzInject: whatever the (valid JSON) body, the rewritten body is valid
// JSON, keeps every original message (same count, plus at most the inserted
// system message, every non-system message byte-identical) and every
// top-level field. Every body is placed in turns too (checkTurnPlacement).
func FuzzInject(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`, true)
	f.Add(`{"messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, false)
	f.Add(`{"messages":[{"role":"user","content":"\u0000\ud83d\ude00"}],"n":1}`, true)
	f.Add(`{"messages":[ ]}`, true)
	f.Add(`{"messages":[{"role":"system","content":"### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!\nold\n### !!! END REPEAT FAILURE GUARD !!!\n\nkeep"}]}`, false)
	// The forms of the newest turn.
	f.Add(`{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"sh"}}]},{"role":"tool","tool_call_id":"a","content":"failed\n"}]}`, true)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"tool","content":[ ]}],"model":"m"}`, true)
	f.Add(`{"messages":[{"role":"user"},{"role":"function","content":null},{"role":"assistant","content":"prefill"}]}`, true)
	f.Add(`{"messages":[{"role":"system","content":"s"},{"role":"assistant"}, 7]}`, true)
	f.Add(`{"messages":[{"role":"user","content":"go"},{"role":"tool","content":{"x":1}}]}`, true)
	f.Add(`{"messages":[{"role":"user","content":"go\n\n<system-reminder>\nNote from scarproxy, the proxy between this agent and its model provider (not from the user):\n\n### RECALL: Similar Task Found in Memory\nold\n### END RECALL\n</system-reminder>"}]}`, true)
	g, r := testBlockParts()
	f.Fuzz(func(t *testing.T, body string, withBlocks bool) {
		if !gjson.Valid(body) || !gjson.Get(body, "messages").IsArray() {
			return
		}
		var p wire.Placement
		if withBlocks {
			// Both, the recall alone, the newest turn's alone.
			switch len(body) % 3 {
			case 0:
				p = wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(r)}
			case 1:
				p = wire.Placement{Recall: wire.NewBlock(r)}
			case 2:
				p = wire.Placement{Turn: []wire.Block{{}, wire.NewBlock(g)}}
			}
		}
		checkTurnPlacement(t, []byte(body), p)
		// The handler passes the guard and recall blocks one by one.
		var parts []string
		if withBlocks {
			parts = []string{g, r}
		}
		out, err := rewrite([]byte(body), parts...)
		if err != nil {
			return // the proxy then forwards the original bytes
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("invalid JSON from %q: %q", body, out)
		}
		in := gjson.Get(body, "messages").Array()
		got := gjson.GetBytes(out, "messages").Array()
		if len(got) != len(in) && len(got) != len(in)+1 {
			t.Fatalf("message count %d -> %d", len(in), len(got))
		}
		offset := len(got) - len(in)
		for i, m := range in {
			r := m.Get("role").String()
			if r == "system" || r == "developer" {
				continue
			}
			if got[i+offset].Raw != m.Raw {
				t.Fatalf("message %d changed: %s -> %s", i, m.Raw, got[i+offset].Raw)
			}
		}
		// The system message says the blocks, then what it said before
		// without any earlier block.
		conv, err := inspect([]byte(body), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if withBlocks {
			want = strings.TrimRight(wire.Compose(g, r), "\n")
		}
		idx := conv.scan.systemIndex()
		before := gjson.Result{}
		if idx >= 0 {
			before = in[idx].Get("content")
			if before.Type == gjson.String {
				want = wire.Compose(want, wire.Strip(before.Str))
			}
		}
		switch {
		case idx < 0 && want != "":
			if got[0].Get("role").String() != "system" || got[0].Get("content").Str != want {
				t.Fatalf("inserted system message %s, want content %q", got[0].Raw, want)
			}
		case idx >= 0 && (before.Type == gjson.String || want != "" && (!before.Exists() || before.Type == gjson.Null)):
			// Invalid UTF-8 in a rewritten text may come back as U+FFFD.
			if c := got[idx].Get("content"); c.Type != gjson.String || string([]rune(c.Str)) != string([]rune(want)) {
				t.Fatalf("system content %s, want %q", c.Raw, want)
			}
		}
		gjson.Parse(body).ForEach(func(k, v gjson.Result) bool {
			if k.String() != "messages" && !gjson.GetBytes(out, gjson.Escape(k.String())).Exists() {
				t.Fatalf("top-level field %q lost", k.String())
			}
			return true
		})
	})
}

func TestUndefinedSystemContentIsLeftAlone(t *testing.T) {
	for _, in := range []string{
		`{"messages":[{"role":"system","content":{"text":"KEEP ME"}},{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":42},{"role":"user","content":"hi"}]}`,
	} {
		out, err := rewrite([]byte(in), testBlocks())
		if err != nil || string(out) != in {
			t.Fatalf("changed %s -> %s (%v)", in, out, err)
		}
	}
}
