package guard

import (
	"os"
	"strings"
	"testing"
)

// txtarFile is one file of a txtar archive.
type txtarFile struct {
	name string
	data string
}

// parseTxtar reads the txtar format: a comment, then files introduced by
// "-- name --" lines.
func parseTxtar(t *testing.T, path string) []txtarFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var files []txtarFile
	var cur *txtarFile
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			files = append(files, txtarFile{name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])})
			cur = &files[len(files)-1]
			continue
		}
		if cur != nil {
			cur.data += line
		}
	}
	return files
}

func TestToolFailedCorpus(t *testing.T) {
	files := parseTxtar(t, "testdata/tool_outputs.txtar")
	var fails, oks int
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			var want bool
			switch {
			case strings.HasPrefix(f.name, "fail/"):
				want = true
				fails++
			case strings.HasPrefix(f.name, "ok/"):
				oks++
			default:
				t.Fatalf("file %q is under neither fail/ nor ok/", f.name)
			}
			if got := ToolFailed(f.data); got != want {
				t.Errorf("ToolFailed = %v, want %v for:\n%s", got, want, f.data)
			}
		})
	}
	if fails < 15 || oks < 15 || fails+oks < 30 {
		t.Errorf("corpus has %d failed and %d successful outputs; want at least 15 of each", fails, oks)
	}
}

func TestToolFailedEdges(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    bool
	}{
		{"empty", "", false},
		{"blank", " \n\t ", false},
		{"bom then error", "\ufeffError: boom", true},
		{"error field false", `{"error": false}`, false},
		{"error field true", `{"error": true}`, true},
		{"error field empty object", `{"error": {}}`, false},
		{"error field blank string", `{"error": "  "}`, false},
		{"error field number", `{"error": 5}`, true},
		{"status ok", `{"status": "ok"}`, false},
		{"status ERROR upper", `{"status": "ERROR"}`, true},
		{"status numeric", `{"status": 500}`, false},
		{"exit code string", `{"exitCode": "3"}`, true},
		{"exit code null", `{"exit_code": null}`, false},
		{"is_error string", `{"is_error": "true"}`, true},
		{"metadata not an object", `{"metadata": [1], "result": "fine"}`, false},
		{"invalid json that reads as an error", `{"partial": Error`, false},
		{"invalid json string then text", `"unterminated`, false},
		{"exit status in a grep hit", "cmd/run.go:40: // exit code 2 means usage", false},
		{"negative exit code", "exit status -1", true},
		{"exit code with parenthesis", "[exit code (137)]", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolFailed(tc.content); got != tc.want {
				t.Errorf("ToolFailed(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
}

func FuzzToolFailed(f *testing.F) {
	for _, s := range []string{"", "Error: x", `{"error": null}`, `{"exit_code": 1}`, "Traceback (most recent call last):", `"x"`, "{", "\n\nFAIL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ToolFailed(s)
		if again := ToolFailed(s); again != got {
			t.Fatalf("ToolFailed(%q) not deterministic", s)
		}
		// Leading white space never changes the verdict.
		if indented := ToolFailed("\n  \t" + s); indented != got {
			t.Fatalf("ToolFailed(%q) = %v but with leading white space %v", s, got, indented)
		}
	})
}
