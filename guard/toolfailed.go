package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/guard/internal/failmodel"
)

// where a tool rule looks.
type where int

const (
	jsonField where = iota // a top-level field of a JSON object (or of its "metadata" object)
	headJSON               // a JSON object that opens one of the first headCount lines and runs to the end, judged by the jsonField rules
	firstLine              // the first non-empty line (and, with next, the second)
	headLines              // each of the first headCount non-empty lines
	lastLines              // each of the last tailLines non-empty lines
	lastLine               // the last non-empty line
	anyLine                // every non-empty line outside fenced code blocks (and, with next, the line after it)
)

// headCount is how many leading lines headLines rules look at: agents wrap
// a command's output in a header of their own (Codex: "Chunk ID: …",
// "Wall time: …", then "Process exited with code 1").
const headCount = 4

// tailLines is how many trailing lines lastLines rules look at: test
// runners, build tools and agents (OpenHands' "[The command completed with
// exit code 1.]" and the three lines after it) put their verdict there.
const tailLines = 8

// maxRuleLine caps the bytes of a line that rules look at.
const maxRuleLine = 512

// maxScan caps the bytes anyLine rules read: beyond it they read the first
// and the last maxScan/2 bytes.
const maxScan = 1 << 20

// toolRule is one row of toolRules.
type toolRule struct {
	name       string
	where      where
	keys       []string          // jsonField: the field names
	value      func([]byte) bool // jsonField: does the raw value say failed?
	re         *regexp.Regexp    // text rules: the line
	next       *regexp.Regexp    // firstLine, anyLine: when set, the next non-empty line must match it too
	notAfter   *regexp.Regexp    // anyLine: when set, the previous non-empty line must not match it
	also       *regexp.Regexp    // text rules: when set, the line must match it too (run only on lines re matched: re stays small and fails fast)
	alsoFn     func(string) bool // text rules: when set, the line must satisfy it too (as also, for a test no one regex says cheaply)
	unless     *regexp.Regexp    // text rules: when set, a line that matches it does not match the rule
	literal    string            // text rules: when set, a line without it cannot match (spares an unanchored regex)
	lits       []string          // text rules: set at init when known, a line without one of them cannot match re (see ruleLiterals)
	foldLits   bool              // lits are lower case, held in any case (re matches them case-insensitively)
	pre        func(string) bool // text rules: when set, a line it rejects cannot match (spares the regex a common line)
	col0       bool              // text rules: the line must not be indented
	located    bool              // anyLine: the line's first word ends with ':' and a space ("x.c:4:5: …", "mkdir: …")
	code       bool              // text rules: group 1 is an exit code, and decides: failed when not 0, succeeded when 0
	ok         bool              // text rules: a match says the tool succeeded
	first      byteSet           // text rules: the bytes a match can begin with, when filter is set
	filter     bool
	nextByte   byteSet // with next: the bytes a match of next can begin with, when nextFilter is set
	nextFilter bool
}

var exitKeys = []string{"exit_code", "exitCode", "exitcode", "returncode", "return_code", "returnCode", "exit_status", "exitStatus"}

// exitCodeRe matches a line that opens with an exit code statement
// ("Exit code: 1", "exit status 2", "Process exited with code 1",
// "[The command completed with exit code 1.]"); group 1 is the code.
const exitCodeRe = `(?i)^(?:[\[(]\s*)?(?:(?:error:\s*)?(?:the\s+)?(?:process|command|program|script|job|task|shell)\b[^:\n]{0,30}?\s)?(?:exit(?:ed)?(?: with)?(?: exit)? (?:code|status)\s*[:=]?\s*|(?:return ?code|exit_?code)(?::\s*|=)|exited with\s*)\(?(-?\d+)`

