package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/recall"
)

// TestMemoryAPICompat covers what the original libraries send that the
// memory API took badly: an error code as the status, a threshold per
// recall, near misses, a bulk delete, the pattern list.
func TestMemoryAPICompat(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1", withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{
			{SHA256: sha("key-a"), Workspace: "team-a"},
			{SHA256: sha("key-c"), Workspace: "team-c", Projects: []string{"api"}},
		}
		o.AdminToken = "admin-secret"
	}))
	call := func(method, path, body, key string) (int, map[string]any) {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		res := h.do(method, path, b, map[string]string{"Authorization": "Bearer " + key})
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	const admin = "admin-secret"

	t.Run("incident codes", func(t *testing.T) {
		for _, tc := range []struct {
			name, body     string
			status         int
			code           string
			httpStatusCode float64
		}{
			{"code as status_code", `{"workspace":"w","project":"p","type":"network_error","status_code":"ECONNRESET","message":"read ECONNRESET"}`, 201, "ECONNRESET", 0},
			{"code field", `{"workspace":"w","project":"p","type":"network_error","code":"ETIMEDOUT","message":"connect ETIMEDOUT"}`, 201, "ETIMEDOUT", 0},
			{"both agree", `{"workspace":"w","project":"p","type":"network_error","code":"EPIPE","status_code":"EPIPE","message":"write EPIPE"}`, 201, "EPIPE", 0},
			{"status and code", `{"workspace":"w","project":"p","type":"http_error","code":"insufficient_quota","status_code":429,"message":"quota"}`, 201, "insufficient_quota", 429},
			{"status as a string", `{"workspace":"w","project":"p","type":"http_error","status_code":"503","message":"unavailable"}`, 201, "", 503},
			{"codes differ", `{"workspace":"w","project":"p","type":"x","code":"EPIPE","status_code":"ECONNRESET","message":"m"}`, 400, "", 0},
			{"code with a space", `{"workspace":"w","project":"p","type":"x","code":"errno 104","message":"m"}`, 400, "", 0},
			{"code too long", `{"workspace":"w","project":"p","type":"x","code":"` + strings.Repeat("E", 65) + `","message":"m"}`, 400, "", 0},
			{"status out of range", `{"workspace":"w","project":"p","type":"x","status_code":"42","message":"m"}`, 400, "", 0},
			{"status of another type", `{"workspace":"w","project":"p","type":"x","status_code":true,"message":"m"}`, 400, "", 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, out := call(http.MethodPost, "/scar/v1/incidents", tc.body, admin)
				if status != tc.status {
					t.Fatalf("%d %v", status, out)
				}
				if status != 201 {
					return
				}
				if got, _ := out["code"].(string); got != tc.code {
					t.Fatalf("code %q, want %q: %v", got, tc.code, out)
				}
				if got, _ := out["status_code"].(float64); got != tc.httpStatusCode {
					t.Fatalf("status_code %v, want %v", got, tc.httpStatusCode)
				}
			})
		}
		_, out := call(http.MethodGet, "/scar/v1/incidents?workspace=w&project=p", "", admin)
		if b, _ := json.Marshal(out); !strings.Contains(string(b), `"code":"ECONNRESET"`) {
			t.Fatalf("listed incidents lack the code: %s", b)
		}
	})

	t.Run("recall threshold and near misses", func(t *testing.T) {
		if status, out := call(http.MethodPost, "/scar/v1/solutions", `{"workspace":"w","goal":"Fix the flaky shutdown test","approach":"wait on a channel","outcome":"green","confidence":0.9}`, admin); status != 201 {
			t.Fatalf("%d %v", status, out)
		}
		const q = "/scar/v1/recall?workspace=w&goal=shutdown+hangs+in+the+integration+suite"
		_, def := call(http.MethodGet, q, "", admin)
		if def["min_similarity"] != recall.DefaultMinSimilarity {
			t.Fatalf("default threshold: %v", def)
		}
		_, low := call(http.MethodGet, q+"&min_similarity=0", "", admin)
		lowMatches, _ := low["matches"].([]any)
		if len(lowMatches) != 1 || low["min_similarity"] != 0.0 {
			t.Fatalf("min_similarity=0: %v", low)
		}
		sim := lowMatches[0].(map[string]any)["similarity"].(float64)
		if sim <= 0 || sim >= 0.99 {
			t.Fatalf("the test wants a partial match, got similarity %v", sim)
		}
		above := fmt.Sprintf("&min_similarity=%.2f", sim+0.01)
		_, miss := call(http.MethodGet, q+above, "", admin)
		if m, _ := miss["matches"].([]any); len(m) != 0 || miss["below"] != nil {
			t.Fatalf("threshold above the match: %v", miss)
		}
		_, near := call(http.MethodGet, q+above+"&include_below=true", "", admin)
		below, _ := near["below"].([]any)
		if len(below) != 1 || below[0].(map[string]any)["similarity"] != sim {
			t.Fatalf("include_below: %v", near)
		}
		_, none := call(http.MethodGet, "/scar/v1/recall?workspace=w&goal=bake+sourdough&include_below=1", "", admin)
		if b, ok := none["below"].([]any); !ok || len(b) != 0 {
			t.Fatalf("include_below with nothing near: %v", none)
		}
		_, high := call(http.MethodGet, "/scar/v1/recall?workspace=w&goal=fix+the+flaky+shutdown+test&min_similarity=1", "", admin)
		if m, _ := high["matches"].([]any); len(m) != 1 {
			t.Fatalf("min_similarity=1 and the same goal: %v", high)
		}
		for _, bad := range []string{"min_similarity=1.5", "min_similarity=-0.1", "min_similarity=NaN", "min_similarity=high", "include_below=maybe", "k=9"} {
			if status, out := call(http.MethodGet, q+"&"+bad, "", admin); status != 400 {
				t.Fatalf("%s: %d %v", bad, status, out)
			}
		}
	})

	t.Run("delete a workspace's solutions", func(t *testing.T) {
		for _, ws := range []string{"team-a", "team-b"} {
			for _, g := range []string{"Fix the flaky shutdown test", "Parse the config file"} {
				if status, out := call(http.MethodPost, "/scar/v1/solutions", `{"workspace":"`+ws+`","goal":"`+g+`","approach":"a","outcome":"o","confidence":1}`, admin); status != 201 {
					t.Fatalf("%d %v", status, out)
				}
			}
		}
		for _, c := range []struct {
			path, key string
			status    int
		}{
			{"/scar/v1/solutions", admin, 400},                    // the admin must name it
			{"/scar/v1/solutions?workspace=team-b", "key-a", 403}, // another team's
			{"/scar/v1/solutions?workspace=team-c", "key-c", 403}, // a key limited to projects
			{"/scar/v1/solutions?workspace=team-b", "", 401},
		} {
			if status, out := call(http.MethodDelete, c.path, "", c.key); status != c.status {
				t.Fatalf("DELETE %s with %q: %d %v, want %d", c.path, c.key, status, out, c.status)
			}
		}
		if status, out := call(http.MethodDelete, "/scar/v1/solutions", "", "key-a"); status != 200 || out["deleted"] != 2.0 {
			t.Fatalf("key-a deleting its own: %d %v", status, out)
		}
		if _, out := call(http.MethodGet, "/scar/v1/recall?workspace=team-a&goal=fix+the+flaky+shutdown+test", "", admin); len(out["matches"].([]any)) != 0 {
			t.Fatalf("deleted solutions recalled: %v", out)
		}
		if _, out := call(http.MethodGet, "/scar/v1/solutions?workspace=team-b", "", admin); len(out["solutions"].([]any)) != 2 {
			t.Fatalf("team-b's solutions: %v", out)
		}
		if status, out := call(http.MethodDelete, "/scar/v1/solutions?workspace=team-b", "", admin); status != 200 || out["deleted"] != 2.0 {
			t.Fatalf("admin deleting team-b's: %d %v", status, out)
		}
		if status, out := call(http.MethodDelete, "/scar/v1/solutions?workspace=team-b", "", admin); status != 200 || out["deleted"] != 0.0 {
			t.Fatalf("deleting again: %d %v", status, out)
		}
	})

	t.Run("patterns", func(t *testing.T) {
		status, out := call(http.MethodGet, "/scar/v1/patterns", "", "key-a")
		pats, _ := out["patterns"].([]any)
		if status != 200 || len(pats) != len(guard.Builtins()) || out["min_repeats"] != 2.0 || out["window"] != "1h0m0s" {
			t.Fatalf("%d %v", status, out)
		}
		labels := map[string]map[string]any{}
		for _, p := range pats {
			labels[p.(map[string]any)["label"].(string)] = p.(map[string]any)
		}
		rl := labels["API RATE LIMIT TRIGGER"]
		if rl == nil || rl["regex"] == "" || !strings.Contains(rl["fix"].(string), "rate-limited") || rl["builtin"] != true || !jsonEqual(rl["status_codes"], []int{429}) {
			t.Fatalf("rate limit pattern: %v", rl)
		}
		if status, _ := call(http.MethodGet, "/scar/v1/patterns", "", ""); status != 401 {
			t.Fatalf("anonymous: %d", status)
		}
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
