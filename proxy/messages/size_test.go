package messages

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// longConversation returns two turns of a Claude Code conversation of
// about size bytes: the captured third turn with tool rounds (a Bash call
// and its output of about 4 KB) added until it is that long, and the next
// turn, one more round.
func longConversation(tb testing.TB, size int) (turn, next []byte) {
	tb.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		tb.Fatal(err)
	}
	msgs := gjson.GetBytes(body, "messages")
	end := msgs.Index + len(msgs.Raw) - 1 // at the closing ']'
	output := strings.Repeat(`drwxr-xr-x  2 user user  4096 Nov 27 02:00 some-directory-name\n`, 64)
	round := func(i int) string {
		id := fmt.Sprintf("toolu_long_%04d", i)
		return fmt.Sprintf(`,{"role":"assistant","content":[{"type":"text","text":"Listing step %d."},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls -la dir%d"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"%s","is_error":false}]}`, i, id, i, id, output)
	}
	var rounds strings.Builder
	for i := 0; len(body)+rounds.Len() < size; i++ {
		rounds.WriteString(round(i))
	}
	turn = slices.Concat(body[:end], []byte(rounds.String()), body[end:])
	next = slices.Concat(body[:end], []byte(rounds.String()+round(99999)), body[end:])
	return turn, next
}

// BenchmarkReadNext reads the next turn of a long Claude Code
// conversation whose turn before was read and judged: what a turn costs
// by the length of its conversation.
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

// growingConversation returns turns successive turns of a Claude Code
// conversation that starts at about size bytes, each one more tool round
// than the turn before.
func growingConversation(tb testing.TB, size, turns int) [][]byte {
	tb.Helper()
	turn, next := longConversation(tb, size)
	// The round longConversation adds: next holds it before the tail.
	msgs := gjson.GetBytes(turn, "messages")
	tail := len(turn) - (msgs.Index + len(msgs.Raw) - 1) // from the array's closing ']' on
	round := next[len(turn)-tail : len(next)-tail]
	out := [][]byte{turn}
	for i := 1; i < turns; i++ {
		prev := out[i-1]
		r := bytes.ReplaceAll(round, []byte("toolu_long_99999"), fmt.Appendf(nil, "toolu_grow_%04d", i))
		out = append(out, slices.Concat(prev[:len(prev)-tail], r, prev[len(prev)-tail:]))
	}
	return out
}

// TestTwoTurnsResumedFromOneKeepTheirOwnCalls: each turn of a growing
// conversation is read twice, with two different new rounds (a retry
// that took another path), both resumed from the remembered turn before;
// each keeps its own calls and marks, and the conversation read turn by
// turn ends with what reading its last turn whole gives.
func TestTwoTurnsResumedFromOneKeepTheirOwnCalls(t *testing.T) {
	turns := growingConversation(t, 20<<10, 12)
	f := New()
	route := wire.Route{Tenant: "t"}
	read := func(body []byte) *request {
		t.Helper()
		r, err := f.Read(body, route)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*request)
	}
	read(turns[0]).Forwarded(true)
	last := func(r *request) string { return r.calls.Calls.At(r.calls.Calls.Len() - 1).id }
	var a *request
	for k := 1; k < len(turns); k++ {
		id := fmt.Sprintf("toolu_grow_%04d", k)
		other := bytes.ReplaceAll(turns[k], []byte(id), []byte(fmt.Sprintf("toolu_othr_%04d", k)))
		a = read(turns[k])
		b := read(other)
		if a.resume.From == 0 || b.resume.From == 0 {
			t.Fatalf("turn %d did not resume (from %d and %d)", k, a.resume.From, b.resume.From)
		}
		if last(a) != id || last(b) != fmt.Sprintf("toolu_othr_%04d", k) {
			t.Fatalf("turn %d: last calls %s and %s", k, last(a), last(b))
		}
		for _, r := range []*request{a, b} {
			if n := r.marks.Len(); n != len(r.elems) || r.marks.At(n-1).calls != r.calls.Calls.Len() {
				t.Fatalf("turn %d: %d marks for %d messages, the last counting %d calls of %d", k, n, len(r.elems), r.marks.At(n-1).calls, r.calls.Calls.Len())
			}
		}
		if k < len(turns)-1 {
			b.Forwarded(false)
			a.Forwarded(true)
		}
	}
	fresh, err := New().Read(turns[len(turns)-1], route)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(&a.calls.Calls), ids(&fresh.(*request).calls.Calls); !slices.Equal(got, want) {
		t.Fatalf("calls read turn by turn %v, read whole %v", got, want)
	}
}

func ids(calls *wire.Chunks[call]) []string {
	out := make([]string, calls.Len())
	for i := range out {
		out[i] = calls.At(i).id
	}
	return out
}

// BenchmarkReadGrowing reads the turns of a Claude Code conversation that
// grows by one tool round a turn, from about 100 KB and from about 1 MB,
// each resumed from the turn before: what a turn costs an agent's real
// run, by the length of its conversation. The first turn of each run,
// read whole, is not timed.
func BenchmarkReadGrowing(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		turns := growingConversation(b, size, 64)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			route := wire.Route{Tenant: "t"}
			read := func(f *Format, body []byte) {
				r, err := f.Read(body, route)
				if err != nil {
					b.Fatal(err)
				}
				r.Forwarded(true)
			}
			b.ReportAllocs()
			var f *Format
			i := len(turns)
			for b.Loop() {
				if i == len(turns) {
					// A new run of the conversation.
					b.StopTimer()
					f, i = New(), 1
					read(f, turns[0])
					b.StartTimer()
				}
				read(f, turns[i])
				i++
			}
		})
	}
}
