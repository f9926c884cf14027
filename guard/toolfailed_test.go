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
func parseTxtar(t testing.TB, path string) []txtarFile {
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
	flagged := map[bool]int{} // by the verdict wanted
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
			got := ToolFailed(f.data)
			if got {
				flagged[want]++
			}
			if got != want {
				t.Errorf("ToolFailed = %v, want %v for:\n%s", got, want, f.data)
			}
		})
	}
	t.Logf("failures detected: %d of %d; successes flagged: %d of %d", flagged[true], fails, flagged[false], oks)
	if fails < 60 || oks < 60 {
		t.Errorf("corpus has %d failed and %d successful outputs; want at least 60 of each", fails, oks)
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
		{"wrapper exit code 0 outranks the text", "Exit code: 0\nTraceback (most recent call last):\n  File \"t.py\", line 1\nValueError: x", false},
		{"wrapper exit code 1 outranks the text", "Process exited with code 1\nall good", true},
		{"exit code assignment in a listing", "def main():\n    run()\n    exitCode = 1", false},
		{"python log record first", "ERROR:root:retrying\ndone", false},
		{"traceback in the middle", "step 1\nstep 2\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nKeyError: 'k'\nstep 3", true},
		{"logged traceback in the middle", "step 1\n2024-05-01 ERROR job failed\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nKeyError: 'k'\nstep 3", false},
		{"indented traceback in the middle", "notes:\n    Traceback (most recent call last):\n      File \"a.py\", line 3\n    KeyError: 'k'\nend", false},
		{"fenced traceback", "see:\n```\nTraceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'k'\n```\nend", false},
		{"after a closed fence", "```\nx\n```\nTraceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'k'\nend", true},
		{"doctest traceback", "x\nTraceback (most recent call last):\n    ...\nValueError: empty\n\"\"\"", false},
		{"json output field judged when nothing else says", `{"output": "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'"}`, true},
		{"json output field fine", `{"output": "3 files written"}`, false},
		{"json exit code outranks output", `{"exit_code": 0, "output": "Error: but it worked"}`, false},
		{"mcp text without isError", `{"content":[{"type":"text","text":"Error: repository not found"}]}`, true},
		{"cline command failed", `[{"query":"python3 hello.py","result":"Traceback (most recent call last):\n  File \"hello.py\", line 1\nSyntaxError: '(' was never closed","error":"Command exited with code 1","success":false}]`, true},
		{"cline command succeeded", `[{"query":"ls","result":"hello.py\nREADME.md","success":true}]`, false},
		{"cline second command failed", `[{"query":"ls","result":"a","success":true},{"query":"make","result":"","error":"make: *** No rule to make target 'x'.  Stop.","success":false}]`, true},
		{"content parts with a traceback", `[{"type":"text","text":"Traceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'k'"}]`, true},
		{"content parts fine", `[{"type":"text","text":"3 files written"}]`, false},
		{"an array of numbers is text", `[1, 2, 3]`, false},
		{"a JSON array listing error words", `[{"name":"error.go"},{"name":"errors_test.go"}]`, false},
		{"http status code 404", `{"status_code": 404}`, true},
		{"http status code 200", `{"status_code": 200, "body": "error: none"}`, false},
		{"embedded exec result", "Script completed\nOutput:\n{\"exit_code\":3,\"output\":\"\"}", true},
		{"embedded exec result ok", "Script completed\nOutput:\n{\"exit_code\":0,\"output\":\"Error: x\"}", false},
		{"embedded JSON without fields", "Error: bad request\n{\"code\": 400}", true},
		{"grep hit on a compiler-like line", "notes.md:3:error handling chapter", false},
		{"tests passed outranks a printed traceback", "Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: x\n.\n1 passed in 0.01s", false},
		{"tests failed at the end", "collected 2 items\n1 failed, 1 passed in 0.02s", true},
		{"traceback past the scan cap", strings.Repeat("ok line\n", maxScan/8) + "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n" + strings.Repeat("ok line\n", maxScan/8), false},
		{"traceback in the first half of a huge output", "start\nTraceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n" + strings.Repeat("ok line\n", maxScan/4), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolFailed(tc.content); got != tc.want {
				t.Errorf("ToolFailed(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
}

// TestToolRulesDiscipline: the rules every line of an output goes through
// are anchored, filtered by their first byte, and, when that byte can be
// almost anything, by a literal the line must contain.
func TestToolRulesDiscipline(t *testing.T) {
	for _, r := range toolRules[anyStart:] {
		n := 0
		for b := 0; b < 256; b++ {
			if r.first.has(byte(b)) {
				n++
			}
		}
		if n > 64 && r.literal == "" {
			t.Errorf("anyLine rule %q can begin with %d bytes and has no literal", r.name, n)
		}
		if r.next != nil && !r.nextFilter {
			t.Errorf("anyLine rule %q: next has no first-byte filter", r.name)
		}
	}
	if anyStart == len(toolRules) {
		t.Fatal("no anyLine rule")
	}
}

func FuzzToolFailed(f *testing.F) {
	for _, s := range []string{"", "Error: x", `{"error": null}`, `{"exit_code": 1}`, "Traceback (most recent call last):", `"x"`, "{", "\n\nFAIL",
		"a\nTraceback (most recent call last):\n  File \"x\", line 1\nE: x", "x\n```\n--- FAIL: T (0.00s)\n```", "Output:\n{\"exit_code\":1}", "# p\n./a.go:1:2: x"} {
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

// TestToolSucceeded: a success is only what shows one; an output that
// cannot be judged (empty, or speaking of errors in no known shape) is
// none, and no failure of the corpus is one.
func TestToolSucceeded(t *testing.T) {
	tests := []struct {
		name, content string
		want          bool
	}{
		{"exit code 0 outranks error words", "Exit code: 0\nerror: none found", true},
		{"structured success", `{"success": true, "output": "Error: deprecated flag"}`, true},
		{"cline success", `[{"query":"ls","result":"hello.py","success":true}]`, true},
		{"passing test run", "collected 3 items\n\n3 passed in 0.04s", true},
		{"plain output", "wrote hello.py (12 lines)", true},
		{"file contents", "{\n  \"name\": \"app\",\n  \"version\": \"1.0.0\"\n}", true},
		{"empty", "", false},
		{"blank", " \n ", false},
		{"bare missing operand", "mkdir: missing operand\nTry 'mkdir --help' for more information.", false},
		{"bare permission denied", "bash: ./run.sh: Permission denied", false},
		{"bare no such file", "cat: config/missing.json: No such file or directory", false},
		{"a script's own failure message", "deploy failed: cluster unreachable", false},
		{"bare SQL error", `relation "users" does not exist`, false},
		{"bare docker daemon down", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", false},
		{"failed exit code", "Process exited with code 2\nok", false},
		{"cline failure", `[{"query":"make","result":"","error":"Command exited with code 2","success":false}]`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolSucceeded(tc.content); got != tc.want {
				t.Errorf("ToolSucceeded(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
	var oks, judged int
	for _, f := range parseTxtar(t, "testdata/tool_outputs.txtar") {
		switch {
		case strings.HasPrefix(f.name, "fail/") && ToolSucceeded(f.data):
			t.Errorf("%s: a failure of the corpus reads as a success", f.name)
		case strings.HasPrefix(f.name, "ok/"):
			oks++
			if ToolSucceeded(f.data) {
				judged++
			}
		}
	}
	t.Logf("successes of the corpus shown as such: %d of %d (the rest cannot be judged: no fix is learned from them)", judged, oks)
}
