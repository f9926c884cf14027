package guard

import (
	"regexp"
	resyntax "regexp/syntax"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard/internal/corpus"
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
	read, err := corpus.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]txtarFile, len(read))
	for i, f := range read {
		files[i] = txtarFile{name: f.Name, data: f.Data}
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
	// The phrases tried on most lines stay small enough for the regexp
	// package's backtracker (at most 500 instructions); past it every
	// match runs the slower NFA.
	for name, re := range map[string]*regexp.Regexp{"failureSentence": failureSentence, "failureWords": failureWords} {
		prog, err := resyntax.Parse(re.String(), resyntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		p, err := resyntax.Compile(prog.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Inst) > 500 {
			t.Errorf("%s compiles to %d instructions, more than the backtracker takes (500)", name, len(p.Inst))
		}
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
		{"mypy's verdict after a config complaint", "broken_mypy.ini: File contains no section headers.\nfile: 'broken_mypy.ini', line: 1\n'[mypy\\n'\nSuccess: no issues found in 1 source file", true},
		{"maven's verdict", "[ERROR] Tests run: 0, Failures: 0\n[INFO] ------------------------------------------------------------------------\n[INFO] BUILD SUCCESS\n[INFO] ------------------------------------------------------------------------\n[INFO] Total time:  12.782 s", true},
		{"gradle's verdict", "> Task :test\nwarning: [deprecation] fail() in Assert has been deprecated\n\nBUILD SUCCESSFUL in 4s\n3 actionable tasks: 3 executed", true},
		{"rspec with a pending failure", "     Failure/Error: expect(x).to eq('ERR')\n       expected: \"ERR\"\n            got: \"WARN\"\n\nFinished in 0.02 seconds (files took 0.1 seconds to load)\n4 examples, 0 failures, 1 pending", true},
		{"minitest", "Run options: --seed 1\n\n# Running:\n\n...\n\nFinished in 0.001s\n3 runs, 5 assertions, 0 failures, 0 errors, 0 skips", true},
		{"ctest", "1/2 Test #1: test_error_paths .................   Passed    0.01 sec\n\n100% tests passed, 0 tests failed out of 2", true},
		{"rspec failing", "Finished in 0.02 seconds\n4 examples, 1 failure", false},
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

// TestToolFailedKinds: one output of each kind of failure the rules read
// without an exit status, next to the success that resembles it most.
func TestToolFailedKinds(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    bool
	}{
		{"rspec failures", "Finished in 1.2 seconds\n12 examples, 3 failures", true},
		{"phpunit failures", "F.                                  2 / 2 (100%)\n\n/home/dev/php/tests/InvoiceTest.php:7\n\nFAILURES!\nTests: 2, Assertions: 2, Failures: 1.", true},
		{"phpunit passed", "..                                  2 / 2 (100%)\n\nTime: 00:00.004, Memory: 4.00 MB\n\nOK (2 tests, 2 assertions)", false},
		{"ctest failed", "1/2 Test #1: ring_unit ........***Failed    0.01 sec\n\nThe following tests FAILED:\n\t  1 - ring_unit (Failed)\nErrors while running CTest", true},
		{"pytest ran nothing", "collected 0 items\n\n============================ no tests ran in 0.00s =============================", true},
		{"ruby load error", "<internal:/usr/lib/ruby/vendor_ruby/rubygems/core_ext/kernel_require.rb>:85:in `require': cannot load such file -- redis (LoadError)\n\tfrom -e:1:in `<main>'", true},
		{"ruby errno", "script_err.rb:2:in `read': No such file or directory @ rb_sysopen - /etc/app/none.yml (Errno::ENOENT)\n\tfrom script_err.rb:6:in `<main>'", true},
		{"patch ignored", "checking file app.conf\nUnreversed patch detected!  Ignore -R? [n]\nApply anyway? [n]\nSkipping patch.\n1 out of 1 hunk ignored", true},
		{"cmake error", "CMake Error: Could not create named generator Ninja Turbo\n\nGenerators\n  Unix Makefiles = Generates standard UNIX makefiles.", true},
		{"symfony console error", "In JsonFile.php line 347:\n\n  \"./composer.json\" does not contain valid JSON", true},
		{"eslint crash", "Oops! Something went wrong! :(\n\nESLint: 10.15.0\n\nNo files matching the pattern \"app/\" were found.", true},
		{"npm unknown command", "Unknown command: \"biuld\"\n\nTo see a list of supported npm commands, run:\n  npm help", true},
		{"go module lookup", "go: finding module for package example.net/m\nexample.com/pkg imports\n        example.net/m: cannot find module providing package example.net/m: no modules on example.net", true},
		{"sqlite import", "data/import.csv:3: expected 3 columns but found 2 - filling the rest with NULL\ndata/import.csv:3: INSERT failed: NOT NULL constraint failed: items.qty", true},
		{"sqlite import warned", "data/import.csv:3: expected 3 columns but found 2 - filling the rest with NULL", false},
		{"logrus fatal", `time="2026-11-28T18:44:19Z" level=fatal msg="unknown flag: --dest-tls-verfy"`, true},
		{"logrus error", `time="2026-11-28T18:44:19Z" level=error msg="retrying in 1s"` + "\nCopying blob sha256:d9fe85\nWriting manifest to image destination", false},
		{"hg abort", "abort: no username supplied\n(use 'hg config --edit' to set your username)", true},
		{"svn error code", "svn: E155007: '/home/dev/x' is not a working copy", true},
		{"go on windows paths", "# command-line-arguments\n.\\main.go:71:2: undefined: AppConfig\n.\\main.go:73:14: undefined: AppConfig", true},
		{"shellcheck marks", "In scripts/rotate_logs.sh line 7:\necho rotated `ls $dir | wc -l` files\n             ^---------------^ SC2046 (warning): Quote this to prevent word splitting.", true},
		{"vitest found nothing", " RUN  v3.2.7 /home/dev/invoice-api\n\nNo test files found, exiting with code 1", true},
		{"pytest deselected all", "collected 13 items / 13 deselected / 0 selected\n\n============================ 13 deselected in 0.05s ============================", true},
		{"pytest deselected some", "collected 13 items / 10 deselected / 3 selected\n\n=============== 3 passed, 10 deselected in 0.05s ===============", false},
		{"prettier check", "Checking formatting...\n[warn] src/invoice.ts\n[warn] Code style issues found in 4 files. Run Prettier with --write to fix.", true},
		{"prettier clean", "Checking formatting...\nAll matched files use Prettier code style!", false},
		{"gpg bad signature", "gpg: Signature made Sat Nov 28 21:11:52 2026 UTC\ngpg:                using EDDSA key B3C2B103AB60\ngpg: BAD signature from \"Release Bot <release@example.com>\" [ultimate]", true},
		{"gpg good signature", "gpg: Signature made Sat Nov 28 21:11:52 2026 UTC\ngpg: Good signature from \"Release Bot <release@example.com>\" [ultimate]", false},
		{"ruby namespaced exception", "/usr/share/rubygems-integration/all/gems/bundler-2.3.15/lib/bundler/resolver.rb:271:in `block in verify!': Could not find gem 'rubocop' in locally installed gems. (Bundler::GemNotFound)\n\tfrom /usr/share/x.rb:254:in `map!'", true},
		{"a program's notice of an unknown option", "Unknown option: level", false},
		{"ansible error", "[WARNING]: Could not match supplied host pattern, ignoring: db\nERROR! Specified inventory, host pattern and/or --limit leaves us with no hosts to target.", true},
		{"ansible recap without failures", "PLAY RECAP *****\nlocalhost : ok=3    changed=0    unreachable=0    failed=0    skipped=1", false},
		{"mocha exception", " Exception during run: Error: `.only` forbidden by --forbid-only\n    at createForbiddenExclusivityError (/home/dev/m/node_modules/mocha/lib/errors.js:444:13)", true},
		{"pnpm error", "Progress: resolved 1, reused 0, downloaded 0, added 0\n ERR_PNPM_FETCH_404  GET https://registry.npmjs.org/x: Not Found - 404", true},
		{"yamllint error", "lint.yml\n  1:11      error    trailing spaces  (trailing-spaces)\n  4:9       warning  truthy value should be one of [false, true]  (truthy)", true},
		{"yamllint warning", "k8s/kustomization.yaml\n  1:1       warning  missing document start \"---\"  (document-start)", false},
		{"yarn error", "yarn workspace v1.22.22\nerror Unknown workspace \"@tariffs/api\".\ninfo Visit https://yarnpkg.com/en/docs/cli/workspace for documentation about this command.", true},
		{"yarn done", "yarn install v1.22.22\n[1/4] Resolving packages...\nsuccess Already up-to-date.\nDone in 0.21s.", false},
		{"meson summary", "Ok:                 3\nExpected Fail:      0\nFail:               1\nUnexpected Pass:    0\nSkipped:            0\nTimeout:            0\n\nFull log written to /home/dev/r/build/meson-logs/testlog.txt", true},
		{"meson summary passed", "Ok:                 4\nExpected Fail:      1\nFail:               0\nUnexpected Pass:    0\nSkipped:            0\nTimeout:            0\n\nFull log written to /home/dev/r/build/meson-logs/testlog.txt", false},
		{"python exception after frames", "  File \"/usr/lib/python3/dist-packages/sqlalchemy/engine/default.py\", line 736, in do_execute\n    cursor.execute(statement, parameters)\nsqlalchemy.exc.OperationalError: (sqlite3.OperationalError) no such table: readingz\n[SQL: ALTER TABLE readingz ADD COLUMN humidity INTEGER]", true},
		{"git diff check", "pipeline/report.py:16: trailing whitespace.\n+x = 1", true},
		{"go mod tidy error", "go mod tidy: error loading go 1.16 module graph: github.com/a/b@v0.1.14 requires\n\tistio.io/istio@v0.0.0 requires", true},
		{"go unknown revision", "github.com/a/b imports\n        github.com/c/d: github.com/e/f@v1.0.1: reading github.com/e/f/go.mod at revision v1.0.1: unknown revision v1.0.1", true},
		{"rspec passed", "Finished in 1.2 seconds\n12 examples, 0 failures", false},
		{"minitest errors", "Finished in 0.01s\n5 runs, 9 assertions, 0 failures, 1 errors, 0 skips", true},
		{"minitest passed", "5 runs, 9 assertions, 0 failures, 0 errors, 0 skips", false},
		{"count of failed tests", "3 tests failed, 9 tests passed (12 total)", true},
		{"doctest failed", "1 items had failures:\n   1 of   2 in m.f\n***Test Failed*** 1 failures.", true},
		{"ansible recap failed", "PLAY RECAP *****\nweb1 : ok=4    changed=1    unreachable=0    failed=1    skipped=0", true},
		{"ansible recap unreachable", "PLAY RECAP *****\nweb1 : ok=0    changed=0    unreachable=1    failed=0", true},
		{"ansible recap ok", "PLAY RECAP *****\nweb1 : ok=4    changed=1    unreachable=0    failed=0    skipped=0", false},
		{"pytest progress with a failure", "collected 3 items\n\ntest_a.py .F.                                      [100%]\n", true},
		{"pytest progress passing", "collected 3 items\n\ntest_a.py ..s                                      [100%]\n\n2 passed, 1 skipped", false},
		{"pytest location of a failure", "    def test_x():\n>       assert f() == 2\n\ntest_a.py:7: AssertionError\n----- Captured stdout call -----\nhello", true},
		{"numpy mismatch", "Not equal to tolerance rtol=1e-07, atol=0\n\nMismatched elements: 2 / 3 (66.7%)\nMax absolute difference: 1.", true},
		{"program could not", "loading\nconfig: could not open settings.ini", true},
		{"program unable to", "wget: unable to resolve host address 'x.invalid'", true},
		{"python module missing", "/usr/bin/python3: No module named pytest", true},
		{"file already exists", "go: /src/app/go.mod already exists", true},
		{"psql notice already exists", "psql:init.sql:3: NOTICE:  relation \"t\" already exists, skipping\nCREATE TABLE", false},
		{"unknown predicate", "find: unknown predicate `-frob'", true},
		{"missing argument", "find: missing argument to `-name'", true},
		{"PROG error line", "\tzip warning: name not matched: a.*\n\nzip error: Nothing to do! (x.zip)", true},
		{"two spaces after a bare program", "unzip:  cannot find zipfile directory in one of x.zip", true},
		{"grep -r hit of indented source", "src/load.py:    raise IOError(\"cannot open config\")\nsrc/load.py:    # could not open: retry", false},
		{"go module lookup", "go: example.com/lib@v1.2.3: reading https://proxy.golang.org/example.com/lib/@v/v1.2.3.mod: 404 Not Found", true},
		{"go downloading is not an error", "go: downloading example.com/lib v1.2.3\ngo: added example.com/lib v1.2.3", false},
		{"go diagnostic in the middle", "go: downloading example.com/lib v1.0.0\nmain.go:3:8: no required module provides package example.com/lib", true},
		{"go vet passes, grep of go files", "main.go:12:\tif err != nil {\nmain.go:13:\t\treturn err", false},
		{"tsc non-pretty", "  src/index.ts(24,7): error TS2322: Type 'string' is not assignable to type 'number'.", true},
		{"webpack module not found", "ERROR in ./src/app.js\nModule not found: Error: Can't resolve './util' in '/src'", true},
		{"failure mark", "▶ math\n  ✔ adds (0.4ms)\n  ✖ divides (0.7ms)\n", true},
		{"eslint warnings only", "/src/a.js\n  3:7  warning  'x' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem (0 errors, 1 warning)", false},
		{"PowerShell error record", "Get-Item : Cannot find path 'C:\\x' because it does not exist.\nAt line:1 char:1\n+ Get-Item C:\\x\n+ ~~~~~~~~~~~~\n    + CategoryInfo          : ObjectNotFound: (C:\\x:String) [Get-Item], ItemNotFoundException", true},
		{"Tcl error", "can't read \"x\": no such variable\n    while executing\n\"puts $x\"\n    (file \"a.tcl\" line 1)", true},
		{"Error line after a prompt", "var.region\n  Enter a value: eu-west-1\n\nError: Invalid provider configuration\n\n  on main.tf line 3", true},
		{"qwen-code's empty error", "Command: ls\nDirectory: (root)\nStdout: a.txt\nStderr: (empty)\nError: (none)\nExit Code: 0", false},
		{"lower-case Error line is not enough", "checking inputs\nError: none found, using defaults\ndone", false},
		{"heap check", "start\nfree(): double free detected in tcache 2", true},
		{"sanitizer report", "=================================================================\n==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020", true},
		{"data race", "==================\nWARNING: DATA RACE\nRead at 0x00c0000a0 by goroutine 8:", true},
		{"perl module missing", "Can't locate Foo/Bar.pm in @INC (you may need to install the Foo::Bar module)\nBEGIN failed--compilation aborted at x.pl line 1.", true},
		{"py_compile's Sorry", "Sorry: IndentationError: unexpected indent (a.py, line 3)", true},
		{"opens with could not", "Could not read certificate from cert.pem\nUnable to load certificate", true},
		{"indented could not is a note", "Applying patches\n    Patch could not be applied with `git am`. Continuing without patching.\nBuild finished", false},
		{"script's last word with a number", "migrating 3 tables\nmigration 0042 failed: column users.email already exists", true},
		{"none failed at the end", "checked 12 hosts\n0 failed: all good", false},
		{"go usage footer", "go frob: unknown command\nRun 'go help' for usage.", true},
		{"connection failed at the end", "--2024-01-01 10:00:00--  http://127.0.0.1:9/\nConnecting to 127.0.0.1:9... failed: Connection refused.", true},
		{"OS error in capitals at the end", "stat /src/cmd/nosuch: directory not found", true},
		{"colored output", "\x1b[31mError: \x1b[39mCannot find module './x'\n\x1b[90m    at Module._resolveFilename (node:internal/modules/cjs/loader:1039:15)\x1b[39m", true},
		{"colored success", "\x1b[32m✓\x1b[39m 12 tests passed\n\x1b[1mDone in 1.2s\x1b[22m", false},
		{"error handling tests pass", "=== RUN   TestErrorHandling\n--- PASS: TestErrorHandling (0.00s)\nPASS\nok  \texample.com/x\t0.01s", false},
		{"zero errors", "compiling 12 files\n0 errors, 0 warnings\nbuild finished", false},
		{"kubectl validation", "The Deployment \"web\" is invalid: spec.template.spec.containers[0].image: Required value", true},
		{"kubectl applied", "deployment.apps/web configured\nservice/web unchanged", false},
		{"git fatal after progress", "Cloning into 'app'...\nfatal: repository 'https://example.com/app.git/' not found", true},
		{"ssh key refused", "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", true},
		{"PHP fatal in the middle", "Loading config\nPHP Fatal error:  Uncaught Error: Call to undefined function f() in /app/a.php:3", true},
		{"Elixir error", "Compiling 2 files (.ex)\n** (CompileError) lib/app.ex:3: undefined function foo/0", true},
		{"R error", "> source('a.R')\nError in f(x) : object 'y' not found\nExecution halted", true},
		{"Lua traceback", "lua: a.lua:3: attempt to call a nil value (global 'f')\nstack traceback:\n\t[C]: in ?", true},
		{"MySQL error", "ERROR 1064 (42000) at line 1: You have an error in your SQL syntax", true},
		{"Kotlin error", "e: file:///src/Main.kt:3:5 Unresolved reference 'x'.", true},
		{"program's Error:", "readcfg: Error: no section [db] in app.ini", true},
		{"program says what failed", "upload: checksum verification failed: size mismatch", true},
		{"program says none failed", "sync: 12 files copied, none failed", false},
		{"assembler Error", "a.s: Assembler messages:\na.s:3: Error: bad register name `%eaxx'", true},
		{"a kind of error first", "Runtime error (func=(main), adr=3): Divide by zero", true},
		{"a handled error first", "Handled error: invalid token (expected in this test)\ntests: 4 passed", false},
		{"syntax error after a location", "(standard_in) 1: syntax error", true},
		{"an ERROR badge", " WARN  deprecated flag\n ERROR  [object Object]", true},
		{"a quoted command failed", "Resolving: total 387, done\n`pnpm install --save-dev react` failed", true},
		{"prose about a failed command", "## Exit codes\n\nAny exit code but 0 means the command failed.\nSee the manual.", false},
		{"formatter check", "would reformat src/a.py\nOh no!\n1 file would be reformatted, 3 files would be left unchanged.", true},
		{"formatter done", "reformatted src/a.py\nAll done!\n1 file reformatted, 3 files left unchanged.", false},
		{"a build failed first", "Gradle build failed to produce an .apk file.", true},
		{"zero tests failed first", "0 tests failed, 12 tests passed (12 total)", false},
		{"a child's exit status", "Compiling app\n/usr/bin/dotnet compile-csc @app.rsp returned Exit Code 1\n\nCompilation failed.", true},
		{"a child's status in parentheses", "Running xcodebuild\nstep 1\nstep 2\nstep 3\nxcodebuild failed (exited with status: 65)\nSee the log above", true},
		{"a generator's exit status", "x.go:3: running \"false\": exit status 1", true},
		{"xcodebuild's failed commands", "** BUILD START **\nCompileC a.o a.c\nLd app\n\nThe following build commands failed:\n\tLd app normal arm64\n(1 failure)\nmake: done", true},
		{"bazel's target", "INFO: Analyzed target //:app\nINFO: Found 1 target...\nERROR: x\nTarget //:app failed to build\nUse --verbose_failures to see the command lines of failed build steps.\nINFO: Elapsed time: 1.2s", true},
		{"composer's resolution", "Loading composer repositories with package information\nUpdating dependencies\nYour requirements could not be resolved to an installable set of packages.\n\n  Problem 1\n    - foo/bar 1.0 requires php ^9\n  Problem 2\n    - x", true},
		{"a child that exited 0", "step 1\nrunner: child exited with code 0\nstep 2", false},
		{"an exception's name on its line", "Installing dependencies\n\n  ValueError\n\n  File /src/pkg-0.1.tar.gz does not exist\n\n  at cli.py:40 in __init__", true},
		{"a list of exception names", "builtins:\nValueError\nTypeError\nKeyError", false},
		{"a conditional sentence", "The deploy step stops if the health check failed.\nIt retries when the registry cannot be reached.", false},
		{"a short sentence of failure", "key1 already exists.\nOverwrite (y/n)? ", true},
		{"not in the search path", "Package libfoo was not found in the pkg-config search path.\nPerhaps you should add the directory containing `libfoo.pc'", true},
		{"not sorted", "join: a.txt:2: is not sorted: a 1", true},
		{"no longer supported", "'build flx' is no longer supported. Use 'build bundle' instead.", true},
		{"a sentence of failure in a long output", strings.Repeat("row ok\n", 10) + "the cache is not found here, rebuilding", false},
		{"a sentence of failure and a word of success", "remote cache could not be reached\nbuilt locally: done", false},
		{"a file list", "docs/not-found.md\nsrc/cannot_parse.go", false},
		{"GitHub Actions log", "2024-05-01T10:00:00.1234567Z Run make test\n2024-05-01T10:00:03.7654321Z ##[error]Process completed with exit code 2.", true},
		{"BuildKit log", "#7 0.512 go build ./...\n#7 3.104 make: *** [Makefile:12: build] Error 1", true},
		{"GitHub Actions log that passed", "2024-05-01T10:00:00.1234567Z Run make test\n2024-05-01T10:00:03.7654321Z ok  \texample.com/x\t0.2s", false},
		{"linter with an empty column", "a.go:22::error: unreachable code\na.go:9::warning: unused variable x", true},
		{"linter warnings only", "a.go:9::warning: unused variable x\na.go:13::warning: unused field y", false},
		{"shellcheck finding", "In run.sh line 3:\nrm $f\n   ^-- SC2086 (info): Double quote to prevent globbing and word splitting.", true},
		{"JVM exception with frames", "* Exception is:\norg.gradle.api.tasks.TaskExecutionException: Execution failed for task ':app:compileJava'.\n\tat org.gradle.api.internal.Task.run(Task.java:100)", true},
		{"a hook that failed", "check yaml...............................................Passed\nblack....................................................Failed\n- hook id: black", true},
		{"hooks that passed", "check yaml...............................................Passed\nblack....................................................Passed", false},
		{"grep hit of a log's error line", "logs/app.log:3:error: connection reset by peer", false},
		{"an app's log in a CI step", "2024-05-01T10:00:00.1234567Z 12:00:01 INFO starting\n2024-05-01T10:00:01.1234567Z ERROR db: connection refused, retrying\n2024-05-01T10:00:02.1234567Z INFO db connected", false},
		{"rustfmt check", "Diff in /src/lib.rs:1:\n-pub fn f() { 1 }\n+pub fn f() {\n+    1\n+}", true},
		{"too few", "mktemp: too few X's in template 'x'", true},
		{"capitalised Invalid", "truncate: Invalid number: '1Q'", true},
		{"no file found", "go: no go.work file found\n\t(run 'go work init' first)", true},
		{"non-integer argument", "expr: non-integer argument", true},
		{"compiler error on a Windows path", "C:\\src\\app\\build.zig:12:5: error: expected type 'u8', found 'i32'\n    const x: u8 = y;\n                  ^", true},
		{"a build tool's clock before each line", "(10:00:02) ERROR: /src/app/BUILD:3:1: Compiling a.cc failed: (Exit 1)\n(10:00:02) INFO: Elapsed time: 1.0s\n(10:00:02) FAILED: Build did NOT complete successfully", true},
		{"a build tool's clock, built", "(10:00:01) INFO: Found 1 target...\n(10:00:03) INFO: Elapsed time: 2.1s\n(10:00:03) INFO: Build completed successfully, 4 total actions", false},
		{"a FATAL record", "2024-03-01 10:00:00.123 UTC [4242] LOG:  starting PostgreSQL 16\n2024-03-01 10:00:00.124 UTC [4242] FATAL:  invalid value for parameter \"port\": \"abc\"\n2024-03-01 10:00:00.125 UTC [4242] LOG:  database system is shut down", true},
		{"a glog FATAL record", "I0301 10:00:00.000000    1 main.go:10] starting\nF0301 10:00:00.100000    1 main.go:22] Check cfg != nullptr\n*** Check failure stack trace: ***", true},
		{"ERROR records and a recovery", "2024-03-01 10:00:00.123 UTC [4242] ERROR:  relation \"t\" does not exist\n2024-03-01 10:00:01.000 UTC [4242] LOG:  checkpoint complete", false},
		{"glog retries, then the verdict", strings.Repeat("E0301 10:00:00.370393    9183 memcache.go:265] \"Unhandled Error\" err=\"couldn't get current server API group list: Get \\\"http://localhost:8080/api\\\": dial tcp 127.0.0.1:8080: connect: connection refused\"\n", 5) + "The connection to the server localhost:8080 was refused - did you specify the right host or port?", true},
		{"an error occurred", "\nAn error occurred (AccessDenied) when calling the PutObject operation: Access Denied", true},
		{"JSON Schema's report", "Failed validating 'additionalProperties' in schema['properties']['server']:\n" + strings.Repeat("    {'type': 'object', 'properties': {'port': {'type': 'integer'}}, 'additionalProperties': False}\n", 12) + "\nOn instance['server']:\n    {'port': 80, 'hots': 'x'}", true},
		{"not of the type", "/usr/bin/jsonschema:5: DeprecationWarning: the CLI is deprecated\n  from jsonschema.cli import main\nport: 'eighty' is not of type 'integer'", true},
		{"a kind of error after a path", "api/spec.yaml: Validation Error: 'info' is a required property", true},
		{"a checker's code first", "W3011 Both UpdateReplacePolicy and DeletionPolicy are needed\ntemplate.yaml:12:3", true},
		{"a checker's range", "t.yaml:5:5:5:15:E3003:'Role' is a required property", true},
		{"exiting due to", "doc.rst:3: (WARNING/2) Title underline too short.\nExiting due to level-2 (WARNING) system message.", true},
		{"while trying to open", "e2fsck 1.47.0 (5-Feb-2023)\nfsck.ext4: Bad magic number in super-block while trying to open /dev/sdb1", true},
		{"smaller than the minimum", "resize2fs 1.47.0 (5-Feb-2023)\nresize2fs: New size smaller than minimum (5120)", true},
		{"an unknown thing, quoted", "chrt: unknown policy \"frob\"\n" + strings.Repeat("  policy options listed in chrt(1)\n", 5), true},
		{"not in a format", "readpe: app.exe is not a valid PE file\n" + strings.Repeat("scanned section table\n", 5), true},
		{"a fatal error in a program's line", "app.timer: Timer configuration has fatal error, unit will not be started.", true},
		{"isn't supported", "This archive format isn't supported by this build of bsdtar", true},
		{"need to install", "You need to install the python3-venv package to use this command.", true},
		{"a count of failed tests alone", "Running 12 tests using 2 workers\n\n  2 failed\n    [chromium] › a.spec.ts:3:1 › login\n  10 passed (4.2s)", true},
		{"has a count of errors", "checking schema.xml\nschema.xml has 3 validation errors.", true},
		{"has no errors", "checking schema.xml\nschema.xml has 0 validation errors.", false},
		{"a JSON array of log lines", "[\n    \"ERROR upload to s3://logs/app timed out\",\n    \"WARN cache could not be reached\"\n]", false},
		{"go flag package", "flag provided but not defined: -verbose\nUsage of ./gen:\n  -v\tverbose output", true},
		{"go flag bad value", "invalid value \"x\" for flag -n: parse error\nUsage of ./gen:", true},
		{"error in the command line", "error in command line argument \"--frob\"\nusage: pkgtool -m mode [-options]", true},
		{"[error] first", "[error] src/app.js: SyntaxError: Unexpected token (3:5)", true},
		{"an unknown signal", "WINCHX: unknown signal; kill -l lists signals.", true},
		{"PROG: unknown signal", "pkill: HUPX: unknown signal", true},
		{"Go's io.EOF", "objread: EOF", true},
		{"EOF in a sentence", "reader: reached EOF after 12 records", false},
		{"a line that failed to parse", "units/app.conf:7: Failed to parse size: tenmegs", true},
		{"a line ignored", "units/app.service:7: Failed to parse timeout value, ignoring: 5x", false},
		{"the standard input's error", "troff:<standard input>:4: error: unknown escape sequence", true},
		{"the standard input's warning", "troff:<standard input>:4: warning: ignoring escape", false},
		{"an X tool's command line", "xprop: (argv):1:  bad format spec", true},
		{"a file's line and its complaint", "messages.po:12: unterminated string", true},
		{"a grep hit of prose", "docs/notes.md:3: missing tests for the parser", false},
		{"a count of broken links", "checking 40 links\n3 broken links found", true},
		{"no broken links", "checking 40 links\n0 broken links found", false},
		{"finished with errors", "[12:00:01]: deploy finished with errors\n\nLooking for help…", true},
		{"finished without errors", "build finished without errors", false},
		{"finished with no errors", "build finished with 0 errors", false},
		{"did not complete successfully", "==> Some builds didn't complete successfully and had errors:\n--> docker: timed out", true},
		{"unsatisfiable", "Because app depends on lib>=2 and no versions of lib match >=2, app's requirements are unsatisfiable.", true},
		{"failed with an error code", "ERROR: export: Project export failed with error code 3.\n   At: editor/export.cpp:12.", true},
		{"an error box", "Deploying...\n\n  Serverless Error ----------------------------------------\n\n  Bucket does not exist", true},
		{"a compiler's error heading", "-- NAMING ERROR ------------------------------------------- src/Main.elm\n\nI cannot find a `foo` variable:", true},
		{"an SQL dump's comment", "--\n-- PostgreSQL database dump\n--\nSET statement_timeout = 0;", false},
		{"a helper not installed", "gdb not found! Please install it first.", true},
		{"Error: [tag]", "Error: [vite]: Rollup failed to resolve import \"x\" from \"src/a.ts\".", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolFailed(tc.content); got != tc.want {
				t.Errorf("ToolFailed(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
}

func TestStripANSI(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                            "plain",
		"\x1b[31mred\x1b[0m":               "red",
		"\x1b[1;32mok\x1b[22m done":        "ok done",
		"a\x1b[2Kb":                        "ab",
		"cut at the end \x1b[":             "cut at the end ",
		"lone escape \x1b":                 "lone escape ",
		"other escape \x1b(Bx":             "other escape Bx",
		"\x1b[38;5;196mError\x1b[39m: bad": "Error: bad",
	} {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestToolFailedMessageShapes: shapes of failure messages that carry
// across tools (a status line, a parser's place, a linker's symbol, a
// synopsis alone) and the data that looks like them.
func TestToolFailedMessageShapes(t *testing.T) {
	tests := []struct {
		name, content string
		want          bool
	}{
		{"HTTP status line with headers", "404 Object Missing\nContent-Length: 0\nServer: nginx", true},
		{"a count that opens like a status", "404 files checked\nall fine", false},
		{"error and what it was doing", "Error creating converter for \"x.cnv\" from \"x.ucm\"", true},
		{"a heading on error handling", "Error handling in this module is described below", false},
		{"syntax error after a tool and a file", "m4:macros.m4:12: syntax error", true},
		{"a grep hit on syntax errors", "notes.txt:3:syntax error handling", false},
		{"an error at a range of columns", "typeerr.capnp:2:18-21: error: Integer value out of range.", true},
		{"an error at a GNU range of lines", "grammar.y:12.1-14.3: error: syntax error, unexpected ';'", true},
		{"an error at a GNU column", "grammar.y:12.5: error: symbol x is used, but is not defined", true},
		{"a grep hit after a range", "notes.txt:3:1-4:error: is a word here", false},
		{"error then a program's message", "building\nError: stack: Could not parse the resolver\n1\n2\n3\n4", true},
		{"exit code before a semicolon", "building\nerror: job 'build' failed with exit code 2;\n1\n2\n3\n4", true},
		{"a program could not", "reading\ncargo-deb: Could not read the manifest\nstopping\n1\n2\n3\n4", true},
		{"a program's thing not found", "probing\nmount.ext4: superblock signature not found\n1\n2\n3\n4", true},
		{"unknown thing named in quotes after words", "stty: unknown terminal mode 'raw2'\n1\n2\n3\n4", true},
		{"what was given does not contain", "objcopy: archive doesn't contain member 'x.o'\n1\n2\n3\n4", true},
		{"a limit exceeded", "checking names\nnamecheck: limit 4096 exceeded by line 12\n1\n2\n3\n4", true},
		{"a program's warning", "tool: warning: unknown field 'x' ignored\nwrote out.txt", false},
		{"a line that is missing something", "Line 7: unexpected token ')'", true},
		{"a file and a line in C's way", "\"rules.txt\", line 3: unknown keyword", true},
		{"a line that says all is well", "Line 7: all checks passed", false},
		{"a file and a line without quotes", "generating\nspec.x, line 1: expected ';'\n/*\n * generated\n */\n#include <rpc/rpc.h>", true},
		{"nothing found for a name", "No documentation found for 'nosuch'.\nUse help() for more.", true},
		{"a place and what failed there", "ui/main.glade:12:4  Failed to load image 'x.png'", true},
		{"a place and a note on failures", "notes.md:3:1  Failed tests are re-run", false},
		{"an undefined reference in a function", "main.o:main.c:function main: error: undefined reference to 'init'", true},
		{"an undefined reference at an offset", "x.c:(.text+0x1a): undefined reference to `g'\ncollect2 was told", true},
		{"prose on undefined references", "docs: an undefined reference to a symbol is a linker error", false},
		{"Julia's stack trace", "Stacktrace:\n [1] f()\n   @ Main ./a.jl:3", true},
		{"a stack trace that is none", "Stacktrace: none", false},
		{"a build file's ERROR", "Run-time dependency egl found: NO\n\nmeson.build:12:6: ERROR: Dependency \"egl\" not found\n\nA full log can be found at build/meson-log.txt", true},
		{"a grep hit on a build file's ERROR", "meson.build:12:6: ERRORS are reported below", false},
		{"an error named by its code", "Compiling\nError HHE1206: The import \"x.sol\" is trying to use an uninstalled npm dependency.\n\nFor more info go to https://example.org", true},
		{"a code that is no error's", "Error E1 is documented below", false},
		{"a tool encountered an error", "Build targets in project: 11\n\nMeson encountered an error:\nMultiple producers for Ninja target \"coverage\".", true},
		{"prose on encountering an error", "If the script encountered an error, it retries.", false},
		{"a banner of an error while installing", "#=== ERROR while installing foo.1.2 ===#\nfoo does not exist.", true},
		{"a tool's version then its error", "Generating...\njekyll 3.8.5 | Error:  Liquid syntax error (line 8)", true},
		{"a module's exception at the end", "  File \"core.py\", line 186, in main\n    f()\nresolvelib.resolvers.ResolutionImpossible: Unable to find a resolution", true},
		{"a module's name and a note at the end", "loaded\napp.models.User: 3 rows", false},
		{"a synopsis alone", "Usage: tool [-v] FILE", true},
		{"a synopsis over two lines", "Usage:\n    tool [-v] FILE", true},
		{"help with options", "Usage: tool [-v] FILE\n\nOptions:\n  -v, --verbose  say more\n  -h, --help     this help", false},
		{"a thing not found", "Module foo.bar not found.", true},
		// A file not in the tool's format, as the message after its name.
		{"a file in no format after its name", "unpack: data.bin: Not a .foo file", true},
		{"not a data file of a kind", "resdump: not an ICU data file: \"x.res\"", true},
		{"a note on what a file is not", "tool: note: not a data file, skipped", false},
		{"a message that opens with what is wrong", "unpack: data.bin: Unknown frame descriptor.", true},
		{"a count of unknown things", "unpack: Unknown frames: 0", false},
		{"com_err while opening", "dumpfs: img.bin: short read while opening filesystem", true},
		{"a warning while reading", "tool: warning: blank line while reading input", false},
		{"two names of one file", "cp: 'a.txt' and 'a.txt' are the same file", true},
		{"a sentence on one file", "Two links and their target are the same file", false},
		{"a program's error reading", "gencat: error reading file \"x.msg\"\n1\n2\n3\n4", true},
		{"a file not opened", "File trace.out not opened", true},
		{"a file opened", "File trace.out opened", false},
		{"an option that must be given", "llc: for the -o option: must be specified at least once!", true},
		{"a rule on what must be given", "If set, the name must be specified in full.", false},
		{"expected against what came", "Expected 4 rows, got 3.", true},
		{"what came as expected", "got 3 rows, as expected", false},
		{"a thing in quotes not available", "locale 'xx_XX.UTF-8' not available", true},
		{"a thing now available", "feature 'gpu' is now available", false},
		{"stopped because of errors", "compiling a.c\nbuilding terminated because of errors.", true},
		{"a make-like driver's target error", "reading\nscons: *** [out.o] Error 2\n1\n2\n3\n4", true},
		{"a heavy ballot X", "locking\n\u2718 Locking failed!\n1\n2\n3\n4", true},
		{"nothing usable could be found", "No usable default provider could be found for your system.\n\nVagrant relies on providers.\nInstall one.\nThen retry.\nOr read more.", true},
		{"no problems could be found", "No problems could be found.", false},
		{"a restricted shell's script line", "rksh: line 3: cd: restricted", true},
		{"a config file's line", "config: line 3: key: value", false},
		{"a complaint then the synopsis", "input and output must both be specified.\nUsage: gen [-v] IN OUT\n  -v  verbose", true},
		{"an error then the synopsis", "`cargo x` exited with an error: error: could not find `Cargo.toml`\n\nFormats the crate.\nUsage: cargo x [OPTIONS]\nOptions:\n  -q  quiet\n  -v  verbose", true},
		{"a description then the synopsis", "Checks files for invalid UTF-8.\nUsage: utf8check [OPTIONS] FILE\nOptions:\n  -q  quiet\n  -v  verbose", false},
		{"an exception after a progress line", "Solving environment ...\nResolveError: Package missing in current channels\n\nmore\nmore\nmore\nmore", true},
		{"a progress line then no error", "Loading...\nNo errors found", false},
		{"a compile report's last line", "Compiling x.py...\n*** Sorry: IndentationError: unexpected indent (x.py, line 2)", true},
		{"a record of tagged variables", "P: /devices/x\nE: DEVNAME=/dev/x\nE: MAJOR=1", false},
		{"ed's question mark", "?", true},
		{"untracked files' marks", "?? new.txt\n?? old.txt", false},
		{"a program, an object and why", "fetchmail: mail.example.org: Server busy, try later", true},
		{"a program, an object and a warning", "tool: config.yaml: Warning about deprecated keys", false},
		{"a program's note", "tool: note: Loaded 3 rules", false},
		{"a warning's missing file, then the list", "Warning: cache at /x/manifest: No such file or directory\n\nInstalled:\n  a 1.0\n  b 2.0", false},
		{"key not found as a description", "Inappropriate argument value (of correct type).\nMapping key not found.", false},
		{"an unknown thing named", "Unknown command \"deploy\".", true},
		{"unknown to a library", "cpu_bogus is unknown to the kernel", true},
		{"can not be found", "script engine can not be found", true},
		{"a bad magic number", "reading image\nbad magic number in image header", true},
		{"a row of two columns", "the deploy failed at 3\t\tthe deploy failed at 3", false},
		{"a warning line", "pip warn Unknown option \"x\" in config\nok", false},
		{"an ICU error code", "loading data\nerror loading data: U_FILE_ACCESS_ERROR", true},
		{"ICU's success code", "initialising\nICU init returned: U_ZERO_ERROR", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolFailed(tc.content); got != tc.want {
				t.Errorf("ToolFailed(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
}

// A file shown with its lines numbered (cat -n, nl, Claude Code's Read) or
// as opencode's read tool shows it is the file's text: the errors it quotes
// are no failure. A line that is not numbered is read as ever.
func TestToolFailedNumberedListing(t *testing.T) {
	for _, c := range []struct {
		name, content string
		want          bool
	}{
		{"Claude Code's Read of a Go file", "1\tpackage main\n2\t\n3\t// fails with: permission denied\n4\tfunc main() {}\n5\t", false},
		{"an arrow after the number", "     1\u2192Traceback (most recent call last):\n     2\u2192  File \"x.py\", line 3, in <module>\n     3\u2192ValueError: bad", false},
		{"cat -n of a build log", "     1\terror: could not compile `foo`\n     2\tmake: *** [all] Error 1", false},
		{"a reminder after the text", "1\tERROR: disk full\n\n<system-reminder>\nWhenever you read a file, consider whether it is malware.\n</system-reminder>\n", false},
		{"opencode's read of a file", "<path>/home/dev/app/main.py</path>\n<type>file</type>\n<content>\n1: import sys\n2: raise SystemExit(\"fatal: config missing\")\n\n(End of file - total 2 lines)\n</content>", false},
		{"opencode's read of a directory", "<path>/home/dev/app</path>\n<type>directory</type>\n<entries>\nerrors/\nfailed_jobs.log\n\n(2 entries)\n</entries>", false},
		{"a path in tags then an error", "<path>/home/dev/app</path>\nError: permission denied", true},
		{"cat -n of a file and a missing one", "     1\tok\ncat: b.txt: No such file or directory", true},
		{"a count is no line number", "3 errors found\nbuild failed", true},
		{"a number and a space", "running\n2 failed", true},
	} {
		if got := ToolFailed(c.content); got != c.want {
			t.Errorf("%s: ToolFailed = %v, want %v", c.name, got, c.want)
		}
	}
}

// A file reader's text is the file's: it says the tool failed only as a
// short complaint or by its JSON fields.
func TestFileTextFailed(t *testing.T) {
	for _, c := range []struct {
		name, content string
		want          bool
	}{
		{"a Go file that quotes an error", "package main\n\n// fails with: permission denied\nfunc main() {}\n", false},
		{"a log file", "2024-01-01 ERROR db: connection refused\n2024-01-01 INFO retrying\n2024-01-01 FATAL giving up\n", false},
		{"a traceback kept in a file", "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nValueError: bad\n", false},
		{"the reader's complaint", "Error: File not found: /home/dev/work/main.go", true},
		{"the reader's complaint on two lines", "Error: ENOENT: no such file or directory, open '/x'\n", true},
		{"a one-line file that reads as success", "v1.2.3", false},
		{"a one-line Go module file", "module example.com/shop", false},
		{"Claude Code's Read of a one-line file that names errors", "1\tERROR: see errors.go", false},
		{"qwen-code's missing file", "File not found: /home/dev/work/missing.go", true},
		{"qwen-code's relative path", "File path must be absolute, but was relative: relative/x.go. You must provide an absolute path.", true},
		{"qwen-code's directory", "Path is a directory, not a file: /home/dev/work", true},
		{"qwen-code's missing parameter", "params must have required property 'file_path'", true},
		{"fields that say it failed", "[\n  {\n    \"query\": \"read_file a.txt\",\n    \"error\": \"File not found\",\n    \"success\": false\n  }\n]", true},
		{"nothing", "  \n", false},
	} {
		if got := FileTextFailed(c.content); got != c.want {
			t.Errorf("%s: FileTextFailed = %v, want %v", c.name, got, c.want)
		}
	}
}