// toolRules decide whether a role:"tool" message says the tool failed. The
// first rule that matches decides; when none matches the tool succeeded.
// The order is the order of trust:
//
//  1. A JSON object is judged by its fields (when it has none of them, by
//     the text of its "output", "stderr", "result" or "content").
//  2. Agent wrappers: an exit code in the header or trailer an agent puts
//     around a command's output (Codex, OpenHands, qwen-code, Claude Code,
//     SWE-agent), decisive both ways, and the agents' own error messages.
//  3. Verdicts at the end of the output: a test runner or build tool that
//     says it failed, then one that says it passed.
//  4. How the output opens: a traceback, "Error:", "fatal:", an exception...
//  5. How it ends: an exception, a crash.
//  6. Anywhere in the output, at the start of a line outside fenced code: a
//     traceback, a compiler error, a test failure, an SQL error... — shapes
//     only a failure prints, never a word: a grep hit on "error", a log
//     line at ERROR level, a test named TestError do not count.
//
// Performance: a rule's regex keeps its "^" outside any alternation: Go's
// regexp treats a regex as anchored only then, and otherwise tries it at
// every offset of the line (a few µs per line where an anchored one fails
// at once). Anchored rules also get a first-byte filter (see firstBytes),
// so a line is rejected without running the regex when it cannot begin a
// match; an anyLine rule must have one (init checks), and those whose
// first byte is anything carry a literal the line must contain. anyLine
// rules come last and all say failed.
var toolRules = []toolRule{
	// 1. JSON objects.
	{name: "json error", where: jsonField, keys: []string{"error"}, value: jsonNonEmpty},
	{name: "json errors", where: jsonField, keys: []string{"errors"}, value: jsonNonEmpty},
	{name: "json is_error", where: jsonField, keys: []string{"is_error", "isError"}, value: jsonTrue},
	{name: "json status", where: jsonField, keys: []string{"status"}, value: jsonFailStatus},
	{name: "json success/ok false", where: jsonField, keys: []string{"success", "ok"}, value: jsonFalse},
	{name: "json exit code", where: jsonField, keys: exitKeys, value: jsonNonZero},
	{name: "json HTTP status", where: jsonField, keys: []string{"status_code", "statusCode", "http_status"}, value: jsonHTTPError},
	{name: "json GitHub API error", where: jsonField, keys: []string{"documentation_url"}, value: jsonNonEmpty},

	// 2. Agent wrappers.
	{name: "exit code", where: headLines, re: mustRe(exitCodeRe), code: true},
	{name: "OpenHands observation", where: firstLine, re: mustRe(`^\*\*CmdOutputObservation \([^)\n]*\bexit code=(-?\d+)`), code: true},
	{name: "mini-swe-agent returncode", where: firstLine, re: mustRe(`^<returncode>(-?\d+)</returncode>`), code: true},
	{name: "exit code at end", where: lastLines, re: mustRe(exitCodeRe), code: true},
	{name: "embedded JSON result", where: headJSON},
	{name: "tool_use_error", where: firstLine, re: mustRe(`^<tool_use_error>`)},
	{name: "edit tool error", where: firstLine, re: mustRe(`^(?:No replacement was performed|String to replace not found|old_string not found|oldString not found in content|Found (?:\d+|multiple) matches (?:of the string to replace|for oldString)|Failed to edit,|Invalid (?:arguments?|parameters?|params)\b|Unknown tool\b|apply_patch verification failed\b)`)},
	{name: "agent timeout at end", where: lastLines, re: mustRe(`^(?:\[The command timed out after|Command timed out after)`)},
	{name: "agent error message", where: firstLine, re: mustRe(`^(?:# Fix any errors below\b|Your proposed edit has introduced new syntax error|The command '.*' was cancelled because it took more than|\[The command timed out after|Command timed out after|Tool "[^"\n]+" not found in registry|Error executing tool [^:\n]+: )`)}, // the last: Continue's

	// 3. Verdicts at the end.
	{name: "go test FAIL", where: lastLines, re: mustRe(`^FAIL\b`)},
	{name: "failed summary", where: lastLines, re: mustRe(`^(?:=+ .*\b[1-9]\d* (?:failed|errors?)\b|(?:\d+ [a-z]+, )*[1-9]\d* (?:failed|errors?)(?:, \d+ [a-z]+)* in [\d.]+s\b|Found [1-9]\d* errors?\b|Tests?:?\s+[1-9]\d* failed\b|Test (?:Files|Suites):?\s+[1-9]\d* failed\b|[1-9]\d* (?:failing|fail)$|FAILED \((?:failures|errors)=|test result: FAILED\b|[1-9]\d* Error\(s\)$|(?:FAILURES|ERRORS)!$|Tests: \d+, Assertions: \d+, (?:Errors|Failures): [1-9]|Errors while running CTest$|=+ no tests ran in [\d.]+s =+$|(?:=+ )?\d+ deselected in [\d.]+s\b|\[warn\] Code style issues found\b|Coverage failure: total of )`)}, // PHPUnit, CTest; pytest exits 5 when it ran nothing
	{name: "count of failures", where: lastLines, re: mustRe(`^(?:\d+ (?:examples?|tests?|runs?|specs?|scenarios?|steps?)(?:, \d+ \w+)*, [1-9]\d* (?:failures?|errors?)\b|[1-9]\d* (?:tests?|specs?|examples?|checks?|scenarios?|steps?|(?:test )?suites?|assertions?) (?:failed|failing)\b|\*\*\*Test Failed\*\*\* [1-9]|[1-9]\d* files? would be reformatted\b)`)},                                                                                                                                                                                                                                                                 // RSpec, minitest, doctest, black
	{name: "play recap failed", where: lastLines, literal: "failed=", re: mustRe(`\bunreachable=(?:[1-9]\d*\s+failed=\d+|\d+\s+failed=[1-9])`)}, // Ansible's PLAY RECAP
	{name: "things found broken", where: lastLines, re: mustRe(`^[1-9]\d* (?:broken|invalid|missing|unresolved|dangling|corrupt(?:ed)?|bad) [\w()-]+(?: [\w()-]+)? (?:found|detected)\b`)},
	{name: "problems summary", where: lastLines, literal: " problem", re: mustRe(`\b[1-9]\d* problems? \([1-9]\d* errors?`)},
	{name: "build error at end", where: lastLines, re: mustRe(`^(?:error: (?:could not compile|aborting due to|test failed\b)|npm (?:ERR!|error) |make(?:\[\d+\])?: \*\*\* |(?:error |ELIFECYCLE\s+)?(?:Command|Test) failed\b|\[ERROR\] (?:-> \[Help 1\]|\[Help 1\] |Re-run Maven\b|For more information about the errors\b|Failed to execute goal\b)|ERROR: failed to (?:solve|build)\b|BUILD FAILED\b|Automatic merge failed\b|curl: \(\d+\) )`)},
	// A run's own last words that it did not end well ("fastlane finished
	// with errors", "Some builds didn't complete successfully").
	{name: "ended with errors", where: lastLines, literal: " with error", re: mustRe(`\b(?:[Ff]inished|[Cc]ompleted|[Ee]nded|[Dd]one|[Ee]xited|[Tt]erminated) with (?:[1-9]\d* )?errors?\b`),
		unless: mustRe(`\b(?:without|with 0|with no) errors?\b`)},
	{name: "not completed successfully", where: lastLines, literal: " successfully", re: mustRe(`\b(?:didn't|did not|couldn't|could not|failed to) (?:complete|finish|succeed|run|build) successfully\b`)},
	// A resolver that proves the requirements cannot be met (uv, pip,
	// poetry, conda).
	{name: "unsatisfiable", where: lastLines, literal: "unsatisfiable", re: mustRe(`\b(?:requirements?|dependencies|constraints|specifications?) (?:are|is) unsatisfiable\b`)},
	{name: "failed with error code", where: lastLines, literal: "ailed with error code", re: mustRe(`\b[Ff]ailed with error code:? [1-9]`)},
	{name: "go module lookup", where: lastLines, re: mustRe(`\S: (?:cannot find module providing package|unknown revision) \S|^go(?: [a-z]+){1,2}: error \w`)},                                 // go build, go mod tidy
	{name: "yarn error", where: lastLines, literal: "info Visit https://yarnpkg.com/", re: mustRe(`^info Visit https://yarnpkg\.com/en/docs/cli/\S+ for documentation about this command\.$`)}, // printed after an error only
	{name: "meson test summary", where: lastLines, re: mustRe(`^(?:Fail|Timeout|Unexpected Pass): +[1-9]\d*$`)},
	{name: "qualified exception", where: lastLines, re: mustRe(`^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Error|Exception): \S`)}, // sqlalchemy.exc.OperationalError: …, java.lang.IllegalStateException: …
	{name: "tests passed", where: lastLines, ok: true, re: mustRe(`^(?:(?:=+ )?\d+ passed(?:, \d+ [a-z]+)* in [\d.]+s\b|test result: ok\.|Tests:\s+(?:\d+ [a-z]+, )*\d+ passed, \d+ total$|Tests\s+\d+ passed \(\d+\)$|ok\s+\S+\s+(?:[\d.]+s|\(cached\))|PASS$|OK(?: \([\w=, ]+\))?$|Success: no issues found in \d+ source files?$|(?:\[INFO\] )?BUILD SUCCESS(?:FUL in \S+)?$|\d+ (?:examples?|runs?), (?:\d+ assertions?, )?0 failures(?:, 0 errors)?(?:, \d+ (?:pending|skips?))?$|100% tests passed, 0 tests failed out of \d+$)`)}, // pytest, cargo, jest, vitest, go, PHPUnit, mypy, Maven, Gradle, RSpec, minitest, CTest

	// 4. How the output opens.
	{name: "python traceback", where: firstLine, re: mustRe(`^Traceback \(most recent call last\):`)},
	{name: "error prefix", where: firstLine, re: mustRe(`^(?:Error|ERROR|error)(?:\[[\w-]+\])?:(?:\s|$)`)}, // not "ERROR:root:…", a log record
	{name: "error while doing", where: firstLine, re: mustRe(`^(?:[Ee]rror|ERROR) (?:\w+ing|while|during|occurred|in tool|in (?:the )?(?:command[- ]line|arguments?|options?)|response from daemon|from server)\b`),
		unless: mustRe(`^\w+ (?:handling|reporting|logging|tracking|checking|recovery|messages?)\b`)}, // "Error creating converter for …"; not a heading's "Error handling"
	{name: "package manager error", where: firstLine, re: mustRe(`^(?:error (?:[A-Z]|TS\d)|npm ERR!|npm error\b|E: |ERR_PNPM_\w+|\[(?:ERROR|[Ee]rror)\] |Usage Error: )`)},
	{name: "fatal or panic", where: firstLine, re: mustRe(`^(?:(?:fatal|FATAL|Fatal)(?: error)?:|panic:|PHP (?:Fatal|Parse) error:|(?:Fatal|Parse) error:)`)},
	{name: "exception", where: firstLine, re: mustRe(`^(?:(?:Uncaught|Unhandled) (?:exception\.? |rejection )?)?(?:[A-Za-z_$][\w$]*\.)*(?:[A-Z][\w$]*)?(?:Error|Exception|Exit|Interrupt|Fault)\b(?::|\s*$| in thread| \[)`)},
	{name: "labelled exception", where: firstLine, re: mustRe(`^(?:Sorry|ERROR|Error|error|FATAL|Fatal|fatal): (?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception)\b(?::|\s*$)`)}, // py_compile's "Sorry: IndentationError: …"
	{name: "unhandled", where: firstLine, re: mustRe(`^(?:Uncaught|Unhandled)\b`)},
	{name: "command failed", where: firstLine, re: mustRe(`^(?:Command failed\b|Command (?:exited|returned) (?:with )?(?:a )?non-zero)`)},
	{name: "shell error", where: firstLine, re: mustRe(`^(?:/(?:usr/)?bin/)?(?:(?:ba|z|da|fi|k)?sh(?:: line \d+|: \d+)?|[a-z]*sh: line \d+): `)}, // and any other shell with the script's line (rbash's "line 1: cd: restricted")
	{name: "command error", where: firstLine, re: mustRe(`^[\w./-]+: (?:[^:\n]+: )?(?:No such file or directory|Permission denied|command not found|cannot (?:access|open|stat|remove|create)|can't open file|Is a directory|Not a directory|not found$|Connection refused|Could not resolve host)`), unless: noteFirst},
	{name: "os error", where: firstLine, re: mustRe(`^(?:[Pp]ermission denied|No such file or directory|Access denied|Operation not permitted)\b`)},
	{name: "failed", where: firstLine, re: mustRe(`^(?:(?:FAIL|FAILED|FAILURE)\b|BUILD FAILED|Build failed|Compilation failed|Failed to compile|[Ff]ailed to \w|Failed:)`)},
	{name: "a step failed", where: firstLine, literal: " failed", re: mustRe(`^(?:[A-Za-z]\S* ){0,2}(?:build|compilation|installation|install|deployment|deploy|migration|tests?) failed\b`), unless: tabRun}, // "Gradle build failed to …"
	{name: "eslint error", where: firstLine, literal: "[Error/", re: mustRe(`^[^\s:]+:\d+:\d+: .*\[Error/`)},                                                                                                  // eslint -f unix
	{name: "go diagnostic", where: firstLine, re: mustRe(`^(?:\.{0,2}[/\\])?[\w./\\-]+\.go:\d+:\d+: \S`)},                                                                                                     // go vet, staticcheck, golangci-lint
	{name: "HTTP status line", where: firstLine, re: mustRe(`^[45]\d\d [A-Z][A-Za-z' -]*$`), next: mustRe(`^[A-Z][\w-]*: \S`)},                                                                                // libwww-perl's "404 File not found" and the headers under it
	{name: "HTTP error status", where: firstLine, re: mustRe(`^(?:HTTP/[\d.]+ [45]\d\d\b|Request failed with status code:? [45]\d\d\b|\(error\) )`)},
	{name: "invalid object", where: firstLine, re: mustRe(`^The (?:request|[A-Z]\w* "[^"\n]+") is invalid: `)},                                                                                                                                                                                                                      // kubectl's validation
	{name: "usage error", where: firstLine, re: mustRe(`^(?:Error: )?(?:unknown (?:shorthand )?flag: |unknown command "|flag needs an argument: |invalid argument "|accepts \d+ arg\(s\), received \d+|requires (?:at least |exactly )?\d+ arg)|flag provided but not defined: -|invalid (?:boolean )?value "[^"\n]*" for flag -`)}, // Go CLIs (cobra): docker, kubectl, gh; Go's flag package
	{name: "could not", where: firstLine, re: couldNot, unless: negatedFailure},
	{name: "not installed", where: firstLine, literal: "lease install", re: mustRe(`^[\w.+-]+ (?:not found|is not installed|isn't installed)[.!]? [Pp]lease install\b`)}, // "lldb not found! Please install it."
	{name: "unknown name", where: firstLine, literal: ": unknown ", re: mustRe(`^\S+: unknown (?:signal|option|command|flag|argument|action|operator)\b`)},               // killall's "FOO: unknown signal; …"
	{name: "ed's question mark", where: firstLine, re: mustRe(`^\?$`)},                                                                                                   // ed's and red's one word for every error
	{name: "formatter diff", where: firstLine, re: mustRe(`^Diff in \S+(?: at line \d+)?:(?:\d+:)?$`)},                                                                   // cargo fmt --check
	{name: "kind of error", where: firstLine, re: mustRe(`^(?:Runtime|Internal|Fatal|Unexpected|Unknown|Unhandled|Network|Connection|Server|Database|Configuration|Config|Compile|Compilation|Build|Linker|Link|Memory|System|Application|Authentication|Permission|Timeout|Validation|Input|Import|Module|Type|Reference|Range|Value|Key|Index|Assertion|IO|I/O|OS) error\b(?: ?[:(,]| in | at |$)`)}, // "Runtime error (…)", "Internal error: …"
	{name: "os error first", where: firstLine, pre: endsWithOSError, re: osErrorLine, unless: notOSErrorOrNote},
	// An exception named with its message right after the line a tool
	// prints while it works ("Fetching package metadata ………", then
	// conda's "PackageNotFoundError: Package not found: …").
	{name: "exception after progress", where: firstLine, re: mustRe(`^[A-Z][^\n]*?(?:\.{3,}|…)\s*(?:done|failed)?$`),
		next: mustRe(`^(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception): \S`)},

	// 5. How the output ends.
	{name: "exception at end", where: lastLine, col0: true, re: mustRe(`^(?:(?:(?:Uncaught|Unhandled) )?(?:[A-Za-z_$][\w$]*\.)*(?:[A-Z][\w$]*)?(?:Error|Exception)(?: \[\w+\])?: \S|KeyboardInterrupt$)`)},
	// An exception a library names for what went wrong, qualified by its
	// module ("resolvelib.resolvers.ResolutionImpossible: Unable to …"):
	// the last line of a traceback whose head was cut off.
	{name: "qualified exception at end", where: lastLine, col0: true, re: mustRe(`^(?:[a-z_][a-z0-9_]*\.)+[A-Z][a-z]\w*: [A-Z]`)},
	{name: "crash", where: lastLines, re: mustRe(`^(?:\S*sh: line \d+:\s+)?(?:\d+\s+)?(?:Segmentation fault|Bus error|Killed|Aborted|Illegal instruction|Floating point exception)\b`)},
	{name: "Node.js crash footer", where: lastLine, col0: true, re: mustRe(`^Node\.js v\d+\.\d+\.\d+$`)},
	// A script's own last word (sys.exit("deploy failed: …"), "1 test
	// failed"), not a log record nor "none failed".
	{name: "failed at end", where: lastLine, literal: "ailed", re: mustRe(`^(?:(?:[^:\n]*\s)?[\w./-]*\w (?:failed|FAILED): \S|(?:\S+ ){0,3}\w*[A-Za-z_][\w./-]* (?:failed|FAILED)[.!]?$|[\x60'"][^\x60'"\n]+[\x60'"] (?:failed|FAILED)[.!]?$)`),
		unless: mustRe(`^(?:[-*+>#|]|\S+:\d+:)|\b(?:ERROR|WARN(?:ING)?|INFO|DEBUG|TRACE|CRITICAL|level=)\b|^\d{2,4}[-/:]\d|(?i:\b(?:no|none|nothing|zero|never|not|0)\s+(?:\w+\s+)?failed\b)`)},
	{name: "failed count at end", where: lastLines, literal: "FAILED: ", re: mustRe(`\bFAILED: [1-9]`)},
	{name: "usage footer", where: lastLines, re: mustRe(`^(?:Try '[^'\n]+ --help' for more information\.$|Run '[^'\n]+ --help' for more information$|See '[^'\n]+ --help'\.$|Run '[^'\n]+ help(?: [^'\n]+)?' for usage\.$)`)}, // printed after a usage error only
	{name: "could not at end", where: lastLine, re: couldNot, unless: negatedFailure},
	{name: "labelled exception at end", where: lastLine, col0: true, re: mustRe(`^(?:\*+ )?(?:Sorry|ERROR|Error|error|FATAL|Fatal|fatal): (?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception)\b(?::|\s*$)`)}, // compileall's "*** Sorry: TabError: …"
	{name: "os error at end", where: lastLine, pre: endsWithOSError, re: osErrorLine, unless: notOSErrorOrNote},
	{name: "perl die", where: lastLine, literal: " line ", re: mustRe(`^.+ at \S+ line \d+(?:, <\w+> (?:line|chunk) \d+)?\.$`),
		unless: mustRe(`^(?:Use of |Useless use |Name "|Scalar value |Possible |Argument "|Odd number |Deep recursion )|deprecated`)}, // a warning reads alike

	// 6. Anywhere (these come last).
	{name: "python traceback anywhere", where: anyLine, col0: true, re: mustRe(`^Traceback \(most recent call last\):$`), next: mustRe(`^File "`),
		notAfter: mustRe(`\b(?:ERROR|CRITICAL|EXCEPTION)\b`)}, // logged by a logger, not a crash
	{name: "JavaScript error with stack", where: anyLine, col0: true, literal: "Error", re: mustRe(`^(?:Uncaught )?(?:[A-Z][\w$]*)?Error\b`), next: stackFrame},
	{name: "java exception", where: anyLine, col0: true, re: mustRe(`^Exception in thread "`)},
	{name: "rust panic", where: anyLine, col0: true, re: mustRe(`^thread '[^'\n]*'(?: \(\d+\))? panicked at `)},
	{name: "go panic", where: anyLine, col0: true, re: mustRe(`^panic: `), next: mustRe(`^(?:goroutine \d+ \[|\[signal |panic: )`)},
	{name: "rustc error", where: anyLine, col0: true, re: mustRe(`^error(?:\[E\d+\])?: `), next: mustRe(`^--> `)},
	{name: "go compile error", where: anyLine, col0: true, re: mustRe(`^# \[?[\w./-]+\]?(?: \[[\w./-]+\])?$`), next: mustRe(`^(?:vet: )?(?:\.{0,2}[/\\])?[\w./\\-]+\.go:\d+(?::\d+)?: `)},
	{name: "compiler error", where: anyLine, col0: true, located: true, literal: "rror: ", re: mustRe(`^(?:[A-Za-z]:\\)?[^\s:(]+:\d+(?:(?:` + placeRange + `)?: |::)(?:fatal )?(?:error|Error): `)}, // gcc, clang, javac, mypy, zig, bison, capnp; a Windows path too
	{name: "build file ERROR", where: anyLine, col0: true, located: true, literal: "ERROR: ", re: mustRe(`^[^\s:(]+:\d+(?::\d+)?: ERROR: `)},                                                        // meson
	{name: "compiler error code", where: anyLine, col0: true, located: true, literal: "): ", re: mustRe(`^[^\s:(]+\((?:\d+,\d+\): error [A-Z]+\d+: |\d+\): Error! E\d+: )`)},                        // tsc, dotnet, Watcom
	{name: "tsc error", where: anyLine, col0: true, literal: " - error ", re: mustRe(`^[^\s:]+:\d+:\d+ - error [A-Z]+\d+: `)},
	{name: "tool error", where: anyLine, col0: true, located: true, literal: "error: ", re: mustRe(`^[\w.+-]+: (?:fatal )?error: `)},
	// A log record at FATAL or PANIC level (a time first; glog's "F"
	// severity) is the last a program writes before it exits; one at
	// ERROR level is not (see logRecord).
	{name: "fatal", where: anyLine, col0: true, pre: fatalCandidate, re: mustRe(`^(?:(?:fatal|FATAL|Fatal)(?: error| ERROR)?: |time="[^"\n]*" level=(?:fatal|panic) |(?:FATA|PANI)\[\d+\] |\[?\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d[^\s\]]*\]?(?: [A-Z]{2,5})?(?: \[\d+\])? \[?(?:FATAL|PANIC)\b|F\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s:]+:\d+\] )`)},
	{name: "git or pip error", where: anyLine, col0: true, re: mustRe(`^error: (?:failed to push some refs|src refspec|pathspec '|Your local changes to the following files|could not apply|subprocess-exited-with-error|metadata-generation-failed|externally-managed-environment|could not compile|test failed, to rerun)`)},
	{name: "merge conflict", where: anyLine, col0: true, re: mustRe(`^(?:CONFLICT \([\w/ -]+\): |Automatic merge failed; )`)},
	{name: "SQL error", where: anyLine, col0: true, re: mustRe(`^(?:(?:psql:[^\s:]+:\d+: )?ERROR:  \S|ERROR \d{4} \([0-9A-Z]{5}\)|(?:Parse|Runtime) error near line \d+: |Error: (?:in prepare, |near line \d+: |stepping, ))`)},
	{name: "curl error", where: anyLine, col0: true, re: mustRe(`^curl: \(\d+\) `)},
	{name: "tool stopped", where: anyLine, col0: true, re: mustRe(`^(?:There is no tracking information for the current branch\.$|WARNING: Package\(s\) not found: |In [\w.-]+\.php line \d+:$|Oops! Something went wrong! :\($|ESLint found too many warnings\b|no main manifest attribute, in |(?:Unknown|Unrecogni[sz]ed) (?:command(?: verb)?|sub-?command|shell)s?(?::? )\S|Undefined command: "|You must edit all merge conflicts and then$|gpg: BAD signature from |g?awk: .*\bfatal: |Load key "[^"\n]+": |Broken \d+ paths?$|ERROR! \S|Missing mandatory value for |\[webpack-cli\] (?:Error|Failed|Invalid)\b)`), unless: mustRe(`\bignor`)}, // git pull, pip show, Symfony's console (composer, artisan), ESLint, java -jar, npm, systemctl, Ansible, docker-compose, webpack
	{name: "runner error", where: anyLine, literal: "E", re: mustRe(`^(?:Exception during run: \S|ERR_PNPM_[A-Z0-9_]+ |FAILED: [A-Z])`)}, // Mocha, pnpm, Alembic
	{name: "yamllint error", where: anyLine, literal: " error ", re: mustRe(`^\d+:\d+ +error +\S.*\([\w-]+\)$`)},
	{name: "whitespace error", where: anyLine, col0: true, located: true, literal: ": trailing whitespace.", re: mustRe(`^[^\s:]+:\d+: trailing whitespace\.$`)}, // git diff --check
	{name: "sqlite import", where: anyLine, col0: true, located: true, literal: ": INSERT failed: ", re: mustRe(`^[^\s:]+:\d+: INSERT failed: `)},
	{name: "hg abort", where: anyLine, col0: true, re: mustRe(`^abort: [a-z]`)},                        // Mercurial's errors
	{name: "svn error", where: anyLine, col0: true, located: true, re: mustRe(`^svn[a-z]*: E\d{6}: `)}, // Subversion's
	{name: "file not found", where: anyLine, col0: true, re: mustRe(`^File not found: \S`)},            // EPUBCheck, qwen-code's readers
	{name: "make error", where: anyLine, col0: true, re: mustRe(`^make(?:\[\d+\])?: \*\*\* `)},
	{name: "build failed", where: anyLine, col0: true, re: mustRe(`^(?:Compilation failed\.?$|The following build commands failed:$|\(\d+ failures?\)$|Target \S+ failed to build$|Your requirements could not be (?:resolved|solved)\b|BUILD FAILED\b|(?:\[(?:INFO|ERROR)\] )?BUILD FAILURE$|FAILURE: Build failed\b|Build FAILED\.|error during build:$|ERROR: failed to (?:solve|build)\b|#\d+ ERROR: |The command '.*' returned a non-zero code: [1-9]|✘ \[ERROR\] )`)},
	{name: "test failure", where: anyLine, col0: true, re: mustRe(`^(?:--- FAIL: \S+ \([\d.]+s\)$|FAIL\t\S+(?:\t[\d.]+s| \[(?:build|setup) failed\])$|FAILED [\w./-]+\.py::|FAILED \((?:failures|errors)=\d|test result: FAILED\. |test \S+ \.\.\. FAILED$)`)},
	{name: "test summary failed", where: anyLine, re: mustRe(`^(?:Tests?:?\s+[1-9]\d* failed\b|Test (?:Files|Suites):?\s+[1-9]\d* failed\b|[1-9]\d* (?:failing|failed)$)`)},                                     // indented by Vitest, Mocha and Playwright
	{name: "pytest failure", where: anyLine, col0: true, re: mustRe(`^(?:E {3,}\S|Mismatched elements: \d+ / \d+ \()`)},                                                                                         // an assertion's report; numpy's
	{name: "pytest report", where: anyLine, col0: true, literal: ".py", pre: pytestTail, re: mustRe(`^(?:\S+\.py [.sxXFE]*[FE][.sxXFE]* +\[ *\d+%\]$|\S+\.py:\d+: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)$)`)}, // a progress line with F or E; where a test failed
	{name: "ruby exception", where: anyLine, col0: true, literal: ":in ", re: mustRe(`^(?:<internal:[^>\n]+>|[^\s:]+):\d+:in [` + "`" + `'].*\((?:\w+::)*[A-Z]\w*\)$`)},
	{name: "docker error", where: anyLine, col0: true, re: mustRe(`^(?:docker: )?Error response from daemon: `)},
	{name: "terraform error", where: anyLine, col0: true, re: mustRe(`^[│|] Error: `)},
	{name: "command not found", where: anyLine, col0: true, located: true, literal: "not found", re: mustRe(`^(?:/(?:usr/)?bin/)?(?:ba|z|da|k)?sh: (?:line \d+: |\d+: )?(?:command not found: |[^\s:]+: (?:command )?not found$)`)},
	{name: "opencode timeout", where: anyLine, col0: true, re: mustRe(`^bash tool terminated command after exceeding timeout\b`)},
	// "PROG: [CONTEXT: ]MESSAGE" from a program, a shell or a script, when
	// the message says it failed (programFailed); a warning does not.
	{name: "program error", where: anyLine, col0: true, located: true, pre: programPrefix, re: mustRe(`^(?:[a-z_./][\w.+/@-]*: \S|[a-z_][\w+-]*:  \S)`), alsoFn: programFailedLine, unless: programNote},
	// "PROG: OBJECT: Message", the Unix convention of err(3) and perror:
	// a program, the file or name it could not deal with, and why, in a
	// sentence that opens with a capital ("pzstd: f: Unknown frame
	// descriptor."); a warning or a note in the third field is none.
	{name: "program, object and message", where: anyLine, col0: true, located: true, pre: programPrefix,
		re:     mustRe(`^[a-z][\w.+-]*: (?:[^\s:]+|'[^'\n]+'|"[^"\n]+"|‘[^’\n]+’): [A-Z][a-z]`),
		unless: mustRe(`^(?:[\w.+/@-]+: )?(?:warning|note|hint|info|debug|notice): |^[^:]+: [^:]+: (?:Warning|Note|Hint|Info|Debug|Notice|Success|Done|Skipping|Ignoring)\b`)},
	{name: "Windows program error", where: anyLine, col0: true, located: true, literal: `:\`, re: mustRe(`^[A-Za-z]:\\[^\s:]*: `), alsoFn: programFailedLine, unless: programNote},
	{name: "syntax error", where: anyLine, col0: true, literal: " error", re: mustRe(`^(?:(?:[Ss]yntax|[Pp]arse) error(?: at | near |: |, )|[^\s:]+(?::[^\s:]+)*(?: \d+)?:(?: \d+:)? (?:[Ss]yntax|[Pp]arse) error\b)`)}, // perl, jq, dash, groff's "pic:f.pic:2: syntax error"
	{name: "make stop", where: anyLine, literal: "*** ", re: mustRe(`^(?:[\w.-]+: )?\*\*\* (?:.*\bStop\.$|\[[^\]\n]+\] Error \d+$)`)},                                                                                   // make's "*** [target] Error 1"
	{name: "makefile error", where: anyLine, located: true, literal: "*** ", re: mustRe(`^[^\s:]+:\d+: \*\*\* .*(?:\bStop\.|停止。)$`)},                                                                                    // a makefile's own error
	{name: "go unused", where: anyLine, col0: true, located: true, literal: " not used", re: mustRe(`^(?:\.{0,2}[/\\])?[\w./\\-]+\.go:\d+(?::\d+)?: .*\b(?:imported|declared) (?:and|but) not used\b`)},
	{name: "go undefined", where: anyLine, col0: true, located: true, literal: ": undefined: ", re: mustRe(`^(?:\.{0,2}[/\\])?[\w./\\-]+\.go:\d+(?::\d+)?: undefined: `)},
	{name: "TAP failure", where: anyLine, re: mustRe(`^(?:not ok(?: \d+\b|$)|# fail [1-9]\d*$|# not ok$|Result: FAIL$)`)},                                   // node --test, prove
	{name: "assertion failed", where: anyLine, col0: true, located: true, literal: "Assertion ", re: mustRe(`^\S+: .*\bAssertion [\x60'‘].*['’] failed\.`)}, // glibc assert()
	{name: "abort", where: anyLine, col0: true, re: mustRe(`^(?:\*\*\* (?:stack smashing|buffer overflow) detected \*\*\*|double free or corruption\b|==\d+==ERROR: \w+Sanitizer: |SUMMARY: \w+Sanitizer: |WARNING: DATA RACE$|terminate called (?:after throwing|without an active exception)|Program (?:received|terminated with) signal SIG[A-Z]+|compilation terminated\.$)`)},
	{name: "heap check", where: anyLine, col0: true, literal: "(): ", re: mustRe(`^\w+\(\): (?:double free|invalid (?:pointer|size|next size)|corrupted|memory corruption)`)},                                                        // glibc's malloc
	{name: "CLI error", where: anyLine, col0: true, pre: cliErrorCandidate, unless: keyValueRecord, re: mustRe(`^(?:(?:ERROR|E): [A-Z]|[a-z][\w.+-]* (?:fatal )?error: \S|fatal: \S|(?:PHP )?(?:Fatal|Parse) error: |##\[error\])`)}, // pip, docker build, apt, scripts; a log record is "ERROR:root:…"
	{name: "docker daemon down", where: anyLine, col0: true, literal: "Docker daemon", re: mustRe(`^(?:docker: |ERROR: )?Cannot connect to the Docker daemon\b`)},
	{name: "patch failed", where: anyLine, col0: true, re: mustRe(`^(?:Hunk #\d+ FAILED at \d+|\d+ out of \d+ hunks? (?:FAILED|ignored)\b|No file to patch\.  Skipping patch\.$|Patch failed at \d+ |error: (?:patch failed: |[^\s:]+: (?:patch does not apply|does not match index|does not exist in index|already exists in (?:index|working directory))))`)},
	{name: "perl compile error", where: anyLine, col0: true, re: mustRe(`^(?:Execution of .* aborted due to compilation errors\.$|BEGIN (?:not safe after errors|failed)--compilation aborted|Can't locate \S+ in @INC\b)`)},
	{name: "JSON error", where: anyLine, col0: true, re: mustRe(`^(?:Expecting (?:property name enclosed in double quotes|value|'[,:]' delimiter): line \d+ column \d+ \(char \d+\)$|Failed validating '[^'\n]+' in (?:meta)?schema\b)`)}, // python -m json.tool; JSON Schema's validation report (python-jsonschema and the validators built on it)
	{name: "SQL error number", where: anyLine, col0: true, re: mustRe(`^(?:Error Number: \d+$|SQLSTATE\[[0-9A-Z]{5}\])`)},
	{name: "command failed anywhere", where: anyLine, re: mustRe(`^(?:Error: )?Command failed: \S`)}, // Node's execSync, indented in a report
	{name: "CMake error", where: anyLine, col0: true, re: mustRe(`^(?:CMake Error\b.*:$|CMake Error: \S|-- Configuring incomplete, errors occurred!)`)},
	{name: "bundler error", where: anyLine, re: mustRe(`^(?:ERROR  \S|ERROR in \S|(?:Entry module|Module) not found: |Module build failed\b)`)}, // vue-cli, webpack
	{name: "OpenSSL error", where: anyLine, col0: true, re: mustRe(`^[0-9A-F]{8,}:error:[0-9A-F]{8}:`)},
	{name: "rake aborted", where: anyLine, col0: true, re: mustRe(`^(?:(?:rake|rails) aborted!$|Failure/Error: |An? (?:unexpected |unknown |internal |fatal )?error (?:has )?occurred\b)`)}, // rake, RSpec, botocore's "An error occurred (NoSuchBucket) when calling …"
	{name: "valgrind error", where: anyLine, col0: true, re: mustRe(`^==\d+== (?:Invalid (?:read|write|free)|Conditional jump |Use of uninitialised|Mismatched free|Source and destination overlap|Syscall param |Process terminating|\S+ bytes in \S+ blocks are definitely lost)`)},
	{name: "command not found hint", where: anyLine, col0: true, re: mustRe(`^Command '[^'\n]+' not found\b`)}, // Ubuntu's command-not-found
	{name: "wget error", where: anyLine, col0: true, re: mustRe(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ERROR [45]\d\d: `)},
	{name: "error line", where: anyLine, col0: true, re: mustRe(`^Error: (?:[A-Z"'\x60‘]|[a-z][\w.+-]*: [A-Z]|\[[\w:.-]+\]:? \S)`)},                          // cobra CLIs, terraform, helm, Node; not qwen-code's "Error: (none)"
	{name: "go module error", where: anyLine, col0: true, located: true, pre: goPrefixed, re: mustRe(`^go: [^\s@:]+@[^\s:]+: \S`)},                           // a module that cannot be had
	{name: "go diagnostic anywhere", where: anyLine, col0: true, located: true, literal: ".go:", re: mustRe(`^(?:\.{0,2}[/\\])?[\w./\\-]+\.go:\d+:\d+: \S`)}, // the compiler's, vet's
	{name: "diagnostic with code", where: anyLine, literal: "): ", re: mustRe(`^[^\s(]+\(\d+,\d+\): (?:fatal )?error [A-Z]*\d+: `)},                          // tsc, MSBuild, csc
	{name: "failure mark", where: anyLine, re: mustRe(`^(?:[✖✗✘✕❌×] \S|\^-*\^? SC\d{4}\b)`), unless: mustRe(`\(0 errors?\b`)},                                // node --test, jest, vitest, eslint, webpack-dev-middleware
	{name: "PowerShell error", where: anyLine, col0: true, re: mustRe(`^(?:At line:\d+ char:\d+$|\+ (?:CategoryInfo|FullyQualifiedErrorId) +: )`)},
	{name: "runtime error", where: anyLine, col0: true, pre: runtimeErrorCandidate, re: mustRe(`^(?:\*\* \((?:\w+\.)*\w+\) \S|Error in \S.* : \S|Execution halted$|stack traceback:$|ERROR \d+ \([0-9A-Z]{5}\)(?: at line \d+)?: |e: (?:file://)?\S+\.kts?(?::\d+:\d+ |: \(\d+, \d+\): ))`)}, // Elixir, R, Lua, MySQL, Kotlin
	{name: "child exit status", where: anyLine, col0: true, literal: "xit", pre: endsWithCode, re: mustRe(`(?i)^(?:.*\b(?:returned|exited with|exiting with|failed with|terminated with)(?: an?)? (?:non-zero )?(?:exit )?(?:code|status)[: ]+[1-9]|(?:.*: )?exit status [1-9]\d*$)`)},       // CI runners, build drivers
	{name: "exception name alone", where: anyLine, pre: endsWithException, re: mustRe(`^(?:[A-Z]\w*\.)*[A-Z]\w*(?:Error|Exception)$`), next: mustRe(`^[A-Z]\S* `)},                                                                                                                           // poetry's (cleo's) report
	{name: "exception with frames", where: anyLine, col0: true, pre: namesException, re: mustRe(`^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)(?::|$)`), next: mustRe(`^at [\w$.<>]+\(`)},                                                                                              // Java, Kotlin, C#
	{name: "status line failed", where: anyLine, col0: true, pre: endsFailed, re: mustRe(`^[A-Za-z][^\n]*?\.{3,}\s*(?:Failed|FAILED)$`)},                                                                                                                                                     // pre-commit's hooks
	{name: "Tcl error", where: anyLine, pre: tclFrame, re: mustRe(`^(?:while executing|invoked from within)$`), next: mustRe(`^"`)},
	// A place in a tool's input and what is wrong there, in three shapes
	// run as one rule (one cheap test for every line): a parser's
	// complaint about a line ("Line 1: missing 'cmd' line", valgrind's
	// annotators; "\"zone.txt\", line 2: input line of unknown type", zic
	// and the C tradition of "FILE", line N; rpcgen's without the
	// quotes), a line (and a column) then what failed there ("f.xml:3:66
	// Failed to parse …", glib's tools; not a warning's "…, ignoring"),
	// and GNU ld's, gold's and lld's
	// undefined reference to a symbol no object defines.
	{name: "place and complaint", where: anyLine, col0: true, pre: placeFirst, literal: ":",
		re:     mustRe(`^(?:(?:"[^"\n]+", |[^\s,"]+, )?[Ll]ine \d+(?:, (?:column|col|char) \d+)?: \S|[^\s:]+:\d+(?::\d+)?:?\s+(?:Failed|Unable) to \S|\S[^\n]*?: (?:error: )?undefined reference to [\x60'‘])`),
		alsoFn: complainsOfLine, unless: mustRe(`\bignoring\b`)},
	// An error named by its code ("Error HHE1206: The import …", Hardhat's;
	// "ERROR CS0103: …").
	{name: "coded error", where: anyLine, col0: true, re: mustRe(`^(?:Error|ERROR) [A-Z]{2,}\d{2,}: \S`)},
	// A tool's own report that it stopped ("Meson encountered an error:",
	// opam's "#=== ERROR while installing …").
	{name: "encountered an error", where: anyLine, col0: true, literal: "ncountered a", re: mustRe(`^[A-Z][\w.-]*(?: [\w.-]+){0,2} encountered an? (?:\w+ )?(?:error|ERROR)[:.!]?$`)},
	{name: "error banner", where: anyLine, col0: true, re: mustRe(`^[#=*]{3,} ERROR (?:while|during) \w`)},
	// A tool's banner then its error ("jekyll 3.8.5 | Error:  Liquid …").
	{name: "versioned tool error", where: anyLine, col0: true, literal: "| Error: ", re: mustRe(`^[\w.-]+ v?\d+(?:\.\d+)+ \| Error: `)},
	// Julia's stack trace (its "ERROR: …" line may be cut off above it).
	{name: "Julia stacktrace", where: anyLine, col0: true, re: mustRe(`^Stacktrace:$`), next: mustRe(`^\[1\] \S`)},
	// A diagnostic about the standard input ("grops:<standard input>:2:
	// fatal error: …", groff's postprocessors) or, from the X tools, about
	// their command line ("xauth: (argv):1:  bad \"add\" command line").
	{name: "input diagnostic", where: anyLine, col0: true, literal: ":", pre: inputPlace,
		re: mustRe(`^(?:(?:[\w.+-]+:)?<(?:standard input|stdin)>:\d+(?::\d+)?: (?:fatal )?(?:error|Error)\b|[a-z][\w.+-]*: \(argv\):\d+:\s+\S)`)},
	// A file's line and, first in the message, what is wrong there
	// ("bad.msg:4: unterminated message", gencat and the C tradition's
	// parsers), in words that seldom open a line of prose: a grep hit
	// ("notes.md:3: missing tests") has this shape too.
	{name: "located complaint", where: anyLine, col0: true, located: true, literal: ": ", pre: fileLinePlace,
		re: mustRe(`^[^\s:]+\.\w+:\d+: (?:unterminated|unexpected|duplicate|undefined|unmatched|unbalanced|unclosed) [\w'"\x60‘]`)},
	// A framework's boxed report ("  Serverless Error ------", "  Type
	// Error ------") and a compiler's heading of one error ("-- TYPE
	// MISMATCH ------ src/Main.elm", Elm's, after "Detected errors in 1
	// module.").
	{name: "error box", where: anyLine, literal: "Error -----", re: mustRe(`^\s*(?:[A-Z][a-z]+ )?Error -{5,}$`)},
	{name: "error heading", where: anyLine, col0: true, re: mustRe(`^(?:-- [A-Z][A-Z ]*[A-Z] -{3,} \S+\.\w+$|Detected (?:[1-9]\d* )?errors? in \d+ (?:modules?|files?)\.$)`)},
}

// placeFirst is the "place and complaint" rule's cheap first test: one of
// its three shapes' (linePlace, placeThenFailed, endsQuoted).
func placeFirst(l string) bool { return linePlace(l) || placeThenFailed(l) || endsQuoted(l) }

// complainsOfLine is what the "place and complaint" rule asks of a
// parser's line: that it says what is wrong (the other shapes say it).
func complainsOfLine(l string) bool { return !linePlace(l) || complains(l) }

// endsQuoted: the line ends with a quote, as the symbol a linker names
// does.
func endsQuoted(l string) bool {
	return l[len(l)-1] == '\'' || strings.HasSuffix(l, "’")
}

// linePlace: the line opens with "Line" or with a word that ends with a
// comma and "line" after it.
func linePlace(l string) bool {
	w, rest, _ := strings.Cut(l, " ")
	return w == "Line" || w == "line" || strings.HasSuffix(w, ",") && strings.HasPrefix(rest, "line ")
}

// placeThenFailed: the first word holds a colon and the text after it
// opens with "Failed" or "Unable".
func placeThenFailed(l string) bool {
	i := strings.IndexByte(l, ' ')
	if i < 0 {
		i = len(l)
	}
	if t := strings.IndexByte(l[:i], '\t'); t >= 0 {
		i = t
	}
	if i < 2 || i == len(l) || !isDigit(l[i-1]) && l[i-1] != ':' || strings.IndexByte(l[:i], ':') < 0 {
		return false
	}
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	return strings.HasPrefix(l[i:], "Failed ") || strings.HasPrefix(l[i:], "Unable ")
}

// fileLinePlace: the line opens with a file's name (an extension) and a
// line number: "name.ext:12: ".
func fileLinePlace(l string) bool {
	i := strings.IndexByte(l, ':')
	if i < 3 || strings.IndexByte(l[:i], '.') < 0 || strings.IndexByte(l[:i], ' ') >= 0 {
		return false
	}
	j := i + 1
	for j < len(l) && isDigit(l[j]) {
		j++
	}
	return j > i+1 && strings.HasPrefix(l[j:], ": ")
}

// inputPlace is the "input diagnostic" rule's cheap first test: the line
// opens with "<st", or has it or " (argv):" right after its first colon.
func inputPlace(l string) bool {
	i := strings.IndexByte(l, ':')
	if i < 0 {
		return false
	}
	rest := l[i+1:]
	return strings.HasPrefix(l, "<st") || strings.HasPrefix(rest, "<st") || strings.HasPrefix(rest, " (argv):")
}

// complains reports whether a line about a place in a tool's input says
// what is wrong there.
func complains(l string) bool { return complaint.MatchString(l) }

// complaint is what a parser says of a line it cannot read.
var complaint = mustRe(`(?i)\b(?:missing|unknown|unexpected|invalid|illegal|unterminated|expected|bad|syntax|parse|error|cannot|can't|unable|not (?:found|allowed|supported))\b`)

// namesException, endsWithException, goPrefixed and tclFrame are cheap
// first tests of the rules that every line of an output goes through.
func namesException(l string) bool {
	return strings.Contains(l, "Exception") || strings.Contains(l, "Error")
}

func endsWithException(l string) bool {
	return strings.HasSuffix(l, "Error") || strings.HasSuffix(l, "Exception")
}

func endsFailed(l string) bool {
	return strings.HasSuffix(l, "Failed") || strings.HasSuffix(l, "FAILED")
}

func pytestTail(l string) bool { return strings.HasSuffix(l, "%]") || endsWithException(l) }

// endsWithCode: the line ends with a number, maybe a full stop, a
// parenthesis, a semicolon or a comma after it.
func endsWithCode(l string) bool {
	l = strings.TrimRight(l, ".);,")
	return l != "" && '0' <= l[len(l)-1] && l[len(l)-1] <= '9'
}

func goPrefixed(l string) bool { return strings.HasPrefix(l, "go: ") }

// fatalCandidate is the "fatal" rule's cheap first test: a line that opens
// with an "f" or "F" (the word, glog's severity, logrus' "FATA[0000]"), or
// one that names the level (logrus' "time=… level=fatal").
func fatalCandidate(l string) bool {
	return l[0] == 'f' || l[0] == 'F' || strings.Contains(l, "FATAL") || strings.Contains(l, "PANIC") ||
		l[0] == 't' && (strings.Contains(l, " level=fatal ") || strings.Contains(l, " level=panic ")) || l[0] == 'P' && strings.HasPrefix(l, "PANI[")
}

func tclFrame(l string) bool { return l == "while executing" || l == "invoked from within" }

// cliErrorCandidate is the "CLI error" rule's cheap first test: most lines
// that begin with a lower-case letter are not "PROG error: …".
func cliErrorCandidate(l string) bool {
	if 'a' <= l[0] && l[0] <= 'z' && !strings.HasPrefix(l, "fatal: ") {
		_, rest, _ := strings.Cut(l, " ")
		return strings.HasPrefix(rest, "error: ") || strings.HasPrefix(rest, "fatal error: ")
	}
	return true
}

// runtimeErrorCandidate is the "runtime error" rule's cheap first test.
func runtimeErrorCandidate(l string) bool {
	switch l[0] {
	case 's':
		return strings.HasPrefix(l, "stack traceback:")
	case 'e':
		return strings.HasPrefix(l, "e: ")
	}
	return true
}

// couldNot is an output that opens, or ends, saying what it could not do,
// or that nothing of a kind could be found ("No usable default provider
// could be found for your system.").
var couldNot = mustRe(`^(?:(?:Could not|Couldn't|Cannot|Can't|Unable to) [a-z]+\b|No (?:[\w-]+ ){1,3}(?:could|can) be (?:found|located)\b)`)

// programFailed is what a program's, a shell's or a script's error line
// says after "PROG: [CONTEXT: ]" (see the "program error" rule): coreutils,
// tar, gzip, sed, awk, sudo, dpkg, md5sum, a script's "line 3: x: command
// not found".
var programFailed = mustRe(`(?:\b(?:missing (?:\w+ ){0,3}(?:operand|argument)|missing \S+ near\b|(?:[Ii]nvalid|[Uu]nrecognized|[Uu]nknown|[Ii]llegal|non-\w+) (?:(?:\w+ ){0,2}(?:option|mode|date|number|argument|specification|value|expression|input|predicate|command|subcommand|flag|field|key|keyword|function|variable|type|operator|directive|action|revision)s?|number of \w+)|[Cc]ould not \w+|unable to \w+|too (?:few|many) \S|no \S+(?: \S+){0,2} found\b|\w*[A-Za-z] failed(?:: |$)|: (?:[A-Z][a-z]+ )?(?:[Ee]rror|ERROR|FATAL|[Ff]atal): |No module named \S|already exists(?:$|;)|not overwritten|omitting directory|disorder: |(?:file)?name not matched|[Ee]rror (?:running|reading|writing|parsing|loading|opening|executing|calling|processing|connecting|fetching|compiling|while|during)\b|(?:computed checksums?|listed files?) did NOT match|(?:[Ff]ile )?format not recognized|option requires an argument|failed to \w+|(?i:cannot|can't|couldn't) \w+|(?i:no such file or directory)|Permission denied|Is a directory|Not a directory|File exists|Operation not permitted|Directory not empty|No space left on device|Read-only file system|not in gzip format|is not installed\b|[Bb]ad (?:configuration option|option|argument|interpreter|address)|Error is not recoverable|Exiting with failure status|Child returned status [1-9]|unterminated|Unmatched|[Ss]yntax error|command not found|not in a function|unbound variable|bad substitution|Exec format error|Connection refused|error \()|: (?:command )?not found$| not found\.?$|: FAILED(?: open or read)?$|: \*{4} )`)

// programFailedMore are more of programFailed's words, each found only in
// a line that holds one of programFailedMoreStems: an unknown thing named
// in quotes, a file not in a format ("not an ICU data file", "Not a .lzma
// file"), a fatal error, com_err's "… while trying to open …" and "…
// while opening filesystem", a limit not met or exceeded, a thing asked
// for that what was given does not contain, JSON Schema's messages, two
// names of one file (coreutils' "'a' and 'a' are the same file"), and a
// message after the object's name that opens with what is wrong with it
// ("pzstd: f: Unknown frame descriptor.", "x: y: Invalid header").
var programFailedMore = mustRe(`(?:[Ii]nvalid|[Uu]nrecognized|[Uu]nknown|[Ii]llegal) (?:[\w-]+ ){1,3}["'\x60‘“]|\b(?:doesn't|does not|don't|do not) (?:contain|have|define|support|match)\b|\b(?:limit|maximum|quota) (?:of )?\S+ exceeded\b|\bis not (?:an? |in )?(?:valid |GNU )?[\w.-]+ (?:format|file|archive)\b|\b[Nn]ot an? (?:valid )?(?:[\w.-]+ ){1,2}(?:format|file|archive)\b|\bfatal error\b|\bwhile (?:(?:trying|attempting) to \w+|(?:opening|reading|writing|loading|parsing|initializing|allocating|creating|checking)\b)|\bare the same file\b|: (?:Unknown|Invalid|Unsupported|Unexpected|Corrupt(?:ed)?|Malformed|Truncated|Bad) [^:]*$|[Bb]ad magic number\b|(?:[Ss]maller|[Ll]arger|[Gg]reater|[Ll]ess|[Ff]ewer) than (?:the )?(?:minimum|maximum|allowed|limit)\b|\bexceeds? (?:the )?(?:maximum|limit)\b|\bis not of type '|\bis a required property$|\bis not valid under any of the given schemas$`)

var programFailedMoreStems = []string{"nvalid ", "nrecognized ", "nknown ", "llegal ", "is not ", "ot a", "fatal error", "while ", "magic", " than ", "exceed", "required property", "doesn't ", "does not ", "don't ", "do not ", "same file", ": Unsupported ", ": Unexpected ", ": Corrupt", ": Malformed ", ": Truncated ", ": Bad "}

// programFailedLine is what the "program error" rules ask of a line: that
// it says a program failed in programFailed's words, ends with a strerror
// text ("stat: /srv/link: Too many levels of symbolic links"), says
// that something does not exist or is unknown (a signal too), or ends
// with Go's io.EOF ("buildid: EOF").
func programFailedLine(l string) bool {
	return programFailed.MatchString(l) || containsAny(l, programFailedMoreStems) && programFailedMore.MatchString(l) ||
		endsWithOSError(l) && osErrorLine.MatchString(l) ||
		strings.Contains(l, "does not exist") || strings.Contains(l, "do not exist") || strings.Contains(l, " is unknown") ||
		strings.Contains(l, "nknown signal") || strings.HasSuffix(l, ": EOF") || strings.HasSuffix(l, ": unexpected EOF")
}

// programPrefix reports whether line opens with "PROG: ", PROG a name or
// a path without spaces or colons: what the "program error" rule's regex
// says, without the cost of running it on every line of an output.
func programPrefix(line string) bool {
	i := strings.IndexAny(line, " \t:")
	return i > 0 && line[i] == ':' && i+1 < len(line) && line[i+1] == ' '
}

// programNote is a program's line that only warns or informs (its name
// first or not: "dpkg-parsechangelog: warning: …"), or says
// that nothing failed, or the subject of a commit in the Conventional
// Commits form ("revert: 'retry on connection refused'", as git log
// prints it).
var programNote = mustRe(`^(?:[\w.+/@-]+: )?(?:warning|note|hint|info|debug|notice): |` + commitSubject + `|(?i:\b(?:no|none|nothing|zero|never|not)\s+(?:\w+\s+)?failed\b)`)

// osErrors are the errors of the operating system as Go and C programs
// print them, at the end of a chain of errors ("unable to prepare
// context: …: lstat /app/Dockerfile: no such file or directory").
var osErrors = strerrors

// osErrorLine is a line that ends with one of osErrors.
var osErrorLine = mustRe(`(?i)^.*: (?:` + strings.Join(osErrors, "|") + `)\.?$`)

// endsWithOSError is osErrorLine's cheap first test.
func endsWithOSError(line string) bool {
	line = strings.TrimSuffix(line, ".")
	var buf [48]byte
	tail := buf[:0]
	for i := max(0, len(line)-len(buf)); i < len(line); i++ {
		c := line[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		tail = append(tail, c)
	}
	last := tail[bytes.LastIndexByte(tail, ' ')+1:]
	if !osErrorLastWords[string(last)] {
		return false
	}
	for _, e := range osErrors {
		if len(e) <= len(tail) && string(tail[len(tail)-len(e):]) == e {
			return true
		}
	}
	return false
}

// osErrorLastWords holds the last word of each of osErrors: a line whose
// last word is none of them ends with none of osErrors.
var osErrorLastWords = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range osErrors {
		m[e[strings.LastIndexByte(e, ' ')+1:]] = true
	}
	return m
}()

// grepHit is a line of grep -n's output, or of a compiler's listing.
var grepHit = mustRe(`^\S+:\d+:`)

// commitSubject is the subject of a commit in the Conventional Commits
// form, as git log prints it: data, not a program's complaint.
const commitSubject = `^(?:fix|feat|docs|test|chore|refactor|revert|style|perf|ci)(?:\([^)\n]*\))?!?: `

var commitSubjectRe = mustRe(commitSubject)

// notOSError is a line that ends with an operating system's error but is
// no program's complaint: a grep hit, a line of a table of errno names and
// their texts ("ENOENT: No such file or directory").
var notOSError = mustRe(`^(?:\S+:\d+:|` + errnoNames + `\b)`)

// notOSErrorOrNote is notOSError or a line that opens with a level below
// error ("Warning: Failed loading manifest for …: No such file or
// directory", then the list the tool was asked for).
var notOSErrorOrNote = mustRe(`^(?:\S+:\d+:|` + errnoNames + `\b|(?i:warn(?:ing)?|note|notice|info|hint)\b)`)

// noteFirst is a line that opens with a level below error and a colon.
var noteFirst = mustRe(`^(?i:warn(?:ing)?|note|notice|info|hint):`)

// keyValueRecord is a line of a record of tagged fields whose "E:" holds
// a variable and its value (udevadm info's "E: DEVNAME=/dev/null"), not
// apt's "E: " complaint.
var keyValueRecord = mustRe(`^E: [A-Z_][A-Z0-9_]*=`)

// stackFrame is the first frame of a JavaScript stack trace.
var stackFrame = mustRe(`^at (?:(?:(?:new|async) )?[^\s(]+(?: \[as \w+\])? ?\(|[^\s(]*:\d+:\d+\)?$)`)

// mustRe compiles a rule regex.
func mustRe(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }

// ruleSet is a set of anyLine rules: bit i of word i/64 stands for
// toolRules[anyStart+i].
type ruleSet [2]uint64

// maxAnyRules is how many anyLine rules a ruleSet holds.
const maxAnyRules = 64 * len(ruleSet{})

func (s *ruleSet) add(i int) { s[i/64] |= 1 << (i % 64) }

// anyStart is the index in toolRules of the first anyLine rule; anyIndex[b]
// holds the anyLine rules that can match a line that begins with byte b,
// anyCol0 those that must not be indented, and anyLocated those that must
// be located.
var (
	anyStart   int
	anyIndex   [256]ruleSet
	anyCol0    ruleSet
	anyLocated ruleSet
)

// wrapperRules are the rules of the JSON fields and of the agents'
// wrappers (the first two kinds of toolRules): what the agent says of a
// result, not what the tool printed.
var wrapperRules []toolRule

func init() {
	anyStart = len(toolRules)
	for i := range toolRules {
		if toolRules[i].name == "go test FAIL" {
			wrapperRules = toolRules[:i:i]
		}
	}
	if wrapperRules == nil {
		panic("guard: no tool rule ends the agents' wrappers")
	}
	for i := range toolRules {
		r := &toolRules[i]
		if r.re != nil {
			r.first, r.filter = firstBytes(r.re.String())
			r.lits, r.foldLits = ruleLiterals(r.re.String())
		}
		if r.next != nil {
			r.nextByte, r.nextFilter = firstBytes(r.next.String())
		}
		if r.where == anyLine && anyStart == len(toolRules) {
			anyStart = i
		}
		if err := r.check(i >= anyStart); err != nil {
			panic(fmt.Sprintf("guard: tool rule %q: %v", r.name, err))
		}
	}
	if len(toolRules)-anyStart > maxAnyRules {
		panic(fmt.Sprintf("guard: more than %d anyLine tool rules", maxAnyRules))
	}
	for i, r := range toolRules[anyStart:] {
		if r.col0 {
			anyCol0.add(i)
		}
		if r.located {
			anyLocated.add(i)
		}
		for b := 0; b < 256; b++ {
			if r.first.has(byte(b)) {
				anyIndex[b].add(i)
			}
		}
	}
}

// maxRuleLits bounds the literals a rule's line is searched for before its
// regex runs: past it, the searches cost about what the regex does.
const maxRuleLits = 8

// ruleLiterals returns literals one of which every match of the rule regex
// expr holds, when there are at most maxRuleLits of them, each of at
// least two bytes; otherwise nil. They are as expr has them, or, when
// fold, lower-cased: expr matches them in any case. A literal that holds
// another of the set is dropped: a line that holds it holds the other.
// Most lines a rule is tried on hold none ("ok  \tpkg\t0.4s" holds no
// "rror", nor "exit" in any case), and a search for them rejects the line
// for a fraction of what starting the regex costs.
func ruleLiterals(expr string) (lits []string, fold bool) {
	lits = exactLiterals(expr)
	if lits == nil {
		lits, fold = requiredLiterals(expr), true
	}
	slices.SortFunc(lits, func(a, b string) int { return len(a) - len(b) })
	var kept []string
	for _, l := range lits {
		if len(l) < 2 {
			return nil, false
		}
		if !slices.ContainsFunc(kept, func(k string) bool { return strings.Contains(l, k) }) {
			kept = append(kept, l)
		}
	}
	if len(kept) == 0 || len(kept) > maxRuleLits {
		return nil, false
	}
	return kept, fold
}

// mayHold reports whether line may match r.re for what r.lits say: it
// holds one of them (in any case, when r.foldLits).
func (r *toolRule) mayHold(line string) bool {
	if !r.foldLits {
		return containsAny(line, r.lits)
	}
	for _, l := range r.lits {
		if containsFold(line, l) {
			return true
		}
	}
	// A rune outside ASCII that folds to an ASCII letter (the Kelvin
	// sign, the long s) matches it case-insensitively.
	return foldsIntoASCII(line)
}

// containsFold reports whether s holds lit, a lower-case ASCII literal,
// with its ASCII letters in any case.
func containsFold(s, lit string) bool {
	for i := 0; i+len(lit) <= len(s); i++ {
		j := 0
		for j < len(lit) && lowerASCII(s[i+j]) == lit[j] {
			j++
		}
		if j == len(lit) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// check reports a rule the scanners cannot run as written.
func (r *toolRule) check(afterAny bool) error {
	switch {
	case afterAny && r.where != anyLine:
		return fmt.Errorf("comes after the first anyLine rule")
	case (r.where == jsonField) != (r.value != nil):
		return fmt.Errorf("a value test belongs to, and only to, jsonField rules")
	case r.where != jsonField && r.where != headJSON && r.re == nil:
		return fmt.Errorf("a text rule without a regex")
	case r.next != nil && r.where != firstLine && r.where != anyLine:
		return fmt.Errorf("next is for firstLine and anyLine rules")
	case (r.notAfter != nil || r.located) && r.where != anyLine:
		return fmt.Errorf("notAfter and located are for anyLine rules")
	case (r.unless != nil || r.also != nil || r.alsoFn != nil || r.pre != nil) && (r.re == nil || r.code):
		return fmt.Errorf("pre, also, alsoFn and unless are for text rules that say failed or succeeded")
	case r.where == anyLine && (!r.filter || r.ok || r.code):
		return fmt.Errorf("an anyLine rule must be anchored, with a first-byte filter, and say failed")
	case r.code && r.re.NumSubexp() < 1:
		return fmt.Errorf("an exit code rule without a group")
	}
	return nil
}

// ToolFailed reports whether the content of a role:"tool" message says the
// tool failed. A JSON array of objects (Cline's command results, MCP
// content parts) fails when one of them does. JSON objects fail on a non-empty "error" or "errors", on
// "is_error"/"isError": true, "status": "error"/"failed", "success" or "ok":
// false, a non-zero "exit_code"/"exitCode"/"returncode" (also inside a
// "metadata" object), or an HTTP "status_code" of 400 or more. An exit code
// in an agent's wrapper decides (Codex's "Process exited with code 1",
// OpenHands' "[The command completed with exit code 1.]", qwen-code's
// "Exit Code: 1", Claude Code's "Exit code 1"); so do the agents' own error
// messages and a test runner's or build tool's final verdict. Otherwise the
// text fails when it opens with a traceback, "Error:", "fatal:", an
// exception..., ends with an exception, a crash or a script's last word
// ("deploy failed: …"), or holds, at the start of a line, a shape only a
// failure prints: a traceback, a compiler error, a program's own error
// line ("mkdir: missing operand"), a failed test or assertion, an SQL
// error, a patch that does not apply, a linter's finding, a log record
// at FATAL level, a JSON Schema validation report, a child's
// non-zero exit status reported by a build driver, a parser's complaint
// about a line of its input, a linker's undefined reference, a synopsis
// printed alone or after a complaint, an HTTP status line over its
// headers, a shell's report of a script's line, a make-like driver's
// "*** [target] Error 1", an exception after a progress line, a
// program, the object it failed on and why ("PROG: FILE: Message", as
// err(3) prints it), ed's "?", or, in a short output,
// a sentence that says something failed ("key1 already exists.") with no
// word of success beside it. When no rule decides, the last lines are read
// in the words every tool borrows (see lexicon.go): a strerror text, an
// errno name, a diagnostic prefix, an HTTP error status, a count of errors
// found, a sentence that says something failed; a word of success there
// outweighs them. When no rule decides either way, the failure model
// weighs the words of the output's last lines (see package failmodel),
// unless one of those lines is data: code, a diff, a search's hit, a
// fence, a traceback's frame. ANSI colours and a CI log's line prefixes
// (GitHub Actions' timestamps, BuildKit's steps, the Open Build Service's
// seconds, a build tool's clock) are read past; a JSON array of strings
// is data, never a complaint, and so is a file shown with its lines
// numbered (cat -n, Claude Code's Read) or as opencode's read tool shows
// it. Successful
// output that merely contains "error" does not count, nor does text
// inside fenced code blocks; an output that prints nothing cannot say it
// failed.
func ToolFailed(content string) bool {
	failed, _ := toolVerdict(content)
	return failed
}

// FileTextFailed is ToolFailed for the result of a tool that reads a file
// (Claude Code's Read, the Gemini CLI's and qwen-code's read_file,
// opencode's read): its text is the file's, whatever errors the file
// quotes, so it says the tool failed only when it is a short complaint
// of the tool that reads as a failure (two lines at most: "Error: File
// not found: x"), a line that speaks of failure as the readers' own
// complaints do ("File not found: x", "Path is a directory, not a file:
// x", "File path must be absolute", "params must have required property
// 'file_path'"), or a JSON result whose fields say so (Cline's).
func FileTextFailed(content string) bool {
	s := strings.TrimSpace(content)
	if s == "" {
		return false
	}
	if s[0] == '{' || s[0] == '[' {
		return ToolFailed(s)
	}
	switch strings.Count(s, "\n") {
	case 0:
		if failed, decided := toolVerdict(s); decided {
			return failed // a numbered line of a file is decided: the file's
		}
		return failureWords.MatchString(s) || readerComplaint.MatchString(s)
	case 1:
		return ToolFailed(s)
	}
	return false
}

// readerComplaint is what file readers say of a path they cannot read,
// besides failureWords: a path that must be something else, a directory
// or a file where the other was wanted, a schema's required property.
var readerComplaint = regexp.MustCompile(`(?i)\bmust (?:be|have|not)\b|\bis a directory\b|\bnot a (?:file|directory)\b`)

// ToolSucceeded reports whether the content of a tool result shows that
// the tool succeeded, rather than only not showing that it failed: an
// exit status of 0, a structured success ("success": true, an exit code
// of 0...), a test runner's or build tool's passing verdict, or, when
// nothing of the kind decides, output with no word of failure in it. An
// empty output, or one that speaks of errors without a shape the rules
// know, cannot be judged: it is no success. What the proxy learns as the
// fix of a failure must have succeeded.
func ToolSucceeded(content string) bool {
	failed, decided := toolVerdict(content)
	switch {
	case failed:
		return false
	case decided:
		return true
	}
	s := strings.TrimSpace(content)
	if len(s) > maxScan {
		s = s[:maxScan/2] + "\n" + s[len(s)-maxScan/2:]
	}
	return s != "" && !failureWords.MatchString(s)
}

// failureWords are words only an output that speaks of a failure holds,
// for an output no rule decides. A success that happens to hold one is
// left unjudged, which costs nothing but a fix not learned.
var failureWords = regexp.MustCompile(`(?i)\b(?:errors?|fail(?:s|ed|ure)?|fatal|exception|traceback|panic|denied|not found|no such|cannot|can't|could ?n[o']t|unable|invalid|missing|refused|timed out|abort(?:ed)?|segmentation|undefined|unknown|usage:|not recognized|not permitted|not allowed|(?:does|do|did)(?: not|n't) exist|unreachable|rejected|violat\w*|syntax)\b`)

// toolVerdict judges a tool result by the rules and, where none decides,
// by the failure model (see judge).
func toolVerdict(content string) (failed, decided bool) { return judge(content, failmodel.Default) }

// judge judges a tool result: failed, and whether a rule or, where none
// did, model decided (false when neither did: the result then reads as a
// success only for want of a failure). A nil model leaves undecided what
// no rule decides.
func judge(content string, model *failmodel.Model) (failed, decided bool) {
	s := strings.TrimLeft(content, " \t\r\n\ufeff")
	if s == "" {
		return false, false
	}
	switch s[0] {
	case '{':
		if fields, ok := jsonObject(s); ok {
			if failed, decided := jsonVerdict(fields); decided {
				return failed, true
			}
			return judge(jsonText(fields), model)
		}
	case '[':
		if items, ok := jsonObjects(s); ok {
			return arrayVerdict(items, model)
		}
		if json.Valid([]byte(s)) {
			// A JSON array of strings or numbers is data the tool
			// printed (a query's result, log lines fetched), not its
			// own complaint.
			return false, false
		}
	case '"':
		var inner string
		if json.Unmarshal([]byte(strings.TrimSpace(s)), &inner) == nil {
			return judge(inner, model)
		}
	}
	if strings.IndexByte(s, '\x1b') >= 0 {
		// An output of escapes alone leaves nothing to read.
		if s = stripANSI(s); s == "" {
			return false, false
		}
	}
	if '0' <= s[0] && s[0] <= '9' && numberedListing(s) || s[0] == '<' && openCodeRead(s) {
		return false, true
	}
	if s[0] == '#' || s[0] == '[' || s[0] == '(' || '0' <= s[0] && s[0] <= '9' {
		s = stripLogPrefix(s)
	}
	if failed, decided = textVerdict(s); decided {
		return failed, true
	}
	if model == nil {
		return false, false
	}
	if score, data := model.Score(s); score > modelThreshold && !data {
		return true, true
	}
	return false, false
}

// numberedListing reports whether every line of s that is not blank opens
// with a line number and a tab or an arrow, as cat -n, nl and the file
// readers of agents (Claude Code's Read: "12\tcode", "    12→code")
// print a file: the output is the file's text, which says nothing of the
// tool's failure whatever errors it quotes. Claude Code's reminder after
// the text (<system-reminder>…</system-reminder>) is read past.
func numberedListing(s string) bool {
	if i := strings.LastIndex(s, "<system-reminder>"); i > 0 && strings.HasSuffix(strings.TrimRight(s, " \t\r\n"), "</system-reminder>") {
		s = s[:i]
	}
	n := 0
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		t := strings.TrimLeft(line, " ")
		d := 0
		for d < len(t) && '0' <= t[d] && t[d] <= '9' {
			d++
		}
		if d == 0 || !(strings.HasPrefix(t[d:], "\t") || strings.HasPrefix(t[d:], "\u2192")) {
			return false
		}
		n++
	}
	return n > 0
}

// openCodeRead reports whether s is what opencode's read tool answers
// for a file or a directory it could read: the path, the type, then the
// content ("1: code" lines) or the entries, each in its tags. Like a
// numbered listing, it is the file's text, not the tool's complaint.
func openCodeRead(s string) bool {
	rest, ok := strings.CutPrefix(s, "<path>")
	if !ok {
		return false
	}
	i := strings.Index(rest, "</path>\n<type>")
	if i < 0 || strings.IndexByte(rest[:i], '\n') >= 0 {
		return false
	}
	rest = rest[i+len("</path>\n<type>"):]
	return strings.HasPrefix(rest, "file</type>\n<content>") || strings.HasPrefix(rest, "directory</type>\n<entries>")
}

// placeRange is what may follow a line number in a diagnostic's place:
// a column, or a range of columns or of lines, in the forms of the GNU
// coding standards ("4.5", "4.5-9", "4.5-6.2", "4-6"; "Formatting Error
// Messages") and with colons as most compilers write them ("4:5",
// "4:5-9", as Cap'n Proto does).
const placeRange = `[.:]\d+(?:-\d+(?:\.\d+)?)?|-\d+(?:\.\d+)?`

// modelThreshold is the score above which the failure model reads an
// output as a failure: the lowest whole log-odds at which, each held-out
// batch left out of the weights' training in turn, the model flagged at
// most 1 in 250 of the successes the rules do not flag (see
// TestFailModelLeftOut).
const modelThreshold = 5.0

// logPrefix is what a CI log puts before every line of a step's output:
// GitHub Actions' timestamp, BuildKit's step and seconds, the Open Build
// Service's seconds ("[   28s] "), or the clock time a build tool puts
// before each of its lines ("(04:10:24) " with Bazel's
// --show_timestamps, "[04:10:24] ").
var logPrefix = mustRe(`^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z|#\d+ \d+\.\d+|\[ *\d+s\]|\(\d\d:\d\d:\d\d\)|\[\d\d:\d\d:\d\d\]) `)

// stripLogPrefix returns s without the CI log prefix of its lines, when
// its first line has one.
func stripLogPrefix(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	if !logPrefix.MatchString(first) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for rest := s; rest != ""; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if m := logPrefix.FindStringIndex(l); m != nil {
			l = l[m[1]:]
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// stripANSI returns s without its ANSI escape sequences: the colours and
// cursor moves of a tool that writes to a terminal (CSI: ESC '[' ...
// a final byte from '@' to '~'; other escapes: ESC and the byte after it).
func stripANSI(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '\x1b')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		switch {
		case s == "":
		case s[0] == '[':
			j := 1
			for j < len(s) && (s[j] < '@' || s[j] > '~') {
				j++
			}
			s = s[min(j+1, len(s)):]
		default:
			s = s[1:]
		}
	}
}

// jsonObjects decodes a JSON array whose elements are all objects.
func jsonObjects(s string) ([]map[string]json.RawMessage, bool) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &items); err != nil || len(items) == 0 {
		return nil, false
	}
	for _, it := range items {
		if it == nil {
			return nil, false
		}
	}
	return items, true
}

// arrayVerdict judges a JSON array of objects, as Cline sends the
// results of its commands ({"query", "result", "error", "success"} each)
// and MCP servers their content parts: it failed when one of its objects
// says so by its fields; the text of those whose fields say nothing (and
// the "text" of content parts) is judged as one output.
func arrayVerdict(items []map[string]json.RawMessage, model *failmodel.Model) (failed, decided bool) {
	var texts []string
	for _, it := range items {
		if failed, ok := jsonVerdict(it); ok {
			if failed {
				return true, true
			}
			decided = true
			continue
		}
		if raw, ok := it["text"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				texts = append(texts, s)
			}
		}
		if t := jsonText(it); t != "" {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return false, decided
	}
	failed, textDecided := judge(strings.Join(texts, "\n"), model)
	return failed, decided || textDecided
}

func jsonObject(s string) (map[string]json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &fields); err != nil || fields == nil {
		return nil, false
	}
	return fields, true
}

// jsonVerdict judges a JSON object by the fields of the jsonField rules.
// decided is false when it has none of them.
func jsonVerdict(fields map[string]json.RawMessage) (failed, decided bool) {
	var meta map[string]json.RawMessage
	if raw, ok := fields["metadata"]; ok {
		_ = json.Unmarshal(raw, &meta) // not an object: no metadata
	}
	for _, r := range toolRules {
		if r.where != jsonField {
			continue
		}
		for _, k := range r.keys {
			for _, obj := range [2]map[string]json.RawMessage{fields, meta} {
				if raw, ok := obj[k]; ok {
					decided = true
					if r.value(raw) {
						return true, true
					}
				}
			}
		}
	}
	return false, decided
}

// jsonText is the text of a JSON object that has no field a jsonField rule
// reads: its "output", "stderr" and "result" strings and the text parts of
// its "content" (an MCP tool result without isError), one per line.
func jsonText(fields map[string]json.RawMessage) string {
	var parts []string
	str := func(raw json.RawMessage) {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			parts = append(parts, s)
		}
	}
	for _, k := range []string{"output", "stderr", "result"} {
		if raw, ok := fields[k]; ok {
			str(raw)
		}
	}
	if raw, ok := fields["content"]; ok {
		var items []struct {
			Text json.RawMessage `json:"text"`
		}
		if json.Unmarshal(raw, &items) == nil {
			for _, it := range items {
				str(it.Text)
			}
		} else {
			str(raw)
		}
	}
	return strings.Join(parts, "\n")
}

// textLine is a non-empty line of a tool output.
type textLine struct {
	s        string // white space trimmed, capped at maxRuleLine bytes
	off, end int    // where the line starts and ends in the output
	indented bool   // the line starts with white space
}

// textVerdict judges a tool output that is text by the rules; decided is
// false when none matched.
func textVerdict(s string) (failed, decided bool) { return verdictOf(s, toolRules) }

// verdictOf judges s by rules, a part of toolRules, as textVerdict does.
func verdictOf(s string, rules []toolRule) (failed, decided bool) {
	var headBuf [headCount]textLine
	var tailBuf [tailLines]textLine
	head, tail := lines(s, headBuf[:0], tailBuf[:0])
	for i := range rules {
		r := &rules[i]
		var failed, matched bool
		switch r.where {
		case headJSON:
			failed, matched = embeddedJSON(s, head)
		case firstLine:
			if len(head) > 0 {
				failed, matched = r.match(head[0], s[head[0].end:])
			}
		case headLines:
			for _, l := range head {
				if failed, matched = r.match(l, ""); matched {
					break
				}
			}
		case lastLine:
			if len(tail) > 0 {
				failed, matched = r.match(tail[0], "")
			}
		case lastLines:
			for _, l := range tail {
				if failed, matched = r.match(l, ""); matched {
					break
				}
			}
		case anyLine:
			failed := anyLineFailed(s) || speaksOfFailure(s) || endSpeaksOfFailure(s, tail) || lastSentenceFailed(s, tail) || usageAlone(s, head) || usageAfterComplaint(head)
			return failed, failed
		}
		if matched {
			return failed, true
		}
	}
	return false, false
}

// match reports whether l, followed by the text rest, matches r, and if so
// whether that says the tool failed.
func (r *toolRule) match(l textLine, rest string) (failed, matched bool) {
	line := l.s
	if r.filter && (line == "" || !r.first.has(line[0])) {
		return false, false
	}
	if r.col0 && l.indented || r.pre != nil && !r.pre(line) || r.literal != "" && !strings.Contains(line, r.literal) ||
		r.lits != nil && !r.mayHold(line) {
		return false, false
	}
	next := ""
	if r.next != nil {
		if next = nextLine(rest); r.nextFilter && (next == "" || !r.nextByte.has(next[0])) {
			return false, false
		}
	}
	if !r.code {
		return !r.ok, r.re.MatchString(line) && (r.also == nil || r.also.MatchString(line)) && (r.alsoFn == nil || r.alsoFn(line)) &&
			(r.next == nil || r.next.MatchString(next)) && (r.unless == nil || !r.unless.MatchString(line))
	}
	m := r.re.FindStringSubmatch(line)
	if m == nil {
		return false, false
	}
	n, err := strconv.Atoi(m[1])
	return err != nil || n != 0, true
}

// embeddedJSON judges a JSON object that opens one of the head lines after
// the first and runs to the end of s (Codex's "Script completed", "Wall
// time", "Output:" and then its exec result), when its fields decide.
func embeddedJSON(s string, head []textLine) (failed, decided bool) {
	for _, l := range head[min(1, len(head)):] {
		if l.s[0] != '{' {
			continue
		}
		if fields, ok := jsonObject(s[l.off:]); ok {
			return jsonVerdict(fields)
		}
	}
	return false, false
}

// anyLineFailed reports whether a line of s matches an anyLine rule.
func anyLineFailed(s string) bool {
	if len(s) > maxScan {
		return anyLineFailed(s[:maxScan/2]) || anyLineFailed(s[len(s)-maxScan/2:])
	}
	rules := toolRules[anyStart:]
	fenced := false
	prev := ""
	for rest := s; rest != ""; {
		var raw string
		raw, rest, _ = strings.Cut(rest, "\n")
		l := strings.TrimSpace(raw)
		if l == "" {
			continue
		}
		if (l[0] == '`' || l[0] == '~') && (strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~")) {
			fenced, prev = !fenced, ""
			continue
		}
		if fenced {
			continue
		}
		if len(l) > maxRuleLine {
			l = l[:maxRuleLine]
		}
		line := textLine{s: l, indented: raw[0] == ' ' || raw[0] == '\t'}
		cand := anyIndex[l[0]]
		if line.indented {
			cand[0] &^= anyCol0[0]
			cand[1] &^= anyCol0[1]
		}
		if !isLocated(l) {
			cand[0] &^= anyLocated[0]
			cand[1] &^= anyLocated[1]
		}
		for w, c := range cand {
			for ; c != 0; c &= c - 1 {
				r := &rules[64*w+bits.TrailingZeros64(c)]
				if _, matched := r.match(line, rest); matched && (r.notAfter == nil || !r.notAfter.MatchString(prev)) {
					return true
				}
			}
		}
		prev = l
	}
	return false
}

// A short output that no rule decided is read as a failure when one of its
// lines says in words that something failed ("key1 already exists.",
// "f1.txt is not a public key file.", "Package x was not found in the
// search path", "comm: file 1 is not in sorted order") and nothing in it
// speaks of success. Only short outputs: in a long one such a sentence is
// as likely a line of a log, a listing or a document.
const (
	maxShortBytes = 1024
	maxShortLines = 4
)

// warningLine reports whether l only warns or informs: its first word, or
// its second after the tool's name, is a level below error ("npm warn
// Unknown user config …", "tool: warning: …").
func warningLine(l string) bool {
	if isLevelWord(l) {
		return true
	}
	i := strings.IndexByte(l, ' ')
	return i > 0 && !strings.ContainsAny(l[:i], "\"'") && isLevelWord(l[i+1:])
}

// isLevelWord reports whether s opens with a word of a level below error.
func isLevelWord(s string) bool {
	n := 0
	for n < len(s) && ('a' <= s[n]|0x20 && s[n]|0x20 <= 'z') {
		n++
	}
	switch strings.ToLower(s[:n]) {
	case "warn", "warning", "note", "notice", "info", "hint":
		return true
	}
	return false
}

// tabRun is a run of tabs between the columns of a table's row.
var tabRun = mustRe(`\t\t`)

// tableRow reports whether l is a row of a table: cells between bars, or
// columns apart by a run of tabs (sdiff, paste, column -t's input).
func tableRow(l string) bool {
	return strings.ContainsRune(l, '|') || strings.Contains(l, "\t\t")
}

// failureSentence is a phrase that says something failed: a verb or an
// adjective, not a noun ("error", "errors.py" and "ValidationError" are
// names as often).
var failureSentence = mustRe(`(?i)\b(?:failed|cannot|can't|could ?n[o']t|unable to|no such|(?:does|do|did)(?: not|n't) exist|already exists|is not an?|is not (?:in )?sorted|not in sorted order|(?:no longer|is not|not) supported|unsupported|denied|refused|not (?:allowed|permitted|installed)|(?:is|are) broken|would reformat|incorrect|mismatch(?:ed)?|rejected|(?:has|have) expired|timed out|abort(?:ed|ing)|g(?:ave|iving) up|errors? (?:occurred|encountered)|incomplete|corrupt(?:ed)?|malformed|unrecogni[sz]ed|invalid|illegal|not recognized)\b`)

// failureSentenceMore are more phrases of failureSentence, each found
// only in a line that holds one of failureSentenceMoreStems: a short
// negation ("isn't supported", "can not"), a thing of a kind named and
// not found or not opened ("Class X not found.", "File x.out not
// opened"), nothing found for a name, a thing unknown ("is unknown to
// libcap", "Unknown identifier \"user\""), a tool that stops for a reason
// ("Exiting due to level-1 (INFO) system message.", "building terminated
// because of errors."), a package to install first, a file whose magic
// number or checksum is wrong, a thing named in quotes that is not
// available ("locale 'xx_YY.UTF-8' not available"), a value that must be
// given and was not (LLVM's "for the -o option: must be specified at
// least once!"), a need of root's privileges ("You need root privileges
// to run this program."), and what was expected against what came
// ("Expected 3 lines, got 2.").
var failureSentenceMore = mustRe(`(?i)\b(?:can not|(?:class|file|module|package|command|function|method|symbol|host|user|group|resource|directory|image|object|table|record|entry|program|script|engine|library|device|interface|section|target|item|variable|property|field|option|plugin|service|process|unit) [\x60'"‘“]?[\w.:/@+-]+[\x60'"’”]? (?:was )?not (?:found|opened|loaded)|no (?:[\w-]+ ){1,3}found for ["'\x60‘“]|is unknown|unknown to|unknown (?:[\w-]+ ){1,2}["'\x60‘“\[]|(?:is|are|was|were)n't (?:supported|allowed|permitted|installed|recognized|valid|available)|(?:exit(?:ing|ed)|stop(?:ping|ped)|halt(?:ing|ed)|terminat(?:ing|ed)) (?:due to|because of)|need to install|bad (?:magic|checksum|crc|superblock|signature)\b|\w[\x60'"’”] (?:is )?not available|must (?:\w+ )?be (?:specified|given|provided|supplied)|(?:need|needs|require|requires) (?:\w+ )?(?:root|superuser) privileges|must be (?:run as )?(?:root|superuser|privileged)|expected\b[^.;!?\n]{1,60}?,? (?:but )?(?:got|found|received)\b)\b`)

var failureSentenceMoreStems = []string{"n't ", "due to", "because of", "need to install", "bad ", "can not", "not found", "not opened", "not loaded", "found for", "nknown", "not available", "must ", "xpected", "privileges"}

// saysFailed reports whether l holds a phrase of failureSentence or of
// failureSentenceMore. Its callers have checked mayFail(l).
func saysFailed(l string) bool {
	return failureSentence.MatchString(l) || containsAny(l, failureSentenceMoreStems) && failureSentenceMore.MatchString(l)
}

// negatedFailure is a line that says nothing failed.
var negatedFailure = mustRe(`(?i)\b(?:no|0|zero|without|none|never|nothing)\s+(?:\w+\s+)?(?:errors?|fail\w*|problems?|issues?|warnings?|invalid|mismatch(?:es)?|corrupt\w*)\b|\b(?:errors?|fail(?:ed|ures?|s)?|problems?|invalid|mismatch(?:es)?|corrupt\w*)\b[^:=\n]{0,40}[:=]\s*(?:0|none|\[\]|null|nil|false)\b|\berror[ _]handling\b`)

// shortSuccess is a word of success: an output that holds one is not read
// as a failure by its words.
var shortSuccess = mustRe(`(?i)\b(?:success(?:ful(?:ly)?)?|succeeded|passed|passing|done|complete[d]?|finished|up[ -]to[ -]date|all good|ok|as expected)\b|✓|✔`)

// conditional is a line that says what would happen, not what did.
var conditional = mustRe(`(?i)\b(?:if|when|whenever|unless|means|should|may|might)\b`)

// pathFirst is a line that opens with a file's path and a colon: a hit of
// grep -r, a line of a listing.
var pathFirst = mustRe(`^[^\s:]*[./][^\s:]*:`)

// logRecord is a line of a log: a timestamp or a level first (an ERROR
// record among others is no verdict on the command).
var logRecord = mustRe(`^(?:\d{2,4}[-/:]\d|\[?(?:INFO|DEBUG|WARN(?:ING)?|TRACE|NOTICE|ERROR)\b)`)

// glogRecord is a record of glog's format (a severity letter, the date
// and the time: Kubernetes' tools and many a Go or C++ program log so).
var glogRecord = mustRe(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d`)

// failureStems are what every phrase of failureSentence and
// failureSentenceMore holds, lower-cased.
var failureStems = []string{"fail", "not", "n't", "unable", "unknown", "bad ", "found for", "no such", "exist", "denied", "refused", "broken", "reformat", "supported",
	"incorrect", "mismatch", "rejected", "expired", "timed out", "abort", "gave up", "giving up", "occurred", "encountered",
	"incomplete", "due to", "because of", "need to install", "corrupt", "malformed", "unrecogni", "invalid", "illegal", "must ", "expected", "privileges"}

// mayFail is failureSentence's cheap first test: whether l, lower-cased,
// holds one of failureStems.
func mayFail(l string) bool {
	var buf [maxRuleLine]byte
	b := buf[:0]
	for i := 0; i < len(l) && i < len(buf); i++ {
		c := l[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	for _, stem := range failureStems {
		if bytes.Contains(b, []byte(stem)) {
			return true
		}
	}
	return false
}

// speaksOfFailure reports whether s is a short output one of whose lines
// says that something failed, with no word of success in it. Lines of
// data (grep hits, lines that open with a path, log records, tables,
// JSON, markup, commit subjects, format strings) and conditional
// sentences do not count; a document (a Markdown heading, a fence) is not
// read at all.
func speaksOfFailure(s string) bool {
	if len(s) > maxShortBytes {
		return false
	}
	n, found := 0, false
	for rest := s; rest != ""; {
		var raw string
		raw, rest, _ = strings.Cut(rest, "\n")
		l := strings.TrimSpace(raw)
		if l == "" {
			continue
		}
		if n++; n > maxShortLines {
			return false
		}
		if l[0] == '#' || strings.HasPrefix(l, "```") {
			return false // a document
		}
		if found || !mayFail(l) || tableRow(l) || strings.IndexByte("[{<>", l[0]) >= 0 ||
			!saysFailed(l) || notOSError.MatchString(l) || pathFirst.MatchString(l) ||
			logRecord.MatchString(l) || negatedFailure.MatchString(l) || conditional.MatchString(l) ||
			commitSubjectRe.MatchString(l) || formatVerb.MatchString(l) || warningLine(l) {
			continue
		}
		found = true
	}
	return found && !shortSuccess.MatchString(s)
}

