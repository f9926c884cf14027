package chat

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// TestRealAgentRequests reads the requests qwen-code, opencode and the
// Continue CLI sent, captured as they were (testdata/agents): their shell
// command fails the same way on the first two turns.
func TestRealAgentRequests(t *testing.T) {
	for _, agent := range []struct{ name, tool string }{{"qwen", "run_shell_command"}, {"opencode", "bash"}, {"cn", "Bash"}} {
		for turn := 1; turn <= 3; turn++ {
			name := fmt.Sprintf("%s-turn%d.json", agent.name, turn)
			body, err := os.ReadFile(filepath.Join("testdata", "agents", name))
			if err != nil {
				t.Fatal(err)
			}
			c, err := inspect(body, nil, "")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			in := c.Info()
			if in.Goal != "Write hello.py that prints hello and run it" || in.System == "" || !in.Stream {
				t.Fatalf("%s: goal %q, system %d bytes, stream %v", name, in.Goal, len(in.System), in.Stream)
			}
			failed := 0
			for _, tr := range in.ToolResults {
				if tr.Name == agent.tool && (tr.IsError || guard.ToolFailed(tr.Text())) && strings.Contains(tr.Text(), "SyntaxError") {
					failed++
				}
				// The loop breaker's view of the call: its arguments, and
				// the tool among the request's definitions.
				if args := wire.CallArgs(tr.Args); !strings.Contains(args, "print(1") || !strings.HasPrefix(args, "{") {
					t.Errorf("%s: %s call arguments %q", name, tr.Name, args)
				}
				if !slices.Contains(wire.DefinedTools(in.ToolDefs), tr.Name) {
					t.Errorf("%s: %s not among the defined tools %v", name, tr.Name, wire.DefinedTools(in.ToolDefs))
				}
			}
			if failed != turn-1 || in.ToolCount != turn-1 {
				t.Errorf("%s: %d failed %s results of %d, want %d", name, failed, agent.tool, in.ToolCount, turn-1)
			}
		}
	}
}
