package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The demos run against a running proxy with --url, so that its
// dashboard shows what they did.
func TestDemosAgainstARunningProxy(t *testing.T) {
	in, err := startServe(context.Background(), []string{"--mock", "--data", t.TempDir()}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	for _, d := range []struct{ name, want string }{
		{"guard", "SYNTAX COMPLIANCE ERROR (Failed 2 times)"},
		{"recall", `Prior Goal: "Download a web page`},
		{"loop", "STOP"},
	} {
		out := mustCLI(t, "demo", d.name, "--url", in.BaseURL)
		if !strings.Contains(out, d.want) || !strings.Contains(out, in.BaseURL+"/ui/") {
			t.Fatalf("demo %s --url:\n%s", d.name, out)
		}
	}
	for path, want := range map[string]string{
		"/ui/incidents":                "SyntaxError: Unexpected end of input",
		"/ui/conversations/demo-guard": "REPEAT FAILURE GUARD",
		"/ui/solutions":                "Download a web page",
	} {
		res, err := http.Get(in.BaseURL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d, want %q:\n%s", path, res.StatusCode, want, b)
		}
	}
	if _, err := cli(t, "demo", "persist", "--url", in.BaseURL); err == nil {
		t.Fatal("demo persist --url: no error")
	}
	if _, err := cli(t, "demo", "guard", "--url", "127.0.0.1:8080"); err == nil {
		t.Fatal("demo guard --url without a scheme: no error")
	}
}
