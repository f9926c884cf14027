package mock

import (
	"strconv"
	"strings"
	"time"
)

// directives are the [[mock:...]] found in a user text.
type directives struct {
	status      int
	delay       time.Duration
	tool        toolScript // tool.name is empty without a tool directive
	echo        bool
	truncate    bool
	streamError bool
}

// errorStatus returns the status to answer instead of a completion, or 0.
func (d directives) errorStatus() int {
	if d.status != 0 && (d.status < 200 || d.status > 299) {
		return d.status
	}
	return 0
}

// parseDirectives reads the directives of text, a last user text, and
// returns them with what is left of text once they are cut out (what the
// mock answers to). Unknown names and bad values are ignored; of two
// directives with the same name the last wins.
func parseDirectives(text string) (directives, string) {
	var d directives
	var rest strings.Builder
	kept := 0
	for _, sp := range scanDirectives(text) {
		rest.WriteString(text[kept:sp.start])
		kept = sp.end
		switch sp.name {
		case "status":
			if n, err := strconv.Atoi(sp.value); err == nil && n >= 100 && n <= 599 {
				d.status = n
			}
		case "delay":
			if v, err := time.ParseDuration(sp.value); err == nil && v > 0 {
				d.delay = v
			}
		case "tool":
			d.tool = parseToolScript(sp.value)
		case "echo":
			d.echo = true
		case "truncate":
			d.truncate = true
		case "stream_error":
			d.streamError = true
		}
	}
	if kept == 0 {
		return d, text
	}
	rest.WriteString(text[kept:])
	return d, rest.String()
}

// span is one directive in a text: text[start:end] is "[[mock:name]]" or
// "[[mock:name=value]]".
type span struct {
	start, end  int
	name, value string
}

const directivePrefix = "[[mock:"

// scanDirectives finds the directives of text, left to right, without
// overlaps. A name is [a-z_]+. A value runs to the first "]" that closes
// the directive; a balanced JSON object or array in the value (brackets
// inside strings ignored) is skipped whole, so that tool arguments may
// contain "]". Without braces it matches the regular expression
// \[\[mock:([a-z_]+)(?:=([^\]]*))?\]\].
func scanDirectives(text string) []span {
	var out []span
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], directivePrefix)
		if j < 0 {
			break
		}
		start := i + j
		if sp, ok := matchDirective(text, start); ok {
			out = append(out, sp)
			i = sp.end
		} else {
			i = start + 1
		}
	}
	return out
}

func matchDirective(text string, start int) (span, bool) {
	k := start + len(directivePrefix)
	n := k
	for n < len(text) && (text[n] >= 'a' && text[n] <= 'z' || text[n] == '_') {
		n++
	}
	if n == k {
		return span{}, false
	}
	name := text[k:n]
	if strings.HasPrefix(text[n:], "]]") {
		return span{start: start, end: n + 2, name: name}, true
	}
	if n >= len(text) || text[n] != '=' {
		return span{}, false
	}
	v := n + 1
	e := v
	for e < len(text) && text[e] != ']' {
		if text[e] == '{' {
			if end, ok := skipBalanced(text, e); ok {
				e = end
				continue
			}
		}
		e++
	}
	if !strings.HasPrefix(text[e:], "]]") {
		return span{}, false
	}
	return span{start: start, end: e + 2, name: name, value: text[v:e]}, true
}

// skipBalanced returns the index just after the JSON object or array that
// opens at s[i], counting brackets outside strings; false when it does not
// close.
func skipBalanced(s string, i int) (int, bool) {
	depth := 0
	inString := false
	for ; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}
