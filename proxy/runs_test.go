package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// TestATaskRunTwiceIsTwoConversations: an agent that names no run (as
// qwen-code, Continue and the Gemini CLI) runs one task twice against the
// mock through one proxy. Each run is one conversation, its first request included
// (named, once the model answered, by the run's first tool call); the
// second run starts with no guard from the first's failures, and recalls
// the solution the first one stored.
func TestATaskRunTwiceIsTwoConversations(t *testing.T) {
	const task = `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard fix={"cmd":"python3 -c \"print(1)\""}]] run the script`
	for _, api := range []string{"chat", "responses", "messages", "gemini"} {
		t.Run(api, func(t *testing.T) {
			h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
			type request struct{ conversation, guard, recall string }
			run := func(wantCalls int) []request {
				var seen []request
				send := func(path string, body []byte) []byte {
					res := h.do(http.MethodPost, path, body, nil)
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					h.inflight.Wait()
					if res.StatusCode != http.StatusOK {
						t.Fatalf("%s: %d %s", path, res.StatusCode, b)
					}
					seen = append(seen, request{res.Header.Get(HeaderConversation), res.Header.Get(HeaderGuard), res.Header.Get(HeaderRecall)})
					return b
				}
				a := &loopAgent{api: api, callIDs: true}
				if calls, words := a.run(t, task, send); calls != wantCalls || !strings.HasPrefix(words, "Mock answer: fixed run_shell") {
					t.Fatalf("%d calls, then %q; requests %+v", calls, words, seen)
				}
				return seen
			}
			// The first run fails twice, gets the guard and fixes the
			// call; the second gets the fix the first learned at its
			// first failure.
			first, second := run(3), run(2)
			for i, r := range [][]request{first, second} {
				for _, req := range r[2:] {
					if req.conversation != r[1].conversation {
						t.Fatalf("run %d: its requests are in conversations %v", i+1, r)
					}
				}
			}
			if first[1].conversation == second[1].conversation {
				t.Fatalf("both runs are conversation %s", first[1].conversation)
			}
			if second[0].guard != "0" {
				t.Fatalf("the second run started with the first one's guard: %v", second)
			}
			if first[0].recall != "0" || second[0].recall != "1" {
				t.Fatalf("recall: first run %s, second run %s; want 0, then the solution the first stored", first[0].recall, second[0].recall)
			}

			// Every request of a run, its first included, is counted in it:
			// the first answer's call id names the run. The Gemini API
			// gives none (the agent makes its own): there a run's first
			// request stays with the task.
			status, b := h.apiCall(http.MethodGet, "/scar/v1/usage?by=conversation", "", nil)
			var got struct{ Usage []store.Usage }
			if status != http.StatusOK || json.Unmarshal(b, &got) != nil {
				t.Fatalf("usage: %d %s", status, b)
			}
			counted := map[string]int64{}
			for _, u := range got.Usage {
				counted[u.Conversation] = u.Requests
			}
			want := map[string]int64{first[1].conversation: int64(len(first)), second[1].conversation: int64(len(second))}
			if api == "gemini" {
				want = map[string]int64{first[0].conversation: 2, first[1].conversation: int64(len(first) - 1), second[1].conversation: int64(len(second) - 1)}
			}
			if fmt.Sprint(counted) != fmt.Sprint(want) {
				t.Fatalf("usage by conversation %v, want %v", counted, want)
			}
		})
	}
}

// TestAgentsNameTheirRuns: Claude Code (metadata.user_id's session), Codex
// CLI (prompt_cache_key) and opencode (X-Session-Id) say which run a
// request belongs to: the same captured request with another session is
// another conversation, from its first request on.
func TestAgentsNameTheirRuns(t *testing.T) {
	up := newRecorder(t, answerByPath)
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
	cases := []struct {
		name, path, file string
		rename           func([]byte, string) []byte
	}{
		{"claude code", "/v1/messages", "messages/testdata/agents/claude-turn1.json", func(b []byte, s string) []byte {
			id := gjson.GetBytes(b, "metadata.user_id").String()
			old := gjson.Get(id, "session_id").String()
			if old == "" {
				t.Fatal("the capture names no session")
			}
			b, _ = sjson.SetBytes(b, "metadata.user_id", strings.Replace(id, old, s, 1))
			return b
		}},
		{"codex", "/v1/responses", "responses/testdata/agents/codex-turn1.json", func(b []byte, s string) []byte {
			if !gjson.GetBytes(b, "prompt_cache_key").Exists() {
				t.Fatal("the capture has no prompt_cache_key")
			}
			b, _ = sjson.SetBytes(b, "prompt_cache_key", s)
			return b
		}},
		{"opencode", "/v1/chat/completions", "chat/testdata/agents/opencode-turn1.json", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			conversation := func(session string) string {
				b, hdr := body, map[string]string{}
				if c.rename != nil {
					b = c.rename(body, session)
				} else {
					hdr[HeaderAgentSession] = session
				}
				res := h.do(http.MethodPost, c.path, b, hdr)
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("status %d", res.StatusCode)
				}
				return res.Header.Get(HeaderConversation)
			}
			a, a2, b := conversation("run-a"), conversation("run-a"), conversation("run-b")
			if a == "" || a != a2 || a == b {
				t.Fatalf("conversations: run a %q and %q, run b %q", a, a2, b)
			}
		})
	}
}
