package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestNULBytesOnPostgres: "\u0000" is valid JSON that PostgreSQL text
// cannot hold. A tool output, an incident and a solution carrying it are
// stored (as U+FFFD), never answered with 503 or a degraded request.
func TestNULBytesOnPostgres(t *testing.T) {
	dsn := schemaDSN(t, postgresDSN(t))
	in := start(t, "--config", postgresConfig(t, dsn))
	hdr := map[string]string{"X-Scar-Workspace": "team", "X-Scar-Project": "api"}

	turn := `{"model":"mock-gpt","messages":[{"role":"user","content":"build it"},
 {"role":"assistant","tool_calls":[{"id":"call_ls","type":"function","function":{"name":"ls","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"call_ls","content":"package.json src"},
 {"role":"assistant","tool_calls":[{"id":"c\u0000%d","type":"function","function":{"name":"build","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"c\u0000%d","content":"Error: Cannot find module 'left\u0000pad' (%d)"}]}`
	var conv string
	for i := range 2 {
		r := do(t, "POST", in.BaseURL+"/v1/chat/completions", fmt.Sprintf(turn, i, i, i), hdr)
		conv = r.header.Get("X-Scar-Conversation")
		if r.status != 200 || r.header.Get("X-Scar-Degraded") != "" {
			t.Fatalf("chat %d: %d degraded %q: %s", i, r.status, r.header.Get("X-Scar-Degraded"), r.body)
		}
	}
	r := do(t, "POST", in.BaseURL+"/scar/v1/incidents",
		`{"workspace":"team","project":"api","type":"test_failure","message":"assert\u0000failed","model":"m\u0000"}`, nil)
	if r.status != 201 {
		t.Fatalf("post incident: %d %s", r.status, r.body)
	}
	r = do(t, "POST", in.BaseURL+"/scar/v1/solutions",
		`{"workspace":"team","goal":"strip \u0000 from logs","approach":"tr -d '\\000'\u0000","outcome":"ok\u0000","confidence":0.9}`, nil)
	if r.status != 201 {
		t.Fatalf("post solution: %d %s", r.status, r.body)
	}
	r = do(t, "GET", in.BaseURL+"/scar/v1/incidents?workspace=team&project=api", "", nil)
	if r.status != 200 || strings.Count(r.body, "left\uFFFDpad") != 2 || !strings.Contains(r.body, "assert\uFFFDfailed") {
		t.Fatalf("incidents: %d %s", r.status, r.body)
	}
	r = do(t, "GET", in.BaseURL+"/scar/v1/guard?workspace=team&project=api&session="+conv, "", nil)
	if r.status != 200 || !strings.Contains(r.body, "(Failed 2 times)") {
		t.Fatalf("guard: %d %s", r.status, r.body)
	}
	r = do(t, "GET", in.BaseURL+"/scar/v1/solutions?workspace=team", "", nil)
	if r.status != 200 || !strings.Contains(r.body, "strip \uFFFD from logs") {
		t.Fatalf("solutions: %d %s", r.status, r.body)
	}
}
