package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// The tenants that hold records: GET /scar/v1/workspaces and the
// dashboard's picker, each as its caller may see them.
func TestWorkspacesListed(t *testing.T) {
	h := keyedHarness(t)
	ctx := context.Background()
	add := func(ws, proj string, ago time.Duration) {
		t.Helper()
		if err := h.store.AddIncident(ctx, &store.Incident{Time: h.now.Add(-ago), Workspace: ws, Project: proj,
			Type: store.TypeToolError, Message: "SyntaxError in " + ws}); err != nil {
			t.Fatal(err)
		}
	}
	add("team-a", "default", 3*time.Hour)
	add("team-a", "api", time.Hour)
	add("team-b", "web", 2*time.Hour)
	if err := h.store.AddUsage(ctx, []store.Usage{{Workspace: "routed", Project: "agent-7", Hour: h.now.Truncate(time.Hour), Requests: 1, Input: 5}}); err != nil {
		t.Fatal(err)
	}

	type project struct{ Project string }
	type workspace struct {
		Workspace string
		Projects  []project
	}
	list := func(token string) (int, []workspace) {
		t.Helper()
		res := h.do(http.MethodGet, "/scar/v1/workspaces", nil, map[string]string{"Authorization": "Bearer " + token})
		defer res.Body.Close()
		var out struct{ Workspaces []workspace }
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
		}
		return res.StatusCode, out.Workspaces
	}
	status, all := list("admin-secret")
	want := []workspace{
		{"routed", []project{{"agent-7"}}},
		{"team-a", []project{{"api"}, {"default"}}},
		{"team-b", []project{{"web"}}},
	}
	if status != http.StatusOK || !reflect.DeepEqual(all, want) {
		t.Fatalf("admin: %d %+v", status, all)
	}
	if status, own := list("key-a"); status != http.StatusOK || !reflect.DeepEqual(own, want[1:2]) {
		t.Fatalf("key A: %d %+v", status, own)
	}
	if status, _ := list("wrong"); status != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", status)
	}

	admin := newUIClient(t, h)
	admin.login("admin-secret")
	_, page, _ := admin.get("/ui/?workspace=team-a&project=api")
	for _, s := range []string{`<datalist id="workspaces"><option value="routed"></option><option value="team-a"></option><option value="team-b"></option></datalist>`,
		`<datalist id="projects"><option value="api"></option><option value="default"></option></datalist>`,
		`<a href="/ui/?workspace=routed&amp;project=agent-7">routed / agent-7</a>`,
		`<a href="/ui/?workspace=team-a&amp;project=api" aria-current="true">team-a / api</a>`} {
		if !strings.Contains(page, s) {
			t.Fatalf("admin's picker lacks %s:\n%s", s, page)
		}
	}
	keyA := newUIClient(t, h)
	keyA.login("key-a")
	_, page, _ = keyA.get("/ui/")
	if !strings.Contains(page, `team-a / api`) || strings.Contains(page, "team-b") || strings.Contains(page, "routed") {
		t.Fatalf("key A's picker:\n%s", page)
	}
}
