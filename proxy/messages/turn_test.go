package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
		{Tool: "Bash", Args: `{"command":"cat config/settings.json"}`, Failed: true, Output: "cat: config/settings.json: No such file or directory"},
	}})
	return wire.Placement{Turn: []wire.Block{wire.NewBlock(stop), wire.NewBlock(g)}, Recall: wire.NewBlock(r)}
}

// textBlock is a framed block as the placement adds it to a content array.
func textBlock(b wire.Block) string {
	return `{"type":"text","text":"` + string(b.JSON) + `"}`
}

func injectAt(t testing.TB, body []byte, p wire.Placement) []byte {
	t.Helper()
	r, err := read(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Inject(nil, body, p)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	return out
}

// unplace takes the framed blocks of p out of out, and a string content
// that became an array back to its string: what is left is what the
// client sent, when its body held no frame of its own.
func unplace(out []byte, p wire.Placement) []byte {
	for _, b := range []wire.Block{wire.Framed(p.Turn...), wire.Framed(p.Recall)} {
		if len(b.JSON) > 0 {
			out = bytes.ReplaceAll(out, []byte(","+textBlock(b)), nil)
			out = bytes.ReplaceAll(out, []byte(textBlock(b)), nil)
		}
	}
	return out
}

// TestInjectTurnAgents places the blocks into the requests Claude Code
// sent: the messages as forwarded are golden files; every other member
// keeps its bytes, and taking the framed blocks out gives the request
// back, cache_control markers included.
func TestInjectTurnAgents(t *testing.T) {
	p := turnPlacement()
	for _, name := range []string{"claude-turn1", "claude-turn2", "claude-turn3", "claude-loop-fix", "claude-loop-stop"} {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "agents", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			out := injectAt(t, body, p)
			var pretty bytes.Buffer
			json.Indent(&pretty, []byte(gjson.GetBytes(out, "messages").Raw), "", "  ")
			agenttest.Golden(t, "inject_turn_"+name+".json", pretty.Bytes())

			agenttest.SameMembers(t, body, out, "messages")
			if back := unplace(out, p); !bytes.Equal(back, body) {
				t.Fatalf("the client's bytes changed outside the blocks placed")
			}
			msgs := gjson.GetBytes(out, "messages").Array()
			newest := len(msgs) - 1
			for msgs[newest].Get("role").Str != "user" { // Claude Code may end with a system message
				newest--
			}
			last := msgs[newest].Get("content").Array()
			if last[len(last)-1].Get("text").Str != wire.Framed(p.Turn...).Text {
				t.Fatalf("the newest turn does not end with the turn's blocks: %s", last[len(last)-1].Raw)
			}
			first := msgs[0].Get("content").Array()
			if !strings.Contains(string(out), textBlock(wire.Framed(p.Recall))) || first[len(first)-1].Get("cache_control").Exists() {
				t.Fatalf("the recall block is not last in the first user turn, without a marker: %s", msgs[0].Raw)
			}
			// What the proxy reads of the request as forwarded is what it
			// read of the client's: the conversation keeps its key.
			a, b := readInfo(t, body), readInfo(t, out)
			if a.Goal != b.Goal || a.Key != b.Key || a.Later != b.Later || a.ToolCount != b.ToolCount {
				t.Fatalf("read back: goal %q key %q, was %q %q", b.Goal, b.Key, a.Goal, a.Key)
			}
			// Placing again replaces the frames: the same bytes.
			if again := injectAt(t, out, p); !bytes.Equal(again, out) {
				t.Fatal("placing the blocks again is not stable")
			}
			// Placing nothing takes them out.
			if none := injectAt(t, out, wire.Placement{}); !bytes.Equal(none, body) {
				t.Fatal("an empty placement leaves frames behind")
			}
		})
	}
}

