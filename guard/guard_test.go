package guard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scarproxy/scarproxy/store"
)

func mustGuard(t testing.TB, cfg Config) *Guard {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{name: "default", cfg: DefaultConfig()},
		{name: "zero value", cfg: Config{}},
		{name: "negative min_repeats", cfg: Config{MinRepeats: -1}, want: []string{"guard.min_repeats: must not be negative"}},
		{name: "negative window", cfg: Config{Window: -time.Second}, want: []string{"guard.window: must not be negative"}},
		{name: "bad regex", cfg: Config{Patterns: []PatternConfig{
			{Name: "A", Regex: "ok", Fix: "f"},
			{Name: "B", Regex: "ok", Fix: "f"},
			{Name: "C", Regex: "(unclosed", Fix: "f"},
		}}, want: []string{"guard.patterns[2].regex: error parsing regexp"}},
		{name: "bad exclude", cfg: Config{Patterns: []PatternConfig{{Name: "A", Regex: "x", Exclude: "[", Fix: "f"}}},
			want: []string{"guard.patterns[0].exclude:"}},
		{name: "regex matching everything", cfg: Config{Patterns: []PatternConfig{{Name: "A", Regex: "x*", Fix: "f"}}},
			want: []string{"guard.patterns[0].regex:", "matches the empty string"}},
		{name: "missing name", cfg: Config{Patterns: []PatternConfig{{Regex: "x", Fix: "f"}}},
			want: []string{"guard.patterns[0].name: required"}},
		{name: "multi-line name", cfg: Config{Patterns: []PatternConfig{{Name: "A\nB", Regex: "x", Fix: "f"}}},
			want: []string{"guard.patterns[0].name: must be one line"}},
		{name: "marker in name", cfg: Config{Patterns: []PatternConfig{{Name: "### !!! END", Regex: "x", Fix: "f"}}},
			want: []string{"guard.patterns[0].name:"}},
		{name: "reserved name", cfg: Config{Patterns: []PatternConfig{{Name: "repeated error", Regex: "x", Fix: "f"}}},
			want: []string{"guard.patterns[0].name:", "reserved"}},
		{name: "duplicate name", cfg: Config{Patterns: []PatternConfig{{Name: "A", Regex: "x", Fix: "f"}, {Name: "a", Regex: "y", Fix: "f"}}},
			want: []string{"guard.patterns[1].name: duplicate of guard.patterns[0].name"}},
		{name: "bad status", cfg: Config{Patterns: []PatternConfig{{Name: "A", StatusCodes: []int{500, 42}, Fix: "f"}}},
			want: []string{"guard.patterns[0].status_codes[1]: 42 is not an HTTP status code"}},
		{name: "empty type", cfg: Config{Patterns: []PatternConfig{{Name: "A", Types: []string{" "}, Fix: "f"}}},
			want: []string{"guard.patterns[0].types[0]: empty type"}},
		{name: "new pattern matches nothing", cfg: Config{Patterns: []PatternConfig{{Name: "A", Fix: "f"}}},
			want: []string{"guard.patterns[0]: needs at least one of regex, status_codes, types"}},
		{name: "new pattern without fix", cfg: Config{Patterns: []PatternConfig{{Name: "A", Regex: "x"}}},
			want: []string{"guard.patterns[0].fix: required for a new pattern"}},
		{name: "override needs no fix", cfg: Config{Patterns: []PatternConfig{{Name: "REQUEST TIMEOUT EXPIRED", StatusCodes: []int{503}}}}},
		{name: "disabled new pattern needs nothing", cfg: Config{Patterns: []PatternConfig{{Name: "A", Disabled: true}}}},
		{name: "unknown built-in", cfg: Config{DisableBuiltins: []string{"all", "NOPE"}},
			want: []string{"guard.disable_builtins[1]: unknown built-in pattern \"NOPE\""}},
		{name: "several problems", cfg: Config{MinRepeats: -2, Patterns: []PatternConfig{{Name: "", Regex: "("}}},
			want: []string{"guard.min_repeats", "guard.patterns[0].name", "guard.patterns[0].regex", "guard.patterns[0].fix"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := New(tc.cfg); err != nil {
					t.Fatalf("New() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if _, err := New(tc.cfg); err == nil {
				t.Errorf("New() accepted a config Validate rejects")
			}
		})
	}
}

