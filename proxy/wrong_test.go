package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/store"
)

// TestMemoriesMarkedWrongAreNotShown: a task run once through the mock
// leaves a learned fix and a solution. Marked wrong through the memory
// API, both stay listed, with their marks, and the same task run again
// gets neither: no recall on its first request, no "Last time this was
// fixed by" at its first failure (so it fails twice, as the first run
// did, before the guard). Cleared, both are shown again.
func TestMemoriesMarkedWrongAreNotShown(t *testing.T) {
	const task = `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard fix={"cmd":"python3 -c \"print(1)\""}]] run the script`
	for _, api := range []string{"chat", "messages"} {
		t.Run(api, func(t *testing.T) {
			h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
			// run runs the task and returns its tool calls and the recall
			// header of its first request.
			run := func() (int, string) {
				recalled := ""
				send := func(path string, body []byte) []byte {
					res := h.do(http.MethodPost, path, body, nil)
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					h.inflight.Wait()
					if res.StatusCode != http.StatusOK {
						t.Fatalf("%s: %d %s", path, res.StatusCode, b)
					}
					if recalled == "" {
						recalled = res.Header.Get(HeaderRecall)
					}
					return b
				}
				calls, words := (&loopAgent{api: api, callIDs: true}).run(t, task, send)
				if !strings.HasPrefix(words, "Mock answer: fixed run_shell") {
					t.Fatalf("the run ended with %q", words)
				}
				return calls, recalled
			}
			if calls, recalled := run(); calls != 3 || recalled != "0" {
				t.Fatalf("first run: %d calls, recall %s; want 3 and 0", calls, recalled)
			}
			fixes := h.fixes("default", "default")
			sols, err := h.store.ListSolutions(t.Context(), "default")
			if len(fixes) != 1 || err != nil || len(sols) != 1 {
				t.Fatalf("after the first run: fixes %+v, solutions %+v, %v", fixes, sols, err)
			}

			// Marked wrong: kept, listed with the mark and its note
			// (redacted), never shown.
			secret := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
			status, b := h.apiCall(http.MethodPost, "/scar/v1/fixes/"+url.PathEscape(fixes[0].ID)+"/wrong",
				`{"note":"it printed an error; key `+secret+`"}`, nil)
			var marked store.Fix
			if status != http.StatusOK || json.Unmarshal(b, &marked) != nil || marked.Wrong == nil ||
				!strings.HasPrefix(marked.Wrong.Note, "it printed an error") || strings.Contains(marked.Wrong.Note, secret) {
				t.Fatalf("mark the fix: %d %s", status, b)
			}
			if status, b := h.apiCall(http.MethodPost, "/scar/v1/solutions/"+url.PathEscape(sols[0].ID)+"/wrong", "", nil); status != http.StatusOK ||
				!strings.Contains(string(b), `"wrong":{"at":`) {
				t.Fatalf("mark the solution: %d %s", status, b)
			}
			if status, b := h.apiCall(http.MethodGet, "/scar/v1/fixes", "", nil); status != http.StatusOK ||
				len(decodeFixes(t, b)) != 1 || decodeFixes(t, b)[0].Wrong == nil {
				t.Fatalf("listed fixes: %d %s", status, b)
			}
			if status, b := h.apiCall(http.MethodGet, "/scar/v1/fixes?failure="+url.QueryEscape(fixes[0].Failure), "", nil); status != http.StatusOK ||
				len(decodeFixes(t, b)) != 0 {
				t.Fatalf("fixes of the failure: %d %s; want none (the only one is marked wrong)", status, b)
			}
			if status, b := h.apiCall(http.MethodGet, "/scar/v1/recall?goal=run+the+script", "", nil); status != http.StatusOK ||
				strings.Contains(string(b), sols[0].ID) {
				t.Fatalf("recall preview: %d %s; want no match", status, b)
			}
			if calls, recalled := run(); calls != 3 || recalled != "0" {
				t.Fatalf("run after the marks: %d calls, recall %s; want 3 and 0 (neither memory shown)", calls, recalled)
			}
			// The second run learned the same call for the same failure:
			// the mark stands.
			if again := h.fixes("default", "default"); len(again) != 1 || again[0].Wrong == nil {
				t.Fatalf("after the second run: %+v", again)
			}

			// Cleared: shown again.
			for _, path := range []string{"/scar/v1/fixes/" + url.PathEscape(fixes[0].ID) + "/wrong", "/scar/v1/solutions/" + url.PathEscape(sols[0].ID) + "/wrong"} {
				if status, b := h.apiCall(http.MethodDelete, path, "", nil); status != http.StatusOK || strings.Contains(string(b), `"wrong"`) {
					t.Fatalf("DELETE %s: %d %s", path, status, b)
				}
			}
			if calls, recalled := run(); calls != 2 || recalled != "1" {
				t.Fatalf("run after the marks were cleared: %d calls, recall %s; want 2 and 1", calls, recalled)
			}

			// Unknown ids are a 404 in the API's shape.
			for _, path := range []string{"/scar/v1/fixes/nope/wrong", "/scar/v1/solutions/nope/wrong"} {
				if status, b := h.apiCall(http.MethodPost, path, `{"note":"x"}`, nil); status != http.StatusNotFound || !strings.Contains(string(b), `"not_found"`) {
					t.Fatalf("POST %s: %d %s", path, status, b)
				}
			}
			if status, b := h.apiCall(http.MethodPost, "/scar/v1/fixes/"+fixes[0].ID+"/wrong", `{"note":`, nil); status != http.StatusBadRequest {
				t.Fatalf("a bad body: %d %s", status, b)
			}
		})
	}
}

