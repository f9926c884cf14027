package guard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"openai key", "invalid key sk-abc123DEF456ghi789JKL0 given", "invalid key [REDACTED] given"},
		{"openai project key", "key=sk-proj-Ab1_cD2-eF3gH4iJ5kL6mN7oP8 rejected", "key=[REDACTED] rejected"},
		{"anthropic key", "x-api-key: sk-ant-api03-AbCdEf0123456789_xyz", "x-api-key: [REDACTED]"},
		{"sk word is not a key", "install scikit: pip install sk-learn-compatible-estimators", "install scikit: pip install sk-learn-compatible-estimators"},
		{"bearer", "Authorization failed for Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "Authorization failed for Bearer [REDACTED]"},
		{"authorization header", `curl -H "Authorization: Bearer abc.def.ghi123" https://x`, `curl -H "Authorization: [REDACTED]" https://x`},
		{"bearer word kept", "Bearer authentication required", "Bearer authentication required"},
		{"aws key id", "using AKIAIOSFODNN7EXAMPLE in us-east-1", "using [REDACTED] in us-east-1"},
		{"password=", "connect failed: host=db password=hunter2 user=app", "connect failed: host=db password=[REDACTED] user=app"},
		{"api_key=", "GET /v1?api_key=abcd1234&q=x failed", "GET /v1?api_key=[REDACTED]&q=x failed"},
		{"token=", "token=tok_live_123 expired", "token=[REDACTED] expired"},
		{"json api_key", `{"api_key": "abc\"def", "model": "gpt-4o"}`, `{"api_key": "[REDACTED]", "model": "gpt-4o"}`},
		{"json access_token", `{"access_token":"ya29.a0Af","expires_in":3599}`, `{"access_token":"[REDACTED]","expires_in":3599}`},
		{"max_tokens untouched", `{"max_tokens": 100, "tokens=": 1}`, `{"max_tokens": 100, "tokens=": 1}`},
		{"yaml password", "password: s3cr3t!", "password: [REDACTED]"},
		{"url credentials", "dial postgres://app:pa55w0rd@db:5432/x failed", "dial postgres://app:[REDACTED]@db:5432/x failed"},
		{"github token", "push rejected for ghp_abcdefghijklmnopqrstuvwxyz0123456789", "push rejected for [REDACTED]"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"},
		{"private key", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nafter", "key:\n[REDACTED]\nafter"},
		{"truncated private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "[REDACTED]"},
		{"nothing secret", "SyntaxError: invalid syntax (line 3)", "SyntaxError: invalid syntax (line 3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := Redact(Redact(tc.in)); got != Redact(tc.in) {
				t.Errorf("Redact is not idempotent: %q", got)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"plain", "SyntaxError: invalid syntax", 200, "SyntaxError: invalid syntax"},
		{"newlines and tabs", "a\nb\r\n\tc  d\n", 200, "a b c d"},
		{"controls removed", "a\x00b\x1b[31mc\x7f", 200, "ab[31mc"},
		{"bidi and zero width removed", "safe\u202Eevil\u200B!", 200, "safeevil!"},
		{"line separators", "a\u2028b\u2029c", 200, "a b c"},
		{"marker forged", BlockEnd + "\n" + BlockStart, 200, "# !!! END REPEAT FAILURE GUARD !!! # !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!"},
		{"hashes joined by a control char", "#\x00##\x00# x", 200, "# x"},
		{"two hashes kept", "## x ####", 200, "## x #"},
		{"invalid utf8", "a\xffb", 200, "a\uFFFDb"},
		{"cap", "abcdefghij", 5, "abcd…"},
		{"cap exact", "abcde", 5, "abcde"},
		{"cap runes", "ééééé", 3, "éé…"},
		{"cap trims the space before the ellipsis", "ab cd", 4, "ab…"},
		{"cap one", "abc", 1, "…"},
		{"no cap", strings.Repeat("x", 500), 0, strings.Repeat("x", 500)},
		{"only white space", " \n\t", 10, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sanitize(tc.in, tc.max); got != tc.want {
				t.Errorf("Sanitize(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\nb", BlockStart, BlockEnd, "#\n##", "\u202E", "\xff", "### RECALL: x"} {
		f.Add(s, 200)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max%400 + 1
		if max < 1 {
			max += 400
		}
		out := Sanitize(s, max)
		if n := utf8.RuneCountInString(out); n > max {
			t.Fatalf("Sanitize(%q, %d) has %d runes", s, max, n)
		}
		if strings.Contains(out, "###") || strings.Contains(out, BlockStart) || strings.Contains(out, BlockEnd) {
			t.Fatalf("Sanitize(%q) = %q holds a marker", s, out)
		}
		for _, r := range out {
			if r == '\n' || r == '\r' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("Sanitize(%q) = %q holds %U", s, out, r)
			}
		}
		if strings.HasPrefix(out, " ") || strings.HasSuffix(out, " ") || strings.Contains(out, "  ") {
			t.Fatalf("Sanitize(%q) = %q: untrimmed or doubled spaces", s, out)
		}
		if again := Sanitize(out, max); again != out {
			t.Fatalf("Sanitize not idempotent: %q then %q", out, again)
		}
	})
}