func readInfo(t testing.TB, body []byte) *wire.Info {
	t.Helper()
	r, err := read(body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Info()
}

// TestInjectTurnShapes: where the blocks go in the shapes a Messages
// request can take.
func TestInjectTurnShapes(t *testing.T) {
	g, rc := agenttest.BlockParts()
	p := wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc)}
	old := guard.Block([]guard.Entry{{Pattern: "RATE LIMIT", Count: 3, Hint: "Slow down."}})
	tests := []struct{ name, body string }{
		{"first_turn_string", `{"model":"m","messages":[{"role":"user","content":"Fix the build"}]}`},
		{"first_turn_empty_string", `{"model":"m","messages":[{"role":"user","content":""}]}`},
		{"string_turns", `{"model":"m","messages":[{"role":"user","content":"Fix the build"},{"role":"assistant","content":"On it."},{"role":"user","content":"Go on"}]}`},
		{"empty_array", `{"model":"m","messages":[{"role":"user","content":[ ]}]}`},
		{"tool_results_then_blocks", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Run it","cache_control":{"type":"ephemeral","ttl":"1h"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"boom"} , {"type":"tool_result","tool_use_id":"t2","content":"ok","cache_control":{"type":"ephemeral"}} ]}]}`},
		{"prefill", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Answer in JSON"}]},{"role":"assistant","content":"{"}]}`},
		{"content_not_placeable", `{"model":"m","messages":[{"role":"user","content":{"text":"x"}},{"role":"assistant","content":"a"},{"role":"user"}]}`},
		{"messages_not_an_array", `{"model":"m","messages":{"a":{"role":"user","content":"x"}}}`},
		{"stale_block_in_system", `{"model":"m","system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":` + jsonString(old) + `,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Fix it"}]}`},
		{"stale_block_in_string_system", `{"model":"m","system":` + jsonString(old+"\nBe terse.") + `,"messages":[{"role":"user","content":"Fix it"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := injectAt(t, []byte(tc.body), p)
			var pretty bytes.Buffer
			json.Indent(&pretty, out, "", "  ")
			agenttest.Golden(t, "inject_turn_"+tc.name+".json", pretty.Bytes())
			if in, got := strings.Count(tc.body, "cache_control"), strings.Count(string(out), "cache_control"); in != got {
				t.Fatalf("%d cache_control markers, %d in the request", got, in)
			}
			if sys := gjson.GetBytes(out, "system").Raw; strings.Contains(sys, "### ") {
				t.Fatalf("a block in the system text: %s", sys)
			}
			if again := injectAt(t, out, p); !bytes.Equal(again, out) {
				t.Fatalf("placing again is not stable:\n%s\n%s", out, again)
			}
		})
	}
}

// TestInjectTurnNothingToPlace: an empty placement returns the body
// itself.
func TestInjectTurnNothingToPlace(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := read(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Inject(make([]byte, 0, 16), body, wire.Placement{})
	if err != nil || &out[0] != &body[0] || len(out) != len(body) {
		t.Fatalf("not the body itself (err %v)", err)
	}
}

// loopTurn is turn k (from 1) of a Claude Code conversation that keeps
// making the same failing Bash call: Claude Code's first request, then k-1
// rounds of its call and the failed result. With moving, the client moves
// its newest-message cache_control to the newest message as Claude Code
// does; else it keeps the first request's markers where they were.
func loopTurn(t testing.TB, k int, moving bool) []byte {
	t.Helper()
	first, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn1.json"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn2.json"))
	if err != nil {
		t.Fatal(err)
	}
	const marker = `,"cache_control":{"type":"ephemeral"}`
	call := gjson.GetBytes(second, "messages.2").Raw
	result := strings.Replace(gjson.GetBytes(second, "messages.3").Raw, marker, "", 1)
	id := gjson.Get(call, "content.1.id").Str
	if id == "" || !strings.Contains(result, id) {
		t.Fatalf("no tool call in claude-turn2.json: %s", call)
	}
	body := first
	if moving && k > 1 {
		// The marker of the first request's newest message moves on.
		task := gjson.GetBytes(first, "messages.0.content.1.cache_control")
		body = wire.Splice(first, task.Index-len(`,"cache_control":`), task.Index+len(task.Raw), nil)
	}
	sp, err := wire.Members(body, "messages")
	if err != nil {
		t.Fatal(err)
	}
	var rounds strings.Builder
	for i := 1; i < k; i++ {
		next := "toolu_loop" + strconv.Itoa(i)
		res := strings.ReplaceAll(result, id, next)
		if moving && i == k-1 {
			res = strings.Replace(res, `}]}`, marker+`}]}`, 1)
		}
		rounds.WriteString("," + strings.ReplaceAll(call, id, next) + "," + res)
	}
	return wire.Splice(body, sp[0].End-1, sp[0].End-1, []byte(rounds.String()))
}

// markers returns where the cache_control markers of body are (gjson
// paths in order), read through the client's structure.
func markers(body []byte) []string {
	var out []string
	var walk func(path string, v gjson.Result)
	walk = func(path string, v gjson.Result) {
		v.ForEach(func(k, e gjson.Result) bool {
			p := path + "." + k.String()
			if k.String() == "cache_control" {
				out = append(out, p+"="+e.Raw)
				return true
			}
			if e.IsObject() || e.IsArray() {
				walk(p, e)
			}
			return true
		})
	}
	walk("", gjson.ParseBytes(body))
	return out
}

// TestTurnPlacementKeepsTheCachedPrefix: a conversation of 8 turns that
// loops on the same failing call, its guard changing every turn ("Failed
// k times") and its recall block the same. On every turn, everything sent
// the turn before up to the blocks placed in its newest turn is sent
// again byte for byte, so the provider's cache of it holds; the recall
// block has the same bytes at the same place; the cache_control markers
// are the client's, where the client put them.
func TestTurnPlacementKeepsTheCachedPrefix(t *testing.T) {
	_, rc := agenttest.BlockParts()
	recallBlock := textBlock(wire.Framed(wire.NewBlock(rc)))
	for _, moving := range []bool{false, true} {
		t.Run(fmt.Sprintf("moving markers %v", moving), func(t *testing.T) {
			var prev []byte // sent on the turn before
			var prevAt int  // where the blocks placed in its newest turn start
			recallAt := -1
			for k := 1; k <= 8; k++ {
				body := loopTurn(t, k, moving)
				in := readInfo(t, body)
				if in.Later != (k > 1) || in.Goal != "Write hello.py that prints hello and run it" {
					t.Fatalf("turn %d: later %v, goal %q", k, in.Later, in.Goal)
				}
				g := wire.NewBlock(guard.Block([]guard.Entry{{Pattern: "SYNTAX COMPLIANCE ERROR", Count: k, Hint: "Output must be valid syntax."}}))
				p := wire.Placement{Turn: []wire.Block{g}, Recall: wire.NewBlock(rc)}
				sent := injectAt(t, body, p)

				if got, want := markers(sent), markers(body); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("turn %d: markers %v, the client's %v", k, got, want)
				}
				if !bytes.Equal(unplace(sent, p), body) {
					t.Fatalf("turn %d: the client's bytes changed", k)
				}
				cmp := sent
				if moving {
					cmp = noMarkers(sent)
				}
				at := bytes.Index(cmp, []byte(recallBlock))
				if at < 0 || bytes.Count(sent, []byte(recallBlock)) != 1 || recallAt >= 0 && at != recallAt {
					t.Fatalf("turn %d: the recall block at %d, was at %d", k, at, recallAt)
				}
				recallAt = at
				turnAt := bytes.LastIndex(sent, []byte(textBlock(wire.Framed(g))))
				if turnAt < 0 || sent[turnAt-1] != ',' {
					t.Fatalf("turn %d: no guard in the newest turn", k)
				}
				turnAt-- // its comma is the first byte placed
				if k > 1 {
					a, b := sent, prev
					if moving {
						// Anthropic matches a prefix by its content: a marker the
						// client moved is no change of it.
						a, b = noMarkers(a), noMarkers(b)
						prevAt = len(noMarkers(prev[:prevAt]))
					}
					if n := agenttest.CommonPrefix(a, b); n < prevAt {
						t.Fatalf("turn %d: %d bytes in common with turn %d, whose newest turn's blocks start at %d:\n%.200q\n%.200q", k, n, k-1, prevAt, a[n:], b[n:])
					}
				}
				prev, prevAt = sent, turnAt
			}
		})
	}
}

func noMarkers(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(`,"cache_control":{"type":"ephemeral"}`), nil)
}

// TestInfoLater: a request is a conversation's first until it holds an
// answer of the model.
func TestInfoLater(t *testing.T) {
	tests := []struct {
		name, body string
		later      bool
	}{
		{"first request", `{"messages":[{"role":"user","content":"Fix the build"}]}`, false},
		{"first request, context first", `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>\nctx\n</system-reminder>"}]},{"role":"user","content":"Fix the build"}]}`, false},
		{"a prefill is the client's", `{"messages":[{"role":"user","content":"Answer in JSON"},{"role":"assistant","content":"{"}]}`, false},
		{"an assistant turn", `{"messages":[{"role":"user","content":"Fix the build"},{"role":"assistant","content":"Done."},{"role":"user","content":"Thanks"}]}`, true},
		{"a tool call answered", claudeTurn, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readInfo(t, []byte(tt.body)).Later; got != tt.later {
				t.Fatalf("Later = %v", got)
			}
		})
	}
	for name, later := range map[string]bool{"claude-turn1": false, "claude-turn2": true, "claude-loop-stop": true} {
		body, err := os.ReadFile(filepath.Join("testdata", "agents", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := readInfo(t, body).Later; got != later {
			t.Errorf("%s: Later = %v", name, got)
		}
	}
}

// placeRef is the turn placement as a plain reference: it finds the first
// and the last user message with gjson paths, and for a body whose
// messages hold no frame and whose system text holds no block, gives what
// Inject must give.
func placeRef(body []byte, p wire.Placement) []byte {
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return body
	}
	var users []int
	for i, m := range msgs.Array() {
		if m.Get("role").String() == "user" {
			users = append(users, i)
		}
	}
	if len(users) == 0 {
		return body
	}
	type ins struct {
		msg    int
		blocks []wire.Block
	}
	first, last := users[0], users[len(users)-1]
	edits := []ins{{first, []wire.Block{wire.Framed(p.Recall)}}, {last, []wire.Block{wire.Framed(p.Turn...)}}}
	if first == last {
		edits = []ins{{first, []wire.Block{wire.Framed(p.Recall), wire.Framed(p.Turn...)}}}
	}
	out := body
	for i := len(edits) - 1; i >= 0; i-- { // the last first: offsets before it hold
		e := edits[i]
		c := gjson.GetBytes(body, "messages."+strconv.Itoa(e.msg)+".content")
		var add []string
		for _, b := range e.blocks {
			if len(b.JSON) > 0 {
				add = append(add, textBlock(b))
			}
		}
		if len(add) == 0 {
			continue
		}
		switch {
		case c.IsArray():
			elems := c.Array()
			at := c.Index + 1
			if len(elems) > 0 {
				lastElem := elems[len(elems)-1]
				at = lastElem.Index + len(lastElem.Raw)
				add = append([]string{""}, add...)
			}
			out = wire.Splice(out, at, at, []byte(strings.Join(add, ",")))
		case c.Type == gjson.String:
			if c.Raw != `""` {
				add = append([]string{`{"type":"text","text":` + c.Raw + `}`}, add...)
			}
			out = wire.Splice(out, c.Index, c.Index+len(c.Raw), []byte("["+strings.Join(add, ",")+"]"))
		}
	}
	return out
}

// placedByProxy reports whether body may hold what the proxy places: a
// frame or a block.
func placedByProxy(body string) bool {
	return strings.Contains(body, "Note from scarproxy") || strings.Contains(body, "### ")
}
