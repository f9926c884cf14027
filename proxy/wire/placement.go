package wire

import "strings"

// Placement says which blocks a request gets and where they go. A byte a
// provider caches is not the proxy's to change: by default the blocks
// that change during a conversation go into its newest turn, and the
// conversation's recall block, the same on every turn, into its first user
// turn; nothing before them changes.
type Placement struct {
	// Turn holds the blocks that change during a conversation, in order:
	// the STOP block, then the guard block with its learned fixes.
	Turn []Block
	// Recall is the conversation's recall block: decided once, the same
	// bytes on every turn.
	Recall Block
	// System puts every block in front of the system text (Turn, then
	// Recall), as guard.placement: system asks, at the cost of the cached
	// prefix. Otherwise Turn goes at the end of the newest turn and Recall
	// at the end of the conversation's first user turn, each framed (see
	// Framed) in the API's own idiom.
	System bool
}

// Blocks returns the blocks in the order they open the system text:
// Turn, then Recall.
func (p Placement) Blocks() []Block {
	out := make([]Block, 0, len(p.Turn)+1)
	out = append(out, p.Turn...)
	return append(out, p.Recall)
}

// Empty reports whether p places no block.
func (p Placement) Empty() bool { return Empty(p.Turn) && len(p.Recall.JSON) == 0 }

// The frame of blocks placed in a conversation's turns: the model reads
// them as a note from the system, not as the user's words (the form
// Claude Code itself uses for its reminders in user turns). What is
// inside keeps the blocks' own markers and wording.
const (
	FrameStart = "<system-reminder>"
	FrameNote  = "Note from scarproxy, the proxy between this agent and its model provider (not from the user):"
	FrameEnd   = "</system-reminder>"
)

// Framed returns one block holding blocks inside the frame, or an empty
// block when none has text. Its escape is made of the blocks' own: what
// it costs is the bytes it writes.
func Framed(blocks ...Block) Block {
	b := FramedJSON(blocks...)
	if len(b.JSON) > 0 {
		b.Text = frameOpen + JoinBlocks(blocks) + frameClose
	}
	return b
}

// FramedJSON is Framed without its text, the escape alone: what a format
// that writes the frame and never reads it back needs.
func FramedJSON(blocks ...Block) Block {
	n := FramedLen(blocks)
	if n == 0 {
		return Block{}
	}
	return Block{JSON: AppendFramed(make([]byte, 0, n), blocks)}
}

// FramedLen is the length of Framed(blocks...)'s escape: 0 when no block
// has text.
func FramedLen(blocks []Block) int {
	n, k := 0, 0
	for _, b := range blocks {
		if len(b.JSON) > 0 {
			n, k = n+len(b.JSON), k+1
		}
	}
	if k == 0 {
		return 0
	}
	return len(frameOpenJSON) + n + (k-1)*len(`\n\n`) + len(frameCloseJSON)
}

// AppendFramed appends Framed(blocks...)'s escape to dst (nothing when no
// block has text): a format writes it straight into the JSON it builds.
func AppendFramed(dst []byte, blocks []Block) []byte {
	if FramedLen(blocks) == 0 {
		return dst
	}
	dst = append(dst, frameOpenJSON...)
	dst = AppendBlocks(dst, blocks)
	return append(dst, frameCloseJSON...)
}

// AppendFramedElems appends, for each frame whose blocks have text, open,
// the escape of the blocks framed (AppendFramed) and close: elements of a
// JSON array (a text part, a text block, a message), each after a comma
// when elems says an element comes before.
func AppendFramedElems(dst []byte, elems bool, open, close string, frames ...[]Block) []byte {
	for _, f := range frames {
		if FramedLen(f) == 0 {
			continue
		}
		if elems {
			dst = append(dst, ',')
		}
		elems = true
		dst = append(dst, open...)
		dst = AppendFramed(dst, f)
		dst = append(dst, close...)
	}
	return dst
}

// FramedElemsLen is the most AppendFramedElems appends (a comma before
// every element counted): 0 when no frame has text.
func FramedElemsLen(open, close string, frames ...[]Block) int {
	n := 0
	for _, f := range frames {
		if l := FramedLen(f); l > 0 {
			n += len(",") + len(open) + l + len(close)
		}
	}
	return n
}

// The frame around the blocks, as text and as its JSON escape (without
// quotes). The escape of the frame's text is the escape of its parts:
// the blocks are valid text, each escaped on its own, and ASCII lines
// separate them.
var (
	frameOpen      = FrameStart + "\n" + FrameNote + "\n\n"
	frameClose     = "\n" + FrameEnd
	frameOpenJSON  = escaped(frameOpen)
	frameCloseJSON = escaped(frameClose)
)

// escaped is the JSON escape of s, without quotes.
func escaped(s string) string {
	esc := AppendJSONString(nil, s)
	return string(esc[1 : len(esc)-1])
}

// StripFramed removes from text every frame that holds nothing but
// blocks (Strip removes those) and the blank line before it: what is left
// is what the client wrote.
func StripFramed(text string) string {
	if !strings.Contains(text, FrameNote) {
		// No frame of the proxy's (a client's own <system-reminder>s
		// hold no note of scarproxy's): nothing to scan for.
		return Strip(text)
	}
	open := FrameStart + "\n" + FrameNote + "\n"
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, open)
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], FrameEnd)
		if j < 0 {
			break
		}
		inner := rest[i+len(open) : i+j]
		if strings.TrimSpace(Strip(inner)) != "" {
			// Not only blocks: text of someone else's, kept as it is.
			b.WriteString(rest[:i+j+len(FrameEnd)])
			rest = rest[i+j+len(FrameEnd):]
			continue
		}
		b.WriteString(trimSeparator(rest[:i]))
		rest = rest[i+j+len(FrameEnd):]
	}
	b.WriteString(rest)
	return Strip(b.String())
}

// trimSeparator removes from the end of text the blank line that
// separates a frame from what comes before it ("\n" when text ends a
// line, as the lines of text parts are joined), and nothing more: a
// newline that ended the client's text stays.
func trimSeparator(text string) string {
	if t, ok := strings.CutSuffix(text, "\n\n"); ok {
		return t
	}
	return strings.TrimSuffix(text, "\n")
}
