package guard

import "strings"

// Evidence that carries across tools. The rules of toolRules know the
// shapes of tools one by one; a tool none of them was written for still
// speaks the languages every tool borrows: the operating system's error
// texts, its errno names, the diagnostic prefixes of compilers and
// package managers, HTTP's reason phrases and the counts a checker prints
// at the end. endSpeaksOfFailure reads an output's last lines in those
// languages when no rule decided it, and lets a word of success there
// outweigh them.

// strerrors are the texts the C library gives the errno values (glibc's
// strerror, the POSIX names in the comments of errno.h) and the resolver's
// (gai_strerror), lower-cased; Go's net package prints the last two of
// its own. "<tool>: <object>: <strerror>" is how a Unix program says a
// system call failed.
var strerrors = []string{
	"operation not permitted", "no such file or directory", "no such process", "interrupted system call",
	"input/output error", "no such device or address", "argument list too long", "exec format error",
	"bad file descriptor", "no child processes", "resource temporarily unavailable", "cannot allocate memory",
	"permission denied", "bad address", "block device required", "device or resource busy", "file exists",
	"invalid cross-device link", "no such device", "not a directory", "is a directory", "invalid argument",
	"too many open files in system", "too many open files", "inappropriate ioctl for device", "text file busy",
	"file too large", "no space left on device", "illegal seek", "read-only file system", "too many links",
	"broken pipe", "numerical argument out of domain", "numerical result out of range",
	"resource deadlock avoided", "file name too long", "no locks available", "function not implemented",
	"directory not empty", "too many levels of symbolic links", "identifier removed", "protocol error",
	"bad message", "value too large for defined data type", "operation not supported",
	"address already in use", "cannot assign requested address", "network is down", "network is unreachable",
	"software caused connection abort", "connection reset by peer", "no buffer space available",
	"transport endpoint is not connected", "connection timed out", "connection refused", "host is down",
	"no route to host", "stale file handle", "disk quota exceeded", "operation canceled",
	"required key not available", "key has expired", "protocol not supported",
	"address family not supported by protocol", "socket operation on non-socket",
	"name or service not known", "temporary failure in name resolution",
	"no address associated with hostname", "no such host", "i/o timeout",
	"directory not found", "host is unreachable",
}

// errnoNames are the POSIX errno names (errno.h) that programs print
// rather than the text: Node.js's system errors ("Error: ENOENT: …",
// code: 'ECONNREFUSED'), npm, libuv, Erlang. ENOTFOUND is Node's own for
// a name that does not resolve.
var errnoNames = "E(?:PERM|NOENT|SRCH|INTR|IO|NXIO|2BIG|NOEXEC|BADF|CHILD|AGAIN|NOMEM|ACCES|FAULT|BUSY|EXIST|XDEV|NODEV|NOTDIR|ISDIR|INVAL|NFILE|MFILE|NOTTY|TXTBSY|FBIG|NOSPC|SPIPE|ROFS|MLINK|PIPE|DOM|RANGE|DEADLK|NAMETOOLONG|NOLCK|NOSYS|NOTEMPTY|LOOP|ADDRINUSE|ADDRNOTAVAIL|NETDOWN|NETUNREACH|CONNABORTED|CONNRESET|NOBUFS|NOTCONN|TIMEDOUT|CONNREFUSED|HOSTDOWN|HOSTUNREACH|STALE|DQUOT|CANCELED|NOTSUP|OPNOTSUPP|PROTO|NOTFOUND|AI_AGAIN)"

// httpFailures are the reason phrases of HTTP's client and server errors
// (RFC 9110, section 15.5 and 15.6), the words that follow the status.
var httpFailures = "Bad Request|Unauthorized|Payment Required|Forbidden|Not Found|Method Not Allowed|Not Acceptable|Proxy Authentication Required|Request Time-?out|Conflict|Gone|Length Required|Precondition Failed|(?:Request Entity|Payload|Content) Too Large|URI Too Long|Unsupported Media Type|Range Not Satisfiable|Expectation Failed|Misdirected Request|Unprocessable (?:Entity|Content)|Locked|Failed Dependency|Too Early|Upgrade Required|Precondition Required|Too Many Requests|Request Header Fields Too Large|Unavailable For Legal Reasons|Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Time-?out|HTTP Version Not Supported|Insufficient Storage|Loop Detected|Network Authentication Required|Overloaded"

