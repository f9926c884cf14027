package recall

import (
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Add gamepad support to the Unity game", []string{"unity"}},
		{"Keep the dependencies up to date automatically with Dependabot", []string{"dependabot"}},
		{"Upload the test coverage report to SonarCloud from CI", []string{"sonarcloud"}},
		{"Add a system tray icon to the Qt desktop app", []string{"qt"}},
		{"Tune the PgBouncer connection pool. Then tune HikariCP", []string{"pgbouncer", "hikaricp"}},
		// A sentence's first word, acronyms in capitals, tools the
		// vocabulary knows and words of the context are no names.
		{"Unity savegame: write progress to a file", nil},
		{"Deploy the API to AWS over HTTPS from CI", nil},
		{"Fix the memory leak in the Node.js service", nil},
		{"Migrate the users from MySQL to PostgreSQL", nil},
		{"Make the Electron App start faster", []string{"electron"}},
		// In title case only a capital past the first letter counts.
		{"Add Dark Mode To The Settings Page", nil},
		{"Upload Coverage Reports To SonarCloud From The Pipeline", []string{"sonarcloud"}},
		{"", nil},
		// Commands, flags and paths.
		{"Add a /warp command and a --dry-run flag to the CLI", []string{"/warp", "--dry-run"}},
		{"Back up /home/user/ to the NAS", []string{"/home/user"}},
		{"Read and/or write the file, -- or not, /", nil},
	}
	for _, tc := range tests {
		if got := names(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("names(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// recalled searches ix at the default threshold and returns the IDs found.
func recalled(ix *Index, goal string) []string {
	return ids(ix.Search(Query{Workspace: "w", Goal: goal, K: 5, MinSimilarity: DefaultMinSimilarity}))
}

// A task that names a tool the vocabulary does not know is not the task of
// another such tool, however much else it shares.
func TestNamesOfTwoToolsConflict(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("renovate", "Keep the dependencies up to date automatically with Renovate"))
	ix.Put(sol("godot", "Add gamepad support to the Godot game"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Keep the dependencies up to date automatically with Dependabot", nil},
		{"Add gamepad support to the Unity game", nil},
		// Naming nothing, or the same name, fits.
		{"Keep our dependencies up to date automatically", []string{"renovate"}},
		{"Keep the dependencies up to date with a Renovate bot", []string{"renovate"}},
		{"Add gamepad support to the game", []string{"godot"}},
		{"Gamepad support for our Godot game", []string{"godot"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// goalDF counts the solutions whose goal holds a term, through puts,
// replacements and deletes.
func TestGoalDocumentFrequency(t *testing.T) {
	ix := NewIndex()
	a := sol("a", "Add gamepad support to the game")
	b := sol("b", "Remap the gamepad buttons")
	c := sol("c", "Ship the save system")
	c.Approach = "Tested with a gamepad."
	for _, s := range []struct{ id, goal, approach string }{{a.ID, a.Goal, a.Approach}, {b.ID, b.Goal, b.Approach}, {c.ID, c.Goal, c.Approach}} {
		x := sol(s.id, s.goal)
		x.Approach = s.approach
		ix.Put(x)
	}
	df := func() int32 {
		ws := ix.workspace("w", false)
		id, ok := ws.dict["gamepad"]
		if !ok {
			return -1
		}
		return ws.terms[id].goalDF
	}
	if got := df(); got != 2 {
		t.Fatalf("goalDF after three puts = %d, want 2 (the approach does not count)", got)
	}
	ix.Put(sol("b", "Remap the keyboard keys"))
	if got := df(); got != 1 {
		t.Fatalf("goalDF after replacing b = %d, want 1", got)
	}
	ix.Delete("w", "a")
	if got := df(); got != 0 {
		t.Fatalf("goalDF after deleting a = %d, want 0 (c's approach still holds the word)", got)
	}
}

// Every name is a word of the text, lowercased, and there are at most
// maxNames of them.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"Add gamepad support to the Unity game", "Use SonarCloud. Then Codecov", "a-B_c D-", "İstanbul Ünity ÄÖ", "x\xffY Zz", strings.Repeat("Aa ", 1000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := names(s)
		if len(got) > maxNames {
			t.Fatalf("%d names from %q", len(got), s)
		}
		low := strings.ToLower(s)
		for _, n := range got {
			if n == "" || n != strings.ToLower(n) || !strings.Contains(low, n) {
				t.Fatalf("name %q is not a lowercased word of %q", n, s)
			}
		}
	})
}

// A tool the query names, of a kind the stored task names none of, counts
// as a name of the query's: against a stored task that names another
// thing of its own, they are two tasks.
func TestToolAgainstANameConflicts(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("quest", "Store the sensor readings in QuestDB every minute"))
	ix.Put(sol("altair", "Plot the weekly signups as a bar chart with Altair"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Store the sensor readings in a CSV file every minute", nil},
		{"Plot the weekly signups as a bar chart with Matplotlib", nil},
		// Naming no tool, or the same name, fits.
		{"Store the sensor readings every minute", []string{"quest"}},
		{"Plot the weekly signups as a bar chart", []string{"altair"}},
		{"Plot the weekly signups with Altair as a bar chart", []string{"altair"}},
		// Client and server say where, not with what.
		{"Store the sensor readings in QuestDB every minute from the backend", []string{"quest"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestVersions(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Port the scripts from Python 2 to Python 3.12", []string{"python 2", "python 3"}},
		{"Publish the pose from the ROS 2 node", []string{"ros 2"}},
		{"Move the extension to Manifest V3", []string{"manifest 3"}},
		{"ROS 2 node that publishes the pose", []string{"ros 2"}},
		{"Upgrade the app to vue 3", []string{"vue 3"}},
		// Numbers after other words are no versions.
		{"Show the top 10 products", nil},
		{"Find the stores within 5 km", nil},
		{"Retry 3 times, then give up", nil},
		{"Python, 3 times", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := versions(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("versions(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	conflicts := []struct {
		q, d []string
		want bool
	}{
		{[]string{"python 2"}, []string{"python 3"}, true},
		{[]string{"python 3"}, []string{"python 3"}, false},
		{[]string{"python 2", "python 3"}, []string{"python 3"}, false},
		{[]string{"python 3"}, []string{"vue 3"}, false},
		{nil, []string{"python 3"}, false},
	}
	for _, tc := range conflicts {
		if got := versionsConflict(tc.q, tc.d); got != tc.want {
			t.Errorf("versionsConflict(%q, %q) = %v, want %v", tc.q, tc.d, got, tc.want)
		}
	}
}

// One tool in two versions makes two tasks; no version, or the same, fits.
func TestVersionsOfOneTool(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("py2", "Package the command-line tool as a wheel for Python 2"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Package the command-line tool as a wheel for Python 3", nil},
		{"Package the command-line tool as a wheel", []string{"py2"}},
		{"Package the command-line tool as a wheel for Python 2", []string{"py2"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// Every version is a lowercased name of the text, a space and one to
// three digits, and there are at most maxVersions of them.
func FuzzVersions(f *testing.F) {
	for _, s := range []string{"Port from Python 2 to Python 3", "ROS 2 node", "Manifest V3", "x\xffY 2", "A 1 B 2 C 3 D 4 E 5", strings.Repeat("Aa 1 ", 1000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := versions(s)
		if len(got) > maxVersions {
			t.Fatalf("%d versions from %q", len(got), s)
		}
		low := strings.ToLower(s)
		for _, v := range got {
			sp := strings.LastIndexByte(v, ' ')
			name, num := v[:max(sp, 0)], v[sp+1:]
			if sp <= 0 || name != strings.ToLower(name) || !strings.Contains(low, name) {
				t.Fatalf("version %q of %q: the name is not a lowercased word of the text", v, s)
			}
			if _, ok := versionNumber(num); !ok || strings.HasPrefix(num, "v") {
				t.Fatalf("version %q of %q: %q is no number", v, s, num)
			}
		}
	})
}

// A tool whose name is a common word is no name of the task: "a black
// background" does not make the task one of the Black formatter.
func TestWordToolsAreNoNames(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("theme", "Add a dark theme to the settings window with Tailwind"))
	if got := recalled(ix, "Add a dark theme with a black background to the settings window"); !slices.Equal(got, []string{"theme"}) {
		t.Errorf("recalled %v, want [theme]", got)
	}
	for w := range wordTools {
		if _, ok := toolIndex[canonical(w)]; !ok {
			t.Errorf("%q of wordTools is no tool", w)
		}
	}
}

// Two commands, flags or paths are two things, as two names are.
func TestCommandNamesConflict(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("ban", "Add a /ban command to the chat bot"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Add a /kick command to the chat bot", nil},
		{"Add a /ban command for moderators to the chat bot", []string{"ban"}},
		{"Add a ban command to the chat bot", []string{"ban"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// Two goals led the same way that share what they act on and each add a
// word of their own to it are two features of one thing; a goal that
// shares the thing's modifier and names its head in other words is not.
func TestOtherFeature(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("dialog", "Add a settings dialog to the Qt editor"))
	ix.Put(sol("sidebar", "Make the sidebar collapsible"))
	ix.Put(sol("records", "Cache the product records in Redis"))
	ix.Put(sol("token", "Add a temporary token cache to the HTTP client"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		// Another feature of the same thing: the head is shared, the
		// words before it (or, after a light verb, what the thing is
		// made) are not.
		{"Add a font dialog to the Qt editor", nil},
		{"Make the sidebar resizable", nil},
		// The same feature.
		{"Add a settings dialog to our Qt editor", []string{"dialog"}},
		{"Make the sidebar collapsible on small screens", []string{"sidebar"}},
		// The modifier shared, the head said in other words.
		{"Cache the product rows in Redis", []string{"records"}},
		// A modifier cut short is the same modifier.
		{"Add a temp token cache to the HTTP client", []string{"token"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestShortens(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"temp", "temporari", true},
		{"directori", "dir", true},
		{"repo", "repositori", true},
		{"do", "document", false}, // too short to say which word
		{"cach", "config", false},
		{"option", "option", true},
	}
	for _, tc := range tests {
		if got := shortens(tc.a, tc.b); got != tc.want {
			t.Errorf("shortens(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// The same thing made for two places is two tasks; a goal that names no
// place, or a place the other shares a word of, fits.
func TestOtherPlace(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("planner", "Add request tracing to the billing service's query planner"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Add request tracing to the mobile app's image cache", nil},
		{"Add request tracing to the query planner", []string{"planner"}},
		{"Add request tracing", []string{"planner"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// A stored goal's acronyms that the vocabulary does not know are read
// apart from its names.
func TestGoalAcronyms(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Suppress addresses that hard-bounce, from SES notifications", []string{"ses"}},
		{"Mark devices offline with an MQTT last will message", []string{"mqtt"}},
		{"OFX files over MLLP, then OFX again", []string{"ofx", "mllp"}},
		{"Show live aircraft positions from ADS-B data", []string{"ads-b"}},
		// Two letters, a plural s aside, and acronyms the vocabulary
		// knows are not read.
		{"Deploy to AWS over HTTPS from CI, with PRs and VMs", nil},
		{"Send failed messages to a DLQ and show them in the UI", nil},
		{"Import the bank files with Plaid", nil},
	}
	for _, tc := range tests {
		if got := goalAcronyms(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("goalAcronyms(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if got := names(tc.text); slices.ContainsFunc(got, func(n string) bool { return slices.Contains(tc.want, n) }) {
			t.Errorf("names(%q) = %q holds an acronym", tc.text, got)
		}
	}
}

// A query that gives a name of its own is not the task of a stored goal
// that names another thing by its acronym; a tool the query names is
// judged against the stored goal's tools alone.
func TestStoredAcronymConflicts(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("lwt", "Mark devices offline with an MQTT last will message"))
	ix.Put(sol("rest", "Add rate limiting to the public REST API"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Mark devices offline with WebSocket ping timeouts", nil},
		{"Add rate limiting to the public Express API", []string{"rest"}},
		// A path says where, not with what.
		{"Add rate limiting to /api/search of the public REST API", []string{"rest"}},
		{"Add rate limiting to /api/search of the public API", []string{"rest"}},
		{"Mark the devices offline with an MQTT last will", []string{"lwt"}},
		{"Mark devices as offline with a last will message", []string{"lwt"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// What a query says it is not, after "instead of" or "rather than", is
// what a stored goal that does it does.
func TestInsteadOf(t *testing.T) {
	words := []struct {
		text string
		want []string
	}{
		{"Publish the budget dataset to Socrata instead of CKAN", []string{"ckan"}},
		{"Make the parser stop at the first error rather than recover", []string{canonical("recover")}},
		// A word the text names elsewhere is no word of what it is not.
		{"Mark user accounts as deleted instead of removing the rows", []string{canonical("rows")}},
		{"Publish the budget dataset", nil},
	}
	for _, tc := range words {
		if got := analyze(tc.text, maxGoalRunes).instead; !slices.Equal(got, tc.want) {
			t.Errorf("analyze(%q).instead = %q, want %q", tc.text, got, tc.want)
		}
	}
	ix := NewIndex()
	ix.Put(sol("ckan", "Publish the city's budget dataset to the open data portal every night (CKAN)"))
	ix.Put(sol("parser", "Make the parser recover from syntax errors and report all of them"))
	ix.Put(sol("moment", "Replace moment with date-fns in the frontend"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Publish the budget dataset to Socrata instead of CKAN", nil},
		{"Publish the city's budget dataset to CKAN every night", []string{"ckan"}},
		{"Make the parser stop at the first syntax error instead of recovering", nil},
		{"Make the parser recover from syntax errors instead of stopping at the first", []string{"parser"}},
		// What a stored goal moves away from is no thing it does.
		{"Use date-fns in the frontend instead of moment", []string{"moment"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// A task done when something fails is not the task of a stored goal that
// names no outcome; a retry of what failed, and a repair, name no such
// condition.
func TestTaskDoneOnFailure(t *testing.T) {
	conds := []struct {
		text string
		want bool
	}{
		{"Email the sheet owner when the sync to the CRM fails", true},
		{"Show a toast if the upload failed", true},
		{"Notify the account manager when a signer declines the envelope", true},
		{"Retry failed webhook deliveries with backoff", false},
		{"Fix the deploy when it fails on a fresh cluster", false},
		{"Email the sheet owner when the sync finishes", false},
	}
	for _, tc := range conds {
		if got := analyze(tc.text, maxGoalRunes).lead.onFailure; got != tc.want {
			t.Errorf("analyze(%q).lead.onFailure = %v, want %v", tc.text, got, tc.want)
		}
	}
	ix := NewIndex()
	ix.Put(sol("sync", "Sync Google Sheets rows to the CRM when a row is edited"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Email the sheet owner when the Google Sheets sync to the CRM fails", nil},
		{"Sync the Google Sheets rows to our CRM whenever a row is edited", []string{"sync"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// The same action on the same thing, with one slot filled in two ways
// (into what, from what, where, by what means), is two tasks; a slot
// only one goal fills fits.
func TestOtherSlot(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("step", "Export the FreeCAD model to STEP from a Python script"))
	ix.Put(sol("mllp", "Receive HL7 v2 messages over MLLP and acknowledge them"))
	ix.Put(sol("csv", "Parse the CSV exports with retries"))
	ix.Put(sol("other", "Plot the monthly revenue with matplotlib"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Export the FreeCAD model to STL from the GUI", nil},
		{"Receive HL7 v2 messages over HTTPS from the exchange", nil},
		{"Export the FreeCAD model to STEP", []string{"step"}},
		{"Export the FreeCAD model to STEP files from a script", []string{"step"}},
		{"Receive HL7 v2 messages over MLLP", []string{"mllp"}},
		{"Parse the CSV exports in the billing service", []string{"csv"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}
