package guard

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// ShellReadFailed judges the result of a shell call by its command when
// the command only prints files: cat, head, tail or nl of named files, or
// sed -n with a script that prints lines (sed -n '1,80p' f), alone or
// after a cd (no pipe, list, redirection or substitution). What such a
// command prints is the files' text, which says nothing of the command's
// failure whatever errors it quotes; the command fails only by saying so
// itself, in a line that opens with its name ("cat: x: No such file or
// directory", "sed: can't read x: …"), or by the shell's complaint
// ("bash: line 1: cd: src: No such file or directory"). An agent's
// wrapper decides first (an exit code, Continue's error, a structured
// result). read is false when command is no such read, or when it printed
// nothing: the result is then judged as any other (ToolFailed).
func ShellReadFailed(command, content string) (failed, read bool) {
	s := strings.TrimLeft(content, " \t\r\n\ufeff")
	if s == "" {
		return false, false // nothing to judge by but an exit status
	}
	prog, ok := readCommand(command)
	if !ok {
		return false, false
	}
	switch s[0] {
	case '{':
		// A structured result (its exit code, success, is_error) or a
		// JSON file printed.
		if fields, ok := jsonObject(s); ok && resultFields(fields) {
			return ToolFailed(s), true
		}
		return false, true
	case '[':
		if items, ok := jsonObjects(s); ok && len(items) > 0 && resultFields(items[0]) {
			return ToolFailed(s), true // Cline's [{"query":…,"success":false}]
		}
		return false, true
	}
	if failed, decided := verdictOf(s, wrapperRules); decided {
		return failed, true
	}
	return complainsAsProgram(s, prog) || complainsAsProgram(s, "bash") || complainsAsProgram(s, "sh"), true
}

// resultFields reports whether a JSON object holds the fields by which a
// tool result says how the call went (success, is_error, an exit code;
// Codex's output beside its metadata), which a file's own JSON seldom
// holds.
func resultFields(fields map[string]json.RawMessage) bool {
	for _, k := range resultKeys {
		if _, ok := fields[k]; ok {
			return true
		}
	}
	_, output := fields["output"]
	_, metadata := fields["metadata"]
	return output && metadata
}

var resultKeys = append([]string{"success", "is_error", "isError"}, exitKeys...)

// complainsAsProgram reports whether a line of s at its start opens with
// prog's name and a colon, as a program's own complaints do, and speaks of
// a failure.
func complainsAsProgram(s, prog string) bool {
	prefix := prog + ": "
	for i := 0; ; {
		j := strings.Index(s[i:], prefix)
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || s[j-1] == '\n' {
			line := s[j:]
			if k := strings.IndexByte(line, '\n'); k >= 0 {
				line = line[:k]
			}
			if failureWords.MatchString(line) || readerComplaint.MatchString(line) || optionComplaint.MatchString(line) {
				return true
			}
		}
		i = j + len(prefix)
	}
}

// optionComplaint is what GNU tools say of an option they cannot take,
// besides failureWords.
var optionComplaint = regexp.MustCompile(`\b(?:unrecogni[sz]ed|requires an argument|extra operand)\b`)

// readCommand returns the program of command when command only prints
// files (see ShellReadFailed).
func readCommand(command string) (prog string, ok bool) {
	words, ok := shellWords(command)
	if !ok {
		return "", false
	}
	// "cd dir && cat f": the cd's complaint, if any, is the shell's.
	if len(words) > 3 && words[0] == "cd" && words[2] == "&&" {
		words = words[3:]
	}
	if len(words) < 2 || slices.Contains(words, "&&") {
		return "", false
	}
	prog = words[0][strings.LastIndexByte(words[0], '/')+1:] // /bin/cat
	var files int
	switch prog {
	case "cat", "nl":
		for _, w := range words[1:] {
			switch {
			case w == "-":
				return "", false // standard input
			case strings.HasPrefix(w, "-"):
				if prog == "nl" && len(w) == 2 {
					return "", false // an option whose value follows (nl -w 3)
				}
			default:
				files++
			}
		}
	case "head", "tail":
		for i := 1; i < len(words); i++ {
			w := words[i]
			switch {
			case w == "-" || w == "-f" || w == "-F" || strings.HasPrefix(w, "--follow") || strings.HasPrefix(w, "--pid"):
				return "", false // standard input, or a tail that follows
			case w == "-n" || w == "-c":
				i++ // the count
			case strings.HasPrefix(w, "-"):
			default:
				files++
			}
		}
	case "sed":
		quiet, script := false, false
		for i := 1; i < len(words); i++ {
			w := words[i]
			switch {
			case w == "-n" || w == "--quiet" || w == "--silent":
				quiet = true
			case w == "-e" && i+1 < len(words):
				i++
				if !printScript.MatchString(words[i]) {
					return "", false
				}
				script = true
			case w == "-E" || w == "-r" || w == "-s" || w == "-u" || w == "--":
			case strings.HasPrefix(w, "-"):
				return "", false // -i edits; others change what is printed
			case !script:
				if !printScript.MatchString(w) {
					return "", false
				}
				script = true
			default:
				files++
			}
		}
		if !quiet {
			return "", false
		}
	default:
		return "", false
	}
	return prog, files > 0
}

// printScript is a sed script that prints lines by number or pattern:
// "12p", "1,80p", "40,$p", "/func main/,/^}/p", one or more.
var printScript = regexp.MustCompile(`^(?:(?:\d+|\$|/[^/]*/)(?:,(?:\d+|\$|\+\d+|/[^/]*/))?p;?)+$`)

// shellWords splits a command of plain words and quoted strings into its
// words; "&&" standing alone is a word. A command with anything else the
// shell would act on (a pipe, a list, a redirection, an expansion, a
// pattern, an escape, a line break) is not split: ok is false.
func shellWords(command string) (words []string, ok bool) {
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(command); i++ {
		c := command[i]
		switch {
		case quote == '\'':
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '$', '`', '\\':
				return nil, false
			default:
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '&' && !in && i+1 < len(command) && command[i+1] == '&' && (i+2 == len(command) || command[i+2] == ' '):
			words = append(words, "&&")
			i++
		case strings.IndexByte("|&;<>$`\\(){}*?[]~#!\n\r", c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	if in {
		words = append(words, w.String())
	}
	return words, true
}