// endFailure is a line, among an output's last, that says the tool
// failed in a language every tool borrows:
//
//   - a diagnostic prefix: "error:", "Error:", "ERROR:", "fatal:",
//     "E: ", "[error]" (sbt), "[ERROR]" (Maven), "ERROR " and "FAILED",
//     alone or after the tool's name ("keytool error: …", "gcc: fatal
//     error: …"), or a record of Python's logging at ERROR or above
//     ("ERROR:sync:upstream returned 503, giving up");
//   - a system error: a strerror text at the end of the line ("x: y:
//     File exists"), an errno name after "Error" or "code", Python's
//     "[Errno 2]", Rust's "(os error 2)", one of ICU's UErrorCode
//     names ("U_FILE_ACCESS_ERROR", utypes.h);
//   - an HTTP status of 400 or more with its reason phrase;
//   - a count of errors, failures, offences, problems or violations that
//     were found or detected, or of files, tests or checks that failed.
var endFailure = mustRe(`^(?:` +
	`\[(?:error|ERROR|fatal|FATAL)\]\s+\S|` +
	`(?:ERROR|CRITICAL|FATAL):[\w.-]+:\S|` +
	`(?:[A-Za-z][\w.+/-]*:? )?(?:error|Error|ERROR|fatal|Fatal|FATAL)(?: error| ERROR)?(?:\[[\w-]+\])?: \S|` +
	`(?:E|F|FAILED|FAILURE|FAIL|Failed|Failure): \S|` +
	`(?:ERROR|FAILED|FAILURE) [A-Za-z(\["'\x60]|` +
	`(?:FAILED|FAILURE)$` +
	`)`)

// endSystemError, endHTTPError and endCount are endFailure's other
// languages, each run only on the lines a cheap test lets through (see
// endFailed).
var (
	endSystemError = mustRe(`\b(?:[Ee]rror|ERR!?|code)\b.*\b` + errnoNames + `\b|\[Errno \d+\]|\(os error \d+\)`)
	endHTTPError   = mustRe(`\b[45]\d\d:? (?:` + httpFailures + `)\b`)
	endCount       = mustRe(`\b[1-9]\d* (?:errors?|failures?|offen[cs]es?|problems?|violations?)(?:\(s\))? (?:were |was )?(?:found|detected|occurred|reported|generated)\b` +
		`|^[1-9]\d* (?:failed|failing|errors?)\.?$` +
		`|\b[1-9]\d* (?:files?|tests?|checks?|targets?|jobs?|tasks?|hooks?|packages?|modules?) (?:with (?:errors|problems|failures)|failed)\b` +
		`|\b(?:has|have|had|with) [1-9]\d* (?:[\w-]+ ){0,2}(?:errors?|failures?)\b`)
)

// endFailed reports whether l says the tool failed in endFailure's words,
// running each regex only on a line that can match it.
func endFailed(l string) bool {
	if mayEndFail(l) && endFailure.MatchString(l) {
		return true
	}
	if endsWithOSError(l) && osErrorLine.MatchString(l) {
		return true
	}
	if hasErrnoToken(l) && endSystemError.MatchString(l) || strings.Contains(l, "U_") && icuFailed(l) {
		return true
	}
	return hasErrorStatus(l) && endHTTPError.MatchString(l) || hasCount(l) && containsAny(l, countStems) && endCount.MatchString(l)
}

// icuErrorCode is one of ICU's UErrorCode names (utypes.h); U_ZERO_ERROR
// is its success.
var icuErrorCode = mustRe(`\bU_[A-Z_]*_(?:ERROR|FAILURE)\b`)

