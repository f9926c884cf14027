package recall

import (
	"regexp"
	"strings"
	"sync"
	"testing"
)

func TestNormalizeGoal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  Fix   the\tBUILD\n", "fix the build"},
		{"Ünïcode  GOAL", "ünïcode goal"},
		{"a\xffb", "ab"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := NormalizeGoal(tc.in); got != tc.want {
			t.Errorf("NormalizeGoal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	goalRe := regexp.MustCompile(`^goal:[0-9a-f]{16}$`)
	convRe := regexp.MustCompile(`^conv:[0-9a-f]{16}$`)
	if k := GoalKey("Fix the build"); !goalRe.MatchString(k) {
		t.Fatalf("GoalKey = %q", k)
	}
	if GoalKey("Fix the build") != GoalKey("  fix THE\nbuild ") {
		t.Fatal("GoalKey differs for goals that normalise alike")
	}
	if GoalKey("Fix the build") == GoalKey("Fix the tests") {
		t.Fatal("GoalKey collides for different goals")
	}
	k := ConversationKey("system", "user")
	if !convRe.MatchString(k) {
		t.Fatalf("ConversationKey = %q", k)
	}
	if k != ConversationKey("system", "user") {
		t.Fatal("ConversationKey not deterministic")
	}
	for _, other := range [][]string{{"sys", "temuser"}, {"systemuser"}, {"system", "user", ""}, {"user", "system"}} {
		if ConversationKey(other...) == k {
			t.Fatalf("ConversationKey(%q) collides with (system, user)", strings.Join(other, "|"))
		}
	}
}

func TestConfig(t *testing.T) {
	d := DefaultConfig()
	if d.MinSimilarity != 0.35 || d.MaxResults != 1 || !d.AutoCapture {
		t.Fatalf("DefaultConfig = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"max results 0", func(c *Config) { c.MaxResults = 0 }, "recall.max_results: must be 1..5"},
		{"max results 6", func(c *Config) { c.MaxResults = 6 }, "recall.max_results: must be 1..5"},
		{"similarity negative", func(c *Config) { c.MinSimilarity = -0.1 }, "recall.min_similarity: must be in [0,1]"},
		{"similarity above 1", func(c *Config) { c.MinSimilarity = 35 }, "recall.min_similarity: must be in [0,1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestKeyStart: a key begun with a first message and ended with the
// others is ConversationKey of them all, from one start as often as
// asked, by concurrent callers too.
func TestKeyStart(t *testing.T) {
	system := strings.Repeat("You are a coding agent. ", 1500)
	start := StartKey(system)
	tasks := []string{"fix the build", "", "add a flag", strings.Repeat("x", 200)}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, task := range tasks {
				if got, want := start.Key(task), ConversationKey(system, task); got != want {
					t.Errorf("Key(%.20q) = %s, want %s", task, got, want)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := start.Key("a", "b"), ConversationKey(system, "a", "b"); got != want {
		t.Errorf("Key of two = %s, want %s", got, want)
	}
	if got, want := StartKey("").Key(), ConversationKey(""); got != want {
		t.Errorf("an empty start = %s, want %s", got, want)
	}
}
