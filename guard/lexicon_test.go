package guard

import "testing"

// TestEndEvidence: an output no tool rule knows is read by its last lines,
// in the languages every tool borrows, and a word of success there wins.
func TestEndEvidence(t *testing.T) {
	tests := []struct {
		name, content string
		want          bool
	}{
		// The operating system's words.
		{"strerror after tool and object", "copying…\nrsync: link_stat \"/src/x\" failed: No such file or directory (2)\nsent 20 bytes\nwritten: hosts.new: Read-only file system", true},
		{"strerror of the resolver", "resolving mirror…\nfetch: mirror.example: Temporary failure in name resolution", true},
		{"errno name after Error", "loading config\nError: EACCES: permission denied, open '/etc/app.conf'", true},
		{"errno name as a code", "request sent\n  code: 'ECONNREFUSED',\n  port: 5432", true},
		{"python errno", "reading input\nOSError: could not read [Errno 5] Input/output error", true},
		{"rust os error", "writing cache\ncould not write cache (os error 28)", true},
		{"an errno name in prose is no error", "EACCES and ENOENT are the two errno values this module maps", false},
		// HTTP.
		{"HTTP status with its reason", "GET /api/items\n<- 503 Service Unavailable", true},
		{"HTTP success", "GET /api/items\n<- 200 OK", false},
		{"a reason phrase without a status", "the page said Not Found once", false},
		// Diagnostic prefixes.
		{"sbt error lines", "[info] compiling 3 Scala sources\n[error] 2 errors found\n[error] (Compile / compileIncremental) Compilation failed", true},
		{"Maven error last", "[INFO] Scanning for projects...\n[ERROR] The goal you specified requires a project to execute", true},
		{"tool error prefix", "reading keystore\nkeytool error: java.io.IOException: keystore password was incorrect", true},
		{"E: prefix", "Reading package lists...\nE: Unable to locate package nosuch", true},
		{"FAILED alone", "running checks\nFAILED", true},
		{"python logging error as the last word", "ERROR:sync:upstream returned 503, giving up after 3 retries", true},
		{"python logging error before a last word", "ERROR:sync:upstream returned 503, retrying\ndone", false},
		{"a level first, not last", "scheduler started\n[ERROR] job 17 failed: upstream timeout\n[INFO] job 17 retried\nfinished", false},
		{"a timestamped error record last", "12:00:01 starting\n2024-05-01 12:00:02 ERROR cache unavailable", false},
		// Counts.
		{"errors found", "Inspecting 2 files\n2 files inspected, 3 offenses detected", true},
		{"failed count alone", "running 12 checks\n3 failed", true},
		{"files with problems", "lint: 2 files with problems", true},
		{"no errors found", "Checked 12 files\n0 errors found", false},
		// Checkers' findings.
		{"linter finding with a code", "repro.py:1:89: E501 line too long (110 > 88 characters)", true},
		{"a grep hit is no finding", "src/app.py:12:4: error_count = 0", false},
		// Success outweighs.
		{"success word after an error line", "> Task :compileJava\nerror: retrying with a mirror\nBUILD SUCCESSFUL in 4s", false},
		{"zero errors", "ERROR SUMMARY below\nerrors: 0", false},
		// Documents and what would happen.
		{"a list item", "Common errors, by how often we see them:\n1. build\n2. deploy\n3. tests\n4. docs\n- error: the file changed", false},
		{"a fenced block", "Look for:\n```\nError: EACCES: permission denied\n```\nthen fix the mode", false},
		{"a conditional", "notes\nif the upstream is down you will see 503 Service Unavailable", false},
		// The last sentence.
		{"last sentence says it failed", "Spider mode enabled.\nConnecting... connected.\nHTTP request sent, awaiting response... 404\nRemote file does not exist -- broken link!!!\nthat is all\nreally\nRemote file does not exist -- broken link!!!", true},
		{"last sentence negated", "checking links\nlink 1\nlink 2\nlink 3\nlink 4\nno link failed", false},
		{"last sentence with success beside it", "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nretry of step 3 succeeded\ncould not reach the cache, used the disk", false},
		// A program's line anywhere, in the operating system's words.
		{"program line with a strerror", "step 1\nstep 2\nstat: /srv/data/link: Too many levels of symbolic links\nstep 3\nstep 4\nstep 5\nstep 6", true},
		{"program line: does not exist", "step 1\nstep 2\nchage: user 'bob' does not exist in /etc/passwd\nstep 3\nstep 4\nstep 5\nstep 6", true},
		// Words of failure in the last sentence.
		{"last sentence: incorrect", "opening store\nreading entries\nchecking\nverifying\nsigning\nthe keystore password was incorrect", true},
		{"last sentence: gave up", "try 1\ntry 2\ntry 3\ntry 4\ntry 5\ngave up after 5 tries", true},
		{"as expected", "invalid JSON rejected as expected: SyntaxError", false},
		{"a line of code", "def load(path):\n    try:\n        return json.load(f)\n    except ValueError as e:\n        pass\n    raise ValueError(f\"invalid config: {e}\") from e", false},
		{"a format string", "error\nerror canonicalizing %s\ncannot access %s\ncannot open directory %s", false},
		{"a list of messages", "error\ncannot make directory\nfailed to get attributes\nfailed to preserve times\nfailed to preserve ownership\ncannot make both hard and symbolic links\ncannot preserve security context without an SELinux-enabled kernel", false},
		// Data that uses the words.
		{"a table of errno names and texts", "EPERM: Operation not permitted\nENOENT: No such file or directory\nEACCES: Permission denied", false},
		{"commit subjects", "docs: list the errors the CLI prints\nrevert: 'retry on connection refused'\nfix: handle a missing config file", false},
		{"counts of zero", "checked 12 files\nerrors: 0\nfailed: 0", false},
		{"a labelled count of zero", "clients: 2\nthreads: 1\ntries: 1\nper client: 20\nprocessed: 40/40\nnumber of failed transactions: 0 (0.000%)", false},
		// Line prefixes of build services.
		{"Open Build Service seconds", "[   10s] + make\n[   12s] gcc -c x.c\n[   14s] error: Bad exit status from /var/tmp/rpm-tmp.x (%build)", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToolFailed(tc.content); got != tc.want {
				t.Errorf("ToolFailed(%q) = %v, want %v", tc.content, got, tc.want)
			}
		})
	}
}
