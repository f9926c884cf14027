package wire

import (
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
)

// TestStripFramedTakesOutWhatWasAdded: text, a blank line and a frame of
// blocks, once or twice, give back the text byte for byte, its own
// trailing newlines and frame-like tags included.
func TestStripFramedTakesOutWhatWasAdded(t *testing.T) {
	g := NewBlock(guard.Block([]guard.Entry{{Pattern: "SYNTAX COMPLIANCE ERROR", Count: 2, Hint: "Output must be valid syntax."}}))
	frame := strings.TrimRight(Framed(g).Text, "\n")
	for _, text := range []string{
		"do it",
		"SyntaxError: '(' was never closed\n",
		"two\n\n",
		"<system-reminder>\nthe client's own\n</system-reminder>",
		"",
	} {
		for _, added := range []string{frame, frame + "\n\n" + frame} {
			in := added
			if text != "" {
				in = text + "\n\n" + added
			}
			if got := StripFramed(in); got != text {
				t.Errorf("StripFramed(%q) = %q, want %q", in, got, text)
			}
		}
	}
	// The lines of text parts are joined by one newline.
	if got := StripFramed("do it\n" + frame); got != "do it" {
		t.Errorf("a frame in a part of its own: %q", got)
	}
	// A frame holding text of someone else's stays, whole.
	other := FrameStart + "\n" + FrameNote + "\n\nnot a block\n" + FrameEnd
	if got := StripFramed("x\n\n" + other); got != "x\n\n"+other {
		t.Errorf("a frame holding other text: %q", got)
	}
}

// FuzzFramed: a frame's escape, made of its blocks' own, is the escape of
// its text, as NewBlock makes it.
func FuzzFramed(f *testing.F) {
	f.Add("### !!! REPEAT FAILURE GUARD\n\"quoted\" \\ <tag> \u2028", "### RECALL\n\tx\n\n\n", "")
	f.Add("a\xff\xfeb", "\x01\x1f", "\xe2\x80")
	f.Add("", "\n\n", "z")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		blocks := []Block{NewBlock(a), NewBlock(b), NewBlock(c)}
		got := Framed(blocks...)
		if len(got.JSON) == 0 {
			if got.Text != "" || JoinBlocks(blocks) != "" || len(FramedJSON(blocks...).JSON) != 0 || FramedElemsLen("<", ">", blocks) != 0 || len(AppendFramedElems(nil, true, "<", ">", blocks)) != 0 {
				t.Fatalf("empty frame of %q", blocks)
			}
			return
		}
		want := NewBlock(FrameStart + "\n" + FrameNote + "\n\n" + JoinBlocks(blocks) + "\n" + FrameEnd)
		if got.Text != want.Text || string(got.JSON) != string(want.JSON) {
			t.Fatalf("Framed = %q %q, want %q %q", got.Text, got.JSON, want.Text, want.JSON)
		}
		if esc := FramedJSON(blocks...); esc.Text != "" || string(esc.JSON) != string(want.JSON) {
			t.Fatalf("FramedJSON = %q %q, want the escape %q alone", esc.Text, esc.JSON, want.JSON)
		}
		if n := FramedLen(blocks); n != len(want.JSON) {
			t.Fatalf("FramedLen = %d, want %d", n, len(want.JSON))
		}
		if app := AppendFramed([]byte("x"), blocks); string(app) != "x"+string(want.JSON) {
			t.Fatalf("AppendFramed = %q, want x then %q", app, want.JSON)
		}
		// Elements: a frame without text is no element; a comma comes
		// before each one that follows an element.
		none := []Block{NewBlock("")}
		if got, w := AppendFramedElems(nil, false, "<", ">", none, blocks, none, blocks), "<"+string(want.JSON)+">,<"+string(want.JSON)+">"; string(got) != w {
			t.Fatalf("AppendFramedElems = %q, want %q", got, w)
		}
		if got := AppendFramedElems([]byte("["), true, "<", ">", blocks); string(got) != "[,<"+string(want.JSON)+">" {
			t.Fatalf("AppendFramedElems after an element = %q", got)
		}
		if n := FramedElemsLen("<", ">", none, blocks); n != len(",<>")+len(want.JSON) {
			t.Fatalf("FramedElemsLen = %d", n)
		}
	})
}
