package guard

import "github.com/scarproxy/scarproxy/guard/quoted"

// Text from tools, providers, users and other conversations reaches a
// block only through [Quote], which is [quoted.Text]: one line, capped, in
// double quotes, judged on its normalised form, with what reads like an
// instruction to a model taken out. The blocks say that quoted text is
// data.

// QuoteNotice is the line every block that quotes stored text carries.
const QuoteNotice = quoted.Notice

// Quote returns s as a block shows stored text (see [quoted.Text]): on one
// line, defused, capped at max runes, in double quotes with inner double
// quotes and backslashes escaped; "" for text that is empty once cleaned,
// and [quoted.Withheld], unquoted, for text that cannot be shown.
func Quote(s string, max int) string {
	q, _ := quoted.Text(s, max)
	return q
}

// quoteOrOmit is [Quote] for text a block can do without: "" when s
// cannot be shown, so the block shows less (the call and the tool, not
// the prose).
func quoteOrOmit(s string, max int) string {
	q, ok := quoted.Text(s, max)
	if !ok {
		return ""
	}
	return q
}

// toolName is a tool's name as a block shows it: on one line, capped, or
// "" when the name reads as an instruction or hides characters.
func toolName(s string) string {
	n, ok := quoted.Name(s, maxLabelRunes)
	if !ok {
		return ""
	}
	return n
}
