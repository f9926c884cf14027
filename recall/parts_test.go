package recall

import (
	"slices"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// TestTaskParts checks each rule of parts.go on a pair of goals, in a
// workspace holding the stored goal alone: fit says whether the parts are
// compatible, and a pair that fits is recalled at the default threshold
// while one that does not is not.
func TestTaskParts(t *testing.T) {
	tests := []struct {
		name, stored, approach, query string
		fit                           bool
	}{
		// The action.
		{"same named action", "Restore the MongoDB database from the nightly dump", "", "Restore the Mongo DB from last night's dump", true},
		{"other named action", "Back up the MongoDB database every night", "", "Restore the MongoDB database from the nightly backup", false},
		{"generic naming the action", "Enable gzip compression for HTTP responses", "", "Compress the HTTP responses with gzip", true},
		{"generic not naming the action", "Add a search box to the orders page", "", "Paginate the orders page", false},
		{"named action and a participle", "Generate thumbnails for uploaded images", "", "Upload the generated thumbnails to the CDN", false},
		{"light verb", "Speed up the CI cache for Go modules", "", "make the go module cache in CI faster", true},
		{"joined verbs", "Find and remove unused imports in the Go project", "", "Remove the unused imports from the Go project", true},
		// The object.
		{"utility and its tests", "Write unit tests for the slugify helper", "", "Write a slugify helper", false},
		{"tests and the utility", "Write a slugify helper", "", "Write unit tests for the slugify helper", false},
		{"a linter and a Makefile", "Build a custom ESLint rule that bans console.log", "", "Build a Makefile that runs the tests", false},
		// Source and target.
		{"reversed migration", "Migrate the frontend build from Webpack to Vite", "", "Migrate the frontend build from Vite to Webpack", false},
		{"same migration told backwards", "Convert the Flask app from Python 2 to Python 3", "", "Port the Flask application to Python 3 from Python 2", true},
		{"reversed versions", "Upgrade the service from Node 18 to Node 20", "", "Move the service from Node 20 to Node 18", false},
		{"substitution reversed", "Replace Jest with Vitest in the frontend tests", "", "Replace Vitest with Jest in the frontend tests", false},
		{"substitution told as a migration", "Replace Jest with Vitest in the frontend tests", "", "Migrate the frontend tests from Jest to Vitest", true},
		{"swap for", "Swap the requests library for httpx", "", "Swap httpx for the requests library", false},
		// Tools.
		{"other language", "Write a Go CLI to bulk-resize images", "", "Write a Python CLI to bulk-resize images", false},
		{"same language, other words", "Write a Go CLI to bulk-resize images", "", "Build a command-line tool in golang that resizes images in bulk", true},
		{"framework implies its language", "Dockerize the Node.js API server", "", "Dockerize the Django API server", false},
		{"other database", "Set up full-text search with Elasticsearch for the catalog", "", "Set up full-text search with PostgreSQL for the catalog", false},
		{"other CI", "Set up GitHub Actions to run the linter on pull requests", "", "Set up GitLab CI to run the linter on merge requests", false},
		{"client and server", "Add WebSocket support to the chat server", "", "Add WebSocket support to the chat client", false},
		{"a target the other lacks", "Convert the Flask app from Python 2 to Python 3", "", "Convert the Flask app to FastAPI", false},
		{"no tool named", "Add retries with backoff to the HTTP client", "", "Add retries with exponential backoff to the Go HTTP client", true},
		{"approach names the language", "Add structured JSON logging to the service", "Used python-json-logger with the Python logging module.", "Add structured JSON logging to the Rust service", false},
		{"approach overruled by the goal", "Add structured JSON logging to the Go service", "Ported the Python formatter's fields.", "Add structured JSON logging to the Go service with slog", true},
		{"other object storage", "Serve user uploads from S3 through signed URLs", "", "Serve user uploads from Azure Blob Storage through signed URLs", false},
		{"other linter", "Run Ruff on every commit", "", "Run ESLint on every commit", false},
		{"other hosted service", "Post a message to Slack when the nightly build finishes", "", "Post a message to Discord when the nightly build finishes", false},
		{"other password hash", "Store passwords with scrypt", "", "Store passwords with PBKDF2", false},
		{"other target format", "Export the invoices to CSV", "", "Export the invoices to JSON", false},
		{"a browser framework and Node.js", "Fix the memory leak in the Node.js worker", "", "Fix the memory leak in the Vue app", false},
		{"a framework and its own side", "Add request logging to the Express server", "", "Add request logging to the Express backend", true},
		// Source and target of a conversion.
		{"conversion reversed, no from", "Convert the CSV exports to Parquet", "", "Convert the Parquet exports to CSV", false},
		{"conversion told with a from", "Convert the CSV exports to Parquet", "", "Convert the exports from CSV to Parquet", true},
		// The direction of what the action is done to.
		{"sender and receiver", "Add request signing to the webhook sender", "", "Add request signing to the webhook receiver", false},
		{"producer and consumer", "Add tracing to the Kafka producer", "", "Add tracing to the Kafka consumer", false},
		{"download and upload", "Add a resume option to the file download", "", "Add a resume option to the file upload", false},
		// The outcome.
		{"success and failure paths", "Email the customer when the refund succeeds", "", "Email the customer when the refund fails", false},
		{"failure path in other words", "Page the on-call engineer when the nightly job fails", "", "Page the on-call engineer when the nightly job has failed", true},
		{"an outcome on one side only", "Retry the upload when it fails", "", "Retry the file upload", true},
		{"a repair names the failure or the aim", "Fix the nightly build that fails on ARM", "", "Fix the nightly build so it succeeds on ARM", true},
		// Qualifiers of the object (qualifiers.go).
		{"other resource", "Lower the CPU limit of the worker pods", "", "Lower the memory limit of the worker pods", false},
		{"same resource in other words", "Increase the RAM limit of the build container", "", "Raise the memory limit of the build container", true},
		{"open files and connections", "Raise the file descriptor limit of the gateway", "", "Raise the connection limit of the gateway", false},
		{"a resource on one side only", "Raise the memory limit of the CI runner", "", "Raise the limits of the CI runner", true},
		{"serial and parallel", "Run the integration tests in parallel", "", "Run the integration tests sequentially", false},
		{"the first named mode counts", "Run the e2e suite serially since parallel runs share a browser profile", "", "Run the e2e suite sequentially", true},
		{"serially is no serialize", "Run the migrations serially", "", "Serialize the migration state to JSON", false},
		{"synchronous and asynchronous", "Call the billing API asynchronously from the checkout", "", "Call the billing API synchronously from the checkout", false},
		{"incremental and full", "Take an incremental backup of the media bucket", "", "Take a full backup of the media bucket", false},
		{"another task of a model", "Train a DistilBERT model for question answering on the FAQ", "", "Train a DistilBERT model for summarization of the FAQ", false},
		// Actions that conflict on the same object.
		{"create and rebuild", "Rebuild the search index every night", "", "Create a search index for the products", false},
		{"refresh in other words", "Regenerate the cached sitemap when a page is published", "", "Refresh the cached sitemap when a page is published", true},
		{"roll back and apply", "Apply the pending Alembic migrations on deploy", "", "Roll back the last Alembic migration on deploy", false},
		{"refresh token is a thing", "Add refresh token rotation to the OAuth server", "", "Rotate refresh tokens in the OAuth server", true},
		// Platforms and tools of the fifth round's categories.
		{"other database, by its acronym", "List the slowest queries of the MySQL server", "", "List the slowest queries of the MSSQL server", false},
		{"other microcontroller", "Blink the status LED from a timer interrupt on the ESP32", "", "Blink the status LED from a timer interrupt on the Arduino", false},
		{"a board and an app", "Add firmware updates over BLE to the nRF52 sensor", "", "Add updates over BLE to the Flutter app", false},
		{"other ML framework", "Quantize the Keras model to int8", "", "Quantize the PyTorch model to int8", false},
		{"ML framework by its nickname", "Add gradient checkpointing to the PyTorch trainer", "", "Add gradient checkpointing to the torch trainer", true},
		{"other model format", "Export the classifier to ONNX", "", "Export the classifier to GGUF", false},
		{"other secret store", "Read the database password from AWS Secrets Manager", "", "Read the database password from Doppler", false},
		{"service manager and container engine", "Restart the worker automatically under systemd when it crashes", "", "Restart the worker automatically under Docker when it crashes", false},
		{"other log store", "Ship the nginx logs to Loki", "", "Ship the nginx logs to Datadog", false},
		{"a task queue implies its language", "Retry the failed Celery tasks with backoff", "", "Retry the failed Sidekiq jobs in Ruby with backoff", false},
		// The sixth round: the thing done (thing.go), a named action
		// against a goal that names none, and the vocabulary of its
		// misses.
		{"two tools the vocabulary does not know", "Keep the dependencies up to date automatically with Renovate", "", "Keep the dependencies up to date automatically with Dependabot", false},
		{"an unknown tool and a known one", "Store the Terraform state in an S3 backend with DynamoDB locking", "", "Store the Terraform state in Terraform Cloud", false},
		{"the same unknown tool", "Add gamepad support to the Godot game", "", "Gamepad support for our Godot game", true},
		{"capitals of a title are no names", "Add a dark mode to the settings screen of the Android app", "", "Add Dark Theme To The Settings Screen", true},
		{"two things made in one place", "Add a tray icon menu to the Qt desktop app", "", "Add a badge icon counter to the Qt desktop app", false},
		{"one thing made in other words", "Add a tray icon menu to the Qt desktop app", "", "Add a menu on the tray icon of our Qt app", true},
		{"other things scanned", "Scan the Docker images for vulnerabilities in CI with Trivy", "", "Scan the Python dependencies for known vulnerabilities in CI", false},
		{"one named action on two things", "Run the linters in a Git pre-commit hook", "", "Run the test suite in a Git pre-push hook", false},
		{"what data moves, in other words", "Receive messages from a Kafka topic and store them in PostgreSQL", "", "Consume the order events from the Kafka topic", true},
		{"a named action the stored goal lacks", "Route the Django app's read queries to a PostgreSQL read replica", "", "Monitor the replication lag of the PostgreSQL read replica", false},
		{"a named action the stored goal holds", "Put the product page's queries in a Redis cache", "", "Cache the product page's queries in Redis", true},
		{"stopping is an action", "Reconnect the WebSocket client with exponential backoff when the connection drops", "", "Stop the WebSocket client from reconnecting after the user logs out", false},
		{"turning off is disabling", "Add auto-update to the Electron desktop app", "", "Turn off auto-update in the Electron app", false},
		{"partitioning is splitting", "Partition the PostgreSQL events table by month", "", "Split the Postgres events table into monthly partitions", true},
		{"merging the partitions", "Partition the PostgreSQL events table by month", "", "Merge the monthly partitions of the events table back into one table", false},
		{"input and output", "Add a --json output flag to the CLI's list command", "", "Accept a JSON file as input to the CLI's import command", false},
		{"upload in the leading phrase", "Show a progress bar while the Rust CLI downloads files", "", "Show upload progress while the Rust CLI sends files to the server", false},
		{"text and images", "Add data augmentation to the image classifier's training pipeline", "", "Add data augmentation to the NLP model's training pipeline", false},
		{"images both ways", "Add data augmentation to the image classifier's training pipeline", "", "Add data augmentation to the training pipeline of the image classifier", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := NewIndex()
			ix.Put(store.Solution{ID: "d", Workspace: "w", Goal: tc.stored, Approach: tc.approach, Confidence: 0.9})
			s := ix.prepare(Query{Workspace: "w", Goal: tc.query, K: 1})
			if s == nil {
				t.Fatal("nothing to search")
			}
			fit := s.fits(s.ws.docs[0]) && !s.opposes(s.ws.docs[0])
			s.release()
			all := ix.Search(Query{Workspace: "w", Goal: tc.query, K: 1})
			ms := ix.Search(Query{Workspace: "w", Goal: tc.query, K: 1, MinSimilarity: DefaultMinSimilarity})
			t.Logf("%q for %q: fits %v, %s", tc.query, tc.stored, fit, describe(all))
			if fit != tc.fit {
				t.Fatalf("fits = %v, want %v", fit, tc.fit)
			}
			if recalled := len(ms) > 0; recalled != tc.fit {
				t.Fatalf("recalled = %v (%s), want %v", recalled, describe(all), tc.fit)
			}
		})
	}
}

