package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
)

const syntaxErr = "SyntaxError: Unexpected end of input\n    at parser.js:%d:5"

// agentTurns builds the history of an agent that ran a tool n times and
// failed each time, the way an agent re-sends its whole history.
func agentTurns(t *testing.T, n int, extra map[string]any) string {
	msgs := []map[string]any{msg("system", "You are a coding agent."), msg("user", "Write parser.js")}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs, toolCall(id, "run_syntax_check"), toolResultMsg(id, fmt.Sprintf(syntaxErr, 10+i)))
	}
	return chatBody(t, extra, msgs...)
}

func TestToolErrorResentOverFiveTurnsIsOneIncidentPerCall(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	// The same single failed call re-sent in 5 requests.
	body := agentTurns(t, 1, nil)
	for i := 0; i < 5; i++ {
		h.chat(body, nil)
	}
	incs := h.incidents("default", "default")
	if n := len(incs); n != 1 {
		t.Fatalf("one tool error re-sent 5 times gave %d incidents", n)
	}
	// It names the provider the conversation's requests go to.
	if incs[0].Provider != "up" {
		t.Fatalf("tool error's provider: %q", incs[0].Provider)
	}
	// A fresh server (empty in-memory cache) on the same store dedupes too.
	h2 := newHarnessOn(t, h.store, up.srv.URL)
	h2.chat(body, nil)
	if n := len(h2.incidents("default", "default")); n != 1 {
		t.Fatalf("after restart: %d incidents", n)
	}
	// Successful tool output is never an incident.
	ok := chatBody(t, nil, msg("user", "grep"), toolCall("c9", "grep"), toolResultMsg("c9", "src/errors.go:12: func Error() string"))
	h.chat(ok, nil)
	if n := len(h.incidents("default", "default")); n != 1 {
		t.Fatalf("successful output recorded: %d incidents", n)
	}
}

func TestGuardInjectedAfterSecondFailureInSameRequest(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)

	res, _ := h.chat(agentTurns(t, 1, nil), map[string]string{tenant.HeaderSession: "s1"})
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatalf("guard after one failure: %s", res.Header.Get(HeaderGuard))
	}
	if sys := toldOf(t, up.last(t).Body); strings.Contains(sys, guard.BlockStart) {
		t.Fatal("guard injected after one failure")
	}
	// The second failure arrives in this request and counts for it.
	res, _ = h.chat(agentTurns(t, 2, nil), map[string]string{tenant.HeaderSession: "s1"})
	if res.Header.Get(HeaderGuard) != "1" {
		t.Fatalf("X-Scar-Guard = %q, want 1", res.Header.Get(HeaderGuard))
	}
	// The system message as the agent sent it, the guard framed in the
	// newest turn.
	sys := toldOf(t, up.last(t).Body)
	if !strings.HasPrefix(sys, "You are a coding agent.\n\n"+wire.FrameStart) || !strings.Contains(sys, "SYNTAX COMPLIANCE ERROR (Failed 2 times)") {
		t.Fatalf("what the model was told:\n%s", sys)
	}
	// A third turn: one guard, not two.
	h.chat(agentTurns(t, 3, nil), map[string]string{tenant.HeaderSession: "s1"})
	sys = toldOf(t, up.last(t).Body)
	if c := strings.Count(sys, guard.BlockStart); c != 1 || !strings.Contains(sys, "(Failed 3 times)") {
		t.Fatalf("%d guard blocks:\n%s", c, sys)
	}
	// Another session does not see session s1's guard.
	res, _ = h.chat(agentTurns(t, 0, nil), map[string]string{tenant.HeaderSession: "s2"})
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatal("guard leaked into another session")
	}
	// Without a session header the conversation is derived from the
	// request's start: session s1's tool failures are not its own.
	res, _ = h.chat(agentTurns(t, 0, nil), nil)
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatal("another conversation's tool failures reached a request without a session")
	}
}