// icuFailed reports whether l names an ICU error code other than success.
func icuFailed(l string) bool {
	for _, c := range icuErrorCode.FindAllString(l, -1) {
		if c != "U_ZERO_ERROR" {
			return true
		}
	}
	return false
}

// hasErrnoToken reports whether l holds what endSystemError looks for: a
// word of an upper-case E and two more capitals or digits (an errno
// name), "[Errno " or "(os error ".
func hasErrnoToken(l string) bool {
	for i := 0; i+2 < len(l); i++ {
		if l[i] == 'E' && (i == 0 || !isLetter(l[i-1])) && isUpperOrDigit(l[i+1]) && isUpperOrDigit(l[i+2]) {
			return true
		}
	}
	return strings.Contains(l, "[Errno ") || strings.Contains(l, "(os error ")
}

func isUpperOrDigit(c byte) bool { return 'A' <= c && c <= 'Z' || isDigit(c) }

// hasCount reports whether l holds a number followed by a space and a
// letter: where endCount's counts can be.
func hasCount(l string) bool {
	for i := 0; i+2 < len(l); i++ {
		if '1' <= l[i] && l[i] <= '9' && (i == 0 || !isDigit(l[i-1])) {
			j := i + 1
			for j < len(l) && isDigit(l[j]) {
				j++
			}
			if j+1 < len(l) && l[j] == ' ' && isLetter(l[j+1]) {
				return true
			}
		}
	}
	return false
}

// mayEndFail is endFailure's cheap first test: the line opens with a
// byte its prefixes open with, or its second word is "error" or "fatal".
func mayEndFail(l string) bool {
	switch l[0] {
	case '[', 'E', 'F', 'C', 'e', 'f':
		return true
	}
	i := strings.IndexByte(l, ' ')
	if i < 0 {
		return false
	}
	w := l[i+1:]
	return strings.HasPrefix(w, "error") || strings.HasPrefix(w, "Error") || strings.HasPrefix(w, "ERROR") ||
		strings.HasPrefix(w, "fatal") || strings.HasPrefix(w, "Fatal") || strings.HasPrefix(w, "FATAL")
}

// countStems are what a line must hold for endCount to match it.
var countStems = []string{"error", "fail", "offen", "problem", "violation"}

// hasErrorStatus reports whether l holds three digits from 400 to 599
// followed by a space or a colon: where an HTTP error status can be.
func hasErrorStatus(l string) bool {
	for i := 0; i+3 < len(l); i++ {
		if (l[i] == '4' || l[i] == '5') && isDigit(l[i+1]) && isDigit(l[i+2]) && (l[i+3] == ' ' || l[i+3] == ':') &&
			(i == 0 || !isDigit(l[i-1])) {
			return true
		}
	}
	return false
}

// endSuccess is a word of success among an output's last lines: it
// outweighs endFailure there (a log that records an error and then
// recovers, a summary of "0 errors").
var endSuccess = mustRe(`(?i)\b(?:success(?:ful(?:ly)?)?|succeeded|passed|passing|all good|up[ -]to[ -]date)\b|\b(?:no|0|zero|without) (?:\w+ )?(?:errors?|failures?|failed|problems?|issues?|offen[cs]es?|violations?)\b|\berrors?\s*[:=]\s*(?:0|none)\b|✓|✔`)

// linterFinding is a checker's finding with its code: "x.py:1:89: E501
// line too long" (pycodestyle, flake8, ruff, pylint's parseable form),
// "a.rb:1:81: C: Line is too long." (RuboCop), the code first and the
// place on the next line ("E3003 'Role' is a required property",
// cfn-lint), or the place as a range ("t.yaml:5:5:5:15:E3003:…"). A checker that finds
// something exits with a status that says so.
var linterFinding = mustRe(`^(?:[^\s:]+:\d+:\d+(?:: |:\d+:\d+:)(?:[A-Z]{1,3}\d{2,4}\b|[CWEF]: )|[EWF]\d{4} [^\d\s])`)

// timestamped is a line of a log: a time first. What a log records among
// the last lines of an output is no verdict on the command.
var timestamped = mustRe(`^\[?\d{2,4}[-/:.]\d`)