// TestLeadVerb checks the verb read from a goal's head: a light verb gives
// none, a substitution makes its object the source.
func TestLeadVerb(t *testing.T) {
	tests := []struct {
		goal, verb string
		kind       uint8
		from, to   []string // terms with leadFrom, leadTo
	}{
		{"Make the docs build faster", "", actNone, nil, nil},
		{"Getting the tests green again", "", actNone, nil, nil},
		{"Write a CSV parser", canonical("write"), actGeneric, nil, nil},
		{"Restore the database from the backup", canonical("restore"), actSpecific, []string{canonical("backup")}, nil},
		{"Replace moment with date-fns", canonical("convert"), actSpecific, []string{"moment"}, []string{"date", "fns"}},
		{"Swap requests for httpx", canonical("convert"), actSpecific, []string{canonical("requests")}, []string{"httpx"}},
		{"Migrate from MySQL to Postgres", canonical("convert"), actSpecific, []string{"mysql"}, []string{"postgresql"}},
	}
	for _, tc := range tests {
		ld := analyze(tc.goal, maxGoalRunes).lead
		var from, to []string
		for _, o := range ld.objs {
			if o.flags&leadFrom != 0 {
				from = append(from, o.term)
			}
			if o.flags&leadTo != 0 {
				to = append(to, o.term)
			}
		}
		if ld.verb != tc.verb || ld.kind != tc.kind || !slices.Equal(from, tc.from) || !slices.Equal(to, tc.to) {
			t.Errorf("%q: verb %q kind %d from %v to %v, want %q %d %v %v", tc.goal, ld.verb, ld.kind, from, to, tc.verb, tc.kind, tc.from, tc.to)
		}
	}
}

