// Package guard is scarproxy's failure memory logic: it classifies incidents
// into named failure patterns, fingerprints the errors no pattern knows,
// finds the failures that repeat inside a time window, and renders (and
// strips) the repeat-failure guard block the proxy prepends to the system
// message.
//
// # What it owns
//
//   - the pattern bank ([Builtins], overridable from the `guard:` YAML
//     section through [Config]) and [Guard.Classify];
//   - [Fingerprint] and [Template], which group novel errors that differ
//     only in line numbers, ids, paths, durations and the like;
//   - [Guard.Detect], [Block] and [Strip];
//   - [ToolFailed], which decides whether a role:"tool" message says the
//     tool failed, and [Redact] and [Sanitize], which clean text before it
//     is stored or shown to a model; [Quote], through which every block
//     shows stored text, is the package quoted below it.
//
// Everything here works on plain values: no I/O, no clock (callers pass
// now), no logging.
//
// # Imports
//
// Only the standard library, the store package (for [store.Incident] and
// the incident type constants) and guard/quoted (the quoting path, which
// recall shares). It must not import Echo, bbolt, pgx nor any other
// scarproxy package.
package guard

import (
	"errors"
	"fmt"
	"hash/maphash"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults used when the corresponding [Config] field is zero.
const (
	DefaultMinRepeats = 2
	DefaultWindow     = time.Hour
)

// RepeatedPattern is the label of guard entries for errors that match no
// pattern but repeat with the same [Fingerprint].
const RepeatedPattern = "REPEATED ERROR"

// repeatedFix is the hint of [RepeatedPattern] entries.
const repeatedFix = "This exact error keeps recurring; do not retry the same approach. " +
	"Read the error, find its root cause, and change strategy before trying again."

// Limits on configured text.
const (
	maxNameRunes = 80
	maxFixRunes  = 1000
)

// Config is the `guard:` YAML section.
//
// The built-in patterns ([Builtins]) are always present unless disabled;
// Patterns adds to them or overrides them. The zero Config behaves like
// [DefaultConfig].
type Config struct {
	// MinRepeats is how many incidents of one pattern (or one fingerprint)
	// inside Window make a guard entry. 0 means 2. 1 turns every single
	// failure into a guard entry.
	MinRepeats int `yaml:"min_repeats"`
	// Window is how far back Detect looks. 0 means 1h.
	Window time.Duration `yaml:"window"`
	// Patterns are added to the built-ins. A pattern with the Name of a
	// built-in (compared case-insensitively) overrides it field by field:
	// an empty Regex, Exclude or Fix and a nil StatusCodes or Types keep the
	// built-in's value; an empty list (`status_codes: []`) clears it.
	// New patterns are tried before the built-ins, in the order given.
	Patterns []PatternConfig `yaml:"patterns"`
	// DisableBuiltins names built-in patterns to turn off; "all" turns off
	// every one. An unknown name is a Validate error.
	DisableBuiltins []string `yaml:"disable_builtins"`

	// StopAfter is how many repeats of a loop (the same call failing, the
	// same call returning the same result, two calls alternating, a tool
	// that does not exist) raise the STOP block. 0 means 4. Below
	// MinRepeats it counts as MinRepeats.
	StopAfter int `yaml:"stop_after"`
	// HardStop turns on the last level: at HardStopAfter repeats the
	// looping turn goes to the provider with tools forbidden (tool_choice
	// none), so the model must answer in words. Off by default: an agent
	// framework may treat a turn without a tool call as the end of its task.
	HardStop bool `yaml:"hard_stop"`
	// HardStopAfter is how many repeats trigger the hard stop. 0 means
	// StopAfter+2; below StopAfter it counts as StopAfter.
	HardStopAfter int `yaml:"hard_stop_after"`

	// Placement says where the proxy puts the blocks. PlacementTurn (the
	// default; "" means it) puts the blocks that change during a
	// conversation (STOP, guard, learned fixes) at the end of its newest
	// turn and its recall block in its first user turn, so that no byte a
	// provider caches changes. PlacementSystem puts every block in front
	// of the system text: the whole conversation is then read again, and
	// billed as uncached, on every turn whose blocks change.
	Placement string `yaml:"placement"`
}

// Values of [Config.Placement].
const (
	PlacementTurn   = "turn"
	PlacementSystem = "system"
)

// PatternConfig is one failure pattern.
//
// An incident matches the pattern when its status code is in StatusCodes,
// or its type is in Types, or its message matches Regex and does not match
// Exclude. Status and type matches are tried (over every pattern) before
// any message match, so a 429 is a rate limit whatever its text says.
type PatternConfig struct {
	// Name is the label shown in the guard block, e.g. "API RATE LIMIT TRIGGER".
	// Required; one line, at most 80 characters.
	Name string `yaml:"name"`
	// Regex is a Go RE2 expression matched case-insensitively against the
	// message. It must not match the empty string (it would match every
	// message; use Types for that).
	Regex string `yaml:"regex"`
	// Exclude vetoes a Regex match: a message matching Exclude does not
	// match by text (status codes and types still match). Optional.
	Exclude string `yaml:"exclude"`
	// StatusCodes: any of these statuses matches, whatever the text.
	StatusCodes []int `yaml:"status_codes"`
	// Types: any of these incident types (store.Type*) matches.
	Types []string `yaml:"types"`
	// Fix is the instruction shown to the model. Required for a new pattern.
	Fix string `yaml:"fix"`
	// Disabled turns the pattern off; on a built-in's name it disables the built-in.
	Disabled bool `yaml:"disabled"`
}

// DefaultConfig returns the defaults: min_repeats 2, window 1h, every
// built-in pattern on and no extra pattern, STOP at 4 repeats, no hard
// stop (hard_stop_after stop_after+2 once turned on).
func DefaultConfig() Config {
	return Config{MinRepeats: DefaultMinRepeats, Window: DefaultWindow, StopAfter: DefaultStopAfter}
}

// Builtins returns a copy of the built-in patterns, in the order they are
// tried.
func Builtins() []PatternConfig {
	out := make([]PatternConfig, len(builtins))
	for i, p := range builtins {
		out[i] = clonePattern(p)
	}
	return out
}

// Validate reports every problem of c, joined. Each message starts with the
// YAML key at fault, e.g. `guard.patterns[2].regex: ...`.
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

// Guard classifies incidents and detects repeated failures. It is safe for
// concurrent use. Create it with [New].
type Guard struct {
	cfg      Config
	patterns []pattern

	seed maphash.Seed
	mu   sync.RWMutex
	cur  map[uint64]memo // newest generation of the classification cache
	prev map[uint64]memo // previous generation, consulted on a miss in cur
	// curBytes is what cur holds (memoBytes of each entry), of at most
	// genBytes; cur holds at most genEntries entries.
	curBytes, prevBytes  int
	genEntries, genBytes int
}

// pattern is a compiled, enabled pattern.
type pattern struct {
	name     string
	fix      string
	re       *matcher       // nil: no text match
	exclude  *regexp.Regexp // nil: no veto
	statuses []int
	types    []string
}

// memo is a cached classification: the index of the matched pattern (-1
// for none) and, for unmatched messages, their fingerprint.
type memo struct {
	pat int32
	fp  string
	ex  string // the example an entry of its fingerprint group shows (see example)
}

// A generation of the classification cache holds at most
// cacheGeneration entries and cacheGenerationBytes bytes (memoBytes): the
// cache holds at most twice that. A guard window counts every
// conversation's failures through it on each of their turns, so it holds
// the distinct messages of a busy gateway's window (tens of thousands of
// short ones), at most 8 MiB; one that thrashes classifies again, with
// every pattern, each failure of a conversation whose guard is derived.
const (
	cacheGeneration      = 32768
	cacheGenerationBytes = 4 << 20
)

// CacheBytes returns the bytes the classification cache holds (at most
// 8 MiB).
func (g *Guard) CacheBytes() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.curBytes + g.prevBytes
}

