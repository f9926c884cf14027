package guard

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// Block markers. Both start with MarkerOpen, which [Sanitize] makes
// impossible in any text that goes into a block.
const (
	// MarkerOpen opens every marker line of a guard or STOP block: a text
	// without it holds none of those blocks.
	MarkerOpen = "### !!! "
	BlockStart = "### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!"
	BlockEnd   = "### !!! END REPEAT FAILURE GUARD !!!"
)

const blockIntro = "The following errors have occurred MULTIPLE times in this session. Prioritize fixing them:"

// Caps, in runes, on the text of a block line.
const (
	maxLabelRunes   = maxNameRunes
	maxExampleRunes = 200
	maxHintRunes    = maxFixRunes
)

// Entry is one repeated failure.
type Entry struct {
	Pattern string `json:"pattern"`           // label, e.g. "SYNTAX COMPLIANCE ERROR" or "REPEATED ERROR"
	Count   int    `json:"count"`             // incidents inside the window
	Hint    string `json:"hint"`              // the fix text
	Example string `json:"example,omitempty"` // sanitised sample message (REPEATED ERROR entries)
	// Provider names the provider a provider failure came from: those
	// count per provider (a rate limit of one says nothing of another).
	Provider string `json:"provider,omitempty"`
	// Fingerprint is the group's fingerprint (RepeatedPattern entries).
	Fingerprint string `json:"fingerprint,omitempty"`
	// Tools names the tools whose failures the entry counts (tool
	// failures recorded by the proxy, see [ToolOf]), sorted.
	Tools []string `json:"tools,omitempty"`
	// Call shows the repeated call of a loop's entry ([LoopEntry]).
	Call string `json:"call,omitempty"`
	// Fixed is how this failure was fixed before, when a fix was learned.
	Fixed *Fixed `json:"fixed,omitempty"`
}

// Fixed is a learned fix as a guard entry shows it: the call that ended
// the same failure before, and what the assistant said of it.
type Fixed struct {
	Tool string `json:"tool"`
	Call string `json:"call"`           // the call's arguments
	Note string `json:"note,omitempty"` // the assistant's note beside the call
}

// ToolOf returns the tool a tool failure came from: the proxy records
// them as "NAME: output". It returns "" for other incidents, and for a
// message that does not start with a plausible tool name.
func ToolOf(inc *store.Incident) string {
	if inc.Type != store.TypeToolError {
		return ""
	}
	name, _, _ := cutToolName(inc.Message)
	return name
}

// cutToolName splits "NAME: output", as the proxy records a tool's
// failure, when NAME is a plausible tool name (no white space nor quotes,
// at most 128 bytes).
func cutToolName(message string) (name, rest string, ok bool) {
	i := strings.Index(message, ": ")
	if i <= 0 || i > 128 || strings.ContainsAny(message[:i], " \t\n\"'`") {
		return "", message, false
	}
	return message[:i], message[i+2:], true
}

// ProviderFailure reports whether an incident type is a failure of the
// provider (a non-2xx answer, a timeout, an unreachable provider, a failed
// stream) rather than of the agent's tools: those hit every conversation
// of a tenant alike, and count per provider.
func ProviderFailure(typ string) bool {
	switch typ {
	case store.TypeHTTPError, store.TypeTimeout, store.TypeUnreachable, store.TypeStreamError:
		return true
	}
	return false
}

// scope is what an incident counts within: its provider for a provider
// failure, nothing for any other.
func scope(inc *store.Incident) string {
	if ProviderFailure(inc.Type) {
		return inc.Provider
	}
	return ""
}

// Detect finds the repeated failures among incidents (in any order) whose
// Time is inside [now-Window, now]: each pattern matched by at least
// MinRepeats incidents, and, among incidents matching no pattern, each
// fingerprint (the incident's Fingerprint field, or [Fingerprint] of its
// message when that is empty) shared by at least MinRepeats incidents,
// reported as [RepeatedPattern] with a redacted, sanitised example taken
// from the newest incident of the group. Provider failures count per
// provider: their entries name it.
//
// Entries are ordered by count (highest first), then label, then example;
// the result depends only on the set of incidents, not on their order.
// Classifications are cached, so repeated calls over mostly the same
// incidents are cheap. It returns nil when nothing repeats.
func (g *Guard) Detect(incidents []store.Incident, now time.Time) []Entry {
	return g.detect(incidents, now, g.cfg.MinRepeats)
}

// DetectAll is [Guard.Detect] with every group reported, whether it
// repeated or not: the caller picks (an entry that occurred once still
// matters when a fix for it was learned).
func (g *Guard) DetectAll(incidents []store.Incident, now time.Time) []Entry {
	return g.detect(incidents, now, 1)
}