// TestLeadingPhrase checks the words of a goal's leading phrase past its
// verb, and its head (the last of them).
func TestLeadingPhrase(t *testing.T) {
	tests := []struct {
		goal string
		objs []string
		head string
	}{
		{"Add an options flow to the integration", []string{canonical("options"), "flow"}, "flow"},
		{"Make the sidebar collapsible on small screens", []string{"sidebar", canonical("collapsible")}, canonical("collapsible")},
		// A question word after the verb opens its object.
		{"Find which delivery zone contains the point", []string{canonical("delivery"), "zone", canonical("contains"), "point"}, "point"},
		{"Show what changed in the release", []string{canonical("changed")}, canonical("changed")},
		// Elsewhere it ends the phrase.
		{"Add a button which opens the dialog", []string{"button"}, "button"},
		{"Deploy", nil, ""},
	}
	for _, tc := range tests {
		ld := analyze(tc.goal, maxGoalRunes).lead
		var objs []string
		for _, o := range ld.objs {
			if o.flags&leadObject != 0 {
				objs = append(objs, o.term)
			}
		}
		if !slices.Equal(objs, tc.objs) || ld.head != tc.head {
			t.Errorf("%q: leading phrase %v head %q, want %v %q", tc.goal, objs, ld.head, tc.objs, tc.head)
		}
	}
}