// memoBytes is what a cached classification holds: its strings, its map
// slot and key.
func memoBytes(m memo) int { return 48 + len(m.fp) + len(m.ex) }

// New validates cfg, compiles its patterns and returns a Guard.
func New(cfg Config) (*Guard, error) {
	pats, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	return &Guard{
		cfg:        cfg.normalized(),
		patterns:   pats,
		seed:       maphash.MakeSeed(),
		cur:        make(map[uint64]memo),
		genEntries: cacheGeneration,
		genBytes:   cacheGenerationBytes,
	}, nil
}

// Window returns the guard's window (Config().Window without the copy).
func (g *Guard) Window() time.Duration { return g.cfg.Window }

// MinRepeats returns how often a failure repeats before it is an entry
// (Config().MinRepeats without the copy).
func (g *Guard) MinRepeats() int { return g.cfg.MinRepeats }

// Config returns the configuration the Guard runs with, defaults filled in.
// The returned value is a copy.
func (g *Guard) Config() Config {
	c := g.cfg
	if g.cfg.Patterns != nil {
		c.Patterns = make([]PatternConfig, len(g.cfg.Patterns))
		for i, p := range g.cfg.Patterns {
			c.Patterns[i] = clonePattern(p)
		}
	}
	c.DisableBuiltins = slices.Clone(g.cfg.DisableBuiltins)
	return c
}

