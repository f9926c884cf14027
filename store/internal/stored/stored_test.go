package stored

import (
	"strings"
	"testing"
	"time"
)

func TestNewID(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	ids := make([]string, 0, 1000)
	seen := map[string]bool{}
	for i := range 1000 {
		id := NewID(base.Add(time.Duration(i/10) * time.Nanosecond)) // 10 per nanosecond
		if len(id) != 26 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 26 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for i := 10; i < len(ids); i += 10 {
		if ids[i] <= ids[i-10] {
			t.Fatalf("id %q of a later time sorts before %q", ids[i], ids[i-10])
		}
	}
}