// TestSearchWhy checks that a match says which action and object it
// shares, in the stored goal's words.
func TestSearchWhy(t *testing.T) {
	ix := NewIndex()
	for _, s := range []store.Solution{
		{ID: "a", Workspace: "w", Goal: "Migrate the user database from MySQL to PostgreSQL"},
		{ID: "b", Workspace: "w", Goal: "Add rate limiting to the public REST API"},
		{ID: "c", Workspace: "w", Goal: "Cache the results of the expensive pricing function"},
	} {
		ix.Put(s)
	}
	tests := []struct {
		query, id string
		want      Reason
	}{
		{"Migrate the users database from MySQL to Postgres", "a", Reason{Action: "migrate", Object: "user database"}},
		{"Throttle requests to the public REST API", "b", Reason{Action: "rate limiting", Object: "public rest api"}},
		{"Memoize the expensive pricing function", "c", Reason{Action: "cache", Object: "expensive pricing function"}},
	}
	for _, tc := range tests {
		ms := ix.Search(Query{Workspace: "w", Goal: tc.query, K: 1, MinSimilarity: DefaultMinSimilarity})
		if len(ms) == 0 || ms[0].Solution.ID != tc.id {
			t.Errorf("%q: want %s, got %s", tc.query, tc.id, describe(ms))
			continue
		}
		if ms[0].Why != tc.want {
			t.Errorf("%q: Why = %+v, want %+v", tc.query, ms[0].Why, tc.want)
		}
	}
}