func (g *Guard) detect(incidents []store.Incident, now time.Time, minRepeats int) []Entry {
	lo := now.Add(-g.cfg.Window)
	t := g.NewTally()
	var misses []int // indexes of incidents not in the cache

	g.mu.RLock()
	for i := range incidents {
		inc := &incidents[i]
		if inc.Time.Before(lo) || inc.Time.After(now) || inc.Type == store.TypeLoop {
			continue // out of the window, or a loop (not a failure)
		}
		k := g.key(inc.Type, inc.StatusCode, inc.Message)
		m, hit := g.cur[k]
		if !hit {
			misses = append(misses, i)
			continue
		}
		t.add(inc, m, ToolOf(inc), 1)
	}
	g.mu.RUnlock()

	if len(misses) > 0 {
		keys := make([]uint64, len(misses))
		memos := make([]memo, len(misses))
		for j, i := range misses {
			inc := &incidents[i]
			keys[j] = g.key(inc.Type, inc.StatusCode, inc.Message)
			var hit bool
			g.mu.RLock()
			memos[j], hit = g.prev[keys[j]]
			g.mu.RUnlock()
			if !hit {
				memos[j] = g.compute(inc.Type, inc.StatusCode, inc.Message)
			}
			t.add(inc, memos[j], ToolOf(inc), 1)
		}
		g.mu.Lock()
		for j, k := range keys {
			g.put(k, memos[j])
		}
		g.mu.Unlock()
	}
	return t.Entries(minRepeats)
}

// scopedPattern is a pattern matched by the failures of one provider.
type scopedPattern struct {
	pat      int
	provider string
}

// newer reports whether a sorts after b: later Time, then greater ID, then
// smaller Message, so the choice does not depend on input order.
func newer(a, b *store.Incident) bool {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c > 0
	}
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c > 0
	}
	return a.Message < b.Message
}

// Block renders entries as the repeat-failure guard block, in the given
// order, or returns "" when there are none. Every text field goes through
// [Sanitize], so stored text cannot add lines or forge a marker. The block
// ends with BlockEnd and a blank line, ready to be prepended to a system
// message: Strip(Block(e) + text) == text for any text without marker lines.
func Block(entries []Entry) string {
	if len(entries) == 0 {
		return ""
	}
	// The texts first, to size the block: a storm of provider failures
	// renders a new one on every request.
	var small [8]entryText
	texts := small[:0]
	quoted := slices.ContainsFunc(entries, quotes)
	n := len(BlockStart) + len(blockIntro) + len(BlockEnd) + 5
	if quoted {
		n += len(QuoteNotice) + 1
	}
	for _, e := range entries {
		t := entryTextOf(e)
		texts = append(texts, t)
		n += len(entryLead) + len(t.label) + maxCountLen + len(t.body)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(BlockStart)
	b.WriteString("\n")
	b.WriteString(blockIntro)
	b.WriteString("\n")
	if quoted {
		b.WriteString(QuoteNotice)
		b.WriteString("\n")
	}
	for i, e := range entries {
		t := &texts[i]
		b.WriteString(entryLead)
		b.WriteString(t.label)
		b.WriteString(" (")
		writeCount(&b, e)
		b.WriteString(")\n")
		b.WriteString(t.body)
	}
	b.WriteString("\n")
	b.WriteString(BlockEnd)
	b.WriteString("\n\n")
	return b.String()
}

// entryLead begins an entry's line in a block.
const entryLead = "\n▶ Pattern: "

// maxCountLen bounds the length of an entry's count and the parentheses
// around it (see writeCount).
const maxCountLen = len(" (Repeated ") + 20 + len(" times with the same result)\n")

// writeCount writes how often an entry's failure happened: "Failed 2
// times"; a loop of calls that did not fail says what they did instead
// ("Repeated 3 times with the same result", "Called 3 times").
func writeCount(b *strings.Builder, e Entry) {
	verb, tail := "Failed ", ""
	switch e.Pattern {
	case labelNoProgress, labelAlternating:
		verb, tail = "Repeated ", " with the same result"
	case labelUnknownTool:
		verb = "Called "
	}
	b.WriteString(verb)
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], int64(e.Count), 10))
	if e.Count == 1 {
		b.WriteString(" time")
	} else {
		b.WriteString(" times")
	}
	b.WriteString(tail)
}

// entryText is an entry's text in a block but its count: its label and
// the lines after the count.
type entryText struct{ label, body string }

// entryKey is what an entry's text depends on.
type entryKey struct {
	pattern, provider, example, call, hint string
	fixed                                  Fixed
	hasFixed                               bool
}