// Classify returns the label of the first pattern the incident matches.
// Status codes and types are tried first, then messages. ok is false when
// no pattern matches. Results are cached.
func (g *Guard) Classify(typ string, status int, message string) (pattern string, ok bool) {
	m := g.lookup(typ, status, message)
	if m.pat < 0 {
		return "", false
	}
	return g.patterns[m.pat].name, true
}

// lookup returns the cached classification of one incident, computing and
// caching it on a miss.
func (g *Guard) lookup(typ string, status int, message string) memo {
	k := g.key(typ, status, message)
	g.mu.RLock()
	m, hit := g.cur[k]
	inPrev := false
	if !hit {
		m, hit = g.prev[k]
		inPrev = hit
	}
	g.mu.RUnlock()
	if !hit {
		m = g.compute(typ, status, message)
	}
	if !hit || inPrev {
		g.storeOne(k, m)
	}
	return m
}

// compute classifies one incident, uncached, with the fingerprint of an
// unmatched message.
func (g *Guard) compute(typ string, status int, message string) memo {
	m := g.classify(typ, status, message)
	if m.pat < 0 {
		m.fp = Fingerprint(message)
		m.ex = example(typ, status, message)
	}
	return m
}

// storeOne caches one classification.
func (g *Guard) storeOne(k uint64, m memo) {
	g.mu.Lock()
	g.put(k, m)
	g.mu.Unlock()
}

// put stores m in the newest cache generation, rotating generations when it
// is full. g.mu must be held for writing.
func (g *Guard) put(k uint64, m memo) {
	n := memoBytes(m)
	if len(g.cur) >= g.genEntries || g.curBytes+n > g.genBytes {
		g.prev, g.prevBytes = g.cur, g.curBytes
		g.cur, g.curBytes = make(map[uint64]memo, len(g.prev)), 0
	}
	if old, ok := g.cur[k]; ok {
		g.curBytes -= memoBytes(old)
	}
	g.cur[k] = m
	g.curBytes += n
}

// key hashes what a classification depends on.
func (g *Guard) key(typ string, status int, message string) uint64 {
	h := maphash.String(g.seed, message)
	t := maphash.String(g.seed, typ)
	return h ^ (t<<17 | t>>47) ^ (uint64(status)+1)*0x9E3779B97F4A7C15
}

