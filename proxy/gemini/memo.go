package gemini

import (
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// newSystemMemo returns a memo of system instructions' texts (the Gemini
// CLI's is about 30 KB, with an escape every few bytes).
func newSystemMemo() *wire.SystemMemo { return wire.NewSystemMemo(systemText, wire.Strip) }

// systemText is the text of a system instruction, raw being its JSON
// value: the text of its parts (see partsText); "" for a value that is
// not an object.
func systemText(raw []byte) string {
	if sys := gjson.ParseBytes(raw); sys.IsObject() {
		return partsText(sys.Get("parts"))
	}
	return ""
}
