package guard

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/scarproxy/scarproxy/guard/quoted"
)

// Redacted replaces every secret [Redact] finds.
const Redacted = "[REDACTED]"

// redaction is one secret format.
type redaction struct {
	name  string
	re    *regexp.Regexp
	lits  []string // prefilter, see requiredLiterals
	mask  uint64   // the bits of lits in redactLits
	repl  string   // may use ${1}... for kept groups
	check func(string) bool
	// sep, when set, is the byte that follows the key (after at most
	// maxKeyTail name bytes and white space) in every match: a text where
	// no literal is so followed cannot match (see keyFollowedBy).
	sep byte
}

// rd builds a redaction. check, when set, must approve the whole match
// (used to spare words that merely look like a token).
func rd(name, expr, repl string, check func(string) bool) redaction {
	return redaction{name: name, re: regexp.MustCompile(expr), lits: requiredLiterals(expr), repl: repl, check: check}
}

// Pieces of the command-line rules: a password value (a quoted string, or
// a word that is not an option); where a command starts (a line, after a
// shell operator, sudo, a "$ " prompt or an agent's "Command: "); the mysql
// clients.
const (
	// quotedOrWord is one shell word: quoted or bare pieces glued
	// together (''0, "pa ss"word), not beginning with "-".
	quotedOrWord = `(?:"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)(?:"[^"\n]*"|'[^'\n]*'|[^\s"']+)*`
	cmdStart     = `(?m)(?:^|[;&|(]|\bsudo|\$|\bCommand:)[ \t]*`
	mysqlFamily  = `\b(?:mysql(?:dump|admin|import|check|slap|sh)?|mariadb(?:-dump|-admin)?)\b`
	// userPassOption is a command's option that takes "user:password",
	// anywhere in a line (the value's colon makes it one): curl's -u and
	// --user, HTTPie's -a and --auth.
	userPassOption = `(?:\bcurl\b[^\n;&|]*?[ \t](?:-u|--user)|\bhttps?\b[^\n;&|]*?[ \t](?:-a|--auth))[ \t=]*`
	// secretName is a field name that holds a secret.
	secretName = `[\w-]*(?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey|token|pwd)`
	// escapedValue is the value of a string inside a JSON string, up to its
	// closing \": plain characters, \\\\ (a backslash), \\\" (a quote) and
	// \\ before any other character (another escape).
	escapedValue = `(?:[^\\"]|\\\\\\\\|\\\\\\"|\\\\[^\\"])*`
)

