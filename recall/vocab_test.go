package recall

import (
	"slices"
	"strings"
	"testing"
)

// termsOf returns the index terms of a text, without repeats.
func termsOf(text string) []string {
	ts := slices.Clone(analyze(text, maxGoalRunes).terms)
	slices.Sort(ts)
	return slices.Compact(ts)
}

func TestVocabularyEquivalences(t *testing.T) {
	tests := []struct{ a, b string }{
		{"throttle", "rate limit"},
		{"throttling", "rate limiting"},
		{"rate limiter", "ratelimit"},
		{"memoize", "cache"},
		{"memoization", "caching"},
		{"sign-in", "login"},
		{"log in", "sign in"},
		{"thumbnail", "preview"},
		{"back up", "backup"},
		{"set up", "install"},
		{"deal with", "handle"},
		{"turn off", "disable"},
		{"switch on", "enable"},
		{"partitioning", "split"},
		{"k8s", "Kubernetes"},
		{"Postgres", "PostgreSQL"},
		{"pg", "postgresql"},
		{"Mongo", "MongoDB"},
		{"JS", "JavaScript"},
		{"Node.js", "JavaScript"},
		{"node", "javascript"},
		{"TS", "TypeScript"},
		{"OTel", "OpenTelemetry"},
		{"golang", "Go"},
		{"GitHub Actions", "github actions"},
		{"protocol buffers", "protobuf"},
		{"serialize", "encode"},
		{"unmarshal", "decode"},
		{"i18n", "internationalization"},
		{"2FA", "two-factor"},
		{"MFA", "TOTP"},
		{"healthz", "health check"},
		{"RAM", "memory"},
		{"helper", "utility"},
		{"command-line", "CLI"},
		{"sign up", "registration"},
		{"browser", "client side"},
		{"backend", "server side"},
		{"migrate", "convert"},
		{"move", "migrate"},
		{"publish", "send"},
		{"subscribe", "consume"},
		{"Dockerize", "containerize"},
		{"cross-origin", "CORS"},
		{"SSL", "TLS"},
		{"HTTP/2", "h2"},
		{"foreign key", "FK"},
		{"time zone", "timezone"},
		{"GMT", "UTC"},
		{"Swagger", "OpenAPI"},
		{"iPhone", "iOS"},
		{"reCAPTCHA", "CAPTCHA"},
		{"keyboard shortcut", "hotkey"},
		{"navigation bar", "navbar"},
		{"stub", "mock"},
		{"inactivity", "idle"},
		{"sign out", "log out"},
		{"re-send", "retry"},
		{"yml", "YAML"},
		{"xlsx", "Excel"},
		// The seventh round's acronyms, numeronyms and nicknames.
		{"a11y", "accessibility"},
		{"o11y", "observability"},
		{"nvim", "Neovim"},
		{"hass", "Home Assistant"},
		{"wp", "WordPress"},
		{"VS Code", "vscode"},
		{"Visual Studio Code", "VS Code"},
		{"language server", "LSP"},
		{"progressive web", "PWA"},
		{"right-to-left", "RTL"},
		{"left to right", "LTR"},
		{"point of sale", "POS"},
		{"just-in-time", "JIT"},
		{"content delivery", "CDN"},
		{"high-performance computing", "HPC"},
		{"adaptive bitrate", "ABR"},
		{"HTTP Live Streaming", "HLS"},
		{"m3u8", "HLS"},
		{"server-side rendering", "SSR"},
		{"JSON Web Token", "JWT"},
		{"cross-site scripting", "XSS"},
		{"cross-site request", "CSRF"},
		{"end-to-end", "e2e"},
		{"text-to-speech", "TTS"},
		{"ASR", "STT"},
		{"electronic health records", "EHR"},
		{"EMR", "EHR"},
		{"internet of things", "IoT"},
		{"garbage collector", "GC"},
		{"sbatch", "Slurm"},
		{"HUP", "SIGHUP"},
		{"webcal", "iCalendar"},
		{".ics", "ical"},
		{"DomainKeys", "DKIM"},
		{"latexmk", "LaTeX"},
		{"TeX", "LaTeX"},
		{"GLB", "glTF"},
		{"ipynb", "notebook"},
		{"loudnorm", "LUFS"},
		{"influx", "InfluxDB"},
		{"sqlite3", "SQLite"},
		{"gh", "GitHub"},
		{"jpg", "JPEG"},
		{"wasm", "WebAssembly"},
		{"Chart.js", "chartjs"},
		{"AWS Batch", "awsbatch"},
		{"sshd", "OpenSSH"},
		{"regular expression", "regexp"},
		{"GUID", "UUID"},
		{"modal", "dialog"},
		{"pop-up", "popup"},
		{"user interface", "GUI"},
		{"virtual machine", "VM"},
		{"machine learning", "ML"},
		{"large language model", "LLM"},
		{"e-mail", "mail"},
		{"junk", "spam"},
		{"passwd", "password"},
		{"administrator", "admin"},
		{"lock down", "harden"},
		{"geo", "GIS"},
		{"continuous integration", "CI"},
		{"autogenerate", "generate"},
		{"CVEs", "vulnerabilities"},
		{"WDT", "watchdog"},
		{"time to live", "TTL"},
		{"dead-letter", "DLQ"},
		{"feature toggle", "feature flag"},
		{"bq", "BigQuery"},
		{"RN", "React Native"},
		{"create-react-app", "CRA"},
		{"GHA", "GitHub Actions"},
		{"HF", "Hugging Face"},
		{"md", "Markdown"},
		{"prod", "production"},
		{"btn", "button"},
		{"bulk", "batch"},
		{"microSD", "SD"},
		{"pulse-width", "PWM"},
	}
	for _, tc := range tests {
		t.Run(tc.a+"="+tc.b, func(t *testing.T) {
			a, b := termsOf(tc.a), termsOf(tc.b)
			if len(a) != 1 || !slices.Equal(a, b) {
				t.Fatalf("%q -> %v, %q -> %v: want one and the same term", tc.a, a, tc.b, b)
			}
		})
	}
	// Words the vocabulary must keep apart.
	apart := []struct{ a, b string }{
		{"backup", "restore"},
		{"cache", "clear"},
		{"Java", "JavaScript"},
		{"client", "server"},
		{"GitHub", "GitLab"},
		{"encode", "decode"},
		{"upload", "download"},
		{"log in", "log out"},
		{"S3", "GCS"},
		{"CSV", "Excel"},
		{"RTL", "LTR"},
		{"CSRF", "XSS"},
		{"TTS", "STT"},
		{"HA", "Home Assistant"}, // HA is high availability
		{"access", "accessibility"},
		{"going", "Go"},
		{"Vim", "Neovim"},
		{"Slurm", "AWS Batch"},
		{"RSS feed", "Atom feed"},
		{"move", "rename"},
		{"window", "Windows"},
		{"RSS feed", "RSS"}, // RSS alone is resident memory
	}
	for _, tc := range apart {
		if a, b := termsOf(tc.a), termsOf(tc.b); slices.Equal(a, b) {
			t.Errorf("%q and %q share the terms %v", tc.a, tc.b, a)
		}
	}
}

