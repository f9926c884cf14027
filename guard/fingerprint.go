package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Masks written by [Template] in place of variable parts.
const (
	maskStr   = "<STR>"
	maskURL   = "<URL>"
	maskEmail = "<EMAIL>"
	maskUUID  = "<UUID>"
	maskIP    = "<IP>"
	maskPath  = "<PATH>"
	maskHex   = "<HEX>"
	maskNum   = "<NUM>"
	maskDur   = "<DUR>"
	maskAny   = "<*>"
)

// Bounds on the input of Template.
const (
	maxTemplateInput = 4 << 10 // longer messages: head and tail, 2 KiB each
	maxQuoted        = 512     // a quote not closed within this many bytes is left as is
	longToken        = 32      // tokens at least this many runes long are ids
)

// Fingerprint returns 16 hex characters identifying the template of
// message (see [Template]): the same error with other line numbers, ids,
// paths, durations or quoted values has the same fingerprint.
func Fingerprint(message string) string {
	sum := sha256.Sum256([]byte(Template(message)))
	return hex.EncodeToString(sum[:8])
}

// Template returns message with its variable parts masked, Drain-style,
// after the source lines it quotes are taken out (see errorLines: the
// same error raised from other code is the same error): quoted strings
// (in ASCII or curly quotes) become <STR>, then, token by token (tokens are separated
// by white space; surrounding brackets and punctuation are kept, and
// key=value tokens are masked on each side), URLs become <URL>, e-mail
// addresses <EMAIL>, UUIDs <UUID>, IP addresses (with port) <IP>, file paths
// (with :line:col) <PATH>, hex numbers <HEX>, numbers and times <NUM>,
// durations <DUR>, and any other token holding a digit, or 32 runes or
// longer, <*>. A value labelled as an id ("Chunk ID: 6e6996",
// "request_id=7f3a9b2c1d") made of six or more hex digits is masked as
// such an id mostly is, whatever digits it happens to have (see idMask).
// A status or an exit code is part of an error's identity and stays:
// a number after "status", "code" or "exit" ("exit status 2", "Process
// exited with code 1", "status=500"), and an HTTP status after "HTTP",
// "HTTP/1.1" or "error" ("returned error: 404", "API Error: 529"). A
// provider's error reads the same in every shape it is reported in (see
// apiError). Runs of white space become one space and a mask repeated in
// a row is kept once. Messages longer than 4 KiB are cut to their first and last
// 2 KiB. Case is kept.
func Template(message string) string {
	s := message
	if len(s) > maxTemplateInput {
		s = headTail(s, maxTemplateInput/2)
	}
	if c, ok := apiError(s); ok {
		s = c
	}
	s = maskQuoted(errorLines(s))
	var b strings.Builder
	b.Grow(len(s))
	last, prev, labelled := "", "", false
	for _, w := range strings.Fields(s) {
		m := ""
		if labelled {
			m = idMask(w)
		}
		labelled = strings.HasSuffix(w, ":") && isIDLabel(strings.TrimSuffix(strings.TrimLeft(w, leadPunct), ":"))
		switch {
		case m != "":
			w = m
		case keepsNumber(prev, w):
			prev = w
		default:
			prev = w
			w = maskToken(w)
		}
		if w == last && strings.Contains(w, ">") && isMasked(trimPunct(w)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		last = w
	}
	return b.String()
}

// maskQuoted replaces "double", `backtick`, 'single' and ‘curly’ “quoted”
// strings (each on one line) with <STR>. A single quote opens only after
// a non-word character and closes only before one, so apostrophes in
// "can't" and "don't" are left alone.
func maskQuoted(s string) string {
	if strings.ContainsAny(s, "‘“") {
		s = curlyQuotes.Replace(s)
	}
	if strings.IndexAny(s, "\"'`") < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	copied := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '"' && c != '`' && (c != '\'' || i > 0 && isWordByte(s[i-1])) {
			continue
		}
		j := closeQuote(s, i)
		if j < 0 {
			continue
		}
		b.WriteString(s[copied:i])
		b.WriteString(maskStr)
		copied = j + 1
		i = j
	}
	b.WriteString(s[copied:])
	return b.String()
}

// curlyQuotes turns the quotes gcc, coreutils and others print in a UTF-8
// locale into ASCII ones.
var curlyQuotes = strings.NewReplacer("‘", "'", "’", "'", "“", `"`, "”", `"`)

