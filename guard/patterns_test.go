package guard

import (
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

const (
	route   = "ROUTE FACTORY EXPORT"
	banned  = "BANNED CALL EXHAUSTION"
	path    = "PATH TRAVERSAL ATTEMPT"
	diff    = "INVALID SEARCH/REPLACE DIFF"
	syntax  = "SYNTAX COMPLIANCE ERROR"
	esm     = "ESM IMPORT IN COMMONJS"
	rate    = "API RATE LIMIT TRIGGER"
	timeout = "REQUEST TIMEOUT EXPIRED"
)

// errorCorpus is real error messages of today's toolchains, agents and
// providers, with the pattern each must get ("" for none).
var errorCorpus = []struct {
	name    string
	typ     string
	status  int
	message string
	want    string
}{
	// Syntax.
	{"python SyntaxError", store.TypeToolError, 0, "  File \"/app/main.py\", line 12\n    def f(:\n          ^\nSyntaxError: invalid syntax", syntax},
	{"python IndentationError", store.TypeToolError, 0, "IndentationError: expected an indented block after function definition on line 3", syntax},
	{"python unterminated string", store.TypeToolError, 0, "SyntaxError: unterminated string literal (detected at line 7)", syntax},
	{"go syntax error", store.TypeToolError, 0, "./main.go:14:2: syntax error: unexpected }, expected expression", syntax},
	{"go parser expected", store.TypeToolError, 0, "main.go:3:1: expected ';', found 'func'", syntax},
	{"typescript TS1005", store.TypeToolError, 0, "src/index.ts(10,3): error TS1005: ';' expected.", syntax},
	{"typescript TS1128", store.TypeToolError, 0, "src/app.ts:22:1 - error TS1128: Declaration or statement expected.", syntax},
	{"json end of input", store.TypeToolError, 0, "SyntaxError: Unexpected end of JSON input", syntax},
	{"node unexpected token }", store.TypeToolError, 0, "SyntaxError: Unexpected token '}'", syntax},
	{"json trailing comma", store.TypeToolError, 0, `SyntaxError: Expected double-quoted property name in JSON at position 17 (line 1 column 18)`, syntax},
	{"python json decode", store.TypeToolError, 0, "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 3 column 5 (char 27)", syntax},
	{"rust unclosed delimiter", store.TypeToolError, 0, "error: this file contains an unclosed delimiter\n --> src/main.rs:9:3", syntax},
	{"gcc expected before", store.TypeToolError, 0, "main.c:5:12: error: expected ';' before 'return'", syntax},
	{"yaml parse", store.TypeToolError, 0, "yaml: line 4: mapping values are not allowed in this context", syntax},
	{"reference syntax check failed", store.TypeToolError, 0, "Syntax check failed for routes/users.js", syntax},
	{"reference unexpected end of input", store.TypeToolError, 0, "SyntaxError: Unexpected end of input", syntax},
	{"bash syntax error", store.TypeToolError, 0, "bash: -c: line 1: syntax error near unexpected token `)'", syntax},
	{"gcc curly quotes", store.TypeToolError, 0, "semi.c: In function ‘main’:\nsemi.c:4:5: error: expected ‘,’ or ‘;’ before ‘printf’\n    4 |     printf(\"%d\\n\", x);\n      |     ^~~~~~", syntax},
	{"g++ expected before", store.TypeToolError, 0, "s3.cpp: In function ‘int main()’:\ns3.cpp:3:3: error: expected ‘;’ before ‘return’", syntax},
	{"g++ unqualified-id", store.TypeToolError, 0, "a.cpp:2:1: error: expected unqualified-id before ‘}’ token", syntax},
	{"mysql 1064", store.TypeToolError, 0, "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '--empty' at line 1", syntax},
	{"psql syntax", store.TypeToolError, 0, "ERROR:  syntax error at or near \"selec\"\nLINE 1: selec 1\n        ^", syntax},

	// ESM.
	{"cannot use import statement", store.TypeToolError, 0, "SyntaxError: Cannot use import statement outside a module", esm},
	{"ERR_REQUIRE_ESM", store.TypeToolError, 0, "Error [ERR_REQUIRE_ESM]: require() of ES Module /app/node_modules/chalk/source/index.js from /app/cli.js not supported.", esm},
	{"require in ES module scope", store.TypeToolError, 0, "ReferenceError: require is not defined in ES module scope, you can use import instead", esm},
	{"unexpected token export", store.TypeToolError, 0, "SyntaxError: Unexpected token 'export'", esm},
	{"reference esm import", store.TypeToolError, 0, "ESM import detected in CommonJS project", esm},

	// Search/replace.
	{"claude edit", store.TypeToolError, 0, "<tool_use_error>String to replace not found in file.\nString: func main() {</tool_use_error>", diff},
	{"old_string not found", store.TypeToolError, 0, "Error: old_string not found in file src/app.ts", diff},
	{"aider search block", store.TypeToolError, 0, "SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py", diff},
	{"SEARCH block failed to match", store.TypeToolError, 0, "The SEARCH block failed to match the file content", diff},
	{"openhands old_str", store.TypeToolError, 0, "No replacement was performed, old_str `x := 1` did not appear verbatim in /workspace/main.go.", diff},
	{"git apply", store.TypeToolError, 0, "error: patch failed: server.go:42\nerror: server.go: patch does not apply", diff},
	{"reference search block did not match", store.TypeToolError, 0, "search block did not match target", diff},

	// Path traversal.
	{"reference path traversal", store.TypeToolError, 0, "Path traversal detected: ../../etc/passwd", path},
	{"mcp filesystem", store.TypeToolError, 0, "Error: Access denied - path outside allowed directories: /etc/passwd not in /home/dev/project", path},
	{"go os.Root", store.TypeToolError, 0, "openat ../secrets.txt: path escapes from parent", path},
	{"absolute path not allowed", store.TypeToolError, 0, "Absolute paths are not allowed: /usr/bin/env", path},

	// Banned calls.
	{"reference guardian rejection", store.TypeToolError, 0, "Guardian rejection: banned call eval() in utils.js", banned},
	{"eslint no-eval", store.TypeToolError, 0, "  12:5  error  eval can be harmful  no-eval", banned},
	{"exec not allowed", store.TypeToolError, 0, "child_process.exec() is not allowed in this sandbox", banned},
	{"bandit", store.TypeToolError, 0, ">> Issue: [B102:exec_used] Use of exec detected.", banned},

	// Route factory.
	{"reference fn.apply", store.TypeToolError, 0, "TypeError: fn.apply is not a function", route},
	{"express router use", store.TypeToolError, 0, "TypeError: Router.use() requires a middleware function but got a Object", route},

	// Rate limits: by status whatever the text, and by provider bodies.
	{"429 any text", store.TypeHTTPError, 429, "upstream said no", rate},
	{"429 html", store.TypeHTTPError, 429, "<html><body>Slow down</body></html>", rate},
	{"openai rate limit body", store.TypeHTTPError, 400, "Rate limit reached for gpt-4o in organization org-abc123 on tokens per min (TPM): Limit 30000, Used 29000, Requested 1800.", rate},
	{"rate_limit_exceeded code", store.TypeStreamError, 0, `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`, rate},
	{"openai quota", store.TypeHTTPError, 403, "You exceeded your current quota, please check your plan and billing details.", rate},
	{"anthropic", store.TypeHTTPError, 0, "This request would exceed the rate limit for your organization of 50,000 input tokens per minute.", rate},
	{"gemini", store.TypeHTTPError, 400, "Resource has been exhausted (e.g. check quota).", rate},
	{"too many requests", store.TypeToolError, 0, "HTTP 429 Too Many Requests", rate},

	// Timeouts: by type and status whatever the text, and by message.
	{"timeout type", store.TypeTimeout, 504, "no answer in 60s", timeout},
	{"504 any text", store.TypeHTTPError, 504, "upstream said no", timeout},
	{"timeout type no status", store.TypeTimeout, 0, "", timeout},
	{"context deadline exceeded", store.TypeUnreachable, 502, "Post \"https://api.openai.com/v1/chat/completions\": context deadline exceeded", timeout},
	{"ETIMEDOUT", store.TypeToolError, 0, "Error: connect ETIMEDOUT 10.0.0.5:443", timeout},
	{"undici headers timeout", store.TypeToolError, 0, "TypeError: fetch failed (cause: UND_ERR_HEADERS_TIMEOUT)", timeout},
	{"timed out after", store.TypeToolError, 0, "Command timed out after 30s", timeout},
	{"python ReadTimeout", store.TypeToolError, 0, "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='x', port=443): Read timed out. (read timeout=10)", timeout},
	{"reference request exceeded", store.TypeToolError, 0, "request exceeded 120s", timeout},

	// Known false positives of the reference patterns, and unrelated errors.
	{"setTimeout not defined", store.TypeToolError, 0, "ReferenceError: setTimeout is not defined", ""},
	{"rate limiting middleware", store.TypeToolError, 0, "rate limiting middleware failed to load config", ""},
	{"html parsed as json", store.TypeToolError, 0, "SyntaxError: Unexpected token < in JSON at position 0", ""},
	{"html parsed as json node20", store.TypeToolError, 0, `SyntaxError: Unexpected token '<', "<!DOCTYPE "... is not valid JSON`, ""},
	{"plain-text body parsed as json", store.TypeToolError, 0, "SyntaxError: Unexpected token T in JSON at position 0", ""},
	{"html page in a parse error", store.TypeHTTPError, 502, "JSON parse error: <!DOCTYPE html><html><head><title>502 Bad Gateway</title>", ""},
	{"go json html", store.TypeHTTPError, 502, "invalid character '<' looking for beginning of value", ""},
	{"python json empty", store.TypeToolError, 0, "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", ""},
	{"value outside allowed range", store.TypeToolError, 0, "ValueError: value 12 outside the allowed range", ""},
	{"500 server error", store.TypeHTTPError, 500, "The server had an error while processing your request.", ""},
	{"connection refused", store.TypeUnreachable, 502, "dial tcp 127.0.0.1:9999: connect: connection refused", ""},
	{"module not found", store.TypeToolError, 0, "ModuleNotFoundError: No module named 'requests'", ""},
	{"go undefined", store.TypeToolError, 0, "./main.go:12:5: undefined: foo", ""},
	{"test assertion", store.TypeToolError, 0, "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4", ""},
	{"network unexpected EOF", store.TypeUnreachable, 502, "Post \"http://127.0.0.1:8000/v1/chat/completions\": unexpected EOF", ""},
	{"timeout property", store.TypeToolError, 0, "TypeError: Cannot read properties of undefined (reading 'timeout')", ""},
	{"timeout option", store.TypeToolError, 0, "error: unknown option '--timeout'", ""},
	{"timeout value", store.TypeToolError, 0, "ValueError: timeout must be a positive number", ""},
	{"clearTimeout is not a timeout", store.TypeToolError, 0, "clearTimeout(handle) returned undefined", ""},
	// A label comes from the error, not from the source a traceback quotes.
	{"urllib refused with timeout= in the quoted source", store.TypeToolError, 0, "run_shell: Traceback (most recent call last):\n" +
		"  File \"/app/fetch.py\", line 5, in <module>\n    print(get(\"http://127.0.0.1:55999/health\"))\n" +
		"  File \"/app/fetch.py\", line 3, in get\n    with urllib.request.urlopen(url, timeout=timeout) as r:\n" +
		"         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" +
		"  File \"/usr/lib/python3.11/socket.py\", line 836, in create_connection\n    sock.settimeout(timeout)\n" +
		"ConnectionRefusedError: [Errno 111] Connection refused\n\nDuring handling of the above exception, another exception occurred:\n\n" +
		"urllib.error.URLError: <urlopen error [Errno 111] Connection refused>", ""},
	{"a quoted line a caret points at", store.TypeToolError, 0, "/app/x.js:2\n  setTimeout(run, timeout)\n  ^\n\nReferenceError: run is not defined", ""},
	{"a compiler's quoted source", store.TypeToolError, 0, "x.c:3:9: error: ‘conn’ undeclared\n    3 |   conn->timeout = 5;\n      |   ^~~~", ""},
	{"urllib timed out", store.TypeToolError, 0, "Traceback (most recent call last):\n  File \"/app/t.py\", line 2, in <module>\n    urlopen(url)\nTimeoutError: timed out", timeout},
}

func TestClassifyCorpus(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	if len(errorCorpus) < 40 {
		t.Fatalf("corpus has %d rows, want at least 40", len(errorCorpus))
	}
	for _, tc := range errorCorpus {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := g.Classify(tc.typ, tc.status, tc.message)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("Classify(%q, %d, %q) = %q, %v; want %q", tc.typ, tc.status, tc.message, got, ok, tc.want)
			}
			// Cached answer is the same.
			if again, _ := g.Classify(tc.typ, tc.status, tc.message); again != got {
				t.Errorf("second Classify = %q, first %q", again, got)
			}
		})
	}
}