// The seventh round's actions and tool categories: cancelling, pausing,
// resuming, scanning, rendering, reindexing and printing are tasks of
// their own; editors, chart and map libraries, batch schedulers and
// workflow managers are kinds of tool.
func TestSeventhRoundActionsAndTools(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("sched", "Schedule the weekly digest email with cron"))
	ix.Put(sol("etl", "Run the nightly import job on the Kubernetes cluster"))
	ix.Put(sol("fmt", "Add a command to the VS Code extension that formats the open buffer"))
	ix.Put(sol("pbs", "Submit the simulation jobs to the PBS cluster"))
	ix.Put(sol("plot", "Draw the sales figures as a line chart with Highcharts"))
	ix.Put(sol("flow", "Retry the failed tasks of the Airflow DAG"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Cancel the scheduled weekly digest email", nil},
		{"Resume the nightly import job on the Kubernetes cluster", nil},
		{"Pause the nightly import job on the Kubernetes cluster", nil},
		{"Add a command to the Emacs extension that formats the open buffer", nil},
		{"Submit the simulation jobs to the Slurm cluster", nil},
		{"Draw the sales figures as a line chart with D3", nil},
		{"Retry the failed tasks of the Prefect flow", nil},
		// The same task in other words still fits.
		{"Schedule the weekly digest email", []string{"sched"}},
		{"Add a command to the vscode extension that formats the open buffer", []string{"fmt"}},
		{"Submit the simulation jobs to the PBS cluster with qsub", []string{"pbs"}},
		{"Draw the sales figures as a line chart", []string{"plot"}},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}

// Moving a project to another tool migrates it, and exporting to a format
// converts to it; renaming is neither, and exporting with no format named
// is another action than converting.
func TestMoveMigratesExportConverts(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("vite", "Migrate the frontend build from webpack to Vite"))
	ix.Put(sol("pdf", "Export the monthly invoices to PDF"))
	ix.Put(sol("arch", "Export the monthly invoices for the accountant"))
	tests := []struct {
		q    string
		want []string
	}{
		{"Move the frontend build from webpack to Vite", []string{"vite"}},
		{"Rename the frontend build of webpack", nil},
		{"Convert the monthly invoices to PDF", []string{"pdf"}},
		{"Convert the monthly invoices to Excel", nil},
		{"Convert the monthly invoices for the accountant", nil},
	}
	for _, tc := range tests {
		if got := recalled(ix, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%q recalled %v, want %v", tc.q, got, tc.want)
		}
	}
}
