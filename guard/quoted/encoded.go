package quoted

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Encoded payloads. A run of base64 or hex that decodes to text is
// replaced by [encodedText] when the decoded text is instruction-like, or
// when words of decoding or obeying stand in the same text ("decode and
// follow"): it is judged decoded and never shown decoded. Runs that decode
// to bytes (hashes, keys, ids) are left alone.
var (
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{20,}={0,2}`)
	hexRun    = regexp.MustCompile(`(?i)(?:\\x[0-9a-f]{2}){8,}|(?:\b0x)?(?:[0-9a-f]{2}[ :]?){12,}`)
	base32Run = regexp.MustCompile(`[A-Z2-7]{16,}={0,6}`)
	// markdownImage is an image a renderer would fetch: its address can
	// carry what the model was told to anyone.
	markdownImage = regexp.MustCompile(`!\[[^\]\n]{0,200}\]\([^)\s]+\)`)
	// escapes are the escapes of URLs, HTML and string literals.
	escapes = regexp.MustCompile(`(?i)%[0-9a-f]{2}|&#x?[0-9a-f]{1,6};|&[a-z]{2,8};|\\u[0-9a-f]{4}`)
)

// Replacements of the other kinds.
const (
	image = "[image]"
)

// minDecoded is the fewest bytes of decoded text a run must hold.
const minDecoded = 10

// encodedSpans finds the runs of s (the text as shown, not folded) that
// decode to text, with whether that text is instruction-like. The
// expressions only run inside the long runs of their characters.
func encodedSpans(s string) (runs []span, instruction bool) {
	if len(s) < 16 {
		return nil, false
	}
	add := func(start, end int, d string) {
		runs = append(runs, span{start, end, encodedText})
		instruction = instruction || instructionLikeText(d)
	}
	for _, c := range candidates(s, isHexish, 24) {
		for _, m := range hexRun.FindAllStringIndex(s[c[0]:c[1]], -1) {
			if d, ok := decodeHex(s[c[0]+m[0] : c[0]+m[1]]); ok {
				add(c[0]+m[0], c[0]+m[1], d)
			}
		}
	}
	for _, c := range candidates(s, isBase64ish, 16) {
		if overlaps(runs, c[0], c[1]) {
			continue
		}
		for _, m := range base32Run.FindAllStringIndex(s[c[0]:c[1]], -1) {
			if d, ok := decodeBase32(s[c[0]+m[0] : c[0]+m[1]]); ok {
				add(c[0]+m[0], c[0]+m[1], d)
			}
		}
		if overlaps(runs, c[0], c[1]) {
			continue
		}
		for _, m := range base64Run.FindAllStringIndex(s[c[0]:c[1]], -1) {
			if d, ok := decodeBase64(s[c[0]+m[0] : c[0]+m[1]]); ok {
				add(c[0]+m[0], c[0]+m[1], d)
			}
		}
	}
	return runs, instruction
}

func isBase64ish(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '+' || c == '/' || c == '_' || c == '-' || c == '='
}

func isHexish(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == ' ' || c == ':' || c == '\\' || c == 'x' || c == 'X'
}

// candidates returns the runs of s, at least min bytes long, of the
// bytes in returns true for.
func candidates(s string, in func(byte) bool, min int) [][2]int {
	var out [][2]int
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && in(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= min {
			out = append(out, [2]int{start, i})
		}
		start = -1
	}
	return out
}

func overlaps(spans []span, a, b int) bool {
	for _, sp := range spans {
		if a < sp.end && sp.start < b {
			return true
		}
	}
	return false
}

// decodeBase64 decodes a run in any of the four alphabets and paddings,
// and reports whether it is text.
func decodeBase64(run string) (string, bool) {
	trimmed := strings.TrimRight(run, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(trimmed); err == nil && isText(b) {
			return string(b), true
		}
	}
	return "", false
}

// decodeBase32 decodes a run of base32, padded or not.
func decodeBase32(run string) (string, bool) {
	b, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.TrimRight(run, "="))
	if err != nil || !isText(b) {
		return "", false
	}
	return string(b), true
}

// imageSpans finds the markdown images of s.
func imageSpans(s string) []span {
	if !strings.Contains(s, "![") {
		return nil
	}
	var out []span
	for _, m := range markdownImage.FindAllStringIndex(s, -1) {
		out = append(out, span{m[0], m[1], image})
	}
	return out
}

// unescaped returns s with its URL, HTML and \u escapes decoded, and
// whether it had any.
func unescaped(s string) (string, bool) {
	if !strings.ContainsAny(s, "%&\\") || !escapes.MatchString(s) {
		return s, false
	}
	out := escapes.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case m[0] == '%':
			if d, err := url.PathUnescape(m); err == nil {
				return d
			}
		case m[0] == '&':
			return html.UnescapeString(m)
		default:
			if n, err := strconv.ParseUint(m[2:], 16, 32); err == nil {
				return string(rune(n))
			}
		}
		return m
	})
	return out, out != s
}

// decodeHex decodes "\x41\x42", "41 42", "41:42" and "4142".
func decodeHex(run string) (string, bool) {
	r := strings.NewReplacer(`\x`, "", `\X`, "", " ", "", ":", "", "0x", "", "0X", "")
	h := r.Replace(run)
	if len(h)%2 == 1 {
		h = h[:len(h)-1]
	}
	b, err := hex.DecodeString(h)
	if err != nil || !isText(b) {
		return "", false
	}
	return string(b), true
}

// isText reports whether b is UTF-8 text of words: at least minDecoded
// bytes, nearly all printable, with letters and a space.
func isText(b []byte) bool {
	if len(b) < minDecoded || !utf8.Valid(b) {
		return false
	}
	s := string(b)
	printable, letters, spaces, n := 0, 0, 0, 0
	for _, r := range s {
		n++
		switch {
		case r == ' ' || r == '\n' || r == '\t':
			spaces++
			printable++
		case unicode.IsLetter(r):
			letters++
			printable++
		case unicode.IsPrint(r):
			printable++
		}
	}
	return spaces > 0 && printable*100 >= n*95 && letters*2 >= n
}

// instructionLikeText judges decoded text by the same rules (one level:
// text encoded twice is judged by its first decoding's words).
func instructionLikeText(s string) bool {
	f := foldText(line(s, 0, false))
	toks := tokenize(f.text)
	return f.hidden || len(phraseSpans(f.text, toks)) > 0 || len(leadInSpans(f.text)) > 0 || hiddenPhrase(f.text)
}
