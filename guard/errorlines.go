package guard

import "strings"

// errorLines returns message without the source lines a report quotes
// around its error, so that a pattern matches the error and not the code
// that happens to be shown with it (a `timeout=timeout` argument quoted
// in a traceback is no timeout): the frames of a Python traceback (a
// `File "…", line N` line and the lines indented under it), stack frames
// ("    at f (a.js:1:2)"), a compiler's numbered source lines ("  4 |
// int x = 1") and a caret line ("   ^~~~") with the line it points at
// (psql's "LINE 1: …", Node's quoted line), and the lines that only say
// where the errors below are (gcc's "x.c: In function ‘main’:", Go's
// "# example.com/pkg" above its diagnostics). A message that is nothing
// but such lines is returned whole. The name of a tool in front of its
// output ("Bash: …", as the proxy records a tool's failure) is kept.
func errorLines(message string) string {
	if strings.IndexByte(message, '\n') < 0 || !mayQuoteSource(message) {
		return message
	}
	all := strings.Split(message, "\n")
	prefix := ""
	// Read the output after a tool's name as the output would be read.
	if name, rest, ok := cutToolName(all[0]); ok && quotesSource(rest, all[1:]) {
		prefix, all[0] = name+": ", rest
	}
	kept := sourceless(all)
	if s := strings.Trim(strings.Join(kept, "\n"), "\n"); strings.TrimSpace(s) != "" {
		return prefix + strings.TrimLeft(s, " \t")
	}
	return message
}

// mayQuoteSource reports whether message holds a mark of the lines
// errorLines leaves out; most do not, and are returned as they are.
func mayQuoteSource(message string) bool {
	return strings.ContainsAny(message, "^~|#") || strings.Contains(message, `File "`) ||
		strings.Contains(message, "at ") || strings.Contains(message, ": In ") || strings.Contains(message, ": At top level:")
}

// quotesSource reports whether the line l (followed by next) opens the
// source or the context a report quotes: a Python frame, a context line.
func quotesSource(l string, next []string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, `File "`) && strings.Contains(t, `", line `) || isContextLine(t, next)
}

// sourceless returns the lines of a report but those errorLines leaves out.
func sourceless(all []string) []string {
	var kept []string
	frame := -1 // the indent of the Python frame being skipped, or -1
	for i, raw := range all {
		l := strings.TrimSpace(raw)
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		if frame >= 0 && l != "" && indent > frame {
			continue
		}
		frame = -1
		switch {
		case strings.HasPrefix(l, `File "`) && strings.Contains(l, `", line `):
			frame = indent
		case isCaretLine(l):
			if n := len(kept); n > 0 {
				kept = kept[:n-1] // the line it points at
			}
		case indent > 0 && strings.HasPrefix(l, "at "), isGutterLine(l), isContextLine(l, all[i+1:]):
		default:
			kept = append(kept, raw)
		}
	}
	return kept
}

// isCaretLine reports whether l (trimmed) is only carets, tildes and
// dashes with at least one caret or tilde: it points at the line above.
func isCaretLine(l string) bool {
	mark := false
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '^', '~':
			mark = true
		case '-', ' ', '+':
		default:
			return false
		}
	}
	return mark
}

// isGutterLine reports whether l (trimmed) is a line of a compiler's
// report in the gutter: a line number then "|" and the source, or an
// empty gutter ("|") with only marks under the source ("|   ^~~"). A
// table's "| Error: …" is none.
func isGutterLine(l string) bool {
	i := 0
	for i < len(l) && isDigit(l[i]) {
		i++
	}
	rest := strings.TrimLeft(l[i:], " ")
	if rest == "" || rest[0] != '|' {
		return false
	}
	if i > 0 {
		return true
	}
	marks := strings.TrimLeft(rest[1:], " ")
	return marks == "" || strings.IndexByte("^~-|", marks[0]) >= 0
}

// isContextLine reports whether l (trimmed) only says where the errors
// on the lines after it (next) are: a C or C++ compiler's "x.c: In
// function ‘main’:" or "At top level:", Go's "# package" line before a
// diagnostic of a .go file.
func isContextLine(l string, next []string) bool {
	if strings.HasSuffix(l, ":") && (strings.Contains(l, ": In ") || strings.HasSuffix(l, ": At top level:")) {
		return true
	}
	if !strings.HasPrefix(l, "# ") || strings.ContainsAny(l[2:], " \t") || len(next) == 0 {
		return false
	}
	n, _, _ := strings.Cut(next[0], ": ")
	return strings.Contains(n, ".go:")
}
