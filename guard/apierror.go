package guard

import (
	"encoding/json"
	"strconv"
	"strings"
)

// apiErrorKinds are the error types of the providers' APIs with the HTTP
// status each comes with (Anthropic's, and OpenAI's where they differ);
// the first of a status is the one an error known only by its status gets.
var apiErrorKinds = []struct {
	kind   string
	status int
}{
	{"invalid_request_error", 400},
	{"authentication_error", 401},
	{"permission_error", 403},
	{"not_found_error", 404},
	{"request_too_large", 413},
	{"rate_limit_error", 429},
	{"insufficient_quota", 429},
	{"rate_limit_exceeded", 429},
	{"api_error", 500},
	{"server_error", 500},
	{"overloaded_error", 529},
}

// apiErrorPrefix is how agents print a provider's error: Claude Code's
// "API Error: 529 Overloaded", or with the provider's JSON body after the
// status.
const apiErrorPrefix = "api error: "

// apiError returns one text for a provider's error, whatever the shape it
// is reported in, so that the same error has one fingerprint: the JSON
// body ({"type":"error","error":{"type":"overloaded_error","message":
// "Overloaded"}}, OpenAI's {"error":{"type":…}}, Gemini's {"error":
// {"code":503,"status":"UNAVAILABLE",…}}) or an agent's "API Error: 529
// Overloaded" all read "API error 529 overloaded_error: Overloaded". A
// tool's name in front ("Task: API Error: …") is kept. ok is false for
// any other message.
func apiError(message string) (canonical string, ok bool) {
	s := strings.TrimSpace(message)
	prefix := ""
	if name, rest, ok := cutToolName(s); ok {
		prefix, s = name+": ", strings.TrimSpace(rest)
	}
	status := 0
	if len(s) > len(apiErrorPrefix) && strings.EqualFold(s[:len(apiErrorPrefix)], apiErrorPrefix) {
		rest := strings.TrimSpace(s[len(apiErrorPrefix):])
		num, after, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(num)
		if err != nil || n < 100 || n > 599 {
			return "", false
		}
		status, s = n, strings.TrimSpace(after)
	} else if !strings.HasPrefix(s, "{") {
		return "", false
	}
	kind, text := s, s
	if strings.HasPrefix(s, "{") {
		var ok bool
		if kind, text, ok = apiErrorBody(s, &status); !ok {
			return "", false
		}
	} else {
		kind = ""
	}
	for _, k := range apiErrorKinds {
		switch {
		case kind == "" && k.status == status:
			kind = k.kind
		case status == 0 && k.kind == kind:
			status = k.status
		}
	}
	if kind == "" && status == 0 {
		return "", false
	}
	head := prefix + "API error "
	if status != 0 {
		head += strconv.Itoa(status) + " "
	}
	return head + kind + ": " + text, true
}

// apiErrorBody reads a provider's JSON error body: its kind, its message,
// and its status when the body says it and *status is not known yet.
func apiErrorBody(body string, status *int) (kind, text string, ok bool) {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal([]byte(body), &b) != nil || len(b.Error) == 0 {
		return "", "", false
	}
	var e struct {
		Type    string          `json:"type"`
		Status  string          `json:"status"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b.Error, &e) != nil {
		return "", "", false
	}
	if n, err := strconv.Atoi(string(e.Code)); err == nil && *status == 0 && n >= 100 && n <= 599 {
		*status = n
	}
	// The most precise name: OpenAI's code ("rate_limit_exceeded" of
	// type "requests"), else the type, else Gemini's status.
	if err := json.Unmarshal(e.Code, &kind); err != nil || kind == "" {
		kind = e.Type
	}
	if kind == "" {
		kind = e.Status
	}
	return kind, e.Message, e.Message != "" || kind != ""
}