// usageAlone reports whether s is a tool's synopsis and nothing more
// ("Usage: chattr [-RVf] [-+=aAcCdDeijPsStTuFx] files...", Perl's
// pod2usage): what a tool prints when it was called wrong. Asked for its
// help, a tool says more: what it does, its options.
func usageAlone(s string, head []textLine) bool {
	if len(s) > maxShortBytes || len(head) == 0 || !usageLine.MatchString(head[0].s) {
		return false
	}
	return len(head) <= maxUsageLines && !strings.Contains(s, "\n-") && !strings.Contains(s, " -h, ")
}

// usageAfterComplaint reports whether an output opens with a complaint
// ("input and output file must both be specified.", "`cargo metadata`
// exited with an error: …") and shows the tool's synopsis within its
// first lines: a tool called wrong says why, then how to call it. Asked
// for its help, a tool opens with what it does, a sentence that begins
// with a capital ("Checks files for invalid UTF-8."), or with its name: a
// complaint here is a sentence that begins in lower case and says
// something failed, or one that holds "error:".
func usageAfterComplaint(head []textLine) bool {
	if len(head) < 2 || usageLine.MatchString(head[0].s) {
		return false
	}
	synopsis := false
	for _, h := range head[1:] {
		if h.s[0]|0x20 == 'u' && usageLine.MatchString(h.s) {
			synopsis = true
			break
		}
	}
	l := head[0].s
	if synopsis && badArgument.MatchString(l) {
		return true
	}
	return synopsis && (strings.Contains(l, "rror: ") || 'a' <= l[0] && l[0] <= 'z') &&
		!markup(l) && mayFail(l) && saysFailed(l) && !negatedFailure.MatchString(l) && !conditional.MatchString(l) && !warningLine(l)
}