// closeQuote returns the index of the quote closing the one at i, or -1.
func closeQuote(s string, i int) int {
	q := s[i]
	end := min(len(s), i+1+maxQuoted)
	for k := i + 1; k < end; k++ {
		switch c := s[k]; {
		case c == '\n':
			return -1
		case c == '\\' && q == '"':
			k++ // an escaped character
		case c == q:
			if q == '\'' && k+1 < len(s) && isWordByte(s[k+1]) {
				continue
			}
			return k
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
}

const (
	leadPunct  = "([{\"'"
	trailPunct = ")]}\"',;:.!?"
)

// trimPunct returns w without its leading and trailing punctuation.
func trimPunct(w string) string {
	return strings.TrimRight(strings.TrimLeft(w, leadPunct), trailPunct)
}

// maskToken masks the core of one white-space separated token, keeping its
// surrounding punctuation.
func maskToken(w string) string {
	lead, core, trail := splitPunct(w)
	if core == "" {
		return w
	}
	var m string
	if strings.IndexByte(core, '=') >= 0 && !strings.Contains(core, "://") {
		parts := strings.Split(core, "=")
		for i, p := range parts {
			if m := idMask(p); m != "" && i > 0 && isIDLabel(parts[i-1]) {
				parts[i] = m
			} else if i > 0 && keepsNumber(parts[i-1], p) {
				continue
			} else if p != "" {
				parts[i] = maskCore(p)
			}
		}
		m = strings.Join(parts, "=")
	} else {
		m = maskCore(core)
	}
	if m == core {
		return w
	}
	return lead + m + trail
}

// splitPunct splits a token into its leading punctuation, its core and
// its trailing punctuation.
func splitPunct(w string) (lead, core, trail string) {
	core = strings.TrimLeft(w, leadPunct)
	lead = w[:len(w)-len(core)]
	core = strings.TrimRight(core, trailPunct)
	return lead, core, w[len(lead)+len(core):]
}

// maskCore masks a token without surrounding punctuation.
func maskCore(w string) string {
	switch {
	case isMasked(w):
		return w
	case strings.Contains(w, "://"):
		return maskURL
	case isEmail(w):
		return maskEmail
	case isUUID(w):
		return maskUUID
	case isTime(w):
		return maskNum
	case isIP(w):
		return maskIP
	case isPath(w):
		return maskPath
	case len(w) > 2 && (w[:2] == "0x" || w[:2] == "0X") && allBytes(w[2:], isHexByte):
		return maskHex
	case isNumber(w):
		return maskNum
	case isDuration(w):
		return maskDur
	case len(w) >= 7 && allBytes(w, isHexByte) && strings.IndexAny(w, "0123456789") >= 0:
		return maskHex
	case strings.IndexAny(w, "0123456789") >= 0:
		return maskAny
	case utf8.RuneCountInString(w) >= longToken:
		return maskAny
	}
	return w
}

// keepsNumber reports whether w is a status or an exit code that label,
// the word before it, names: any number after "status", "code", "exit"
// and the like, a number from 100 to 599 after "HTTP" or "error".
func keepsNumber(label, w string) bool {
	_, core, _ := splitPunct(w)
	if core == "" || len(core) > 4 || !allBytes(core, isDigit) {
		return false
	}
	switch l := strings.ToLower(trimPunct(label)); l {
	case "status", "code", "exit", "exitcode", "exit_code", "returncode", "return_code", "statuscode", "status_code", "rc":
		return true
	case "http", "error":
	default:
		if !strings.HasPrefix(l, "http/") {
			return false
		}
	}
	n, _ := strconv.Atoi(core)
	return n >= 100 && n <= 599
}

// isIDLabel reports whether a key names an id: "id", "ID", or a name
// ending in _id, -id, .id, Id or ID after a lower-case letter ("chunk_id",
// "Request-Id", "requestId", "traceID").
func isIDLabel(key string) bool {
	n := len(key)
	switch {
	case strings.EqualFold(key, "id"):
		return true
	case n < 3 || !strings.EqualFold(key[n-2:], "id"):
		return false
	case key[n-3] == '_' || key[n-3] == '-' || key[n-3] == '.':
		return true
	}
	return key[n-2] == 'I' && key[n-3] >= 'a' && key[n-3] <= 'z'
}

// idMask masks a token that follows an id label when its core is six or
// more hex digits: as a random id of its length mostly is (<*> for six
// digits, <HEX> for more), not as the digits it happens to have would
// read ("123456" a number, "64577d" a duration, "abcdef" a word). Agents
// print such ids in front of every command's output (Codex CLI's
// "Chunk ID: 6e6996"): the same failure must keep one fingerprint. It
// returns "" for any other token.
func idMask(w string) string {
	lead, core, trail := splitPunct(w)
	if len(core) < 6 || !allBytes(core, isHexByte) {
		return ""
	}
	m := maskAny
	if len(core) >= 7 {
		m = maskHex
	}
	return lead + m + trail
}

func isMasked(w string) bool {
	switch w {
	case maskStr, maskURL, maskEmail, maskUUID, maskIP, maskPath, maskHex, maskNum, maskDur, maskAny:
		return true
	}
	return false
}

func allBytes(s string, f func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !f(s[i]) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isHexByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// isEmail: local@domain.tld with a letter after the @.
func isEmail(w string) bool {
	at := strings.IndexByte(w, '@')
	if at <= 0 || at+1 >= len(w) || !isLetter(w[at+1]) {
		return false
	}
	dot := strings.LastIndexByte(w[at:], '.')
	if dot < 0 || at+dot+1 >= len(w) {
		return false
	}
	return allBytes(w[:at], func(c byte) bool { return isWordByte(c) || c == '.' || c == '+' || c == '-' })
}

func isUUID(w string) bool {
	if len(w) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if w[i] != '-' {
				return false
			}
		default:
			if !isHexByte(w[i]) {
				return false
			}
		}
	}
	return true
}

// isTime: 12:30, 12:30:45, 12:30:45.123.
func isTime(w string) bool {
	parts := strings.Split(w, ":")
	if len(parts) < 2 || len(parts) > 3 || len(parts[0]) == 0 || len(parts[0]) > 2 || !allBytes(parts[0], isDigit) {
		return false
	}
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			p, _, _ = strings.Cut(p, ".")
		}
		if len(p) != 2 || !allBytes(p, isDigit) {
			return false
		}
	}
	return !strings.HasSuffix(w, ".")
}

