package guard

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

func TestRuleLiteralsFold(t *testing.T) {
	r := toolRule{re: regexp.MustCompile(`(?i)^\w+ stack\b`)}
	r.lits, r.foldLits = ruleLiterals(r.re.String())
	if !r.foldLits || len(r.lits) != 1 || r.lits[0] != " stack" {
		t.Fatalf("ruleLiterals = %q, fold %v; want [\" stack\"], fold", r.lits, r.foldLits)
	}
	for line, want := range map[string]bool{
		"go stack overflow": true,
		"GO STACK":          true,
		"go \u017ftack":     true, // the long s matches s case-insensitively
		"go stac":           false,
		"gostack":           false,
	} {
		if got := r.mayHold(line); got != want {
			t.Errorf("mayHold(%q) = %v, want %v", line, got, want)
		}
		if r.re.MatchString(line) && !r.mayHold(line) {
			t.Errorf("%q matches, but mayHold rejects it", line)
		}
	}
	if lits, _ := ruleLiterals(`^(?:a|bb)x`); lits != nil {
		t.Errorf("a one-byte literal kept: %q", lits)
	}
	if lits, _ := ruleLiterals(`error|error: x|fatal`); len(lits) != 2 {
		t.Errorf("a literal that holds another kept: %q", lits)
	}
}

// Every line of every tool output in testdata that a rule's regex
// matches holds one of the rule's literals: the literals never change a
// verdict. Most rules get literals.
func TestToolRuleLiterals(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatal("no corpus", err)
	}
	with := 0
	for _, r := range toolRules {
		if r.lits != nil {
			with++
		}
	}
	if with < len(toolRules)*2/3 {
		t.Errorf("only %d of %d tool rules have literals", with, len(toolRules))
	}
	// Every distinct line that is not blank, once, with the file it was
	// first seen in.
	type text struct{ file, line string }
	var texts []text
	seen := map[string]bool{}
	for _, f := range files {
		for _, file := range parseTxtar(t, f) {
			for _, raw := range strings.Split(file.data, "\n") {
				if line := strings.TrimSpace(raw); line != "" && !seen[line] {
					seen[line] = true
					texts = append(texts, text{f, line})
				}
			}
		}
	}
	var nMatched atomic.Int64
	eachInParallel(len(texts), func(k int) {
		line := texts[k].line
		for i := range toolRules {
			r := &toolRules[i]
			if r.re == nil || r.lits == nil || !r.re.MatchString(line) {
				continue
			}
			nMatched.Add(1)
			if !r.mayHold(line) {
				t.Errorf("%s: rule %q matches %q, which its literals %q reject", texts[k].file, r.name, line, r.lits)
			}
		}
	})
	lines, matched := len(texts), int(nMatched.Load())
	if matched < 500 {
		t.Errorf("only %d matches over %d lines: the check proves little", matched, lines)
	}
}

// FuzzToolRuleLiterals: a line a rule's literals reject is one its regex
// does not match.
func FuzzToolRuleLiterals(f *testing.F) {
	for _, s := range []string{"Exit code: 1", "EXIT STATUS 2", "Process exited with code 1", "Traceback (most recent call last):",
		"ok  \tgithub.com/acme/app\t0.4s", "ValueError: bad value", "npm ERR! code 1", "\u017fh: line 1: x: command not found"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		line = strings.ReplaceAll(line, "\n", " ")
		for i := range toolRules {
			r := &toolRules[i]
			if r.re != nil && r.lits != nil && !r.mayHold(line) && r.re.MatchString(line) {
				t.Fatalf("rule %q matches %q, which its literals %q reject", r.name, line, r.lits)
			}
		}
	})
}
