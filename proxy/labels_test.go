package proxy

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
)

// TestDashboardNamesConversationsByTheirTask: a task run through the mock
// by an agent that says who it is only in its User-Agent; every page
// that links the run's conversation names it by its task's first words
// and the agent, and its own page says when it started.
func TestDashboardNamesConversationsByTheirTask(t *testing.T) {
	const task = `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard fix={"cmd":"python3 -c \"print(1)\""}]] run the script that prints the totals`
	for _, api := range []string{"chat", "responses", "messages", "gemini"} {
		t.Run(api, func(t *testing.T) {
			h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
			conv := ""
			send := func(path string, body []byte) []byte {
				res := h.do(http.MethodPost, path, body, map[string]string{"User-Agent": "QwenCode/0.15.10 (linux; x64)"})
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", path, res.StatusCode, b)
				}
				conv = res.Header.Get(HeaderConversation)
				return b
			}
			if calls, _ := (&loopAgent{api: api, callIDs: true}).run(t, task, send); calls != 3 {
				t.Fatalf("%d calls", calls)
			}
			label := "run the script that prints the totals"
			for _, page := range []string{"/ui/incidents", "/ui/", "/ui/usage?range=24h", "/ui/fixes", "/ui/conversations/" + url.PathEscape(conv)} {
				res := h.do(http.MethodGet, page, nil, nil)
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				body := string(b)
				if res.StatusCode != http.StatusOK || !strings.Contains(body, label) || !strings.Contains(body, "QwenCode/0.15.10") {
					t.Fatalf("%s: %d, without the label %q and its agent:\n%s", page, res.StatusCode, label, body)
				}
			}
			res := h.do(http.MethodGet, "/ui/conversations/"+url.PathEscape(conv), nil, nil)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(b), "started "+h.clock().UTC().Format("2006-01-02")) {
				t.Fatalf("the conversation's page says no start:\n%s", b)
			}
		})
	}
}