func TestRepeated429sBecomeARateLimitGuard(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("fail")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`)
			return
		}
		okCompletion(w, r)
	})
	h := newHarness(t, up.srv.URL)
	for i := 0; i < 2; i++ {
		res, body := h.chat(`{"model":"m","messages":[{"role":"user","content":"fail"}]}`, nil)
		if res.StatusCode != 429 || !bytes.Contains(body, []byte("insufficient_quota")) {
			t.Fatalf("provider error not passed through: %d %s", res.StatusCode, body)
		}
	}
	res, _ := h.chat(`{"model":"m","messages":[{"role":"user","content":"go"}]}`, nil)
	sys := toldOf(t, up.last(t).Body)
	if res.Header.Get(HeaderGuard) != "1" || !strings.Contains(sys, "API RATE LIMIT TRIGGER (Failed 2 times)") {
		t.Fatalf("guard %s, system:\n%s", res.Header.Get(HeaderGuard), sys)
	}
	var msgs []map[string]any
	json.Unmarshal([]byte(gjsonMessages(up.last(t).Body)), &msgs)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0]["content"].(string), "go\n\n"+wire.FrameStart) {
		t.Fatalf("the guard is not after the user's text: %v", msgs)
	}
	// The provider answered well: its failures leave the guard (they stay
	// stored), and new ones count from there.
	res, _ = h.chat(`{"model":"m","messages":[{"role":"user","content":"go"}]}`, nil)
	if res.Header.Get(HeaderGuard) != "0" || strings.Contains(toldOf(t, up.last(t).Body), guard.BlockStart) {
		t.Fatalf("after a good answer the guard still shows the provider's failures: guard %s", res.Header.Get(HeaderGuard))
	}
	for range 2 {
		h.chat(`{"model":"m","messages":[{"role":"user","content":"fail"}]}`, nil)
	}
	res, _ = h.chat(`{"model":"m","messages":[{"role":"user","content":"go"}]}`, nil)
	if sys := toldOf(t, up.last(t).Body); res.Header.Get(HeaderGuard) != "1" || !strings.Contains(sys, "API RATE LIMIT TRIGGER (Failed 2 times)") {
		t.Fatalf("after new failures: guard %s, system:\n%s", res.Header.Get(HeaderGuard), sys)
	}
	if n := len(h.incidents("default", "default")); n != 4 {
		t.Fatalf("%d incidents stored, want 4", n)
	}
}

func gjsonMessages(body []byte) string {
	var v struct {
		Messages json.RawMessage `json:"messages"`
	}
	json.Unmarshal(body, &v)
	return string(v.Messages)
}

func TestTenantsAreIsolated(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	h.chat(agentTurns(t, 2, nil), map[string]string{tenant.HeaderWorkspace: "team-a", tenant.HeaderProject: "api"})
	// The same run in other tenants: one failure of their own, below the
	// guard's two, unless team-a's leaked in.
	res := h.do(http.MethodPost, "/w/team-b/api/v1/chat/completions", []byte(agentTurns(t, 1, nil)), nil)
	res.Body.Close()
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatal("team-b saw team-a's guard")
	}
	res = h.do(http.MethodPost, "/w/team-a/web/v1/chat/completions", []byte(agentTurns(t, 1, nil)), nil)
	res.Body.Close()
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatal("project web saw project api's guard")
	}
	res = h.do(http.MethodPost, "/w/team-a/api/v1/chat/completions", []byte(agentTurns(t, 2, nil)), nil)
	res.Body.Close()
	if res.Header.Get(HeaderGuard) != "1" {
		t.Fatal("team-a/api lost its guard")
	}
	if n := len(h.incidents("team-b", "api")); n != 1 {
		t.Fatalf("team-b holds %d incidents, want its own one", n)
	}
}

func TestFailOpenWhenStoreIsClosed(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	h.chat(agentTurns(t, 2, nil), nil) // guard-worthy memory exists
	h.store.Close()
	body := agentTurns(t, 3, nil)
	res, _ := h.chat(body, nil)
	if res.StatusCode != 200 || res.Header.Get(HeaderDegraded) != "store" {
		t.Fatalf("status %d degraded %q", res.StatusCode, res.Header.Get(HeaderDegraded))
	}
	if got := string(up.last(t).Body); got != body {
		t.Fatalf("degraded request was not forwarded unchanged:\n%s", got)
	}
	if res.Header.Get(HeaderGuard) != "0" {
		t.Fatal("guard header on a degraded request")
	}
	ready := h.do(http.MethodGet, "/readyz", nil, nil)
	b, _ := io.ReadAll(ready.Body)
	ready.Body.Close()
	if ready.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("store")) {
		t.Fatalf("readyz %d %s", ready.StatusCode, b)
	}
}

func TestRedactionBeforeStore(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	secret := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	body := chatBody(t, nil, msg("user", "deploy"), toolCall("c1", "deploy"),
		toolResultMsg("c1", "Error: auth failed for key "+secret+" with header Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlMTIz"))
	h.chat(body, nil)
	incs := h.incidents("default", "default")
	if len(incs) != 1 {
		t.Fatalf("incidents %+v", incs)
	}
	if strings.Contains(incs[0].Message, secret) || strings.Contains(incs[0].Message, "eyJzdWIiOiIxIn0") {
		t.Fatalf("secret stored: %q", incs[0].Message)
	}
	// Posted through the memory API: every text field of a solution, and
	// an incident's message and model.
	res := h.do(http.MethodPost, "/scar/v1/solutions", []byte(`{"goal":"deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789","approach":"git clone https://deploy:p@ss-s3cretpass@git.example.com/app.git","outcome":"used password=hunter2secret","confidence":0.9}`), nil)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("post solution: %d %s", res.StatusCode, b)
	}
	res = h.do(http.MethodPost, "/scar/v1/incidents", []byte(`{"type":"x","message":"failed with `+secret+`","model":"m-`+secret+`"}`), nil)
	res.Body.Close()
	sols, _ := h.store.ListSolutions(context.Background(), "default")
	incs = h.incidents("default", "default")
	stored, _ := json.Marshal([]any{sols, incs})
	for _, leak := range []string{"ghp_abcdefghijklmnopqrstuvwxyz0123456789", "hunter2secret", "s3cretpass", secret} {
		if strings.Contains(string(stored), leak) {
			t.Fatalf("%s stored: %s", leak, stored)
		}
	}
}

// toolConversation is a finished agent conversation: goal, one tool call,
// its result, the final answer request.
func toolConversation(t *testing.T, goal string, stream bool, failures int) string {
	msgs := []map[string]any{msg("system", "You are an agent."), msg("user", goal)}
	for i := 0; i < failures; i++ {
		id := fmt.Sprintf("f%d", i)
		msgs = append(msgs, toolCall(id, "run_tests"), toolResultMsg(id, "FAIL: TestParse\nError: expected 3 got 2"))
	}
	if failures > 0 {
		// The tests pass at last: the failures were overcome.
		msgs = append(msgs, toolCall("ok0", "run_tests"), toolResultMsg("ok0", "ok  \tgithub.com/acme/app\t0.412s"))
	}
	msgs = append(msgs, toolCall("ok1", "write_file"), toolResultMsg("ok1", "wrote 120 bytes"))
	extra := map[string]any{}
	if stream {
		extra["stream"] = true
	}
	return chatBody(t, extra, msgs...)
}

func sseAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Parser \"}}]}\n\n")
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"written.\"}}]}\n\n")
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

func TestAutoCaptureAndRecall(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			sseAnswer(w, r)
			return
		}
		okCompletion(w, r)
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			h := newHarness(t, up.srv.URL)
			goal := "Parse the YAML configuration file and reject unknown keys"
			res, _ := h.chat(toolConversation(t, goal, stream, 1), nil)
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			sols, err := h.store.ListSolutions(context.Background(), "default")
			if err != nil || len(sols) != 1 {
				t.Fatalf("solutions %+v %v", sols, err)
			}
			s := sols[0]
			if s.Source != store.SourceAuto || s.Verified || s.Goal != goal || !strings.Contains(s.Approach, "run_tests") ||
				!strings.Contains(s.Outcome, "recovered from 1 failure of run_tests") {
				t.Fatalf("captured %+v", s)
			}
			// The same conversation going on updates its one solution and
			// never recalls itself.
			res, _ = h.chat(toolConversation(t, goal, stream, 1), nil)
			if res.Header.Get(HeaderRecall) != "0" {
				t.Fatal("a conversation recalled its own solution")
			}
			sols, _ = h.store.ListSolutions(context.Background(), "default")
			if len(sols) != 1 {
				t.Fatalf("conversation stored %d solutions", len(sols))
			}
			// The same answer again writes nothing (the clock moved).
			if !sols[0].Updated.Equal(s.Updated) {
				t.Fatalf("an unchanged capture was written again: updated %v, then %v", s.Updated, sols[0].Updated)
			}
			// A new conversation with a similar goal recalls it.
			res, _ = h.chat(chatBody(t, nil, msg("system", "Other agent."), msg("user", "parse the yaml config files, rejecting unknown keys")), nil)
			sys := toldOf(t, up.last(t).Body)
			if res.Header.Get(HeaderRecall) != "1" || !strings.HasPrefix(sys, "Other agent.\n\n"+wire.FrameStart) || !strings.Contains(sys, recall.BlockStart) {
				t.Fatalf("recall %s, system:\n%s", res.Header.Get(HeaderRecall), sys)
			}
		})
	}
}

// TestNoCaptureOfAFailedRun: a conversation whose latest call of a tool
// failed ended in words, not in a solution ("it failed twice, stopping
// here"): nothing is captured. Secrets in a captured solution are
// redacted.
func TestNoCaptureOfAFailedRun(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	gaveUp := chatBody(t, nil, msg("system", "You are an agent."), msg("user", "Run the migration"),
		toolCall("a", "run_shell"), toolResultMsg("a", "Traceback (most recent call last):\nKeyError: 'db'"),
		toolCall("b", "read_file"), toolResultMsg("b", "config = {}"),
		toolCall("c", "run_shell"), toolResultMsg("c", "Traceback (most recent call last):\nKeyError: 'db'"))
	h.chat(gaveUp, nil)
	if sols, _ := h.store.ListSolutions(context.Background(), "default"); len(sols) != 0 {
		t.Fatalf("a failed run was captured: %+v", sols)
	}
	if n := h.counter("scarproxy_captures_refused_total"); n != 1 {
		t.Fatalf("captures refused: %v", n)
	}
	// The same run, fixed: captured, its secret redacted.
	fixed := chatBody(t, nil, msg("system", "You are an agent."), msg("user", "Run the migration with password=hunter2secret"),
		toolCall("a", "run_shell"), toolResultMsg("a", "Traceback (most recent call last):\nKeyError: 'db'"),
		toolCall("c", "run_shell"), toolResultMsg("c", "migrated 3 tables"))
	h.chat(fixed, nil)
	sols, _ := h.store.ListSolutions(context.Background(), "default")
	if len(sols) != 1 || strings.Contains(sols[0].Goal, "hunter2") || !strings.Contains(sols[0].Outcome, "recovered from 1 failure of run_shell") {
		t.Fatalf("captured %+v", sols)
	}
}

// TestNoCaptureOfAnAnswerThatSaysItFailed: every tool's latest call
// succeeded, but the final answer says the task did not: no solution.
func TestNoCaptureOfAnAnswerThatSaysItFailed(t *testing.T) {
	for _, c := range []struct {
		answer string
		stored int
	}{
		{"I was unable to run the migration: the database refuses the connection.", 0},
		{"Migrated 3 tables; the app starts.", 1},
	} {
		up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":`+jsonText(c.answer)+`},"finish_reason":"stop"}]}`)
		})
		h := newHarness(t, up.srv.URL)
		h.chat(chatBody(t, nil, msg("system", "You are an agent."), msg("user", "Run the migration"),
			toolCall("a", "run_shell"), toolResultMsg("a", "Exit code: 0\nconnecting...")), nil)
		if sols, _ := h.store.ListSolutions(context.Background(), "default"); len(sols) != c.stored {
			t.Fatalf("answer %q: %d solutions stored, want %d", c.answer, len(sols), c.stored)
		}
		if n := h.counter("scarproxy_captures_refused_total"); n != float64(1-c.stored) {
			t.Fatalf("answer %q: captures refused %v", c.answer, n)
		}
	}
}

