package memory

import (
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// BenchmarkRenderGrowingLoop renders the blocks of a loop that goes on
// turn after turn: its count grows, its calls stay the same.
func BenchmarkRenderGrowingLoop(b *testing.B) {
	lt := newLoopTracker(16, 1<<20)
	k := convRef{"w", "p", "c1"}
	lt.get(k)
	step := guard.Step{Tool: "run_shell", Args: `{"cmd":"python3 scripts/gen_defaults.py --config config/defaults.yaml"}`,
		Output: "Traceback (most recent call last):\n  File \"scripts/gen_defaults.py\", line 12, in <module>\n    import yaml\nModuleNotFoundError: No module named 'yaml'\n" + strings.Repeat("x", 100)}
	base := []guard.Entry{{Pattern: "MODULE NOT FOUND", Count: 2, Call: "run_shell"}}
	block := wire.NewBlock(guard.Block(base))
	for i := 0; b.Loop(); i++ {
		l := guard.Loop{Kind: guard.LoopNoProgress, Count: 5 + i%1000, Level: guard.LevelStop, Calls: []guard.Step{step}}
		lt.render(k, l, base, block)
	}
}
