package guard

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces every secret [Redact] finds.
const Redacted = "[REDACTED]"

// redaction is one secret format.
type redaction struct {
	name  string
	re    *regexp.Regexp
	lits  []string // prefilter, see requiredLiterals
	repl  string   // may use ${1}... for kept groups
	check func(string) bool
}

// rd builds a redaction. check, when set, must approve the whole match
// (used to spare words that merely look like a token).
func rd(name, expr, repl string, check func(string) bool) redaction {
	return redaction{name: name, re: regexp.MustCompile(expr), lits: requiredLiterals(expr), repl: repl, check: check}
}

// redactions are applied in order.
var redactions = []redaction{
	rd("private key block", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)`, Redacted, nil),
	rd("credentials in URL", `(://[^/\s:@]+:)[^/\s@]+@`, "${1}"+Redacted+"@", nil),
	rd("authorization header", `(?i)(\bauthorization["']?\s*[:=]\s*["']?)(?:(?:basic|bearer|token)\s+)?[^\s"',;]+`, "${1}"+Redacted, nil),
	rd("bearer token", `(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`, "${1} "+Redacted,
		func(m string) bool { return looksSecret(m[strings.LastIndexAny(m, " \t")+1:]) }),
	rd("OpenAI / Anthropic key", `\bsk-[A-Za-z0-9_-]{16,}`, Redacted,
		func(m string) bool { return strings.IndexAny(m, "0123456789") >= 0 }),
	rd("Stripe key", `\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`, Redacted, nil),
	rd("AWS access key id", `\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, Redacted, nil),
	rd("GitHub token", `\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`, Redacted, nil),
	rd("Slack token", `\bxox[abposr]-[A-Za-z0-9-]{10,}`, Redacted, nil),
	rd("Google API key", `\bAIza[0-9A-Za-z_-]{35}`, Redacted, nil),
	rd("JSON secret field", `(?i)("[\w-]*(?:password|passwd|secret|api[_-]?key|apikey|token|pwd)"\s*:\s*")(?:[^"\\]|\\.)*"`, "${1}"+Redacted+`"`, nil),
	rd("key=value secret", `(?i)(\b[\w-]*(?:password|passwd|secret|api[_-]?key|apikey|token|pwd)\s*=\s*["']?)[^\s&"',;]+`, "${1}"+Redacted, nil),
	rd("key: value secret", `(?i)(\b[\w-]*(?:password|passwd|api[_-]?key|apikey|secret[_-]?key|client[_-]?secret)\s*:\s*["']?)[^\s"',;]+`, "${1}"+Redacted, nil),
}

// looksSecret spares plain words after "Bearer" ("Bearer authentication").
func looksSecret(tok string) bool {
	return len(tok) >= 20 || strings.IndexAny(tok, "0123456789") >= 0
}

// Redact replaces secrets in s with [Redacted]: private key blocks
// (-----BEGIN ... PRIVATE KEY----- to its END line, or to the end of a
// truncated text), passwords in URLs, Authorization header values, Bearer
// tokens, OpenAI/Anthropic keys (sk-..., sk-proj-..., sk-ant-...), Stripe,
// AWS (AKIA...), GitHub (ghp_..., github_pat_...), Slack and Google keys,
// and the values of password / secret / api_key / token fields written as
// key=value, "key": "value" or key: value. The key names are kept so the
// message still says what failed. Redaction is best effort: it cannot know
// every secret format.
func Redact(s string) string {
	lower, prefilter := "", isASCII(s)
	if prefilter {
		lower = strings.ToLower(s)
	}
	for _, r := range redactions {
		if prefilter && !containsAny(lower, r.lits) {
			continue
		}
		if r.check == nil {
			s = r.re.ReplaceAllString(s, r.repl)
			continue
		}
		s = r.re.ReplaceAllStringFunc(s, func(m string) string {
			if !r.check(m) {
				return m
			}
			return r.re.ReplaceAllString(m, r.repl)
		})
	}
	return s
}

// Sanitize returns s as one line fit to be placed in a block: newlines,
// tabs and other white space become single spaces, control and invisible
// format characters (bidi overrides, zero-width) are removed, invalid UTF-8
// becomes U+FFFD, runs of three or more '#' become one (so no block marker
// nor Markdown heading can be forged), and the result is trimmed and capped
// at max runes, ending with "…" when cut. max < 1 means no cap.
func Sanitize(s string, max int) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false // a space is due before the next visible rune
	for _, r := range s {
		switch {
		case unicode.IsSpace(r) || r == '\u2028' || r == '\u2029':
			space = b.Len() > 0
			continue
		case isControl(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r) // invalid UTF-8 arrives as U+FFFD
	}
	out := collapseHashes(b.String())
	if max < 1 || utf8.RuneCountInString(out) <= max {
		return out
	}
	cut := 0
	for i := 0; i < max-1; i++ {
		_, n := utf8.DecodeRuneInString(out[cut:])
		cut += n
	}
	return strings.TrimRight(out[:cut], " ") + "…"
}

// collapseHashes turns every run of three or more '#' into one '#'.
func collapseHashes(s string) string {
	if !strings.Contains(s, "###") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] != '#' {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '#' {
			j++
		}
		if j-i >= 3 {
			b.WriteByte('#')
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}