func TestConfigDefaultsAndCopy(t *testing.T) {
	g := mustGuard(t, Config{Patterns: []PatternConfig{{Name: "A", Regex: "x", Types: []string{"t"}, Fix: "f"}}})
	c := g.Config()
	if c.MinRepeats != 2 || c.Window != time.Hour {
		t.Errorf("Config() = min_repeats %d window %s, want 2 and 1h", c.MinRepeats, c.Window)
	}
	if d := DefaultConfig(); d.MinRepeats != 2 || d.Window != time.Hour || len(d.Patterns) != 0 {
		t.Errorf("DefaultConfig() = %+v", d)
	}
	if got := mustGuard(t, DefaultConfig()).Config(); !reflect.DeepEqual(got, DefaultConfig()) {
		t.Errorf("New(DefaultConfig()).Config() = %+v", got)
	}
	c.Patterns[0].Types[0] = "changed"
	if got := g.Config().Patterns[0].Types[0]; got != "t" {
		t.Errorf("Config() shares memory with the Guard: type became %q", got)
	}
}

func TestConfigYAML(t *testing.T) {
	src := `
min_repeats: 3
window: 30m
disable_builtins: ["ROUTE FACTORY EXPORT"]
patterns:
  - name: DATABASE LOCKED
    regex: 'database (?:is|table is) locked'
    types: [db_error]
    fix: Close other connections before writing.
  - name: REQUEST TIMEOUT EXPIRED
    status_codes: []
    fix: Ask for less.
  - name: PATH TRAVERSAL ATTEMPT
    disabled: true
`
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if cfg.Window != 30*time.Minute || cfg.MinRepeats != 3 {
		t.Fatalf("decoded window %s min_repeats %d", cfg.Window, cfg.MinRepeats)
	}
	g := mustGuard(t, cfg)

	tests := []struct {
		name    string
		typ     string
		status  int
		message string
		want    string
	}{
		{"new pattern by regex", store.TypeToolError, 0, "sqlite3.OperationalError: database is locked", "DATABASE LOCKED"},
		{"new pattern by type", "db_error", 0, "whatever", "DATABASE LOCKED"},
		{"override cleared status codes", store.TypeHTTPError, 504, "upstream said no", ""},
		{"override kept types", store.TypeTimeout, 0, "", "REQUEST TIMEOUT EXPIRED"},
		{"override kept regex", store.TypeToolError, 0, "context deadline exceeded", "REQUEST TIMEOUT EXPIRED"},
		{"disabled by disable_builtins", store.TypeToolError, 0, "TypeError: fn.apply is not a function", ""},
		{"disabled by pattern", store.TypeToolError, 0, "path traversal detected", ""},
		{"others still on", store.TypeHTTPError, 429, "", "API RATE LIMIT TRIGGER"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := g.Classify(tc.typ, tc.status, tc.message); got != tc.want {
				t.Errorf("Classify = %q, want %q", got, tc.want)
			}
		})
	}

	entries := g.Detect([]store.Incident{
		{Time: time.Unix(100, 0), Type: store.TypeTimeout},
		{Time: time.Unix(101, 0), Type: store.TypeTimeout},
		{Time: time.Unix(102, 0), Type: store.TypeTimeout},
	}, time.Unix(200, 0))
	if len(entries) != 1 || entries[0].Hint != "Ask for less." || entries[0].Count != 3 {
		t.Errorf("Detect with overridden fix = %+v", entries)
	}
}

