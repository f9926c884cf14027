package guard

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// where a tool rule looks.
type where int

const (
	jsonField where = iota // a top-level field of a JSON object (or of its "metadata" object)
	firstLine              // the first non-empty line, leading white space removed
	firstTwo               // the first two non-empty lines, joined by "\n"
	headLines              // each of the first headCount non-empty lines
	lastLines              // each of the last tailLines non-empty lines
)

// headCount is how many leading lines headLines rules look at: agents wrap
// a command's output in a header of their own (Codex: "Chunk ID: …",
// "Wall time: …", then "Process exited with code 1").
const headCount = 4

// tailLines is how many trailing lines lastLines rules look at: test
// runners and build tools print their verdict in the last few lines.
const tailLines = 5

// maxRuleLine caps the bytes of a line that rules look at.
const maxRuleLine = 512

// toolRule is one row of toolRules.
type toolRule struct {
	name         string
	where        where
	keys         []string          // jsonField: the field names
	test         func([]byte) bool // jsonField: does the raw value say failed?
	re           *regexp.Regexp    // text rules
	literal      string            // text rules: when set, a line without it cannot match (spares an unanchored regex)
	first        byteSet           // text rules: the bytes a match can begin with, when filter is set
	filter       bool
	nonZeroGroup bool // text rules: group 1 must be a non-zero number
}

var exitKeys = []string{"exit_code", "exitCode", "exitcode", "returncode", "return_code", "returnCode", "exit_status", "exitStatus"}

// exitCodeRe matches a line that opens with an exit code statement
// ("Exit code: 1", "exit status 2", "Process exited with code 1");
// group 1 is the code.
const exitCodeRe = `(?i)^(?:[\[(]\s*|(?:error:\s*)?(?:the\s+)?(?:process|command|program|script|job|task|shell)\b[^:\n]{0,30}?\s)?(?:exit(?:ed)?(?: with)?(?: exit)? (?:code|status)|return ?code|exit_?code|exited with)\s*[:=]?\s*\(?(-?\d+)`

// toolRules decide whether a role:"tool" message says the tool failed. A
// rule's regex keeps its "^" outside any alternation: Go's regexp treats a
// regex as anchored only then, and otherwise tries it at every offset of
// the line (a few µs per line where an anchored one fails at once). The
// first rule that matches decides "failed"; when none matches the tool
// succeeded. A JSON object is judged by its fields only; any other content
// by its first and last lines, so a word like "error" in the middle of
// successful output (a grep hit, a log line, a test named TestError) does
// not count.
var toolRules = []toolRule{
	// JSON objects.
	{name: "json error", where: jsonField, keys: []string{"error"}, test: jsonNonEmpty},
	{name: "json errors", where: jsonField, keys: []string{"errors"}, test: jsonNonEmpty},
	{name: "json is_error", where: jsonField, keys: []string{"is_error", "isError"}, test: jsonTrue},
	{name: "json status", where: jsonField, keys: []string{"status"}, test: jsonFailStatus},
	{name: "json success/ok false", where: jsonField, keys: []string{"success", "ok"}, test: jsonFalse},
	{name: "json exit code", where: jsonField, keys: exitKeys, test: jsonNonZero},

	// Text: how the output opens.
	{name: "python traceback", where: firstLine, re: mustRe(`^Traceback \(most recent call last\):`)},
	{name: "tool_use_error", where: firstLine, re: mustRe(`^<tool_use_error>`)},
	{name: "error prefix", where: firstLine, re: mustRe(`^(?:Error|ERROR|error)(?:\[[\w-]+\])?:`)},
	{name: "error while doing", where: firstLine, re: mustRe(`^(?:Error|ERROR) (?:executing|calling|running|reading|writing|opening|parsing|loading|invoking|fetching|processing|while|during|occurred|in tool)\b`)},
	{name: "package manager error", where: firstLine, re: mustRe(`^(?:error (?:[A-Z]|TS\d)|npm ERR!|npm error\b|E: |ERR_PNPM_\w+|\[ERROR\] )`)},
	{name: "fatal or panic", where: firstLine, re: mustRe(`^(?:(?:fatal|FATAL|Fatal)(?: error)?:|panic:|PHP (?:Fatal|Parse) error:|(?:Fatal|Parse) error:)`)},
	{name: "exception", where: firstLine, re: mustRe(`^(?:(?:Uncaught|Unhandled) (?:exception\.? |rejection )?)?(?:[A-Za-z_$][\w$]*\.)*(?:[A-Z][\w$]*)?(?:Error|Exception|Exit|Interrupt|Fault)\b(?::|\s*$| in thread| \[)`)},
	{name: "unhandled", where: firstLine, re: mustRe(`^(?:Uncaught|Unhandled)\b`)},
	{name: "command failed", where: firstLine, re: mustRe(`^(?:Command failed\b|Command (?:exited|returned) (?:with )?(?:a )?non-zero)`)},
	{name: "exit code", where: headLines, re: mustRe(exitCodeRe), nonZeroGroup: true},
	{name: "shell error", where: firstLine, re: mustRe(`^(?:ba|z|da|fi|k)?sh(?:: line \d+|: \d+)?: `)},
	{name: "command error", where: firstLine, re: mustRe(`^[\w./-]+: (?:[^:\n]+: )?(?:No such file or directory|Permission denied|command not found|cannot (?:access|open|stat|remove|create)|Is a directory|Not a directory|not found$)`)},
	{name: "os error", where: firstLine, re: mustRe(`^(?:No such file or directory|Permission denied|Access denied|Operation not permitted)\b`)},
	{name: "failed", where: firstLine, re: mustRe(`^(?:(?:FAIL|FAILED|FAILURE)\b|BUILD FAILED|Build failed|Compilation failed|Failed to compile|[Ff]ailed to \w|Failed:)`)},
	{name: "compiler diagnostic", where: firstLine, re: mustRe(`^[^\s:(]+(?::\d+(?::\d+)?|\(\d+,\d+\)):?\s*(?:error|fatal error)\b`)},
	{name: "edit tool error", where: firstLine, re: mustRe(`^(?:No replacement was performed|String to replace not found|old_string not found|Found \d+ matches of the string to replace|Invalid (?:arguments?|parameters?|params)\b|Unknown tool\b)`)},
	{name: "go build error", where: firstTwo, re: mustRe(`^# \S+\n\S+\.go:\d+:\d+: `)},

	// Text: how the output ends.
	{name: "exit code at end", where: lastLines, re: mustRe(exitCodeRe), nonZeroGroup: true},
	{name: "go test FAIL", where: lastLines, re: mustRe(`^FAIL\b`)},
	{name: "failed summary", where: lastLines, re: mustRe(`^(?:=+ .*\b[1-9]\d* (?:failed|errors?)\b|Found [1-9]\d* errors?\b|Tests?:\s+[1-9]\d* failed)`)},
	{name: "problems summary", where: lastLines, literal: " problem", re: mustRe(`\b[1-9]\d* problems? \([1-9]\d* errors?`)},
	{name: "build error at end", where: lastLines, re: mustRe(`^(?:error: (?:could not compile|aborting due to)|npm (?:ERR!|error) |make(?:\[\d+\])?: \*\*\* .*Error \d+)`)},
	{name: "crash", where: lastLines, re: mustRe(`^(?:Segmentation fault|Bus error|Killed|Aborted)\b`)},
}

