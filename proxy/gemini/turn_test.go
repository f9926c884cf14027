package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// turnPlacement is what a looping turn gets: a STOP block and the guard in
// the newest turn, the recall block in the first user turn.
func turnPlacement() wire.Placement {
	g, r := agenttest.BlockParts()
	stop := guard.StopBlock(guard.Loop{Kind: guard.LoopFailing, Count: 4, Level: guard.LevelStop, Calls: []guard.Step{
		{Tool: "run_shell_command", Args: `{"command":"cat config/settings.json"}`, Failed: true, Output: "cat: config/settings.json: No such file or directory"},
	}})
	return wire.Placement{Turn: []wire.Block{wire.NewBlock(stop), wire.NewBlock(g)}, Recall: wire.NewBlock(r)}
}

// textPart is a framed block as the placement adds it to a parts array.
func textPart(b wire.Block) string {
	return `{"text":"` + string(b.JSON) + `"}`
}

// unplace takes the framed blocks of p out of out: what is left is what
// the client sent, when its body held no frame of its own.
func unplace(out []byte, p wire.Placement) []byte {
	for _, b := range []wire.Block{wire.Framed(p.Turn...), wire.Framed(p.Recall)} {
		if len(b.JSON) > 0 {
			out = bytes.ReplaceAll(out, []byte(","+textPart(b)), nil)
			out = bytes.ReplaceAll(out, []byte(textPart(b)), nil)
		}
	}
	return out
}

// TestInjectTurnAgents places the blocks into the requests the Gemini
// CLI sent: the contents as forwarded are golden files; every other
// member keeps its bytes, and taking the framed blocks out gives the
// request back.
func TestInjectTurnAgents(t *testing.T) {
	p := turnPlacement()
	for _, name := range []string{"gemini-cli-turn1", "gemini-cli-turn2", "gemini-cli-turn3", "gemini-cli-loop-stop", "gemini-cli-loop-fix"} {
		t.Run(name, func(t *testing.T) {
			body := agentBody(t, name)
			out := injectAtPath(t, body, p)
			var pretty bytes.Buffer
			json.Indent(&pretty, []byte(gjson.GetBytes(out, "contents").Raw), "", "  ")
			agenttest.Golden(t, "inject_turn_"+name+".json", pretty.Bytes())

			agenttest.SameMembers(t, body, out, "contents")
			if back := unplace(out, p); !bytes.Equal(back, body) {
				t.Fatalf("the client's bytes changed outside the blocks placed")
			}
			contents := gjson.GetBytes(out, "contents").Array()
			last := contents[len(contents)-1].Get("parts").Array()
			if contents[len(contents)-1].Get("role").Str != "user" || last[len(last)-1].Get("text").Str != wire.Framed(p.Turn...).Text {
				t.Fatalf("the newest turn does not end with the turn's blocks: %s", last[len(last)-1].Raw)
			}
			first := contents[0].Get("parts").Array()
			if len(contents) == 1 {
				first = first[:len(first)-1] // the turn's blocks come after
			}
			if first[len(first)-1].Raw != textPart(wire.Framed(p.Recall)) {
				t.Fatalf("the recall block is not last in the first user turn: %s", contents[0].Raw)
			}
			// What the proxy reads of the request as forwarded is what it
			// read of the client's: the conversation keeps its key.
			a, b := readAt(t, streamPath, string(body)).Info(), readAt(t, streamPath, string(out)).Info()
			if a.Goal != b.Goal || a.Key != b.Key || a.Later != b.Later || a.ToolCount != b.ToolCount {
				t.Fatalf("read back: goal %q key %q, was %q %q", b.Goal, b.Key, a.Goal, a.Key)
			}
			// Placing again replaces the frames: the same bytes.
			if again := injectAtPath(t, out, p); !bytes.Equal(again, out) {
				t.Fatal("placing the blocks again is not stable")
			}
			// Placing nothing takes them out.
			if none := injectAtPath(t, out, wire.Placement{}); !bytes.Equal(none, body) {
				t.Fatal("an empty placement leaves frames behind")
			}
		})
	}
}