// entryTexts remembers the text of recent entries: the blocks of a
// tenant's requests differ from one failure to the next in counts, and
// sanitising and quoting the same text again costs more than the rest of
// a block. Bounded: cleared when it holds maxEntryTexts.
var entryTexts struct {
	mu sync.Mutex
	m  map[entryKey]entryText
}

const maxEntryTexts = 1024

func entryTextOf(e Entry) entryText {
	k := entryKey{pattern: e.Pattern, provider: e.Provider, example: e.Example, call: e.Call, hint: e.Hint}
	if e.Fixed != nil {
		k.fixed, k.hasFixed = *e.Fixed, true
	}
	entryTexts.mu.Lock()
	t, ok := entryTexts.m[k]
	entryTexts.mu.Unlock()
	if ok {
		return t
	}
	t = renderEntry(e)
	entryTexts.mu.Lock()
	if entryTexts.m == nil || len(entryTexts.m) >= maxEntryTexts {
		entryTexts.m = make(map[entryKey]entryText)
	}
	entryTexts.m[k] = t
	entryTexts.mu.Unlock()
	return t
}

// renderEntry draws an entry's text but its count.
func renderEntry(e Entry) entryText {
	var b strings.Builder
	if p := Sanitize(e.Provider, maxLabelRunes); p != "" {
		b.WriteString("  Provider: ")
		b.WriteString(p)
		b.WriteString("\n")
	}
	if ex := Quote(e.Example, maxExampleRunes); ex != "" {
		b.WriteString("  Error: ")
		b.WriteString(ex)
		b.WriteString("\n")
	}
	if call := Sanitize(e.Call, 2*maxCallArgsRunes+2*maxLabelRunes); call != "" {
		b.WriteString("  Call: ")
		b.WriteString(call) // built by LoopEntry: names and quoted arguments
		b.WriteString("\n")
	}
	if hint := Sanitize(e.Hint, maxHintRunes); hint != "" {
		b.WriteString("  Fix Instruction: ")
		b.WriteString(hint)
		b.WriteString("\n")
	}
	if f := e.Fixed; f != nil {
		if fix := fixText(f); fix != "" {
			b.WriteString("  Last time this was fixed by: ")
			b.WriteString(fix)
			b.WriteString("\n")
		}
	}
	return entryText{label: Sanitize(e.Pattern, maxLabelRunes), body: b.String()}
}

// quotes reports whether an entry shows stored text.
func quotes(e Entry) bool { return e.Example != "" || e.Call != "" || e.Fixed != nil }

// fixText shows a learned fix: the call, and the assistant's note quoted;
// a note that cannot be shown is left out.
func fixText(f *Fixed) string {
	if f.Tool == "" && f.Call == "" {
		return ""
	}
	call := callText(&Step{Tool: f.Tool, Args: f.Call})
	if note := quoteOrOmit(f.Note, maxExampleRunes); note != "" {
		call += ", with the note " + note
	}
	return "calling " + call
}

// Strip removes every guard block and STOP block from text: each line
// that is BlockStart (or StopStart), ignoring surrounding whitespace,
// through the next BlockEnd (StopEnd) line, and one blank line after it.
// A marker line without its partner (a start with no end before the next
// start, or a lone end) is removed alone, so the text between is kept.
// Strip is idempotent, and text without marker lines is returned
// unchanged.
func Strip(text string) string {
	if !strings.Contains(text, MarkerOpen) {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		line, next := lineAt(text, i)
		switch l := strings.TrimSpace(line); l {
		case BlockStart, StopStart:
			end := blockEnd(text, next, l)
			if end < 0 {
				i = next // orphan start: drop its line only
				continue
			}
			i = end
			if l, n := lineAt(text, i); i < len(text) && strings.TrimSpace(l) == "" {
				i = n // the blank line after the block
			}
		case BlockEnd, StopEnd:
			i = next // orphan end
		default:
			b.WriteString(text[i:next])
			i = next
		}
	}
	return b.String()
}

// lineAt returns the line starting at i (without its newline) and the
// index after its newline.
func lineAt(text string, i int) (line string, next int) {
	j := strings.IndexByte(text[i:], '\n')
	if j < 0 {
		return text[i:], len(text)
	}
	return text[i : i+j], i + j + 1
}

// blockEnd returns the index after the end line that closes a block
// opened by start whose body starts at i, or -1 when a start line or the
// end of text comes first.
func blockEnd(text string, i int, start string) int {
	end := BlockEnd
	if start == StopStart {
		end = StopEnd
	}
	for i < len(text) {
		line, next := lineAt(text, i)
		switch strings.TrimSpace(line) {
		case end:
			return next
		case BlockStart, StopStart:
			return -1
		}
		i = next
	}
	return -1
}
