package proxy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/chat"
	"github.com/scarproxy/scarproxy/proxy/messages"
	"github.com/scarproxy/scarproxy/proxy/responses"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// TestToolDefsSum: the turns of a conversation whose tools (after the
// conversation's array) are the same bytes carry one sum of them, though
// other bytes there changed (Codex CLI's client_metadata); a turn whose
// tools changed carries another, for each API that remembers turns. The
// loop tracker reads the tools again only when the sum does not say they
// are the same.
func TestToolDefsSum(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		turns      [2]string // a turn, and the next
		format     wire.Format
	}{
		{"chat", "/chat/completions", [2]string{"chat/testdata/agents/qwen-turn1.json", "chat/testdata/agents/qwen-turn2.json"}, chat.New()},
		{"responses", "/responses", [2]string{"responses/testdata/agents/codex-gpt-5.5-turn2.json", "responses/testdata/agents/codex-gpt-5.5-turn3.json"}, responses.New()},
		// Claude Code's first turn has another first user message (its
		// cache mark moves): the second turn starts the conversation.
		{"messages", "/messages", [2]string{"messages/testdata/agents/claude-turn2.json", "messages/testdata/agents/claude-turn3.json"}, messages.New()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := wire.Route{Tenant: "w\x00p", Path: tc.path}
			read := func(body []byte) uint64 {
				t.Helper()
				req, err := tc.format.Read(body, route)
				if err != nil {
					t.Fatal(err)
				}
				sum := req.Info().ToolDefsSum
				req.Forwarded(true)
				return sum
			}
			var bodies [2][]byte
			for i, name := range tc.turns {
				b, err := os.ReadFile(filepath.FromSlash(name))
				if err != nil {
					t.Fatal(err)
				}
				if !gjson.GetBytes(b, "tools").IsArray() {
					t.Fatalf("%s sends no tools", name)
				}
				bodies[i] = b
			}
			// Codex CLI orders client_metadata's members anew on every
			// request: its turns' bytes after the input differ, their
			// tools do not.
			// Chat sums the bytes after its array from a conversation's
			// second turn on; the others sum the tools from the first.
			first, next := read(bodies[0]), read(bodies[1])
			if next == 0 || first != next && (tc.name != "chat" || first != 0) {
				t.Fatalf("sums of a first turn and the next: %x, %x; want one sum", first, next)
			}
			if again := read(bodies[1]); again != next {
				t.Errorf("the same turn again: sum %x, want %x", again, next)
			}
			// The next turn with one tool's description changed.
			tools := gjson.GetBytes(bodies[1], "tools").Raw
			changed := bytes.Replace(bodies[1], []byte(tools), bytes.Replace([]byte(tools), []byte(`"description":"`), []byte(`"description":"Changed. `), 1), 1)
			if bytes.Equal(changed, bodies[1]) {
				t.Fatal("no description to change")
			}
			if s := read(changed); s == next {
				t.Errorf("tools changed, the same sum %x", s)
			}
		})
	}
}