// classify runs the patterns, uncached.
func (g *Guard) classify(typ string, status int, message string) memo {
	for i, p := range g.patterns {
		if status != 0 && slices.Contains(p.statuses, status) {
			return memo{pat: int32(i)}
		}
		for _, t := range p.types {
			if strings.EqualFold(t, typ) {
				return memo{pat: int32(i)}
			}
		}
	}
	text := patternText(message)
	var f folded
	f.fold(text)
	for i, p := range g.patterns {
		if p.re != nil && p.re.match(&f) && (p.exclude == nil || !p.exclude.MatchString(text)) {
			return memo{pat: int32(i)}
		}
	}
	return memo{pat: -1}
}

// patternText is the text of a message patterns are run on: its error
// lines (see errorLines), capped (see matchText), with the curly quotes
// gcc and others print in a UTF-8 locale made ASCII.
func patternText(message string) string {
	s := matchText(errorLines(message))
	if strings.ContainsAny(s, "‘’“”") {
		s = curlyQuotes.Replace(s)
	}
	return s
}

// maxMatchBytes bounds the text patterns are run on: the head and the tail
// of longer messages (a traceback names its error on the last line).
const maxMatchBytes = 8 << 10

func matchText(s string) string {
	if len(s) <= maxMatchBytes {
		return s
	}
	return headTail(s, maxMatchBytes/2)
}

// headTail returns the first and last n bytes of s (cut on rune
// boundaries), joined by a newline.
func headTail(s string, n int) string {
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[:cut] + "\n" + s[i:]
}