// TestInjectTurnShapes: where the blocks go in the shapes a Gemini
// request can take.
func TestInjectTurnShapes(t *testing.T) {
	g, rc := agenttest.BlockParts()
	p := wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc)}
	old := guard.Block([]guard.Entry{{Pattern: "RATE LIMIT", Count: 3, Hint: "Slow down."}})
	tests := []struct{ name, body string }{
		{"first_turn", `{"contents":[{"role":"user","parts":[{"text":"Fix the build"}]}]}`},
		{"no_role", `{"contents":[{"parts":[{"text":"Fix the build"}]}]}`},
		{"text_turns", `{"contents":[{"role":"user","parts":[{"text":"Fix the build"}]},{"role":"model","parts":[{"text":"On it."}]},{"role":"user","parts":[{"text":"Go on"}]}]}`},
		{"empty_parts", `{"contents":[{"role":"user","parts":[ ]}]}`},
		{"function_responses_then_blocks", `{"contents":[{"role":"user","parts":[{"text":"Run it"}]},{"role":"model","parts":[{"functionCall":{"name":"run","args":{}}},{"functionCall":{"name":"run","args":{"x":1}}}]},{"role":"user","parts":[{"functionResponse":{"name":"run","response":{"error":"boom"}}} , {"functionResponse":{"name":"run","response":{"output":"ok"}}} ]}]}`},
		{"parts_not_placeable", `{"contents":[{"role":"user","parts":{"text":"x"}},{"role":"model","parts":[{"text":"a"}]},{"role":"user"}]}`},
		{"contents_not_an_array", `{"contents":{"role":"user","parts":[{"text":"x"}]}}`},
		{"function_role", `{"contents":[{"role":"user","parts":[{"text":"Run it"}]},{"role":"model","parts":[{"functionCall":{"name":"run","args":{}}}]},{"role":"function","parts":[{"functionResponse":{"name":"run","response":{"output":"ok"}}}]}]}`},
		{"stale_block_in_system", `{"systemInstruction":{"parts":[{"text":"You are Gemini CLI."},{"text":` + jsonString(old) + `}]},"contents":[{"role":"user","parts":[{"text":"Fix it"}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := injectAtPath(t, []byte(tc.body), p)
			var pretty bytes.Buffer
			json.Indent(&pretty, out, "", "  ")
			agenttest.Golden(t, "inject_turn_"+tc.name+".json", pretty.Bytes())
			if sys := gjson.GetBytes(out, "systemInstruction").Raw; strings.Contains(sys, "### ") {
				t.Fatalf("a block in the system instruction: %s", sys)
			}
			if again := injectAtPath(t, out, p); !bytes.Equal(again, out) {
				t.Fatalf("placing again is not stable:\n%s\n%s", out, again)
			}
		})
	}
}

// TestInjectTurnNothingToPlace: an empty placement returns the body
// itself.
func TestInjectTurnNothingToPlace(t *testing.T) {
	body := agentBody(t, "gemini-cli-turn3")
	r := readAt(t, streamPath, string(body))
	out, err := r.Inject(make([]byte, 0, 16), body, wire.Placement{})
	if err != nil || &out[0] != &body[0] || len(out) != len(body) {
		t.Fatalf("not the body itself (err %v)", err)
	}
}

// loopTurn is turn k (from 1) of a Gemini CLI conversation that keeps
// making the same failing shell call: the CLI's first request, then k-1
// rounds of its call and the failed response, each call with an id of
// its own as the CLI gives them.
func loopTurn(t testing.TB, k int) []byte {
	t.Helper()
	first, second := agentBody(t, "gemini-cli-turn1"), agentBody(t, "gemini-cli-turn2")
	call := gjson.GetBytes(second, "contents.1").Raw
	result := gjson.GetBytes(second, "contents.2").Raw
	id := gjson.Get(call, "parts.1.functionCall.id").Str
	if id == "" || !strings.Contains(result, id) {
		t.Fatalf("no function call in gemini-cli-turn2.json: %s", call)
	}
	sp, err := wire.Members(first, "contents")
	if err != nil {
		t.Fatal(err)
	}
	var rounds strings.Builder
	for i := 1; i < k; i++ {
		next := "run_shell_command_loop" + strconv.Itoa(i)
		rounds.WriteString("," + strings.ReplaceAll(call, id, next) + "," + strings.ReplaceAll(result, id, next))
	}
	return wire.Splice(first, sp[0].End-1, sp[0].End-1, []byte(rounds.String()))
}

// TestTurnPlacementKeepsTheCachedPrefix: a conversation of 8 turns that
// loops on the same failing call, its guard changing every turn ("Failed
// k times") and its recall block the same. On every turn, everything sent
// the turn before up to the blocks placed in its newest turn is sent
// again byte for byte, so the provider's cache of it holds; the recall
// block has the same bytes at the same place.
func TestTurnPlacementKeepsTheCachedPrefix(t *testing.T) {
	_, rc := agenttest.BlockParts()
	recallPart := textPart(wire.Framed(wire.NewBlock(rc)))
	var prev []byte // sent on the turn before
	var prevAt int  // where the blocks placed in its newest turn start
	recallAt := -1
	for k := 1; k <= 8; k++ {
		body := loopTurn(t, k)
		in := readAt(t, streamPath, string(body)).Info()
		if in.Later != (k > 1) || in.Goal != "Write hello.py that prints hello and run it" || in.ToolCount != k-1 {
			t.Fatalf("turn %d: later %v, goal %q, %d results", k, in.Later, in.Goal, in.ToolCount)
		}
		g := wire.NewBlock(guard.Block([]guard.Entry{{Pattern: "REPEATED ERROR", Count: k, Hint: "Change approach."}}))
		p := wire.Placement{Turn: []wire.Block{g}, Recall: wire.NewBlock(rc)}
		sent := injectAtPath(t, body, p)
		if !bytes.Equal(unplace(sent, p), body) {
			t.Fatalf("turn %d: the client's bytes changed", k)
		}
		at := bytes.Index(sent, []byte(recallPart))
		if at < 0 || bytes.Count(sent, []byte(recallPart)) != 1 || recallAt >= 0 && at != recallAt {
			t.Fatalf("turn %d: the recall block at %d, was at %d", k, at, recallAt)
		}
		recallAt = at
		turnAt := bytes.LastIndex(sent, []byte(textPart(wire.Framed(g))))
		if turnAt < 0 || sent[turnAt-1] != ',' {
			t.Fatalf("turn %d: no guard in the newest turn", k)
		}
		turnAt-- // its comma is the first byte placed
		if k > 1 {
			if n := agenttest.CommonPrefix(sent, prev); n < prevAt {
				t.Fatalf("turn %d: %d bytes in common with turn %d, whose newest turn's blocks start at %d", k, n, k-1, prevAt)
			}
		}
		prev, prevAt = sent, turnAt
	}
}

// TestInfoLater: a request is a conversation's first until it holds an
// answer of the model.
func TestInfoLater(t *testing.T) {
	tests := []struct {
		name, body string
		later      bool
	}{
		{"first request", `{"contents":[{"role":"user","parts":[{"text":"Fix the build"}]}]}`, false},
		{"context first", `{"contents":[{"role":"user","parts":[{"text":"<session_context>\nctx\n</session_context>"}]},{"role":"user","parts":[{"text":"Fix the build"}]}]}`, false},
		{"a model content last is the client's", `{"contents":[{"role":"user","parts":[{"text":"Answer in JSON"}]},{"role":"model","parts":[{"text":"{"}]}]}`, false},
		{"a model turn", `{"contents":[{"role":"user","parts":[{"text":"Fix the build"}]},{"role":"model","parts":[{"text":"Done."}]},{"role":"user","parts":[{"text":"Thanks"}]}]}`, true},
		{"a call answered", cliTurn, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readAt(t, jsonPath, tt.body).Info().Later; got != tt.later {
				t.Fatalf("Later = %v", got)
			}
		})
	}
}

// placeRef is the turn placement as a plain reference: it finds the first
// and the last user content with gjson paths, and for a body whose
// contents hold no frame and whose system instruction holds no block,
// gives what Inject must give.
func placeRef(body []byte, p wire.Placement) []byte {
	contents := gjson.GetBytes(body, "contents")
	if !contents.IsArray() {
		return body
	}
	first, last := -1, -1
	for i, c := range contents.Array() {
		switch c.Get("role").String() {
		case "user", "":
			if first < 0 {
				first = i
			}
			last = i
		case "function":
			last = i
		}
	}
	type ins struct {
		content int
		blocks  []wire.Block
	}
	var edits []ins
	switch {
	case first >= 0 && first == last:
		edits = []ins{{first, []wire.Block{wire.Framed(p.Recall), wire.Framed(p.Turn...)}}}
	case first >= 0:
		edits = []ins{{first, []wire.Block{wire.Framed(p.Recall)}}, {last, []wire.Block{wire.Framed(p.Turn...)}}}
	case last >= 0:
		edits = []ins{{last, []wire.Block{wire.Framed(p.Turn...)}}}
	}
	out := body
	for i := len(edits) - 1; i >= 0; i-- { // the last first: offsets before it hold
		e := edits[i]
		ps := gjson.GetBytes(body, "contents."+strconv.Itoa(e.content)+".parts")
		var add []string
		for _, b := range e.blocks {
			if len(b.JSON) > 0 {
				add = append(add, textPart(b))
			}
		}
		if len(add) == 0 || !ps.IsArray() {
			continue
		}
		elems := ps.Array()
		at := ps.Index + 1
		if len(elems) > 0 {
			lastElem := elems[len(elems)-1]
			at = lastElem.Index + len(lastElem.Raw)
			add = append([]string{""}, add...)
		}
		out = wire.Splice(out, at, at, []byte(strings.Join(add, ",")))
	}
	return out
}

// placedByProxy reports whether body may hold what the proxy places: a
// frame or a block.
func placedByProxy(body string) bool {
	return strings.Contains(body, "Note from scarproxy") || strings.Contains(body, "### ")
}