func TestUserPatternsComeFirstAndDisableAll(t *testing.T) {
	g := mustGuard(t, Config{Patterns: []PatternConfig{{Name: "JSX", Regex: `unexpected token <`, Fix: "Configure the JSX transform."}}})
	if got, _ := g.Classify(store.TypeToolError, 0, "SyntaxError: Unexpected token <div>"); got != "JSX" {
		t.Errorf("user pattern: got %q, want JSX before the built-in syntax pattern", got)
	}
	// A status match wins over an earlier pattern's text match.
	if got, _ := g.Classify(store.TypeHTTPError, 429, "Unexpected token <div>"); got != rate {
		t.Errorf("429 with a JSX text = %q, want %q", got, rate)
	}

	none := mustGuard(t, Config{DisableBuiltins: []string{"all"}})
	for _, tc := range errorCorpus {
		if got, ok := none.Classify(tc.typ, tc.status, tc.message); ok {
			t.Errorf("%s: all built-ins disabled, still classified as %q", tc.name, got)
		}
	}
}

func inc(sec int64, typ string, status int, msg string) store.Incident {
	return store.Incident{ID: fmt.Sprintf("id%06d", sec), Time: time.Unix(sec, 0), Type: typ, StatusCode: status, Message: msg}
}

func withProvider(in store.Incident, p string) store.Incident {
	in.Provider = p
	return in
}

