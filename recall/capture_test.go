package recall

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/store"
)

func TestAutoSolution(t *testing.T) {
	now := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		c            Conversation
		wantApproach string
		wantOutcome  string
		wantConf     float64
	}{
		{
			name: "tools summarised",
			c: Conversation{Tools: []string{"read_file", "run_tests", "run_tests", "run_tests", "write_file"},
				FinalAnswer: "Fixed the\n\nparser."},
			wantApproach: "Tools: read_file -> run_tests x3 -> write_file. Final answer: Fixed the parser.",
			wantOutcome:  "Completed with a final answer after 5 tool calls; no tool failures.",
			wantConf:     0.8,
		},
		{
			name:         "one failure",
			c:            Conversation{Tools: []string{"grep"}, Recovered: map[string]int{"grep": 1}, FinalAnswer: "Done."},
			wantApproach: "Tools: grep. Final answer: Done.",
			wantOutcome:  "Completed with a final answer after 1 tool call; recovered from 1 failure of grep.",
			wantConf:     0.7,
		},
		{
			name:         "failures lower confidence",
			c:            Conversation{Tools: []string{"a", "b", "a", "c"}, Recovered: map[string]int{"a": 2, "b": 1, "c": 0}},
			wantApproach: "Tools: a -> b -> a -> c.",
			wantOutcome:  "Completed with a final answer after 4 tool calls; recovered from 2 failures of a and 1 of b.",
			wantConf:     0.5,
		},
		{
			name:         "confidence floor",
			c:            Conversation{Tools: []string{"x"}, Recovered: map[string]int{"x": 5, "": 4}},
			wantApproach: "Tools: x.",
			wantOutcome:  "Completed with a final answer after 1 tool call; recovered from 5 failures of x and 4 of a tool.",
			wantConf:     0.3,
		},
		{
			name:         "no tools, blank names skipped",
			c:            Conversation{Tools: []string{"", "  "}, Recovered: map[string]int{"x": -2}},
			wantApproach: "Tools: none.",
			wantOutcome:  "Completed with a final answer after 0 tool calls; no tool failures.",
			wantConf:     0.8,
		},
		{
			name:         "many steps capped",
			c:            Conversation{Tools: strings.Fields("a b c d e f g h i j k l m n")},
			wantApproach: "Tools: a -> b -> c -> d -> e -> f -> g -> h -> i -> j -> k -> l -> … (+2 more steps).",
			wantOutcome:  "Completed with a final answer after 14 tool calls; no tool failures.",
			wantConf:     0.8,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Workspace, tc.c.Project, tc.c.Key, tc.c.Goal = "w", "p", "conv:0123456789abcdef", "  Fix   the\nparser "
			s := AutoSolution(tc.c, now)
			if s.Approach != tc.wantApproach {
				t.Errorf("Approach = %q, want %q", s.Approach, tc.wantApproach)
			}
			if s.Outcome != tc.wantOutcome {
				t.Errorf("Outcome = %q, want %q", s.Outcome, tc.wantOutcome)
			}
			if s.Confidence != tc.wantConf {
				t.Errorf("Confidence = %v, want %v", s.Confidence, tc.wantConf)
			}
			want := store.Solution{Workspace: "w", Project: "p", Key: "conv:0123456789abcdef", Goal: "Fix the parser",
				Approach: s.Approach, Outcome: s.Outcome, Confidence: s.Confidence,
				Source: store.SourceAuto, Verified: false, Created: now, Updated: now}
			if s != want {
				t.Errorf("AutoSolution = %+v, want %+v", s, want)
			}
		})
	}
}

func TestAutoSolutionCaps(t *testing.T) {
	s := AutoSolution(Conversation{
		Goal:        strings.Repeat("g", 2000),
		Tools:       []string{strings.Repeat("t", 500)},
		FinalAnswer: strings.Repeat("é", 1000),
	}, time.Time{})
	if n := utf8.RuneCountInString(s.Goal); n != maxAutoGoal || !strings.HasSuffix(s.Goal, "…") {
		t.Errorf("goal has %d runes, want %d ending in …", n, maxAutoGoal)
	}
	_, excerpt, ok := strings.Cut(s.Approach, "Final answer: ")
	if !ok || utf8.RuneCountInString(excerpt) != maxAutoExcerpt || !strings.HasSuffix(excerpt, "…") {
		t.Errorf("excerpt %q: want %d runes ending in …", excerpt, maxAutoExcerpt)
	}
	if !strings.Contains(s.Approach, strings.Repeat("t", maxToolName-1)+"…") {
		t.Errorf("tool name not capped: %q", s.Approach[:100])
	}
}