// badArgument opens a complaint about an argument the tool was given
// ("Unknown option: to-debb", "Invalid argument '-5'").
var badArgument = mustRe(`^(?:Unknown|Unrecogni[sz]ed|Invalid|Illegal|Bad) (?:option|argument|flag|command|parameter|switch)s?(?:: |\s+['"\x60‘-])`)

// usageLine opens a synopsis.
var usageLine = mustRe(`^(?:[Uu]sage|USAGE):(?: \S|$)`)

// maxUsageLines is how many non-empty lines a synopsis alone may take.
const maxUsageLines = 3

// isLocated reports whether the first word of l ends with ':' and a space,
// as the lines of compilers and programs that say where an error is do
// ("x.c:4:5: error: …", "mkdir: missing operand"); a grep hit
// ("x.c:4:\tint y;") is not.
func isLocated(l string) bool {
	i := strings.IndexAny(l, " \t")
	return i > 0 && l[i] == ' ' && l[i-1] == ':'
}

// nextLine returns the first non-empty line of s, white space trimmed and
// capped at maxRuleLine bytes.
func nextLine(s string) string {
	for s != "" {
		var l string
		l, s, _ = strings.Cut(s, "\n")
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > maxRuleLine {
				l = l[:maxRuleLine]
			}
			return l
		}
	}
	return ""
}