// mustRe compiles a rule regex.
func mustRe(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }

func init() {
	for i := range toolRules {
		if r := &toolRules[i]; r.re != nil {
			r.first, r.filter = firstBytes(r.re.String())
		}
	}
}

// ToolFailed reports whether the content of a role:"tool" message says the
// tool failed. JSON objects fail on a non-empty "error" or "errors", on
// "is_error"/"isError": true, "status": "error"/"failed", "success" or "ok":
// false, or a non-zero "exit_code"/"exitCode"/"returncode" (also inside a
// "metadata" object). Other text fails when it opens with a traceback,
// "Error:", "fatal:", "panic:", an exception, "Command failed", a non-zero
// exit code, "npm ERR!"..., or ends with a failing test or build summary.
// Successful output that merely contains "error" does not count.
func ToolFailed(content string) bool {
	s := strings.TrimLeft(content, " \t\r\n\ufeff")
	if s == "" {
		return false
	}
	if s[0] == '{' {
		if fields, ok := jsonObject(s); ok {
			return jsonFailed(fields)
		}
	} else if s[0] == '"' {
		var inner string
		if json.Unmarshal([]byte(strings.TrimSpace(s)), &inner) == nil {
			return ToolFailed(inner)
		}
	}
	return textFailed(s)
}

func jsonObject(s string) (map[string]json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &fields); err != nil || fields == nil {
		return nil, false
	}
	return fields, true
}

func jsonFailed(fields map[string]json.RawMessage) bool {
	var meta map[string]json.RawMessage
	if raw, ok := fields["metadata"]; ok {
		_ = json.Unmarshal(raw, &meta) // not an object: no metadata
	}
	for _, r := range toolRules {
		if r.where != jsonField {
			continue
		}
		for _, k := range r.keys {
			if raw, ok := fields[k]; ok && r.test(raw) {
				return true
			}
			if raw, ok := meta[k]; ok && r.test(raw) {
				return true
			}
		}
	}
	return false
}

func textFailed(s string) bool {
	head, tail := lines(s)
	first, second := "", ""
	if len(head) > 0 {
		first = head[0]
	}
	if len(head) > 1 {
		second = head[1]
	}
	for _, r := range toolRules {
		switch r.where {
		case headLines:
			for _, l := range head {
				if r.matches(l) {
					return true
				}
			}
		case firstLine:
			if r.matches(first) {
				return true
			}
		case firstTwo:
			if second != "" && r.matches(first+"\n"+second) {
				return true
			}
		case lastLines:
			for _, l := range tail {
				if r.matches(l) {
					return true
				}
			}
		}
	}
	return false
}

func (r *toolRule) matches(line string) bool {
	if r.filter && (line == "" || !r.first.has(line[0])) {
		return false
	}
	if r.literal != "" && !strings.Contains(line, r.literal) {
		return false
	}
	if !r.nonZeroGroup {
		return r.re.MatchString(line)
	}
	m := r.re.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err != nil || n != 0
}

// lines returns the first headCount non-empty lines of s and its last
// tailLines non-empty lines, last first (white space trimmed, each capped
// at maxRuleLine bytes).
func lines(s string) (head, tail []string) {
	cut := func(l string) string {
		l = strings.TrimSpace(l)
		if len(l) > maxRuleLine {
			l = l[:maxRuleLine]
		}
		return l
	}
	for rest := s; rest != "" && len(head) < headCount; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if l = cut(l); l != "" {
			head = append(head, l)
		}
	}
	for end := len(s); end > 0 && len(tail) < tailLines; {
		start := strings.LastIndexByte(s[:end], '\n') + 1
		if l := cut(s[start:end]); l != "" {
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
	v := bytes.TrimSpace(raw)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return false
		}
		v = []byte(strings.TrimSpace(s))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err == nil && f != 0
}