// TestAutoSolutionIsRecalled checks that a captured conversation is found
// by a reworded task and not by the conversation itself.
func TestAutoSolutionIsRecalled(t *testing.T) {
	key := ConversationKey("You are a coding agent.", "Download the web page and extract every link")
	s := AutoSolution(Conversation{Workspace: "w", Key: key, Goal: "Download the web page and extract every link",
		Tools: []string{"http_get", "write_file"}, FinalAnswer: "Saved 12 links to links.txt."}, time.Now())
	s.ID = "auto1"
	ix := rankingIndex(t)
	ix.Put(s)
	q := Query{Workspace: "w", Goal: "fetch the html of a site and list its links", K: 5, MinSimilarity: DefaultMinSimilarity}
	if got := ids(ix.Search(q)); len(got) == 0 || !strings.Contains(strings.Join(got, " "), "auto1") {
		t.Fatalf("auto-captured solution not recalled: %v", got)
	}
	q.ExcludeKey = key
	if got := ids(ix.Search(q)); strings.Contains(strings.Join(got, " "), "auto1") {
		t.Fatalf("conversation recalled its own solution: %v", got)
	}
}

// FuzzJoinFields: joinFields is strings.Join(strings.Fields(s), sep).
func FuzzJoinFields(f *testing.F) {
	for _, s := range []string{"", " ", "a", "a b", "a  b", " a", "a ", "a\tb", "a\u00a0b", "a\u2003b", "run_tests", "go test ./...", "\xff \xfe", "x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sep := range []string{" ", "_"} {
			if got, want := joinFields(s, sep), strings.Join(strings.Fields(s), sep); got != want {
				t.Fatalf("joinFields(%q, %q) = %q, want %q", s, sep, got, want)
			}
		}
	})
}

func TestReportsFailure(t *testing.T) {
	tests := []struct {
		answer string
		want   bool
	}{
		{"I was unable to fix the failing test: the fixture server never starts.", true},
		{"I couldn't get the build to pass; the linker still fails on libssl.", true},
		{"We failed to install the dependency behind the proxy.", true},
		{"Mock answer: gave up after 10 calls of run_shell.", true},
		{"The migration ran, but the integration tests still fail on CI.", true},
		{"Unfortunately the deploy was not successful.", true},
		{strings.Repeat("Looked at the logs. ", 100) + "In the end I could not reproduce the crash.", true},
		{"Fixed: the config directory was missing; I created it and the tests pass.", false},
		{"Done. hello.py prints 'hello' and exits 0.", false},
		{"The error handling now returns a 404 when the user is not found.", false},
		{"Renamed FailedLogin to LoginFailure and updated the 3 callers.", false},
	}
	for _, tc := range tests {
		if got := ReportsFailure(tc.answer); got != tc.want {
			t.Errorf("ReportsFailure(%.80q) = %v, want %v", tc.answer, got, tc.want)
		}
	}
}

// FuzzReportsFailure: ReportsFailure says what the failure-report pattern
// says of the answer's first and last sentences, whatever its prefilter
// skips.
func FuzzReportsFailure(f *testing.F) {
	for _, s := range []string{
		"I was unable to fix it.", "the tests STILL FAIL", "Gave Up", "we couldn't build",
		"It was not ſuccessful.", "the build is still bro\u212aen", "I CAN'T", "it still crashes", "Done: all pass.",
		strings.Repeat("x", 700) + " giving up " + strings.Repeat("y", 700),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		read := answer
		if len(read) > 2*reportSpan {
			read = read[:reportSpan] + "\n" + read[len(read)-reportSpan:]
		}
		if got, want := ReportsFailure(answer), failureReport.MatchString(read); got != want {
			t.Errorf("ReportsFailure(%q) = %v, the pattern says %v", answer, got, want)
		}
	})
}

func BenchmarkReportsFailure(b *testing.B) {
	answers := []string{
		"Fixed: the config directory was missing; I created it, reran `go test ./...` and every package passes now. " +
			"The loader returns Default() when the file does not exist, and the README says so.",
		strings.Repeat("Looked at the logs and the handler again. ", 40) + "All tests pass.",
		"I was unable to fix the failing test: the fixture server never starts.",
	}
	for b.Loop() {
		for _, a := range answers {
			ReportsFailure(a)
		}
	}
}