func TestDetect(t *testing.T) {
	now := time.Unix(10_000, 0)
	start := now.Add(-time.Hour).Unix()
	syntaxErr := func(sec int64, line int) store.Incident {
		return inc(sec, store.TypeToolError, 0, fmt.Sprintf("  File \"/app/main.py\", line %d\nSyntaxError: invalid syntax", line))
	}
	novel := func(sec int64, id string) store.Incident {
		return inc(sec, store.TypeToolError, 0, "KeyError: 'user_"+id+"' not in cache shard 7f3a9b21")
	}
	tests := []struct {
		name       string
		cfg        Config
		incidents  []store.Incident
		want       []Entry // Hint compared by prefix
		wantLabels []string
	}{
		{name: "nothing", want: nil},
		{name: "one failure is not a repeat",
			incidents: []store.Incident{syntaxErr(start+10, 1)}, want: nil},
		{name: "two failures repeat",
			incidents: []store.Incident{syntaxErr(start+10, 1), syntaxErr(start+20, 2)},
			want:      []Entry{{Pattern: syntax, Count: 2, Hint: "Output must be valid syntax."}}},
		{name: "window edges are inside",
			incidents: []store.Incident{syntaxErr(start, 1), syntaxErr(now.Unix(), 2)},
			want:      []Entry{{Pattern: syntax, Count: 2, Hint: "Output must be valid syntax."}}},
		{name: "outside the window on both sides",
			incidents: []store.Incident{syntaxErr(start-1, 1), syntaxErr(start+5, 2), syntaxErr(now.Unix()+1, 3)},
			want:      nil},
		{name: "min_repeats 3",
			cfg:       Config{MinRepeats: 3},
			incidents: []store.Incident{syntaxErr(start+1, 1), syntaxErr(start+2, 2), inc(start+3, store.TypeHTTPError, 429, ""), inc(start+4, store.TypeHTTPError, 429, ""), inc(start+5, store.TypeHTTPError, 429, "")},
			want:      []Entry{{Pattern: rate, Count: 3, Hint: "Provider is currently rate-limited."}}},
		{name: "min_repeats 1 and a short window",
			cfg:       Config{MinRepeats: 1, Window: time.Minute},
			incidents: []store.Incident{syntaxErr(now.Unix()-30, 1), inc(now.Unix()-120, store.TypeHTTPError, 429, "")},
			want:      []Entry{{Pattern: syntax, Count: 1, Hint: "Output must be valid syntax."}}},
		{name: "provider failures count per provider",
			incidents: []store.Incident{
				withProvider(inc(start+1, store.TypeHTTPError, 429, ""), "a"), withProvider(inc(start+2, store.TypeHTTPError, 429, ""), "b"),
				withProvider(inc(start+3, store.TypeTimeout, 504, "provider timed out"), "a"), withProvider(inc(start+4, store.TypeTimeout, 504, "provider timed out"), "b"),
			},
			want: nil},
		{name: "a provider's repeated failures name it",
			incidents: []store.Incident{
				withProvider(inc(start+1, store.TypeHTTPError, 429, ""), "a"), withProvider(inc(start+2, store.TypeHTTPError, 429, ""), "a"),
				withProvider(inc(start+3, store.TypeHTTPError, 429, ""), "b"),
				withProvider(inc(start+4, store.TypeStreamError, 200, "stream ended before data: [DONE]"), "b"),
				withProvider(inc(start+5, store.TypeStreamError, 200, "stream ended before data: [DONE]"), "b"),
			},
			want: []Entry{
				{Pattern: rate, Count: 2, Hint: "Provider is currently rate-limited.", Provider: "a"},
				{Pattern: RepeatedPattern, Count: 2, Hint: "This exact error", Example: "stream ended before data: [DONE]", Provider: "b"},
			}},
		{name: "tool errors are not scoped by provider",
			incidents: []store.Incident{withProvider(syntaxErr(start+1, 1), "a"), withProvider(syntaxErr(start+2, 2), "b")},
			want:      []Entry{{Pattern: syntax, Count: 2, Hint: "Output must be valid syntax."}}},
		{name: "novel errors grouped by fingerprint, example from the newest",
			incidents: []store.Incident{novel(start+1, "1"), novel(start+3, "3"), novel(start+2, "2")},
			want: []Entry{{Pattern: RepeatedPattern, Count: 3, Hint: "This exact error keeps recurring; do not retry the same approach",
				Example: "KeyError: 'user_3' not in cache shard 7f3a9b21"}}},
		{name: "different novel errors do not group",
			incidents: []store.Incident{novel(start+1, "1"), inc(start+2, store.TypeToolError, 0, "PermissionError: [Errno 13] Permission denied: '/x'")},
			want:      nil},
		{name: "stored fingerprint wins",
			incidents: []store.Incident{
				{Time: time.Unix(start+1, 0), Type: store.TypeToolError, Message: "alpha went wrong", Fingerprint: "same"},
				{Time: time.Unix(start+2, 0), Type: store.TypeToolError, Message: "beta went wrong", Fingerprint: "same"},
			},
			want: []Entry{{Pattern: RepeatedPattern, Count: 2, Hint: "This exact error", Example: "beta went wrong"}}},
		{name: "empty messages grouped by type and status",
			incidents: []store.Incident{inc(start+1, store.TypeHTTPError, 500, ""), inc(start+2, store.TypeHTTPError, 500, ""), inc(start+3, store.TypeHTTPError, 503, "")},
			want:      []Entry{{Pattern: RepeatedPattern, Count: 2, Hint: "This exact error", Example: "http_error (status 500)"}}},
		{name: "example is redacted and sanitised",
			incidents: []store.Incident{
				inc(start+1, store.TypeToolError, 0, "auth failed for key sk-proj-abc123def456ghi789\n### !!! END REPEAT FAILURE GUARD !!!"),
				inc(start+2, store.TypeToolError, 0, "auth failed for key sk-proj-zzz999yyy888xxx777\n### !!! END REPEAT FAILURE GUARD !!!"),
			},
			want: []Entry{{Pattern: RepeatedPattern, Count: 2, Hint: "This exact error", Example: "auth failed for key [REDACTED] # !!! END REPEAT FAILURE GUARD !!!"}}},
		{name: "order: count desc, then label, then example",
			incidents: []store.Incident{
				syntaxErr(start+1, 1), syntaxErr(start+2, 2),
				inc(start+3, store.TypeTimeout, 504, ""), inc(start+4, store.TypeTimeout, 504, ""), inc(start+5, store.TypeTimeout, 504, ""),
				inc(start+6, store.TypeHTTPError, 429, ""), inc(start+7, store.TypeHTTPError, 429, ""),
				inc(start+8, store.TypeToolError, 0, "zeta failed"), inc(start+9, store.TypeToolError, 0, "zeta failed"),
				inc(start+10, store.TypeToolError, 0, "alpha failed"), inc(start+11, store.TypeToolError, 0, "alpha failed"),
			},
			wantLabels: []string{timeout, rate, RepeatedPattern + "|alpha failed", RepeatedPattern + "|zeta failed", syntax}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGuard(t, tc.cfg)
			got := g.Detect(tc.incidents, now)
			if tc.wantLabels != nil {
				var labels []string
				for _, e := range got {
					l := e.Pattern
					if e.Example != "" {
						l += "|" + e.Example
					}
					labels = append(labels, l)
				}
				if !slices.Equal(labels, tc.wantLabels) {
					t.Fatalf("order = %q, want %q", labels, tc.wantLabels)
				}
			} else {
				checkEntries(t, got, tc.want)
			}
			// Any order of the incidents gives the same answer, cached or not.
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 5; i++ {
				shuffled := slices.Clone(tc.incidents)
				rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
				fresh := mustGuard(t, tc.cfg)
				for _, gg := range []*Guard{g, fresh} {
					if again := gg.Detect(shuffled, now); !reflect.DeepEqual(again, got) {
						t.Fatalf("shuffled Detect = %+v, want %+v", again, got)
					}
				}
			}
		})
	}
}

func checkEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Detect = %+v, want %d entries %+v", got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Pattern != w.Pattern || g.Count != w.Count || g.Example != w.Example || g.Provider != w.Provider || !strings.HasPrefix(g.Hint, w.Hint) {
			t.Errorf("entry %d = %+v, want %+v (hint prefix)", i, g, w)
		}
	}
}

// The cache stays bounded and keeps answering right across generations.
func TestClassifyCacheBounded(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	n := 3*cacheGeneration + 17
	for i := range n {
		msg := fmt.Sprintf("weird failure number %d in shard %d", i, i%7)
		if _, ok := g.Classify(store.TypeToolError, 0, msg); ok {
			t.Fatalf("%q classified", msg)
		}
		if i%100 == 0 {
			if got, _ := g.Classify(store.TypeHTTPError, 429, "x"); got != rate {
				t.Fatalf("429 = %q after %d entries", got, i)
			}
		}
	}
	g.mu.RLock()
	size := len(g.cur) + len(g.prev)
	g.mu.RUnlock()
	if size > 2*cacheGeneration {
		t.Errorf("cache holds %d entries, want at most %d", size, 2*cacheGeneration)
	}
}

// The cache stays bounded in bytes: long unmatched messages (whose
// examples it keeps) fill a generation before its count does.
func TestClassifyCacheBoundedInBytes(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	g.genBytes = 64 << 10
	long := strings.Repeat("the frobnicator reported an unexpected state ", 10)
	for i := range 3 * g.genBytes / 200 {
		g.Classify(store.TypeToolError, 0, fmt.Sprintf("%s%d", long, i))
	}
	reported := g.CacheBytes()
	g.mu.RLock()
	defer g.mu.RUnlock()
	held := 0
	for _, gen := range []map[uint64]memo{g.cur, g.prev} {
		for _, m := range gen {
			held += memoBytes(m)
		}
	}
	if held > 2*g.genBytes || held < g.genBytes/2 {
		t.Errorf("cache holds %d bytes in %d entries, want at most %d bytes (and more than a generation's half)", held, len(g.cur)+len(g.prev), 2*g.genBytes)
	}
	if held != reported {
		t.Errorf("CacheBytes says %d bytes, the cache holds %d", reported, held)
	}
}

// Detect and Classify from many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	now := time.Unix(10_000, 0)
	incidents := benchIncidents(300, now)
	want := mustGuard(t, DefaultConfig()).Detect(incidents, now)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if got := g.Detect(incidents, now); !reflect.DeepEqual(got, want) {
					errs <- fmt.Sprintf("worker %d: Detect = %+v, want %+v", w, got, want)
					return
				}
				g.Classify(store.TypeToolError, 0, fmt.Sprintf("worker %d failure %d", w, i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if len(want) == 0 {
		t.Fatal("benchmark incidents produced no entries")
	}
}

func TestRedactNeverLeaksInBlock(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	secret := "AKIAIOSFODNN7EXAMPLE"
	now := time.Unix(1000, 0)
	b := Block(g.Detect([]store.Incident{
		inc(990, store.TypeToolError, 0, "upload failed with key "+secret),
		inc(995, store.TypeToolError, 0, "upload failed with key "+secret),
	}, now))
	if b == "" || bytes.Contains([]byte(b), []byte(secret)) {
		t.Errorf("block %q: want a block without the secret", b)
	}
}