// normalized returns c with zero values replaced by defaults.
func (c Config) normalized() Config {
	if c.MinRepeats == 0 {
		c.MinRepeats = DefaultMinRepeats
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.StopAfter == 0 {
		c.StopAfter = DefaultStopAfter
	}
	return c
}

// stopAfter is StopAfter, never below MinRepeats (a STOP before the
// guard would skip a level); c is normalized.
func (c Config) stopAfter() int { return max(c.StopAfter, c.MinRepeats) }

// hardStopAfter is HardStopAfter with its default (StopAfter+2) applied,
// never below the STOP level's; c is normalized.
func (c Config) hardStopAfter() int {
	if c.HardStopAfter == 0 {
		return c.stopAfter() + hardStopMargin
	}
	return max(c.HardStopAfter, c.stopAfter())
}

// compile validates c and returns the enabled patterns in the order they
// are tried: new patterns first, then the built-ins (overridden where a
// configured pattern names them).
func (c Config) compile() ([]pattern, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("guard.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.MinRepeats < 0 {
		bad("min_repeats", "must not be negative, got %d (0 means %d)", c.MinRepeats, DefaultMinRepeats)
	}
	if c.Window < 0 {
		bad("window", "must not be negative, got %s (0 means %s)", c.Window, DefaultWindow)
	}
	if c.Placement != "" && c.Placement != PlacementTurn && c.Placement != PlacementSystem {
		bad("placement", "must be %q or %q, got %q", PlacementTurn, PlacementSystem, c.Placement)
	}
	if c.StopAfter < 0 {
		bad("stop_after", "must not be negative, got %d (0 means %d)", c.StopAfter, DefaultStopAfter)
	}
	if c.HardStopAfter < 0 {
		bad("hard_stop_after", "must not be negative, got %d (0 means stop_after+%d)", c.HardStopAfter, hardStopMargin)
	}

	disabled := make(map[int]bool) // built-in index -> off
	for j, name := range c.DisableBuiltins {
		if strings.EqualFold(strings.TrimSpace(name), "all") {
			for i := range builtins {
				disabled[i] = true
			}
			continue
		}
		i := builtinIndex(name)
		if i < 0 {
			bad(fmt.Sprintf("disable_builtins[%d]", j), "unknown built-in pattern %q (known: %s, or \"all\")", name, builtinNames())
			continue
		}
		disabled[i] = true
	}

	effective := Builtins()
	var extra []PatternConfig
	seen := make(map[string]int) // lower-cased name -> index in c.Patterns
	for i, p := range c.Patterns {
		key := fmt.Sprintf("patterns[%d]", i)
		name := strings.TrimSpace(p.Name)
		switch {
		case name == "":
			bad(key+".name", "required")
		case utf8.RuneCountInString(name) > maxNameRunes:
			bad(key+".name", "longer than %d characters", maxNameRunes)
		case strings.IndexFunc(name, isControl) >= 0 || strings.Contains(name, "###"):
			bad(key+".name", "must be one line of text without control characters or \"###\"")
		case strings.EqualFold(name, RepeatedPattern):
			bad(key+".name", "%q is reserved for errors that match no pattern", RepeatedPattern)
		}
		if j, dup := seen[strings.ToLower(name)]; dup && name != "" {
			bad(key+".name", "duplicate of guard.patterns[%d].name %q", j, name)
		}
		seen[strings.ToLower(name)] = i

		for _, f := range []struct{ key, expr string }{{"regex", p.Regex}, {"exclude", p.Exclude}} {
			if f.expr == "" {
				continue
			}
			re, err := regexp.Compile("(?i)" + f.expr)
			if err != nil {
				bad(key+"."+f.key, "%v", err)
			} else if f.key == "regex" && re.MatchString("") {
				bad(key+"."+f.key, "%q matches the empty string, so it would match every message (use types to match every incident of a type)", f.expr)
			}
		}
		for j, s := range p.StatusCodes {
			if s < 100 || s > 599 {
				bad(fmt.Sprintf("%s.status_codes[%d]", key, j), "%d is not an HTTP status code", s)
			}
		}
		for j, t := range p.Types {
			if strings.TrimSpace(t) == "" {
				bad(fmt.Sprintf("%s.types[%d]", key, j), "empty type")
			}
		}
		if n := utf8.RuneCountInString(p.Fix); n > maxFixRunes {
			bad(key+".fix", "longer than %d characters", maxFixRunes)
		}

		if bi := builtinIndex(name); bi >= 0 {
			if p.Disabled {
				disabled[bi] = true
				continue
			}
			effective[bi] = override(effective[bi], p)
			continue
		}
		if p.Disabled {
			continue
		}
		if p.Regex == "" && len(p.StatusCodes) == 0 && len(p.Types) == 0 {
			bad(key, "needs at least one of regex, status_codes, types")
		}
		if strings.TrimSpace(p.Fix) == "" {
			bad(key+".fix", "required for a new pattern")
		}
		p.Name = name
		extra = append(extra, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var out []pattern
	for _, p := range extra {
		out = append(out, mustPattern(p))
	}
	for i, p := range effective {
		if !disabled[i] {
			out = append(out, mustPattern(p))
		}
	}
	return out, nil
}

// override applies the set fields of p over the built-in b.
func override(b, p PatternConfig) PatternConfig {
	if p.Regex != "" {
		b.Regex = p.Regex
	}
	if p.Exclude != "" {
		b.Exclude = p.Exclude
	}
	if p.StatusCodes != nil {
		b.StatusCodes = slices.Clone(p.StatusCodes)
	}
	if p.Types != nil {
		b.Types = slices.Clone(p.Types)
	}
	if strings.TrimSpace(p.Fix) != "" {
		b.Fix = p.Fix
	}
	return b
}

// mustPattern compiles a validated pattern.
func mustPattern(p PatternConfig) pattern {
	out := pattern{
		name:     p.Name,
		fix:      p.Fix,
		statuses: slices.Clone(p.StatusCodes),
		types:    slices.Clone(p.Types),
	}
	if p.Regex != "" {
		out.re = matcherOf("(?i)" + p.Regex)
	}
	if p.Exclude != "" {
		out.exclude = regexp.MustCompile("(?i)" + p.Exclude)
	}
	return out
}

func builtinIndex(name string) int {
	name = strings.TrimSpace(name)
	for i, b := range builtins {
		if strings.EqualFold(b.Name, name) {
			return i
		}
	}
	return -1
}

func builtinNames() string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = fmt.Sprintf("%q", b.Name)
	}
	return strings.Join(names, ", ")
}

func clonePattern(p PatternConfig) PatternConfig {
	p.StatusCodes = slices.Clone(p.StatusCodes)
	p.Types = slices.Clone(p.Types)
	return p
}

func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
