package guard

import (
	"encoding/json"
	"strings"
)

// FailureText returns what of a failed tool result an incident keeps as
// its message: for a JSON result (Cline's array of command results, an
// object with an "error"), the "error" and the output of the items that
// failed, one per line, instead of their JSON; any other content as it
// is. The guard and a person then read the error, not its escapes.
func FailureText(content string) string {
	s := strings.TrimSpace(content)
	if s == "" || s[0] != '[' && s[0] != '{' {
		return content
	}
	var items []map[string]json.RawMessage
	if s[0] == '{' {
		if fields, ok := jsonObject(s); ok {
			items = append(items, fields)
		}
	} else if objs, ok := jsonObjects(s); ok {
		items = objs
	}
	var lines []string
	for _, it := range items {
		if failed, decided := jsonVerdict(it); !decided || !failed {
			continue
		}
		for _, k := range []string{"query", "command", "error", "stderr", "result", "output"} {
			var v string
			if raw, ok := it[k]; ok && json.Unmarshal(raw, &v) == nil && strings.TrimSpace(v) != "" {
				lines = append(lines, strings.TrimSpace(v))
			}
		}
	}
	if len(lines) == 0 {
		return content
	}
	return strings.Join(lines, "\n")
}