// TestVocabularyTables checks the tables themselves: no word in two
// groups, every group's words fold into its first word's term, every tool
// is one term with a category, and a name written in camel case stays one
// word.
func TestVocabularyTables(t *testing.T) {
	seen := map[string]string{}
	for _, g := range append(slices.Clone(synonymGroups), vocabGroups...) {
		want := canonical(g[0])
		for _, w := range g {
			if other, ok := seen[w]; ok {
				t.Errorf("%q is in the groups of %q and %q", w, other, g[0])
			}
			seen[w] = g[0]
			if got := canonical(w); got != want {
				t.Errorf("%q folds into %q, want %q (its group's)", w, got, want)
			}
		}
	}
	for _, p := range vocabPhrases {
		if got, want := termsOf(p[0]+" "+p[1]), canonical(p[2]); len(got) != 1 || got[0] != want {
			t.Errorf("phrase %q %q -> %v, want [%s]", p[0], p[1], got, want)
		}
	}
	for _, p := range vocabTriples {
		if p[3] == "" {
			t.Errorf("triple %q has no term", p)
		}
		if got, want := termsOf(p[0]+" "+p[1]+" "+p[2]), canonical(p[3]); len(got) != 1 || got[0] != want {
			t.Errorf("triple %q %q %q -> %v, want [%s]", p[0], p[1], p[2], got, want)
		}
	}
	for w, a := range spelledOut {
		if got, want := termsOf(w), canonical(a); len(got) != 1 || got[0] != want {
			t.Errorf("%q -> %v, want [%s]", w, got, want)
		}
	}
	for _, tt := range toolTable {
		if c, st := canonical(tt.name), stemWord(tt.name); c != st {
			t.Errorf("tool %q is read as %q, another group's term", tt.name, c)
		}
		if tt.cats == 0 {
			t.Errorf("tool %q has no category", tt.name)
		}
		if tt.lang != "" {
			if _, ok := toolIndex[canonical(tt.lang)]; !ok {
				t.Errorf("tool %q implies the unknown language %q", tt.name, tt.lang)
			}
		}
		a := analyze(tt.shown, maxGoalRunes)
		if len(a.tools) == 0 || toolTable[a.tools[0].tool].name != tt.name {
			t.Errorf("%q (as shown) names the tools %v, want %s", tt.shown, a.tools, tt.name)
			continue
		}
		for _, u := range a.tools[1:] {
			if u.role&toolImplied == 0 || toolTable[u.tool].name != tt.lang && !slices.Contains(impliedTools[tt.name], toolTable[u.tool].name) {
				t.Errorf("%q (as shown) also names %s", tt.shown, toolTable[u.tool].name)
			}
		}
	}
	for w, k := range actionKinds {
		if k != actGeneric && k != actSpecific {
			t.Errorf("action %q of kind %d", w, k)
		}
	}
	for _, w := range []string{"PostgreSQL", "GitHub", "JavaScript", "TypeScript", "MySQL", "GraphQL", "WebSocket"} {
		if got := termsOf(w); len(got) != 1 || strings.Contains(got[0], " ") {
			t.Errorf("%q -> %v, want one term", w, got)
		}
	}
	// Identifiers still split.
	if got := termsOf("parseConfig"); len(got) != 2 {
		t.Errorf("parseConfig -> %v, want two terms", got)
	}
}

// "go" is the language except as the verb of "go to ..." and in the
// other forms of that verb.
func TestGoTheLanguageAndTheVerb(t *testing.T) {
	golang := canonical("golang")
	tests := []struct {
		text string
		lang bool
	}{
		{"Add go to definition to the language server", false},
		{"Go to the settings page after login", false},
		{"The old manifest is going away", false},
		{"Rewrite the service in Go", true},
		{"Port the service from Go to Rust", true},
		{"Write a Go client for the API", true},
	}
	for _, tc := range tests {
		if got := slices.Contains(termsOf(tc.text), golang); got != tc.lang {
			t.Errorf("%q names the Go language: %v, want %v", tc.text, got, tc.lang)
		}
	}
}
