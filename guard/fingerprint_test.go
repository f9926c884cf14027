package guard

import (
	"regexp"
	"strings"
	"testing"
)

func TestFingerprintSame(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"python line numbers",
			"  File \"/app/main.py\", line 12\n    def f(:\nSyntaxError: invalid syntax",
			"  File \"/app/other.py\", line 40\n    def f(:\nSyntaxError: invalid syntax"},
		{"go path line col", "/home/a/x.go:12:5: undefined: foo", "/home/b/y.go:99:1: undefined: foo"},
		{"relative go path", "./main.go:12:5: undefined: foo", "./cmd/run.go:7:22: undefined: foo"},
		{"ip and port", "dial tcp 10.0.0.1:5432: connect: connection refused", "dial tcp 192.168.1.20:6543: connect: connection refused"},
		{"uuid", "job 3f2c1a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60 failed", "job 00000000-1111-2222-3333-444444444444 failed"},
		{"durations", "Command timed out after 30s", "Command timed out after 1m30.5s"},
		{"urls", "GET https://api.example.com/v1/items?id=3 returned 404", "GET http://localhost:8080/v2/x returned 404"},
		{"emails", "user bob@example.com not found", "user alice.smith+dev@corp.example.org not found"},
		{"quoted values", "Cannot find module 'express'", "Cannot find module '@scope/pkg/sub'"},
		{"apostrophe then quote", "can't open 'x.txt'", "can't open 'some other.txt'"},
		{"double quoted with escapes", `unknown key "a\"b" in config`, `unknown key "zzz" in config`},
		{"hex ids", "object 7f3a9b21c0 missing at 0xdeadbeef", "object 0a1b2c3d4e missing at 0x10"},
		{"mixed ids", "request req_8f7a9b2 for org-abc123 rejected", "request req_1c2d3 for org-zz9 rejected"},
		{"numbers and times", "retry 3 of 5 at 12:30:45.123", "retry 4 of 5 at 09:01:02"},
		{"white space", "connection   reset\tby peer\n", "connection reset by peer"},
		{"windows path", `open C:\Users\dev\app\config.json: access is denied`, `open D:\work\x.json: access is denied`},
		{"ts location", "src/a.ts(10,3): error TS2304: Cannot find name 'foo'.", "src/lib/b.ts(2,17): error TS2304: Cannot find name 'barBaz'."},
		{"key=value", "retry limit reached attempts=5 backoff=2s", "retry limit reached attempts=12 backoff=500ms"},
		{"repeated masks collapse", "ids 1 2 3 failed", "ids 7 8 9 10 11 failed"},
		{"long head and tail", strings.Repeat("x ", 3000) + "end 1", strings.Repeat("x ", 3100) + "end 2"},
		{"id after key=", "upload failed request_id=64577d", "upload failed request_id=6e6996"},
		{"longer labelled ids", "Request ID: 1234567 rejected", "Request ID: 7f3a9b2 rejected"},
		{"camel case id label", "traceId: 123456 dropped", "traceId: 6e6996 dropped"},
		{"id label after punctuation", "(requestID: abcdef)", "(requestID: 4be21c)"},
		{"same exit code", "./a.go:3:1: undefined: x\nexit status 2", "./b/c.go:9:4: undefined: x\nexit status 2"},
		{"overload as JSON and as Claude Code's line",
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "API Error: 529 Overloaded"},
		{"overload with its body after the status",
			`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CX"}`, "API Error: 529 Overloaded"},
		{"server error as JSON and as a line",
			`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, "API Error: 500 Internal server error"},
		{"a tool's name in front", `Task: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Task: API Error: 529 Overloaded"},
		{"gemini status in the body", `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`,
			`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fa, fb := Fingerprint(tc.a), Fingerprint(tc.b)
			if fa != fb {
				t.Errorf("fingerprints differ:\n%q -> %q\n%q -> %q", tc.a, Template(tc.a), tc.b, Template(tc.b))
			}
		})
	}
}

func TestFingerprintDifferent(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"different identifiers", "./main.go:12:5: undefined: foo", "./main.go:12:5: undefined: bar"},
		{"different error classes", "SyntaxError: invalid syntax", "IndentationError: unexpected indent"},
		{"different os errors", "open /x: permission denied", "open /x: no such file or directory"},
		{"different network errors", "read tcp 10.0.0.1:5432: connection reset by peer", "dial tcp 10.0.0.1:5432: connection refused"},
		{"different status text", "404 Not Found", "500 Internal Server Error"},
		{"apostrophes are not quotes", "can't open file 'a'", "can open file 'a'"},
		{"words kept", "KeyError: not in cache", "KeyError: not in store"},
		{"case kept", "ERROR: disk full", "error: disk full"},
		{"curl statuses", "curl: (22) The requested URL returned error: 404", "curl: (22) The requested URL returned error: 500"},
		{"exit statuses", "Command 'make' returned non-zero exit status 1.", "Command 'make' returned non-zero exit status 2."},
		{"exit codes", "Process exited with code 1", "Process exited with code 137"},
		{"status lines", "HTTP/1.1 404", "HTTP/1.1 500"},
		{"status fields", "upload failed status=500", "upload failed status=502"},
		{"axios statuses", "Request failed with status code 404", "Request failed with status code 401"},
		{"overload and rate limit", "API Error: 529 Overloaded", "API Error: 429 Overloaded"},
		{"overload and server error",
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			`{"type":"error","error":{"type":"api_error","message":"Overloaded"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if Fingerprint(tc.a) == Fingerprint(tc.b) {
				t.Errorf("same fingerprint for %q and %q (template %q)", tc.a, tc.b, Template(tc.a))
			}
		})
	}
}

