package responses

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// longConversation returns two turns of a Codex CLI conversation of about
// size bytes: the captured third turn (gpt-5.5) with tool rounds (an
// exec_command call and its output of about 4 KB) added until it is that
// long, and the next turn, one more round.
func longConversation(tb testing.TB, size int) (turn, next []byte) {
	tb.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "codex-gpt-5.5-turn3.json"))
	if err != nil {
		tb.Fatal(err)
	}
	input := gjson.GetBytes(body, "input")
	end := input.Index + len(input.Raw) - 1 // at the closing ']'
	output := strings.Repeat(`drwxr-xr-x  2 user user  4096 Nov 27 02:00 some-directory-name\n`, 64)
	round := func(i int) string {
		id := fmt.Sprintf("call_long_%04d", i)
		return fmt.Sprintf(`,{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls -la dir%d\"}","call_id":%q},{"type":"function_call_output","call_id":%q,"output":"Chunk ID: 1\nProcess exited with code 0\nOutput:\n%s"}`, i, id, id, output)
	}
	var rounds strings.Builder
	for i := 0; len(body)+rounds.Len() < size; i++ {
		rounds.WriteString(round(i))
	}
	turn = slices.Concat(body[:end], []byte(rounds.String()), body[end:])
	next = slices.Concat(body[:end], []byte(rounds.String()+round(99999)), body[end:])
	return turn, next
}

// BenchmarkReadNext reads the next turn of a long Codex CLI conversation
// whose turn before was read and judged: what a turn costs by the length
// of its conversation.
func BenchmarkReadNext(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		turn, next := longConversation(b, size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			f := New()
			route := wire.Route{Tenant: "t"}
			r, err := f.Read(turn, route)
			if err != nil {
				b.Fatal(err)
			}
			r.Forwarded(true)
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := f.Read(next, route)
				if err != nil {
					b.Fatal(err)
				}
				r.Forwarded(false)
			}
		})
	}
}
