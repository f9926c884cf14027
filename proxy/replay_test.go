package proxy

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store/bolt"
)

// A conversation's page replays the guard its requests got as the
// request path builds it: after a failure a learned fix applies to, the
// guard quotes the fix, though nothing repeated; and the last replayed
// block is the one its next request gets.
func TestConversationReplaysFixes(t *testing.T) {
	h := newHarnessOn(t, boltAt(t, harnessStart.Add(-time.Hour)), "http://127.0.0.1:9")
	res := h.do(http.MethodPost, "/scar/v1/fixes", []byte(`{"tool":"run_syntax_check","failure":"run_syntax_check: SyntaxError: Unexpected end of input at parser.js:46:2",
		"call":"{\"file\":\"parser.js\",\"fix\":\"close the brace\"}","explanation":"The config block was missing its closing brace.","failures":3}`), nil)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("post fix: %d", res.StatusCode)
	}
	postIncident(t, h, `{"type":"tool_error","session":"c:0a1b2c3d4e5f6071","message":"run_syntax_check: SyntaxError: Unexpected end of input at parser.js:52:7"}`)

	res = h.do(http.MethodGet, "/scar/v1/guard?session=c:0a1b2c3d4e5f6071", nil, nil)
	var g struct{ Block string }
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(b, &g); err != nil || !strings.Contains(g.Block, "Last time this was fixed by") {
		t.Fatalf("the next request's guard: %v %s", err, b)
	}

	u := newUIClient(t, h)
	status, page, _ := u.get("/ui/conversations/c:0a1b2c3d4e5f6071")
	if status != http.StatusOK || strings.Contains(page, "No guard yet") {
		t.Fatalf("conversation: %d\n%s", status, page)
	}
	start := strings.Index(page, "<pre>")
	end := strings.Index(page, "</pre>")
	if start < 0 || end < start {
		t.Fatalf("no guard replayed:\n%s", page)
	}
	if replayed := html.UnescapeString(page[start+len("<pre>") : end]); replayed != g.Block {
		t.Fatalf("replayed guard:\n%s\nthe next request's:\n%s", replayed, g.Block)
	}
}

// boltAt opens a bbolt store in a temporary directory whose clock (the
// time of the fixes it stores) stays at now, closed when the test ends.
func boltAt(t *testing.T, now time.Time) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "scarproxy.db"), bolt.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
