package mock

import (
	"strings"

	"github.com/tidwall/gjson"
)

// What the proxy tells the model: its blocks, wherever a request carries
// them. The proxy puts them in the system text, or in the conversation's
// turns (the newest one, the first user one); [[mock:echo]] and the
// scripted loops read them wherever they are.

// blockMarker is the first and last line of one kind of scarproxy block.
// They are the proxy's (guard/detect.go, guard/loop.go, recall/block.go),
// written out here: the mock imports no other scarproxy package.
type blockMarker struct{ start, end string }

var (
	guardMarkers  = blockMarker{"### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!", "### !!! END REPEAT FAILURE GUARD !!!"}
	stopMarkers   = blockMarker{"### !!! STOP — RECURSIVE ERROR LOOP !!!", "### !!! END STOP !!!"}
	recallMarkers = blockMarker{"### RECALL: Similar Task Found in Memory", "### END RECALL"}
	blockKinds    = []blockMarker{guardMarkers, stopMarkers, recallMarkers}
)

// region is a part of a text: text[start:end].
type region struct{ start, end int }

// blockSpans returns the blocks of text in order: each runs from a line
// that is a start marker to the first later line that is its end marker,
// that line included. A start line without its end opens no block.
func blockSpans(text string) []region {
	if !strings.Contains(text, "### ") {
		return nil
	}
	var out []region
	for at := 0; at < len(text); {
		line, next := lineAt(text, at)
		kind, ok := startOf(line)
		if !ok {
			at = next
			continue
		}
		end := -1
		for p := next; p < len(text) && end < 0; {
			l, n := lineAt(text, p)
			if strings.TrimRight(l, " \r") == kind.end {
				end = p + len(l)
			}
			p = n
		}
		if end < 0 {
			at = next
			continue
		}
		out = append(out, region{at, end})
		at = end
	}
	return out
}

// lineAt returns the line of text that starts at at, without its "\n",
// and where the next line starts.
func lineAt(text string, at int) (line string, next int) {
	if i := strings.IndexByte(text[at:], '\n'); i >= 0 {
		return text[at : at+i], at + i + 1
	}
	return text[at:], len(text)
}

func startOf(line string) (blockMarker, bool) {
	line = strings.TrimRight(line, " \r")
	for _, k := range blockKinds {
		if line == k.start {
			return k, true
		}
	}
	return blockMarker{}, false
}

// blocksIn returns the text of every block in the strings of values
// (JSON: messages, items, their parts), in order of appearance.
func blocksIn(values []gjson.Result) []string {
	var out []string
	var walk func(v gjson.Result) bool
	walk = func(v gjson.Result) bool {
		switch {
		case v.Type == gjson.String:
			for _, sp := range blockSpans(v.Str) {
				out = append(out, v.Str[sp.start:sp.end])
			}
		case v.IsArray() || v.IsObject():
			v.ForEach(func(_, e gjson.Result) bool { return walk(e) })
		}
		return true
	}
	for _, v := range values {
		walk(v)
	}
	return out
}

// echoText is what [[mock:echo]] answers: the system text, then each
// block found elsewhere in the request, separated by blank lines.
func echoText(system string, elsewhere []string) string {
	parts := make([]string, 0, 1+len(elsewhere))
	if system != "" {
		parts = append(parts, system)
	}
	return strings.Join(append(parts, elsewhere...), "\n\n")
}

// withoutBlocks returns text without its blocks, each with the
// <system-reminder> frame around it when it sits in one, and without the
// white space this leaves at either end: the first user text as its
// author wrote it, whether or not a block was placed in it.
func withoutBlocks(text string) string {
	spans := blockSpans(text)
	if len(spans) == 0 {
		return text
	}
	const open, closing = "<system-reminder>", "</system-reminder>"
	var b strings.Builder
	kept := 0
	for _, sp := range spans {
		if sp.start < kept {
			continue // inside the frame of the block before
		}
		if o := strings.LastIndex(text[kept:sp.start], open); o >= 0 && !strings.Contains(text[kept+o:sp.start], closing) {
			if c := strings.Index(text[sp.end:], closing); c >= 0 {
				sp = region{kept + o, sp.end + c + len(closing)}
			}
		}
		b.WriteString(strings.TrimRight(text[kept:sp.start], " \t\r\n"))
		kept = sp.end
	}
	b.WriteString(text[kept:])
	return strings.TrimSpace(b.String())
}

// onlyBlocks reports whether text holds scarproxy blocks (framed or not)
// and nothing else.
func onlyBlocks(text string) bool {
	return strings.TrimSpace(text) != "" && withoutBlocks(text) == ""
}

// placedMessage reports whether msg, a chat message or a Responses item,
// is one the proxy placed: a user, developer or system message whose
// content is nothing but blocks (see placedOnly).
func placedMessage(msg gjson.Result) bool {
	if typ := msg.Get("type").Str; typ != "" && typ != "message" {
		return false
	}
	switch msg.Get("role").Str {
	case "user", "developer", "system":
		return placedOnly(msg.Get("content"))
	}
	return false
}

// placedOnly reports whether a message's content is nothing but blocks
// the proxy placed in a turn: a string, or text parts, holding only
// blocks. Such a message is the proxy's, not the agent's: it is no user
// text and does not end the conversation.
func placedOnly(content gjson.Result) bool {
	if content.IsArray() {
		all := true
		content.ForEach(func(_, part gjson.Result) bool {
			all = part.Get("text").Type == gjson.String
			return all
		})
		if !all {
			return false
		}
	}
	return onlyBlocks(contentText(content))
}