// lines appends to head the first headCount non-empty lines of s, and to
// tail its last tailLines non-empty lines, last first.
func lines(s string, head, tail []textLine) ([]textLine, []textLine) {
	mk := func(raw string, off int) (textLine, bool) {
		l := strings.TrimSpace(raw)
		if l == "" {
			return textLine{}, false
		}
		if len(l) > maxRuleLine {
			l = l[:maxRuleLine]
		}
		return textLine{s: l, off: off, end: off + len(raw), indented: raw[0] == ' ' || raw[0] == '\t'}, true
	}
	for off := 0; off < len(s) && len(head) < headCount; {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			end = len(s) - off
		}
		if l, ok := mk(s[off:off+end], off); ok {
			head = append(head, l)
		}
		off += end + 1
	}
	for end := len(s); end > 0 && len(tail) < tailLines; {
		start := strings.LastIndexByte(s[:end], '\n') + 1
		if l, ok := mk(s[start:end], start); ok {
			tail = append(tail, l)
		}
		end = start - 1
	}
	return head, tail
}

// JSON value tests.

func jsonNonEmpty(raw []byte) bool {
	v := bytes.TrimSpace(raw)
	switch {
	case len(v) == 0, bytes.Equal(v, []byte("null")), bytes.Equal(v, []byte("false")):
		return false
	case v[0] == '"':
		var s string
		return json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != ""
	case v[0] == '{' || v[0] == '[':
		var x any
		if json.Unmarshal(v, &x) != nil {
			return false
		}
		switch x := x.(type) {
		case map[string]any:
			return len(x) > 0
		case []any:
			return len(x) > 0
		}
		return false
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		return jsonNonZero(v)
	}
	return bytes.Equal(v, []byte("true"))
}

func jsonTrue(raw []byte) bool {
	v := bytes.TrimSpace(raw)
	return bytes.Equal(v, []byte("true")) || bytes.EqualFold(v, []byte(`"true"`))
}

func jsonFalse(raw []byte) bool {
	v := bytes.TrimSpace(raw)
	return bytes.Equal(v, []byte("false")) || bytes.EqualFold(v, []byte(`"false"`))
}

func jsonFailStatus(raw []byte) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "error", "errored", "failed", "failure", "fail", "fatal", "crashed", "timeout", "timed_out", "timed out":
		return true
	}
	return false
}

func jsonNonZero(raw []byte) bool {
	f, ok := jsonNumber(raw)
	return ok && f != 0
}

// jsonHTTPError: an HTTP status of 400 to 599.
func jsonHTTPError(raw []byte) bool {
	f, ok := jsonNumber(raw)
	return ok && f >= 400 && f < 600
}

// jsonNumber reads a number, or a string holding one.
func jsonNumber(raw []byte) (float64, bool) {
	v := bytes.TrimSpace(raw)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, false
		}
		v = []byte(strings.TrimSpace(s))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}