func TestBuiltinsKeepReferenceLabelsAndFixes(t *testing.T) {
	want := map[string]string{
		route:   "Route files MUST export a factory function: `module.exports = function(app) { app.get(...) }`. NEVER export a raw Express Router.",
		banned:  "eval(), exec(), or child_process.exec() are forbidden by security policies. Use spawn() with explicit args instead.",
		path:    "No `..` or absolute paths. Always relative-to-projectRoot. Validate with path.resolve + startsWith check.",
		diff:    "The SEARCH block must match the target file exactly. Double check whitespace and line endings, or use empty SEARCH blocks.",
		syntax:  "Output must be valid syntax. Verify braces, brackets, parentheses, and commas. Never truncate output mid-block.",
		esm:     "This file runs in a CommonJS project. Use `const x = require(...)` and `module.exports = x`. Do NOT use `import` / `export` syntax.",
		rate:    "Provider is currently rate-limited. Wait or adjust model chains to route to cheaper/local providers first.",
		timeout: "Inference took too long. Reduce output tokens size or request complexity. Check provider status.",
	}
	got := Builtins()
	if len(got) != len(want) {
		t.Fatalf("%d built-ins, want %d", len(got), len(want))
	}
	for _, p := range got {
		if fix, ok := want[p.Name]; !ok {
			t.Errorf("unexpected built-in %q", p.Name)
		} else if p.Fix != fix {
			t.Errorf("%s fix = %q, want %q", p.Name, p.Fix, fix)
		}
		if err := (Config{Patterns: []PatternConfig{p}}).Validate(); err != nil {
			t.Errorf("built-in %s as a config pattern: %v", p.Name, err)
		}
	}
}
