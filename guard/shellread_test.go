package guard

import (
	"strconv"
	"strings"
	"testing"
)

func TestReadCommand(t *testing.T) {
	for _, c := range []struct {
		command, prog string
	}{
		{"cat main.go", "cat"},
		{"cat -n src/app.py", "cat"},
		{"/bin/cat a.txt b.txt", "cat"},
		{"cat 'my notes.txt'", "cat"},
		{"head -n 50 README.md", "head"},
		{"head -50 README.md", "head"},
		{"tail -n +120 log/app.log", "tail"},
		{"nl -ba main.c", "nl"},
		{"sed -n '1,80p' internal/server.go", "sed"},
		{"sed -n '40,$p' x.go", "sed"},
		{`sed -n "/func main/,/^}/p" main.go`, "sed"},
		{"sed -n -e '1,5p' -e '9p' a.txt", "sed"},
		{"cd /home/dev/project && cat go.mod", "cat"},
		{"cd 'my dir' && sed -n '1,20p' a.py", "sed"},

		{"cat", ""},                      // standard input
		{"cat - a.txt", ""},              // standard input
		{"cat a.txt | grep error", ""},   // a pipe
		{"cat a.txt; make", ""},          // a list
		{"cat a.txt && make", ""},        // a list
		{"cat a.txt > b.txt", ""},        // a redirection
		{"cat a.txt 2>&1", ""},           // a redirection
		{"cat $FILE", ""},                // an expansion
		{`cat "$HOME/x"`, ""},            // an expansion
		{"cat *.log", ""},                // a pattern
		{"cat `ls`", ""},                 // a substitution
		{"tail -f server.log", ""},       // follows
		{"head -n 5", ""},                // standard input
		{"sed 's/a/b/' a.txt", ""},       // prints every line, edited
		{"sed -n 's/a/b/p' a.txt", ""},   // an edit
		{"sed -i '1d' a.txt", ""},        // edits in place
		{"sed -n '1,5p'", ""},            // standard input
		{"nl -w 3 a.txt", ""},            // an option with a value
		{"grep -n error main.go", ""},    // a search: its own rules
		{"python3 main.py", ""},          // runs something
		{"cd src && cd .. && cat a", ""}, // more than one cd
		{"cat 'unterminated", ""},
		{"cat a.txt\nmake", ""},
	} {
		prog, ok := readCommand(c.command)
		if ok != (c.prog != "") || prog != c.prog && ok {
			t.Errorf("readCommand(%q) = %q, %v; want %q", c.command, prog, ok, c.prog)
		}
	}
}