// endFailureLines is how many of an output's last non-empty lines
// endSpeaksOfFailure reads: a tool's verdict is its last word, and the
// lines a little before it are as likely a log it recovered from.
const endFailureLines = 3

// endSpeaksOfFailure reports whether one of the last endFailureLines lines
// of an output (tail: its last lines, last first) says it failed in
// endFailure's words, with no word of success among them. Lines of a log
// (a time first; a level first but for the last line, the tool's last
// word), of a listing (a path and a colon first, but for a checker's
// finding; an errno name first) and lines that say what would happen are
// not read.
func endSpeaksOfFailure(s string, tail []textLine) bool {
	if isDocument(s) {
		return false
	}
	end := tail[:min(len(tail), endFailureLines)]
	found := false
	for i, l := range end {
		if !markup(l.s) && !keyValueRecord.MatchString(l.s) && (linterFinding.MatchString(l.s) || endFailed(l.s) &&
			!timestamped.MatchString(l.s) && (i == 0 || !logRecord.MatchString(l.s)) &&
			!notOSError.MatchString(l.s) && !conditional.MatchString(l.s)) {
			found = true
			break
		}
	}
	if !found {
		return false
	}
	for _, l := range end {
		if endSuccess.MatchString(l.s) {
			return false
		}
	}
	return true
}

// lastSentenceFailed reports whether the last line of an output says in
// words that something failed (failureSentence, as speaksOfFailure reads
// a short output), with no word of success in the last lines: a tool's
// own last word ("Remote file does not exist -- broken link!!!",
// "Configuring incomplete, errors occurred!"), not a line of code.
func lastSentenceFailed(s string, tail []textLine) bool {
	if len(tail) == 0 || isDocument(s) {
		return false
	}
	l := tail[0].s
	if markup(l) || tableRow(l) || strings.IndexByte("[{<", l[0]) >= 0 || !mayFail(l) ||
		notOSError.MatchString(l) || pathFirst.MatchString(l) || logRecord.MatchString(l) ||
		!saysFailed(l) || negatedFailure.MatchString(l) || conditional.MatchString(l) ||
		commitSubjectRe.MatchString(l) || codeLine.MatchString(l) || formatVerb.MatchString(l) || warningLine(l) {
		return false
	}
	for _, t := range tail[:min(len(tail), endFailureLines)] {
		if shortSuccess.MatchString(t.s) {
			return false
		}
	}
	// Many such sentences in a row are a list of messages (strings or
	// grep run on a program or a message catalogue), not a verdict; the
	// records of a log (kubectl's retries before its last word) are no
	// such list.
	n := 0
	for _, t := range tail {
		if mayFail(t.s) && !glogRecord.MatchString(t.s) && saysFailed(t.s) {
			n++
		}
	}
	return n < maxListed
}

// maxListed is how many of an output's last tailLines lines may say that
// something failed before they read as a list of messages.
const maxListed = 4

// codeLine is a line of source code rather than a sentence: a statement
// first, a brace, a semicolon or a call.
var codeLine = mustRe(`^(?:raise|return|throw|if|elif|else|for|while|def|func|fn|let|const|var|case|except|catch|assert|print|echo|die|panic)\b|[{};]|\w\(`)

// formatVerb is a printf verb: a line that holds one is a format string,
// a message not yet said.
var formatVerb = mustRe(`%[-+ #0]*\d*(?:\.\d+)?[sdiufxXcpqvlz]\b`)

// isDocument reports whether s reads as a document rather than a tool's
// output: it opens with a Markdown heading or holds a fenced block, and
// what it says of errors it quotes.
func isDocument(s string) bool {
	return s[0] == '#' || strings.Contains(s, "```") || strings.Contains(s, "~~~")
}

// markup reports whether l is a line of a list, a quote, a table or a
// heading: a document's, not a tool's verdict.
func markup(l string) bool {
	return strings.IndexByte("-*+>|#", l[0]) >= 0
}