// fixes returns the tenant's learned fixes as the store holds them.
func (h *harness) fixes(workspace, project string) []store.Fix {
	h.t.Helper()
	fx, err := h.store.ListFixes(h.t.Context(), store.FixQuery{Workspace: workspace, Project: project})
	if err != nil {
		h.t.Fatal(err)
	}
	return fx
}

// TestDashboardMarksMemoriesWrong: the dashboard's "Mark wrong" and "Not
// wrong" buttons on a fix and a solution, within the signed-in key's
// workspace only.
func TestDashboardMarksMemoriesWrong(t *testing.T) {
	h := keyedHarness(t)
	ctx := t.Context()
	ids := map[string][2]string{} // workspace: fix id, solution id
	for _, ws := range []string{"team-a", "team-b"} {
		f := store.Fix{Workspace: ws, Project: "default", Key: "k", Tool: "run_shell", Failure: "mkdir: missing operand in " + ws,
			Call: `{"cmd":"mkdir"}`, Failures: 2}
		s := store.Solution{Workspace: ws, Key: "k", Goal: "create the build directory", Approach: "ran mkdir without a name", Outcome: "done"}
		if err := h.store.PutFix(ctx, &f); err != nil {
			t.Fatal(err)
		}
		if err := h.store.PutSolution(ctx, &s); err != nil {
			t.Fatal(err)
		}
		ids[ws] = [2]string{f.ID, s.ID}
	}
	u := newUIClient(t, h)
	u.login("key-a")
	_, page, _ := u.get("/ui/fixes")
	csrf := u.csrf(page)
	if !strings.Contains(page, `action="/ui/fixes/`+ids["team-a"][0]+`/wrong"`) || strings.Contains(page, `class="tag wrong"`) {
		t.Fatalf("fixes page before: %s", page)
	}
	for _, c := range []struct {
		path   string
		form   url.Values
		status int
	}{
		{"/ui/fixes/" + ids["team-b"][0] + "/wrong", url.Values{"csrf": {csrf}}, http.StatusNotFound},
		{"/ui/fixes/" + ids["team-b"][0] + "/wrong", url.Values{"csrf": {csrf}, "workspace": {"team-b"}}, http.StatusForbidden},
		{"/ui/solutions/" + ids["team-b"][1] + "/wrong", url.Values{"csrf": {csrf}}, http.StatusNotFound},
		{"/ui/fixes/" + ids["team-a"][0] + "/wrong", url.Values{"note": {"no csrf"}}, http.StatusForbidden},
		{"/ui/fixes/" + ids["team-a"][0] + "/wrong", url.Values{"csrf": {csrf}, "note": {"its output was an error"}}, http.StatusSeeOther},
		{"/ui/solutions/" + ids["team-a"][1] + "/wrong", url.Values{"csrf": {csrf}, "note": {"the directory was never made"}}, http.StatusSeeOther},
	} {
		if status, body, _ := u.post(c.path, c.form, ""); status != c.status {
			t.Fatalf("POST %s %v: %d, want %d\n%s", c.path, c.form, status, c.status, body)
		}
	}
	for _, ws := range []string{"team-a", "team-b"} {
		fx := h.fixes(ws, "default")
		sol, err := h.store.GetSolution(ctx, ws, ids[ws][1])
		if err != nil || len(fx) != 1 || (fx[0].Wrong != nil) != (ws == "team-a") || (sol.Wrong != nil) != (ws == "team-a") {
			t.Fatalf("%s after the posts: fix %+v, solution %+v (%v)", ws, fx, sol, err)
		}
	}
	_, page, _ = u.get("/ui/fixes")
	if !strings.Contains(page, `<tr class="wrong">`) || !strings.Contains(page, "its output was an error") ||
		!strings.Contains(page, `action="/ui/fixes/`+ids["team-a"][0]+`/right"`) {
		t.Fatalf("fixes page after: %s", page)
	}
	_, page, _ = u.get("/ui/solutions")
	if !strings.Contains(page, `class="tag wrong"`) || !strings.Contains(page, "the directory was never made") ||
		strings.Contains(page, `/ui/solutions/`+ids["team-a"][1]+`/verify`) {
		t.Fatalf("solutions page after: %s", page)
	}
	// Exported and imported again, a marked solution keeps its mark.
	status, export, _ := u.get("/ui/solutions/export")
	if status != http.StatusOK || !strings.Contains(export, `"wrong":`) {
		t.Fatalf("export: %d %s", status, export)
	}
	if err := h.store.DeleteSolution(ctx, "team-a", ids["team-a"][1]); err != nil {
		t.Fatal(err)
	}
	if status, body, _ := u.post("/ui/solutions/import", url.Values{"csrf": {csrf}, "json": {export}}, ""); status != http.StatusSeeOther {
		t.Fatalf("import: %d %s", status, body)
	}
	sols, err := h.store.ListSolutions(ctx, "team-a")
	if err != nil || len(sols) != 1 || sols[0].Wrong == nil || sols[0].Wrong.Note != "the directory was never made" {
		t.Fatalf("imported: %+v, %v; want the solution marked, with its note", sols, err)
	}
	ids["team-a"] = [2]string{ids["team-a"][0], sols[0].ID}

	for _, path := range []string{"/ui/fixes/" + ids["team-a"][0] + "/right", "/ui/solutions/" + ids["team-a"][1] + "/right"} {
		if status, body, _ := u.post(path, url.Values{"csrf": {csrf}}, ""); status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%s", path, status, body)
		}
	}
	if fx := h.fixes("team-a", "default"); fx[0].Wrong != nil {
		t.Fatalf("fix still marked: %+v", fx[0].Wrong)
	}
	if sol, _ := h.store.GetSolution(ctx, "team-a", ids["team-a"][1]); sol.Wrong != nil {
		t.Fatalf("solution still marked: %+v", sol.Wrong)
	}
}