func TestTemplate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  File \"/app/main.py\", line 12", "File <STR>, line <NUM>"},
		{"./main.go:12:5: undefined: foo", "<PATH>: undefined: foo"},
		{"dial tcp 10.0.0.1:5432: connect: connection refused", "dial tcp <IP>: connect: connection refused"},
		{"timed out after 1m30s (deadline 2024-05-01)", "timed out after <DUR> (deadline <*>)"},
		{"see https://x.io/a?b=1, or mail ops@x.io.", "see <URL>, or mail <EMAIL>."},
		{"--timeout=30s failed", "--timeout=<DUR> failed"},
		{"[1, 2, 3, 4]", "[<NUM>, <NUM>, <NUM>]"},
		{"don't stop 'me now'", "don't stop <STR>"},
		{"commit a1b2c3d4e5 and 0xFF", "commit <HEX> and <HEX>"},
		{"id 3f2c1a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60", "id <UUID>"},
		{"token " + strings.Repeat("abcdefgh", 5), "token <*>"},
		{"unclosed \"quote stays", "unclosed \"quote stays"},
		// Only a hex value right after an id label is masked as an id.
		{"ID: 42 not found", "ID: <NUM> not found"},
		{"valid: abcdef", "valid: abcdef"},
		{"VALID: 123456", "VALID: <NUM>"},
		{"Chunk ID: 6e6996 abcdef", "Chunk ID: <*> abcdef"},
		{"ID: deadline exceeded", "ID: deadline exceeded"},
		{"Chunk ID abcdef", "Chunk ID abcdef"},
		{"request_id=7f3a9b2c1d failed", "request_id=<HEX> failed"},
		{"valid=abcdef", "valid=abcdef"},
		// Statuses and exit codes stay; other numbers near a label do not.
		{"curl: (22) The requested URL returned error: 404", "curl: (<NUM>) The requested URL returned error: 404"},
		{"exit status 2 after 3 tries", "exit status 2 after <NUM> tries"},
		{"status=500 retry=3", "status=500 retry=<NUM>"},
		{"error 3 of 5", "error <NUM> of <NUM>"},
		{"HTTP/1.1 503 Service Unavailable", "<*> 503 Service Unavailable"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "API error 529 overloaded_error: Overloaded"},
		{"API Error: 529 Overloaded", "API error 529 overloaded_error: Overloaded"},
		{`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "API error 429 rate_limit_exceeded: Rate limit reached"},
		{`{"error": "not an API error"}`, `{<STR>: <STR>}`},
		{"API Error: soon", "API Error: soon"},
	}
	for _, tc := range tests {
		if got := Template(tc.in); got != tc.want {
			t.Errorf("Template(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

var hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)

func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{"", "SyntaxError: invalid syntax", "'a' \"b\" `c`", "x=1=2==", "/a/b:1:2", "1.2.3.4:5", "::", "\xff\xfe'", "0x", "1h2m3s", "a@b.c"} {
		f.Add(s)
	}
	for _, tc := range errorCorpus {
		f.Add(tc.message)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fp := Fingerprint(s)
		if !hex16.MatchString(fp) {
			t.Fatalf("Fingerprint(%q) = %q, want 16 hex characters", s, fp)
		}
		if again := Fingerprint(s); again != fp {
			t.Fatalf("Fingerprint not deterministic: %q then %q", fp, again)
		}
		tpl := Template(s)
		if strings.ContainsAny(tpl, "\n\t\r") || strings.Contains(tpl, "  ") {
			t.Fatalf("Template(%q) = %q: want single spaces", s, tpl)
		}
	})
}

// TestFingerprintKeepsLabelledIDsAlike: Codex CLI prints a random six-digit
// hex chunk id in front of every command's output. Whatever digits come
// up, the same failure has one fingerprint. (Its exit code is kept: a
// status is part of an error's identity; the frame and the source line
// the traceback quotes are not.)
func TestFingerprintKeepsLabelledIDsAlike(t *testing.T) {
	var exec string
	for _, f := range parseTxtar(t, "testdata/tool_outputs.txtar") {
		if f.name == "fail/codex-exec-command" {
			exec = f.data
		}
	}
	if !strings.HasPrefix(exec, "Chunk ID: 533704\n") {
		t.Fatalf("the captured Codex output starts %q", exec[:min(len(exec), 40)])
	}
	want := "Chunk ID: <*> Wall time: <NUM> seconds Process exited with code 1 Original token count: <NUM> Output: " +
		"SyntaxError: <STR> was never closed"
	// 533704 read as a number, 64577d as 64,577 days, abcdef as a word.
	for _, id := range []string{"6e6996", "9f12aa", "533704", "123456", "64577d", "abcdef", "ABCDEF", "00ff00"} {
		msg := strings.Replace(exec, "533704", id, 1)
		if got := Template(msg); got != want {
			t.Errorf("chunk id %s: template\n%q, want\n%q", id, got, want)
		}
	}

}

func TestErrorLines(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"one line", "x: timeout=3", "x: timeout=3"},
		{"python frames", "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    get(timeout=3)\n    ^^^^^^^^^^^^^^\nValueError: bad", "Traceback (most recent call last):\nValueError: bad"},
		{"syntax error frame", "  File \"a.py\", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax", "SyntaxError: invalid syntax"},
		{"caret under a line", "ERROR:  relation \"t\" does not exist\nLINE 1: select * from t\n                      ^", "ERROR:  relation \"t\" does not exist"},
		{"gutter", "x.c: In function ‘main’:\nx.c:3:5: error: expected ‘;’ before ‘return’\n    3 |   return x;\n      |   ^~~~~~", "x.c:3:5: error: expected ‘;’ before ‘return’"},
		{"stack frames", "Error: boom\n    at f (a.js:1:2)\n    at g (b.js:3:4)", "Error: boom"},
		{"go package line", "# example.com/app\n./main.go:5:2: \"os\" imported and not used", "./main.go:5:2: \"os\" imported and not used"},
		{"a markdown heading stays", "# Notes\nsee below", "# Notes\nsee below"},
		{"a table row stays", "| Error: Unsupported argument\n|   on main.tf line 3", "| Error: Unsupported argument\n|   on main.tf line 3"},
		{"a tool's name in front", "Bash:   File \"a.py\", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax", "Bash: SyntaxError: invalid syntax"},
		{"nothing but source", "    3 |   x = 1\n      |   ^", "    3 |   x = 1\n      |   ^"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorLines(tc.in); got != tc.want {
				t.Errorf("errorLines(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
