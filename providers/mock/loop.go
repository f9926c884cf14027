package mock

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// The scripted model behind [[mock:tool=...]]: which call, how many times,
// until what, and how a loop ends (see the Transport type's doc).

// Bounds of a loop: repeat's default when only until is given, and its cap.
const (
	defaultLoopRepeat = 10
	maxLoopRepeat     = 1000
)

// callArgs are the arguments of a scripted call in the two forms a tool
// takes them.
type callArgs struct {
	json string // a function tool's arguments: a compact JSON object ("{}" when not given as one)
	text string // a custom (freeform) tool's input (see parseCallArgs)
}

// parseCallArgs reads the value of args= or fix=: a JSON object, or a JSON
// string. A custom tool's input is the string, or the "input" of an object
// whose only member it is ({"input":"TEXT"}: any text, brackets
// included), else the object's JSON.
func parseCallArgs(raw string) callArgs {
	a := callArgs{json: "{}"}
	switch {
	case strings.HasPrefix(raw, "{") && json.Valid([]byte(raw)):
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(raw)) == nil {
			a.json = buf.String()
		}
		var only map[string]json.RawMessage
		var input string
		if json.Unmarshal([]byte(raw), &only) == nil && len(only) == 1 && json.Unmarshal(only["input"], &input) == nil {
			a.text = input
			return a
		}
	case strings.HasPrefix(raw, `"`):
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			a.text = s
			return a
		}
	}
	a.text = a.json
	return a
}

// toolScript is a [[mock:tool=NAME ...]] directive.
type toolScript struct {
	name   string
	args   callArgs
	repeat int    // calls answered with results before giving up; 0: not a loop
	until  string // "guard" or "stop": stop once the proxy sends that block
	fix    callArgs
	hasFix bool
}

// parseToolScript reads the value of a tool directive: NAME, then any of
// args=JSON, repeat=N, until=guard|stop and fix=JSON, separated by white
// space. A JSON value is an object (brackets and white space inside it
// allowed) or a string; unknown keys and bad values are ignored.
func parseToolScript(v string) toolScript {
	ts := toolScript{args: callArgs{json: "{}", text: "{}"}}
	v = strings.TrimSpace(v)
	end := strings.IndexFunc(v, unicode.IsSpace)
	if end < 0 {
		end = len(v)
	}
	ts.name = v[:end]
	for rest := v[end:]; ; {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		var key, value string
		key, value, rest = nextField(rest)
		switch key {
		case "args":
			ts.args = parseCallArgs(value)
		case "fix":
			if value != "" {
				ts.fix, ts.hasFix = parseCallArgs(value), true
			}
		case "repeat":
			if n, err := strconv.Atoi(value); err == nil && n > 0 {
				ts.repeat = min(n, maxLoopRepeat)
			}
		case "until":
			if value == "guard" || value == "stop" {
				ts.until = value
			}
		}
	}
	if ts.until != "" && ts.repeat == 0 {
		ts.repeat = defaultLoopRepeat
	}
	return ts
}

// nextField reads "key=value" at the start of s (no leading space) and
// returns the rest. A value that opens a JSON object or array runs to its
// balanced end, one that opens a JSON string to its closing quote, any
// other to the next white space. A word without "=" has an empty key.
func nextField(s string) (key, value, rest string) {
	end := strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	eq := strings.IndexByte(s[:end], '=')
	if eq < 0 {
		return "", "", s[end:]
	}
	key, s = s[:eq], s[eq+1:]
	switch {
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["):
		if e, ok := skipBalanced(s, 0); ok {
			return key, s[:e], s[e:]
		}
	case strings.HasPrefix(s, `"`):
		if e, ok := skipString(s); ok {
			return key, s[:e], s[e:]
		}
	}
	end = strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	return key, s[:end], s[end:]
}

// skipString returns the index just after the JSON string that opens at
// s[0]; false when it does not close.
func skipString(s string) (int, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// loop reports whether the directive is a scripted loop (repeat or until).
func (ts *toolScript) loop() bool { return ts.repeat > 0 }

// pastCall is a tool call of the conversation, made after its last user
// text: the tool's name and its arguments (a function's JSON, a custom
// tool's input) as the client sent them back.
type pastCall struct {
	name, args string
}

// sameArgs reports whether arguments sent back by a client are a's: the
// same JSON object once compacted, or the same text.
func (a callArgs) sameArgs(sent string) bool {
	if sent == a.text || sent == a.json {
		return true
	}
	var buf bytes.Buffer
	return json.Compact(&buf, []byte(sent)) == nil && buf.String() == a.json
}

// toolNext is what a tool directive makes the mock answer.
type toolNext struct {
	call bool     // answer with a call of the directive's tool, with args
	args callArgs //
	text string   // else, when not empty, answer these words
}

// next decides the answer of the tool directive ts to turn t (see the
// Transport type's doc, # Loops). A zero toolNext means the directive does not
// apply: the mock answers as without it.
func (ts *toolScript) next(t turn) toolNext {
	if !ts.loop() {
		switch {
		case !t.userLast:
			return toolNext{}
		case t.toolsForbidden:
			return toolNext{text: "Mock answer: tools were forbidden, so " + ts.name + " was not called."}
		}
		return toolNext{call: true, args: ts.args}
	}
	n := strconv.Itoa(t.results)
	if ts.hasFix {
		for _, c := range t.calls {
			if c.name == ts.name && ts.fix.sameArgs(c.args) {
				return toolNext{text: "Mock answer: fixed " + ts.name + " by calling it with " + ts.fix.shown() + "."}
			}
		}
	}
	if t.toolsForbidden {
		return toolNext{text: "Mock answer: tools were forbidden, so " + ts.name + " was not called again after " + n + " calls."}
	}
	if block := ts.stopBlock(t); block != "" {
		if ts.hasFix {
			return toolNext{call: true, args: ts.fix}
		}
		return toolNext{text: "Mock answer: stopped calling " + ts.name + " after " + n + " calls: the " + block + " appeared."}
	}
	if t.results < ts.repeat {
		return toolNext{call: true, args: ts.args}
	}
	return toolNext{text: "Mock answer: gave up after " + n + " calls of " + ts.name + "."}
}

// stopBlock names the block of the turn that ends the loop ("" when
// none), in what the proxy told the model ([turn.told]): until=stop
// waits for the STOP block; until=guard for the guard block, or the STOP
// block it escalates to.
func (ts *toolScript) stopBlock(t turn) string {
	if ts.until == "" {
		return ""
	}
	switch told := t.told(); {
	case strings.Contains(told, stopMarkers.start):
		return "STOP block"
	case ts.until == "guard" && strings.Contains(told, guardMarkers.start):
		return "repeat-failure guard"
	}
	return ""
}

// shown is the fixed call's arguments as the closing words quote them.
func (a callArgs) shown() string {
	s := a.text
	if rs := []rune(s); len(rs) > 200 {
		s = string(rs[:200]) + "…"
	}
	return s
}