// redactions are applied in order.
var redactions = []redaction{
	rd("private key block", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)`, Redacted, nil),
	// The password of a URL runs to the last "@" of its authority, so one
	// holding "@" is removed whole.
	rd("credentials in URL", `(://[^/\s:]*:)[^/\s?#"'<>`+"`"+`]*@`, "${1}"+Redacted+"@", nil),
	rd("Slack or Discord webhook", `(\bhooks\.slack\.com/(?:services|workflows|triggers)/|\bdiscord(?:app)?\.com/api/webhooks/)[\w/-]+`, "${1}"+Redacted, nil),
	rd("JWT", `\beyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]*`, Redacted, nil),
	rd("authorization header", `(?i)(\bauthorization["']?\s*[:=]\s*["']?)(?:(?:basic|bearer|token)\s+)?[^\s"',;]+`, "${1}"+Redacted, nil),
	rd("bearer token", `(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`, "${1} "+Redacted,
		func(m string) bool { return looksSecret(m[strings.LastIndexAny(m, " \t")+1:]) }),
	rd("OpenAI / Anthropic key", `\bsk-[A-Za-z0-9_-]{16,}`, Redacted,
		func(m string) bool { return strings.IndexAny(m, "0123456789") >= 0 }),
	rd("Stripe key", `\b(?:rk_live_|sk_live_|rk_test_|sk_test_)[A-Za-z0-9]{16,}`, Redacted, nil),
	// An AWS secret access key is 40 characters of base64 with nothing to
	// mark it: it is found next to its name, or after its access key id.
	rd("AWS key pair", `\b((?:AKIA|ASIA)[0-9A-Z]{16})([\s,:;|"'=]{1,8})[A-Za-z0-9/+]{40}[A-Za-z0-9/+=]*`, Redacted+"${2}"+Redacted,
		func(m string) bool { return trailingBase64(m) == 40 }),
	rd("AWS secret access key", `(?i)(\b(?:aws_?)?secret_?access_?key["']?\s*[:=]\s*["']?)[^\s"',;]+`, "${1}"+Redacted, nil),
	rd("AWS access key id", `\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, Redacted, nil),
	rd("GitHub token", `\bgh[pousr]_[A-Za-z0-9]{30,}`, Redacted, nil),
	rd("GitHub fine-grained token", `\bgithub_pat_[A-Za-z0-9_]{22,}`, Redacted, nil),
	rd("GitLab token", `\bgl(?:pat|dt|rt|ptt|cbt|ft|soat)-[\w.-]{20,}`, Redacted, nil),
	rd("Hugging Face token", `\bhf_[A-Za-z0-9]{30,}`, Redacted, mixedCase),
	rd("npm token", `\bnpm_[A-Za-z0-9]{36}\b`, Redacted, mixedCase),
	rd("Slack token", `\bxox(?:[abposr]|e(?:\.xox[bp])?)-[A-Za-z0-9-]{10,}`, Redacted, nil),
	rd("Slack app token", `\bxapp-\d-[A-Za-z0-9-]{10,}`, Redacted, nil),
	rd("Google API key", `\bAIza[0-9A-Za-z_-]{35}`, Redacted, nil),
	rd("Azure account key", `(?i)(\b(?:Account|SharedAccess)Key\s*=\s*)[^\s;"']+`, "${1}"+Redacted, nil),
	rd("URL signature", `([?&](?:sig|X-Amz-Signature|Signature)=)[^&\s"']+`, "${1}"+Redacted, nil), // Azure SAS, S3 and CloudFront presigned URLs
	// Command lines. mysql takes its password glued to -p ("-pSecret");
	// "mysql -p db" asks for one and names the database, so a word after
	// -p is taken for a password only when another word follows it.
	rd("--password option", `(--pass(?:word|wd)[= ][ \t]*)`+quotedOrWord, "${1}"+Redacted, nil),
	rd("mysql -pSECRET", `(`+mysqlFamily+`[^\n;&|]*?[ \t]-p)`+`(?:"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)`, "${1}"+Redacted, nil),
	rd("mysql -p SECRET db", `(`+cmdStart+mysqlFamily+`[^\n;&|]*?[ \t]-p[ \t]+)`+quotedOrWord+`([ \t]+[^\s<>|;&-])`, "${1}"+Redacted+"${2}", nil),
	rd("-p of docker login, mongo; -a of redis-cli", `(`+cmdStart+`(?:(?:docker[ \t]+login|mongo(?:sh|dump|restore|import|export)?)\b[^\n;&|]*?[ \t]-p|redis-cli\b[^\n;&|]*?[ \t]-a)[ \t]*)`+quotedOrWord, "${1}"+Redacted, nil),
	// sshpass takes its options before the command it runs: its -p is
	// found anywhere in a line, after options only.
	rd("sshpass -p", `(\bsshpass(?:[ \t]+-\S+)*?[ \t]+-p[ \t]*)`+quotedOrWord, "${1}"+Redacted, nil),
	rd("user:password option, quoted", `(`+userPassOption+`['"][^\s:"']*:)[^"'\n]+`, "${1}"+Redacted, nil),
	rd("user:password option", `(`+userPassOption+`[^\s:"']*:)[^\s"']+`, "${1}"+Redacted, nil),
	rd("JSON secret field", `(?i)("`+secretName+`"\s*:\s*")(?:[^"\\]|\\.)*"`, "${1}"+Redacted+`"`, nil),
	// A JSON document quoted in a JSON string (a logged request body):
	// \"password\":\"hunter2\".
	rd("escaped JSON secret field", `(?i)(\\"`+secretName+`\\"\s*:\s*\\")`+escapedValue+`\\"`, "${1}"+Redacted+`\"`, nil),
	// The name before "password" (db_password=) stays out of the match:
	// it is kept either way, and matching it costs a scan of every word. A
	// value does not begin with "=": "token == x", "password := f()" are
	// code, not secrets.
	withSep(rd("key=value secret", `(?i)((?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey|token|pwd)\s*=\s*["']?)[^\s&"',;=][^\s&"',;]*`, "${1}"+Redacted, nil), '='),
	withSep(rd("key: value secret", `(?i)((?:password|passwd|passphrase|api[_-]?key|apikey|secret[_-]?key|client[_-]?secret)\s*:\s*["']?)[^\s"',;=][^\s"',;]*`, "${1}"+Redacted, nil), ':'),
}

// withSep sets r's sep.
func withSep(r redaction, sep byte) redaction {
	r.sep = sep
	return r
}

// maxKeyTail is the most bytes a key name of the key=value and key: value
// rules has after the literal it begins with ("client" + "_secret").
const maxKeyTail = 7

// keyFollowedBy reports whether lower (lower-case ASCII) holds one of lits
// followed by at most maxKeyTail letters, '_' or '-', white space and sep:
// a text where none is cannot match a rule whose keys so end. It is a
// necessary condition only; the rule's expression decides.
func keyFollowedBy(lower string, lits []string, sep byte) bool {
	for _, lit := range lits {
		for off := 0; ; {
			i := strings.Index(lower[off:], lit)
			if i < 0 {
				break
			}
			j := off + i + len(lit)
			for k := 0; k < maxKeyTail && j < len(lower) && (lower[j] >= 'a' && lower[j] <= 'z' || lower[j] == '_' || lower[j] == '-'); k++ {
				j++
			}
			for j < len(lower) && (lower[j] == ' ' || lower[j] == '\t' || lower[j] == '\n' || lower[j] == '\r' || lower[j] == '\f') {
				j++
			}
			if j < len(lower) && lower[j] == sep {
				return true
			}
			off += i + 1
		}
	}
	return false
}

// redactLits holds every literal of the redactions once; litsFrom[b] the
// indexes of those that begin with byte b, and litPairs the pairs of bytes
// a literal can begin with: litScan finds them all in one pass over a text.
var (
	redactLits []string
	litsFrom   [256][]uint8
	litPairs   [1 << 16 / 64]uint64
)

func init() {
	index := map[string]int{}
	for i := range redactions {
		r := &redactions[i]
		for _, l := range r.lits {
			if _, ok := index[l]; !ok {
				index[l] = len(redactLits)
				redactLits = append(redactLits, l)
			}
			r.mask |= 1 << index[l]
		}
	}
	if len(redactLits) > 64 {
		panic("guard: more than 64 redaction literals")
	}
	for i, l := range redactLits {
		litsFrom[l[0]] = append(litsFrom[l[0]], uint8(i))
		for b := 0; b < 256; b++ {
			if len(l) == 1 || b == int(l[1]) {
				p := int(l[0])<<8 | b
				litPairs[p/64] |= 1 << (p % 64)
			}
		}
	}
}

// litScan returns the bits of the redactLits that s holds.
func litScan(s string) (found uint64) {
	for i := 0; i < len(s); i++ {
		if i+1 < len(s) {
			if p := int(s[i])<<8 | int(s[i+1]); litPairs[p/64]&(1<<(p%64)) == 0 {
				continue
			}
		}
		for _, j := range litsFrom[s[i]] {
			if strings.HasPrefix(s[i:], redactLits[j]) {
				found |= 1 << j
			}
		}
	}
	return found
}

// looksSecret spares plain words after "Bearer" ("Bearer authentication").
func looksSecret(tok string) bool {
	return len(tok) >= 20 || strings.IndexAny(tok, "0123456789") >= 0
}

// mixedCase spares identifiers that merely share a token's prefix
// (hf_transformers_cache, npm_package_version): a token mixes upper and
// lower case.
func mixedCase(m string) bool {
	return strings.IndexFunc(m, unicode.IsUpper) >= 0 && strings.IndexFunc(m, unicode.IsLower) >= 0
}

// trailingBase64 is the length of the run of base64 characters that ends m.
func trailingBase64(m string) int {
	n := 0
	for i := len(m) - 1; i >= 0; i-- {
		c := m[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '/' || c == '+' || c == '=') {
			break
		}
		n++
	}
	return n
}

// foldLower returns s in lower case with the two letters outside ASCII
// that case-insensitive matching takes for ASCII ones (U+017F, long s,
// for "s"; U+212A, the Kelvin sign, for "k") made ASCII: an ASCII
// literal a case-insensitive expression needs is in foldLower(s) whenever
// the expression matches s. The prefilters test it (they only need to
// know which literals occur, not where).
func foldLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return strings.ReplaceAll(strings.ToLower(s), "\u017f", "s") // ToLower makes the Kelvin sign "k"
}

// Redact replaces secrets in s with [Redacted]: private key blocks
// (-----BEGIN ... PRIVATE KEY----- to its END line, or to the end of a
// truncated text); passwords in URLs (all of one that holds "@"); Slack
// and Discord webhook URLs; JWTs; Authorization header values and Bearer
// tokens; OpenAI/Anthropic (sk-...), Stripe, GitHub (ghp_...,
// github_pat_...), GitLab (glpat-...), Hugging Face (hf_...), npm
// (npm_...), Slack (xoxb-..., xapp-...) and Google keys; AWS access key ids
// and secret access keys (by name, or after their key id); Azure
// AccountKey= and the signatures of presigned URLs (Azure SAS, S3,
// CloudFront); command-line passwords (--password X, mysql -pX, sshpass -p
// X anywhere in a line, curl -u USER:X, http -a USER:X...); and the values
// of password / secret / api_key / token fields written as key=value,
// "key": "value" (also inside a JSON string: \"key\":\"value\") or
// key: value. The key names are
// kept so the message still says what failed. Redaction is best effort: it
// cannot know every secret format.
func Redact(s string) string {
	lower := foldLower(s)
	found := litScan(lower)
	for i := range redactions {
		r := &redactions[i]
		if r.lits != nil && (r.mask&found == 0 || r.sep != 0 && !keyFollowedBy(lower, r.lits, r.sep)) {
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
// at max runes, ending with "…" when cut. max < 1 means no cap. It is
// [quoted.Line].
func Sanitize(s string, max int) string { return quoted.Line(s, max) }