// What the read commands print when they fail, run as an unprivileged
// user on Debian 12 (GNU coreutils 9.1, sed 4.9, bash 5.2), and what
// agents make of a read: each judged by the command it came from.
func TestShellReadFailed(t *testing.T) {
	for _, c := range []struct {
		command, output string
		failed          bool
	}{
		{"cat missing.txt", "cat: missing.txt: No such file or directory\n", true},
		{"cat d", "cat: d: Is a directory\n", true},
		{"cat p.txt", "cat: p.txt: Permission denied\n", true},
		{"cat f.txt missing.txt", "a\nb\ncat: missing.txt: No such file or directory\n", true},
		{"cat missing.txt f.txt", "cat: missing.txt: No such file or directory\na\nb\n", true},
		{"cat --numbr f.txt", "cat: unrecognized option '--numbr'\nTry 'cat --help' for more information.\n", true},
		{"head -n 5 missing.txt", "head: cannot open 'missing.txt' for reading: No such file or directory\n", true},
		{"head -n abc f.txt", "head: invalid number of lines: ‘abc’\n", true},
		{"head d", "head: error reading 'd': Is a directory\n", true},
		{"head -n 5 f.txt d", "==> f.txt <==\na\nb\n\n==> d <==\nhead: error reading 'd': Is a directory\n", true},
		{"tail -n x f.txt", "tail: invalid number of lines: ‘x’\n", true},
		{"nl missing.txt", "nl: missing.txt: No such file or directory\n", true},
		{"sed -n '1,5p' missing.txt", "sed: can't read missing.txt: No such file or directory\n", true},
		{"sed -n '1,5p' d", "sed: read error on d: Is a directory\n", true},
		{"cd srcc && cat main.go", "bash: line 1: cd: srcc: No such file or directory\n", true},

		// The files' text, whatever it quotes.
		{"cat notes.txt", "ERROR: see errors.go\n", false},
		{"cat build.log", "gcc -c x.c\nx.c:3:5: error: expected ';' before 'return'\nmake: *** [Makefile:4: x.o] Error 1\n", false},
		{"sed -n '1,3p' test_api.py", "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: bad\n", false},
		{"cat config.yaml", "retries: 3\ncat: persian\non_error: fail\n", false},
		{"cat status.json", `{"status": "failed", "error": "disk full"}`, false},
		{"cat results.json", `[{"name": "t1", "error": "timeout"}]`, false},

		// The agents' wrappers decide.
		{"cat config/settings.json", "Command: cat config/settings.json\nDirectory: (root)\nOutput: cat: config/settings.json: No such file or directory\nError: (none)\nExit Code: 1\nSignal: 0\nProcess Group PGID: 507", true},
		{"cat errors.txt", "Command: cat errors.txt\nDirectory: (root)\nOutput: fatal: could not read\nError: (none)\nExit Code: 0\nSignal: 0\nProcess Group PGID: 508", false},
		{"cat x", "Exit code: 1\nWall time: 0 seconds\nOutput:\ncat: x: No such file or directory\n", true},
		{"cat x", "Exit code: 0\nWall time: 0 seconds\nOutput:\npanic: runtime error: index out of range\n", false},
		{"cat x", "Error executing tool Bash: Error (exit code 1): cat: x: No such file or directory\n", true},
		{"cat config/settings.json", `[{"query":"cat config/settings.json","result":"[Command exited with code 1]\n\n[stderr]\ncat: config/settings.json: No such file or directory\n","error":"Command exited with code 1","success":false}]`, true},
		{"cat x", `{"output":"cat: x: No such file or directory\n","metadata":{"exit_code":1,"duration_seconds":0.0}}`, true},
	} {
		failed, read := ShellReadFailed(c.command, c.output)
		if !read || failed != c.failed {
			t.Errorf("ShellReadFailed(%q, %q) = %v, %v; want %v, true", c.command, c.output, failed, read, c.failed)
		}
	}
	if _, read := ShellReadFailed("make test", "FAIL\n"); read {
		t.Error("make test was taken for a read")
	}
	if _, read := ShellReadFailed("cat empty.txt", "\n"); read {
		t.Error("an empty output was judged: only an exit status can judge it")
	}
}

// The file reads of the corpus printed by the read commands an agent runs
// through its shell: none reads as a failure, though ToolFailed, which
// does not know the command, flags some of them.
func TestShellReadFailedReads(t *testing.T) {
	shows := []struct {
		command string
		show    func(lines []string) string
	}{
		{"cat file", func(lines []string) string { return strings.Join(lines, "\n") + "\n" }},
		{"cat -n file", func(lines []string) string {
			var b strings.Builder
			for i, l := range lines {
				b.WriteString(strconv.Itoa(i+1) + "\t" + l + "\n")
			}
			return b.String()
		}},
		{"sed -n '1,40p' file", func(lines []string) string {
			return strings.Join(lines[:min(40, len(lines))], "\n") + "\n"
		}},
		{"tail -n 20 file", func(lines []string) string {
			return strings.Join(lines[max(0, len(lines)-20):], "\n") + "\n"
		}},
	}
	for _, part := range []string{"corpus_reads", "corpus_reads_heldout"} {
		reads := parseTxtar(t, "testdata/"+part+".txtar")
		if len(reads) < 900 {
			t.Errorf("%s: %d reads, want 900 or more", part, len(reads))
		}
		for _, s := range shows {
			blind := 0
			for _, f := range reads {
				out := s.show(strings.Split(strings.TrimRight(f.data, "\n"), "\n"))
				if ToolFailed(out) {
					blind++
				}
				if failed, read := ShellReadFailed(s.command, out); !read || failed {
					t.Errorf("%s: %s, printed by %s, reads as a failure (%v, %v)", part, f.name, s.command, failed, read)
				}
			}
			t.Logf("%s printed by %s: %d of %d read as failures without the command", part, s.command, blind, len(reads))
		}
	}
}
