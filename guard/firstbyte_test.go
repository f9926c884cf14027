package guard

import (
	"strings"
	"testing"
)

func TestFirstBytes(t *testing.T) {
	tests := []struct {
		expr    string
		ok      bool
		in, out string // bytes in the set, bytes not in it
	}{
		{`^Traceback`, true, "T", "tX "},
		{`^(?:Error|ERROR|error):`, true, "Ee", "rx:"},
		{`(?i)^exit code`, true, "eE", "x "},
		{`^(?:[\[(]\s*)?exit`, true, "[(e", "x "},
		{`^\s*x`, true, " \t\nx", "y"},
		{`^é`, true, "\xc3", "e"},
		{`^[│|] `, true, "\xe2|", "\xc3\xff "},         // a class of two runes: their first bytes only
		{`^[^\s:]`, true, "a\x80\xc3\xe2\xff", " \t:"}, // holds U+FFFD, which invalid bytes read as
		{`^[é-ü]`, true, "\xc3", "\xc2\xe2\xff"},
		{`^a?`, false, "", ""},   // matches ""
		{`Error`, false, "", ""}, // not anchored: any line may hold it
		{`^(?:a|b*)c`, true, "abc", "d"},
	}
	for _, tt := range tests {
		set, ok := firstBytes(tt.expr)
		if ok != tt.ok {
			t.Errorf("firstBytes(%q): ok %v, want %v", tt.expr, ok, tt.ok)
			continue
		}
		for i := 0; i < len(tt.in); i++ {
			if !set.has(tt.in[i]) {
				t.Errorf("firstBytes(%q) lacks %q", tt.expr, tt.in[i])
			}
		}
		for i := 0; i < len(tt.out); i++ {
			if set.has(tt.out[i]) {
				t.Errorf("firstBytes(%q) has %q", tt.expr, tt.out[i])
			}
		}
	}
	filtered := 0
	for _, r := range toolRules {
		if r.filter {
			filtered++
		}
	}
	if filtered < len(toolRules)/2 {
		t.Errorf("only %d of %d tool rules are filtered by their first byte", filtered, len(toolRules))
	}
}

// FuzzToolRuleFilter: a line the first-byte filter rejects is one the
// rule's regex does not match.
func FuzzToolRuleFilter(f *testing.F) {
	for _, s := range []string{"Traceback (most recent call last):", "error: aborting due to 2 previous errors",
		"Exit code: 1", "[exit code 2]", "  FAIL", "ÉRROR", "make[1]: *** [x] Error 2", "✖ 1 problem (1 error, 0 warnings)", "eRRor:",
		"│ Error: x", "\xff: error: x", "at Object.<anonymous> (/a.js:1:2)", "File \"a.py\", line 1", "goroutine 1 [running]:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		line = strings.ReplaceAll(line, "\n", " ")
		for _, r := range toolRules {
			if r.re == nil || !r.filter || line == "" || r.first.has(line[0]) {
				continue
			}
			if r.re.MatchString(line) {
				t.Fatalf("rule %q matches %q, which its first-byte filter rejects", r.name, line)
			}
		}
		for _, r := range toolRules {
			if r.next != nil && r.nextFilter && line != "" && !r.nextByte.has(line[0]) && r.next.MatchString(line) {
				t.Fatalf("rule %q: next matches %q, which its first-byte filter rejects", r.name, line)
			}
		}
	})
}