func TestNoCaptureWithoutToolsOrStop(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	h.chat(chatBody(t, nil, msg("user", "just chatting about parsers")), nil)
	if sols, _ := h.store.ListSolutions(context.Background(), "default"); len(sols) != 0 {
		t.Fatalf("captured a conversation without tools: %+v", sols)
	}
}

func TestMemoryAPI(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	call := func(method, path, body string) (int, []byte) {
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		res := h.do(method, path, b, nil)
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out
	}
	for _, tc := range []struct {
		name, body string
		status     int
		mention    string
	}{
		{"ok", `{"workspace":"w","goal":"Fix the flaky shutdown test","approach":"wait on a channel","outcome":"green","confidence":0.9}`, 201, ""},
		{"dedupe updates", `{"workspace":"w","goal":"  fix the FLAKY shutdown test ","approach":"wait on a channel, then Shutdown","outcome":"green x1000","confidence":95}`, 200, ""},
		{"missing goal", `{"workspace":"w","approach":"a","outcome":"o","confidence":0.5}`, 400, "goal"},
		{"confidence out of range", `{"workspace":"w","goal":"g","approach":"a","outcome":"o","confidence":150}`, 400, "confidence"},
		{"confidence wrong type", `{"workspace":"w","goal":"g","approach":"a","outcome":"o","confidence":"high"}`, 400, "confidence"},
		{"goal wrong type", `{"workspace":"w","goal":7,"approach":"a","outcome":"o","confidence":0.5}`, 400, "goal"},
		{"unknown field", `{"workspace":"w","goal":"g","approach":"a","outcome":"o","confidence":0.5,"extra":1}`, 400, "extra"},
		{"not json", `{"workspace":`, 400, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(http.MethodPost, "/scar/v1/solutions", tc.body)
			if status != tc.status || !strings.Contains(string(body), tc.mention) {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
	status, body := call(http.MethodGet, "/scar/v1/solutions?workspace=w", "")
	var list struct {
		Solutions []store.Solution `json:"solutions"`
	}
	json.Unmarshal(body, &list)
	if status != 200 || len(list.Solutions) != 1 || list.Solutions[0].Confidence != 0.95 || !list.Solutions[0].Verified {
		t.Fatalf("list %d %s", status, body)
	}
	id := list.Solutions[0].ID
	status, body = call(http.MethodGet, "/scar/v1/recall?workspace=w&goal=the+shutdown+test+is+flaky", "")
	if status != 200 || !bytes.Contains(body, []byte(id)) || !bytes.Contains(body, []byte(recall.BlockStart)) {
		t.Fatalf("recall %d %s", status, body)
	}
	status, body = call(http.MethodGet, "/scar/v1/recall?workspace=w&goal=bake+sourdough+bread", "")
	if status != 200 || !bytes.Contains(body, []byte(`"matches":[]`)) {
		t.Fatalf("unrelated recall %d %s", status, body)
	}
	if status, _ := call(http.MethodDelete, "/scar/v1/solutions/"+id+"?workspace=other", ""); status != 404 {
		t.Fatalf("delete in another workspace: %d", status)
	}
	if status, _ := call(http.MethodDelete, "/scar/v1/solutions/"+id+"?workspace=w", ""); status != 204 {
		t.Fatalf("delete: %d", status)
	}
	status, body = call(http.MethodGet, "/scar/v1/recall?workspace=w&goal=the+shutdown+test+is+flaky", "")
	if bytes.Contains(body, []byte(id)) {
		t.Fatalf("deleted solution recalled: %s", body)
	}

	// Incidents.
	status, body = call(http.MethodPost, "/scar/v1/incidents", `{"workspace":"w","project":"p","type":"test_failure","message":"FAIL TestParse: expected 3, got 2"}`)
	if status != 201 {
		t.Fatalf("post incident %d %s", status, body)
	}
	call(http.MethodPost, "/scar/v1/incidents", `{"workspace":"w","project":"p","type":"test_failure","message":"FAIL TestParse: expected 4, got 1"}`)
	status, body = call(http.MethodGet, "/scar/v1/guard?workspace=w&project=p", "")
	if status != 200 || !bytes.Contains(body, []byte(`"count":2`)) || !bytes.Contains(body, []byte("REPEATED ERROR")) {
		t.Fatalf("guard %d %s", status, body)
	}
	if status, _ := call(http.MethodPost, "/scar/v1/incidents", `{"workspace":"w","project":"p","type":"x"}`); status != 400 {
		t.Fatal("incident without message accepted")
	}
	if status, _ := call(http.MethodDelete, "/scar/v1/incidents?workspace=w", ""); status != 400 {
		t.Fatal("delete without project accepted")
	}
	status, body = call(http.MethodDelete, "/scar/v1/incidents?workspace=w&project=p", "")
	if status != 200 || !bytes.Contains(body, []byte(`"deleted":2`)) {
		t.Fatalf("delete incidents %d %s", status, body)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestGatewayKeys(t *testing.T) {
	up := newRecorder(t, okCompletion)
	keyed := providerAt("up", up.srv.URL)
	keyed.APIKeyEnv = "TEST_PROVIDER_KEY"
	h := newHarness(t, "", withProviders(keyed), withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{
			{SHA256: sha("key-a"), Workspace: "team-a", Projects: []string{"api"}},
			{SHA256: sha("key-b"), Workspace: "team-b"},
		}
		o.AdminToken = "admin-secret"
	}))
	body := agentTurns(t, 2, nil)
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }

	res, b := h.chat(body, nil)
	assertOpenAIError(t, res, b, http.StatusUnauthorized)
	res, b = h.chat(body, bearer("wrong"))
	assertOpenAIError(t, res, b, http.StatusUnauthorized)

	hdr := bearer("key-a")
	hdr[tenant.HeaderProject] = "api"
	res, _ = h.chat(body, hdr)
	if res.StatusCode != 200 {
		t.Fatalf("valid key: %d", res.StatusCode)
	}
	if got := up.last(t).Header.Get("Authorization"); got != "Bearer sk-provider-secret" {
		t.Fatalf("provider saw %q", got)
	}
	if n := len(h.incidents("team-a", "api")); n != 2 {
		t.Fatalf("team-a/api has %d incidents", n)
	}
	// The key decides the workspace: a header naming another one is refused.
	hdr[tenant.HeaderWorkspace] = "team-b"
	res, b = h.chat(body, hdr)
	assertOpenAIError(t, res, b, http.StatusForbidden)
	// Project allow-list.
	res, b = h.chat(body, map[string]string{"Authorization": "Bearer key-a", tenant.HeaderProject: "web"})
	assertOpenAIError(t, res, b, http.StatusForbidden)

	// Memory API: the key reads its own workspace only; the admin token all.
	get := func(path, key string) int {
		res := h.do(http.MethodGet, path, nil, bearer(key))
		res.Body.Close()
		return res.StatusCode
	}
	if s := get("/scar/v1/incidents?workspace=team-a&project=api", "key-a"); s != 200 {
		t.Fatalf("own workspace: %d", s)
	}
	if s := get("/scar/v1/incidents?workspace=team-b&project=api", "key-a"); s != 403 {
		t.Fatalf("other workspace: %d", s)
	}
	if s := get("/scar/v1/incidents?workspace=team-b&project=api", "admin-secret"); s != 200 {
		t.Fatalf("admin: %d", s)
	}
	if s := get("/scar/v1/incidents?workspace=team-b&project=api", ""); s != 401 {
		t.Fatalf("anonymous: %d", s)
	}
}

func TestRetentionPrunesInTheBackground(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) {
		o.RetentionMaxAge = time.Hour
		o.RetentionMaxPerTenant = 3
	}))
	ctx := context.Background()
	old := h.now.Add(-48 * time.Hour)
	for i := 0; i < 2; i++ {
		h.store.AddIncident(ctx, &store.Incident{Time: old, Workspace: "w", Project: "p", Type: "x", Message: "old"})
	}
	for i := 0; i < 5; i++ {
		h.store.AddIncident(ctx, &store.Incident{Time: h.now, Workspace: "w", Project: "p", Type: "x", Message: fmt.Sprint("new ", i)})
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.srv.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		incs := h.incidents("w", "p")
		if len(incs) == 3 {
			for _, in := range incs {
				if in.Message == "old" {
					t.Fatalf("old incident kept: %+v", incs)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not pruned: %d incidents", len(incs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetentionPrunesSolutionsInTheBackground: the retention loop prunes
// solutions by age (verified ones kept) and by the per-workspace cap
// (unverified ones first), and the recall index forgets the pruned ones.
func TestRetentionPrunesSolutionsInTheBackground(t *testing.T) {
	up := newRecorder(t, okCompletion)
	clock := &tickingClock{now: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "scarproxy.db"), bolt.Options{Now: clock.read})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) {
		o.RetentionSolutionsMaxAge = 30 * 24 * time.Hour
		o.RetentionSolutionsMaxPerWorkspace = 3
	}))
	ctx := context.Background()
	put := func(ws, goal string, verified bool) store.Solution {
		t.Helper()
		sol := store.Solution{Workspace: ws, Key: recall.GoalKey(goal), Goal: goal, Approach: "did it", Outcome: "ok",
			Confidence: 0.8, Source: store.SourceAuto, Verified: verified}
		if err := st.PutSolution(ctx, &sol); err != nil {
			t.Fatal(err)
		}
		return sol
	}
	// Stored some 80 days before the proxy's clock.
	old := put("w", "Rotate the ingress TLS certificates", false)
	oldVerified := put("w", "Purge the CDN cache after a deploy", true)
	clock.set(h.now)
	recent := []store.Solution{
		put("w", "Speed up the CI cache for Go modules", false),
		put("w", "Fix the flaky shutdown test of the worker pool", false),
		put("w", "Paginate the audit log endpoint with a cursor", false),
		put("w", "Retry webhook deliveries with exponential backoff", false),
	}
	other := []store.Solution{
		put("other", "Rotate the ingress TLS certificates", false),
		put("other", "Speed up the CI cache for Go modules", false),
	}
	found := func(sol store.Solution) bool {
		for _, m := range h.srv.memory.Index().Search(recall.Query{Workspace: sol.Workspace, Goal: sol.Goal, K: 5}) {
			if m.Solution.ID == sol.ID {
				return true
			}
		}
		return false
	}
	if err := h.srv.memory.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if !found(old) || !found(recent[0]) || h.srv.memory.Index().Len("w") != 6 {
		t.Fatalf("before pruning: index holds %d solutions of w", h.srv.memory.Index().Len("w"))
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.srv.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.memory.Index().Len("w") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("not pruned: the index holds %d solutions of w", h.srv.memory.Index().Len("w"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Age took the old unverified one; the cap of 3 then took the two
	// least recently updated unverified ones; the verified one stays.
	for _, sol := range []store.Solution{old, recent[0], recent[1]} {
		if found(sol) {
			t.Fatalf("pruned solution %q still recalled", sol.Goal)
		}
		if _, err := st.GetSolution(ctx, sol.Workspace, sol.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("pruned solution %q still stored: %v", sol.Goal, err)
		}
	}
	for _, sol := range append([]store.Solution{oldVerified, recent[2], recent[3]}, other...) {
		if !found(sol) {
			t.Fatalf("kept solution %s %q not recalled", sol.Workspace, sol.Goal)
		}
	}
	if n := h.srv.memory.Index().Len("other"); n != 2 {
		t.Fatalf("index holds %d solutions of other, want 2", n)
	}
}
