package wire

import (
	"net/http"
	"testing"
)

func TestIsSSE(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                 true,
		"text/event-stream; charset=utf-8":  true,
		"Text/Event-Stream":                 true,
		" text/event-stream ;charset=utf-8": true,
		"text/event-stream; =broken":        false, // a parameter mime refuses
		"text/event-streams":                false,
		"application/json":                  false,
		"application/json; charset=utf-8":   false,
		"":                                  false,
	} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if got := IsSSE(h); got != want {
			t.Errorf("IsSSE(%q) = %v, want %v", ct, got, want)
		}
	}
}
