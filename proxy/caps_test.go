package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// TestCapsHeldAtWriteTime: with a cap of 3 solutions per workspace and 2
// fixes per project, the solutions posted through the memory API and
// imported through the dashboard, and the fixes posted, never make the
// store nor the recall index hold more than the cap, with no pruning run.
func TestCapsHeldAtWriteTime(t *testing.T) {
	h := keyedHarness(t, withOptions(func(o *Options) {
		o.RetentionSolutionsMaxPerWorkspace, o.RetentionFixesMaxPerProject = 3, 2
	}))
	ctx := context.Background()
	admin := map[string]string{"Authorization": "Bearer admin-secret"}
	held := func(t *testing.T, ws string, want int) {
		t.Helper()
		sols, err := h.store.ListSolutions(ctx, ws)
		if err != nil || len(sols) != want {
			t.Fatalf("%s holds %d solutions (%v), want %d", ws, len(sols), err, want)
		}
		if n := h.srv.memory.Index().Len(ws); n != want {
			t.Fatalf("the recall index holds %d solutions of %s, want %d", n, ws, want)
		}
	}

	t.Run("memory API", func(t *testing.T) {
		for i := range 5 {
			status, body := h.apiCall(http.MethodPost, "/scar/v1/solutions", fmt.Sprintf(
				`{"workspace":"team-a","goal":"Rotate the signing key of service %d","approach":"renew","outcome":"ok","confidence":0.8}`, i), admin)
			if status != http.StatusCreated {
				t.Fatalf("post solution %d: %d %s", i, status, body)
			}
			held(t, "team-a", min(i+1, 3))
		}
	})

	t.Run("dashboard import", func(t *testing.T) {
		var export struct {
			Solutions []store.Solution `json:"solutions"`
		}
		for i := range 5 {
			export.Solutions = append(export.Solutions, store.Solution{Goal: fmt.Sprintf("Migrate table %d to the new schema", i),
				Approach: "online migration", Outcome: "ok", Confidence: 0.7})
		}
		b, _ := json.Marshal(export)
		u := newUIClient(t, h)
		u.login("key-b")
		_, page, _ := u.get("/ui/solutions")
		status, _, res := u.post("/ui/solutions/import", url.Values{"csrf": {u.csrf(page)}, "json": {string(b)}}, "")
		if status != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "Imported+5") {
			t.Fatalf("import: %d %q", status, res.Header.Get("Location"))
		}
		held(t, "team-b", 3)
	})

	t.Run("fixes", func(t *testing.T) {
		for i := range 4 {
			status, body := h.apiCall(http.MethodPost, "/scar/v1/fixes", fmt.Sprintf(`{"workspace":"team-a","project":"p","tool":"deploy","key":"quota-%d",
				"failure":"deploy: quota of project %d exceeded","call":"{\"project\":%d}","failures":2}`, i, i, i), admin)
			if status != http.StatusCreated {
				t.Fatalf("post fix %d: %d %s", i, status, body)
			}
		}
		fixes, err := h.store.ListFixes(ctx, store.FixQuery{Workspace: "team-a", Project: "p", Limit: store.MaxLimit})
		if err != nil || len(fixes) != 2 || !strings.Contains(fixes[0].Failure, "project 3") || !strings.Contains(fixes[1].Failure, "project 2") {
			t.Fatalf("fixes held: %+v %v; want the two latest", fixes, err)
		}
	})
}