// isIP: IPv4 with an optional :port or /prefix, or IPv6 (two or more
// colons, hex digits only).
func isIP(w string) bool {
	if i := strings.IndexAny(w, ":/"); i > 0 && strings.Count(w, ".") == 3 {
		if !allBytes(w[i+1:], isDigit) || len(w) == i+1 {
			return false
		}
		w = w[:i]
	}
	if parts := strings.Split(w, "."); len(parts) == 4 {
		for _, p := range parts {
			if len(p) == 0 || len(p) > 3 || !allBytes(p, isDigit) {
				return false
			}
		}
		return true
	}
	return strings.Count(w, ":") >= 2 && strings.IndexFunc(w, func(r rune) bool { return r < utf8.RuneSelf && isHexByte(byte(r)) }) >= 0 &&
		allBytes(w, func(c byte) bool { return isHexByte(c) || c == ':' || c == '.' || c == '%' })
}

// isPath: /abs, ./rel, ../rel, ~/home, C:\win, \\share, a/b/c, dir/file.ext,
// and file.ext:12[:5] or file.ext(12,5) locations.
func isPath(w string) bool {
	for _, p := range []string{"/", "./", "../", "~/", `.\`, `..\`, `\\`} {
		if strings.HasPrefix(w, p) {
			return true
		}
	}
	if len(w) >= 3 && isLetter(w[0]) && w[1] == ':' && (w[2] == '\\' || w[2] == '/') {
		return true
	}
	name, loc := w, false
	if i := strings.IndexAny(w, ":("); i > 0 && i+1 < len(w) && isDigit(w[i+1]) {
		name, loc = w[:i], true
	}
	switch strings.Count(name, "/") + strings.Count(name, `\`) {
	case 0:
		return loc && hasExt(name)
	case 1:
		return hasExt(name[strings.LastIndexAny(name, `/\`)+1:])
	}
	return true
}

// hasExt reports whether name ends in .ext with a letter-led extension.
func hasExt(name string) bool {
	dot := strings.LastIndexByte(name, '.')
	return dot > 0 && dot+1 < len(name) && isLetter(name[dot+1]) &&
		allBytes(name[dot+1:], func(c byte) bool { return isLetter(c) || isDigit(c) })
}

// isNumber: an optional sign, digits with . , _ separators, an optional %.
func isNumber(w string) bool {
	w = strings.TrimPrefix(strings.TrimPrefix(w, "-"), "+")
	w = strings.TrimSuffix(w, "%")
	return w != "" && isDigit(w[0]) && allBytes(w, func(c byte) bool { return isDigit(c) || c == '.' || c == ',' || c == '_' })
}

// durationUnits, longest first so "ms" wins over "m".
var durationUnits = []string{
	"seconds", "minutes", "second", "minute", "hours", "days",
	"secs", "mins", "hour", "hrs", "day",
	"sec", "min", "hr", "ns", "us", "µs", "ms",
	"s", "m", "h", "d",
}

// isDuration: one or more number+unit pairs, e.g. 30s, 1.5ms, 1h2m3s, 10min.
func isDuration(w string) bool {
	w = strings.ToLower(w)
	if w == "" {
		return false
	}
	for w != "" {
		n := 0
		for n < len(w) && (isDigit(w[n]) || n > 0 && w[n] == '.') {
			n++
		}
		if n == 0 || !isDigit(w[0]) {
			return false
		}
		w = w[n:]
		found := false
		for _, u := range durationUnits {
			if strings.HasPrefix(w, u) {
				w = w[len(u):]
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
