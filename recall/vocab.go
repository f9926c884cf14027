package recall

// The vocabulary of software-engineering tasks: words that name the same
// action or thing, and the tools, languages and platforms a task can be
// tied to. It is used on both sides of a comparison: a stored goal and a
// query are analysed by the same tables.
//
// Sources. The groups are synonym sets in the manner of WordNet's synsets
// (one sense per group, its member words), restricted to the sense the
// words have in software work: "throttle" is a group with "rate limit", not
// with "choke". Tool names, their nicknames and acronyms are the ones the
// projects use in their own documentation: PostgreSQL's ("Postgres" is an
// accepted nickname, "pg" its client prefix), Kubernetes' ("K8s"),
// OpenTelemetry's ("OTel"), Node.js' (JavaScript's runtime), Next.js'. The categories follow the
// headings of those documentations (a database, a message broker, a CI
// service, an infrastructure-as-code tool...).
//
// vocab_test.go tests the tables on their own: every group folds its words
// into one term, no word sits in two groups, every tool has a category.

// vocabGroups extend synonymGroups (text.go): the first word of a group is
// its canonical term. Word forms the stemmer folds need not be listed.
var vocabGroups = [][]string{
	// Actions.
	{"ratelimit", "throttle", "ratelimiter", "ratelimiting"},
	{"cache", "memoize", "memoization", "memoise"},
	{"backup", "backups"},
	{"restore", "recover", "recovery"},
	{"consume", "receive", "listen", "subscribe"},
	{"send", "post", "notify", "notification", "publish", "produce", "emit"},
	{"deploy", "deployment", "release", "ship"},
	{"dedupe", "deduplicate", "deduplication"},
	{"paginate", "pagination", "paging"},
	{"encode", "serialize", "serialization", "marshal"},
	{"decode", "deserialize", "deserialization", "unmarshal"},
	{"internationalize", "internationalization", "i18n", "localize", "localization", "l10n"},
	{"reduce", "decrease", "shrink", "minimize", "lower", "cut"},
	{"increase", "raise", "grow"},
	{"schedule", "cron", "crontab", "periodic", "periodically"},
	{"instrument", "instrumentation"},
	{"containerize", "docker", "dockerize", "dockerfile"},
	{"setup", "install", "installation", "provision"},
	// Things.
	{"thumbnail", "thumb", "preview"},
	{"2fa", "mfa", "totp", "otp"},
	{"healthcheck", "healthz", "liveness", "readiness"},
	{"memory", "ram", "rss"},
	{"utility", "helper", "util", "utils", "helpers"},
	{"cli", "commandline"},
	{"signup", "registration"},
	{"client", "browser", "frontend"},
	{"server", "backend"},
	{"flaky", "intermittent", "intermittently", "flakiness"},
	{"replica", "replication"},
	{"endpoint", "route"},
	{"websocket", "ws", "websockets"},
	// Tools: nicknames and acronyms.
	{"postgresql", "postgres", "pg", "psql"},
	{"mongodb", "mongo"},
	{"elasticsearch", "elastic"},
	{"opentelemetry", "otel"},
	{"golang", "go"},
	{"bash", "shell", "sh", "zsh"},
	{"rabbitmq", "amqp", "rmq"},
	{"yaml", "yml"},
	{"excel", "xlsx", "xls"},
	{"beautifulsoup", "bs4"},
	// Acronyms and the names of protocols, as their specifications and
	// the projects' documentation write them.
	{"cors"},
	{"tls", "ssl", "https"},
	{"http2", "h2"},
	{"sse"},
	{"fk"},
	{"utc", "gmt"},
	{"timezone", "timezones", "tz"},
	{"openapi", "swagger"},
	{"ios", "iphone", "ipad"},
	// Words of user interfaces and tests.
	{"captcha", "hcaptcha", "recaptcha"},
	{"hotkey", "shortcut", "keybinding"},
	{"navbar", "nav"},
	{"autocomplete", "autocompletion", "typeahead", "autosuggest"},
	{"mock", "stub", "fake"},
	{"idle", "inactivity", "inactive"},
	{"logout", "signout"},
	{"retry", "resend"},
	{"minute", "min", "mins"},
	{"develop", "dev"},
	// The fifth round's words, each from the documentation that names
	// it: PostgreSQL's (REFRESH MATERIALIZED VIEW rebuilds a
	// materialized view; "matview" is the name its catalog and its
	// mailing lists use), systemd.exec(5) and getrlimit(2) (LimitNOFILE=,
	// RLIMIT_NOFILE: the open files limit, set with ulimit -n), PyTorch's
	// "Automatic Mixed Precision" (torch.amp, autocast, GradScaler), MDN's
	// Content-Security-Policy (CSP), Android's DayNight theme ("night
	// mode"), Sigstore's cosign, Apple's and Android's biometric
	// authentication (Face ID, Touch ID), pytest-xdist, SQL Server's own
	// name and T-SQL, and the glossaries of personal data (PII) and of
	// high availability (failover). To poll is to read again and again.
	{"refresh", "rebuild", "regenerate", "recompute"},
	{"rollback"},
	{"matview"},
	{"csp"},
	{"ota", "fota"},
	{"mixedprecision", "amp", "autocast", "fp16", "bf16", "gradscaler"},
	{"darkmode", "daynight"},
	{"nofile", "ulimit", "limitnofile"},
	{"failover", "ha"},
	{"cosign", "sigstore"},
	{"sign", "signature", "signing"},
	{"redact", "mask", "masking", "anonymize", "anonymise", "scrub"},
	{"pii"},
	{"biometric", "biometrics", "faceid", "touchid"},
	{"secret", "credential", "credentials", "creds"},
	{"parallel", "xdist", "parallelize", "parallelise"},
	{"sqlserver", "mssql", "tsql"},
	{"pytorch", "torch"},
	{"raspberrypi", "rpi"},
	{"firmware", "microcontroller", "mcu", "embedded"},
	{"secretsmanager"},
	{"ner"},
	{"qa"},
	// The sixth round's: PostgreSQL's "Table Partitioning" ("splitting
	// what is logically one large table into smaller physical pieces").
	{"split", "partition", "partitioned", "partitioning", "partitions"},
	// The seventh round's: acronyms, numeronyms and nicknames, each as the
	// documentation of the tool or the specification writes it (an
	// acronym spelled out in full is read as the acronym: vocabPhrases,
	// vocabTriples). Numeronyms as the W3C's glossaries and MDN write
	// them: a11y for accessibility (spelledOut), o11y for observability
	// (with monitoring above). Nicknames of tools as their own commands
	// and prefixes: Neovim's nvim, Home Assistant's hass (its core and
	// its command), WordPress's wp (wp-admin, WP-CLI), Slurm's sbatch,
	// srun, squeue and salloc, InfluxDB's influx, RabbitMQ's rmq,
	// SQLite's sqlite3, GitHub's gh. Formats as their specifications
	// name them: iCalendar (RFC 5545: .ics files, the webcal: scheme),
	// glTF and its binary GLB (Khronos), HLS and its m3u8 playlists (RFC
	// 8216), the Jupyter notebook and its .ipynb file, TeX and LaTeX and
	// their engines (latexmk, pdfLaTeX, XeLaTeX, LuaLaTeX), JPEG and jpg.
	// Signals as signal(7) names them (SIGHUP, kill -HUP). DKIM as RFC
	// 6376 spells it out (DomainKeys Identified Mail). Loudness as
	// FFmpeg's loudnorm filter and EBU R 128 measure it (LUFS).
	{"a11y"},
	{"monitor", "monitoring", "observability", "o11y"},
	{"neovim", "nvim"},
	{"vscode"},
	{"homeassistant", "hass"},
	{"wordpress", "wp"},
	{"icalendar", "ical", "ics", "webcal"},
	{"slurm", "sbatch", "srun", "squeue", "salloc"},
	{"sighup", "hup"},
	{"dkim", "domainkeys"},
	{"latex", "tex", "latexmk", "pdflatex", "xelatex", "lualatex"},
	{"gltf", "glb"},
	{"notebook", "ipynb"},
	{"loudness", "loudnorm", "lufs"},
	{"hls", "m3u8"},
	{"influxdb", "influx"},
	{"sqlite", "sqlite3"},
	{"github", "gh"},
	{"jpeg", "jpg"},
	{"webassembly", "wasm"},
	{"vue", "vuejs"},
	{"react", "reactjs"},
	{"tailwind", "tailwindcss"},
	// Acronyms read from their expansions (vocabPhrases, vocabTriples),
	// as the specifications and the projects write them: LSP (Microsoft's
	// Language Server Protocol), PWA (web.dev's and MDN's progressive web
	// apps), RTL and LTR (the W3C's right-to-left and left-to-right
	// text), POS (point of sale), JIT (just-in-time compilation, as
	// Numba and PyPy describe themselves), CDN (content delivery
	// network), HPC (high-performance computing), ABR (adaptive bitrate
	// streaming), SPA, SSR and SSG (single-page apps, server-side
	// rendering, static site generators), ORM, DSL, JWT (RFC 7519), RBAC,
	// CSRF and XSS (OWASP), E2E tests, ETL, CDC (change data capture),
	// OCR, TTS and STT (text to speech, speech to text; ASR), NLP, BLE
	// (Bluetooth Low Energy), IoT, EHR (electronic health records; EMR),
	// CRM, CMS, LTS (long-term support), VOD, GC (garbage collection).
	{"lsp"}, {"pwa"}, {"rtl"}, {"ltr"}, {"pos"}, {"jit"}, {"cdn"}, {"hpc"},
	{"abr"}, {"spa"}, {"ssr"}, {"ssg"}, {"orm"}, {"dsl"}, {"jwt"}, {"rbac"},
	{"csrf"}, {"xss"}, {"e2e"}, {"etl"}, {"cdc"}, {"ocr"}, {"tts"},
	{"stt", "asr"}, {"nlp"}, {"ble"}, {"iot"}, {"ehr", "emr"}, {"crm"},
	{"cms"}, {"lts"}, {"vod"}, {"gc"},
	// Words of everyday software work that name one thing, each as a
	// reference names it: OpenSSH's ssh and its daemon sshd, POSIX's
	// regular expressions (regex, regexp), RFC 9562's UUIDs ("also known
	// as GUIDs"), WAI-ARIA's dialog role (a modal dialog; a popup window),
	// the user interface (UI, GUI), the virtual machine (VM), machine
	// learning (ML), large language models (LLM), email and mail, junk
	// mail and spam, passwd as Unix names the password, the administrator,
	// NIST's "hardening" of a system (locking it down), geospatial data
	// (geo, GIS: a geographic information system).
	{"ssh", "sshd", "openssh"},
	{"regex", "regexp", "regexes"},
	{"uuid", "guid", "uuids", "guids"},
	{"dialog", "modal", "popup"},
	{"ui", "gui"},
	{"vm"}, {"ml"}, {"llm"},
	{"email", "mail", "emails", "mails"},
	{"spam", "junk"},
	{"password", "passwd"},
	{"admin", "administrator"},
	{"harden", "hardening"},
	{"geospatial", "geo", "gis", "geographic"},
	// And their nicknames and acronyms: CVE (cve.org: "Common
	// Vulnerabilities and Exposures", one record per publicly disclosed
	// vulnerability), WDT (the watchdog timer of the microcontrollers'
	// manuals), TTL (time to live), DLQ (a dead-letter queue, as SQS and
	// RabbitMQ name it), feature toggles and feature flags (one thing, as
	// Martin Fowler's "Feature Toggles (aka Feature Flags)" says), bq
	// (BigQuery's command), RN (React Native), CRA (Create React App),
	// GHA (GitHub Actions), HF (Hugging Face), md (Markdown's extension),
	// prod (production), btn (a button's class prefix), bulk and batch,
	// microSD and SD cards, PWM (pulse-width modulation).
	{"vulnerability", "vulnerabilities", "vuln", "vulns", "cve", "cves"},
	{"watchdog", "wdt"},
	{"ttl"}, {"dlq"}, {"featureflag"}, {"pwm"}, {"cra"},
	{"bigquery", "bq"},
	{"reactnative", "rn"},
	{"githubactions", "gha"},
	{"huggingface", "hf"},
	{"markdown", "md"},
	{"production", "prod"},
	{"button", "btn"},
	{"batch", "bulk"},
	{"sd", "microsd", "sdcard"},
}

// spelledOut are words read as the acronym or numeronym that stands for
// them, in place of their stem, where the stem would join other words:
// "accessibility" stems to "access" (access tokens, access control).
var spelledOut = map[string]string{
	"accessibility": "a11y",
	// The operating system, not a window of the user interface: both
	// stem to "window".
	"windows": "windows",
}

// vocabPhrases extend synonymPhrases (text.go): two words, by their stems,
// read as one term.
var vocabPhrases = [][3]string{
	{"deal", "with", "handle"},
	{"turn", "off", "disable"},
	{"switch", "off", "disable"},
	{"turn", "on", "enable"},
	{"switch", "on", "enable"},
	{"rate", "limit", "ratelimit"},
	{"rate", "limiting", "ratelimit"},
	{"rate", "limiter", "ratelimit"},
	{"back", "up", "backup"},
	{"set", "up", "setup"},
	{"log", "in", "authentication"},
	{"sign", "on", "authentication"},
	{"two", "factor", "2fa"},
	{"2", "fa", "2fa"},
	{"health", "check", "healthcheck"},
	{"command", "line", "cli"},
	{"node", "js", "javascript"},
	{"golangci", "lint", "golangcilint"},
	{"beautiful", "soup", "beautifulsoup"},
	{"cross", "origin", "cors"},
	{"http", "2", "http2"},
	{"server", "sent", "sse"},
	{"foreign", "key", "fk"},
	{"time", "zone", "timezone"},
	{"keyboard", "shortcut", "hotkey"},
	{"navigation", "bar", "navbar"},
	{"log", "out", "logout"},
	{"sign", "out", "logout"},
	{"re", "send", "retry"},
	{"azure", "blob", "azureblob"},
	{"next", "js", "nextjs"},
	{"vue", "js", "vue"},
	{"react", "native", "reactnative"},
	{"github", "actions", "githubactions"},
	{"github", "action", "githubactions"},
	{"gitlab", "ci", "gitlabci"},
	{"google", "cloud", "gcp"},
	{"protocol", "buffers", "protobuf"},
	{"protocol", "buffer", "protobuf"},
	{"lazy", "load", "lazyload"},
	{"defer", "loading", "lazyload"},
	{"sign", "up", "signup"},
	{"client", "side", "client"},
	{"server", "side", "server"},
	{"full", "text", "fulltext"},
	{"new", "relic", "newrelic"},
	{"dark", "mode", "darkmode"},
	{"dark", "theme", "darkmode"},
	{"night", "mode", "darkmode"},
	{"night", "theme", "darkmode"},
	{"materialized", "view", "matview"},
	{"materialised", "view", "matview"},
	{"roll", "back", "rollback"},
	{"content", "security", "csp"},
	{"the", "air", "ota"},
	{"mixed", "precision", "mixedprecision"},
	{"half", "precision", "mixedprecision"},
	{"file", "limit", "nofile"},
	{"file", "descriptor", "nofile"},
	{"high", "availability", "failover"},
	{"personal", "data", "pii"},
	{"personal", "information", "pii"},
	{"face", "id", "biometric"},
	{"touch", "id", "biometric"},
	{"schema", "changes", "migration"},
	{"sql", "server", "sqlserver"},
	{"raspberry", "pi", "raspberrypi"},
	{"gh", "action", "githubactions"},
	{"github", "workflow", "githubactions"},
	{"docker", "compose", "dockercompose"},
	{"compose", "file", "dockercompose"},
	{"compose", "yml", "dockercompose"},
	{"named", "entity", "ner"},
	{"question", "answering", "qa"},
	{"sentiment", "analysis", "sentiment"},
	{"refresh", "token", "refreshtoken"},
	{"secrets", "manager", "secretsmanager"},
	{"key", "vault", "keyvault"},
	{"tensorflow", "lite", "tflite"},
	// The seventh round's (see the acronyms of vocabGroups).
	{"language", "server", "lsp"},
	{"progressive", "web", "pwa"},
	{"content", "delivery", "cdn"},
	{"adaptive", "bitrate", "abr"},
	{"adaptive", "streaming", "abr"},
	{"single", "page", "spa"},
	{"object", "relational", "orm"},
	{"domain", "specific", "dsl"},
	{"garbage", "collection", "gc"},
	{"garbage", "collector", "gc"},
	{"content", "management", "cms"},
	{"vs", "code", "vscode"},
	{"home", "assistant", "homeassistant"},
	{"chart", "js", "chartjs"},
	{"d3", "js", "d3"},
	{"aws", "batch", "awsbatch"},
	{"microsoft", "teams", "msteams"},
	{"ms", "teams", "msteams"},
	{"regular", "expression", "regex"},
	{"pop", "up", "popup"},
	{"user", "interface", "ui"},
	{"virtual", "machine", "vm"},
	{"machine", "learning", "ml"},
	{"lock", "down", "harden"},
	{"continuous", "integration", "ci"},
	{"dead", "letter", "dlq"},
	{"pulse", "width", "pwm"},
	{"feature", "toggle", "featureflag"},
	{"feature", "flag", "featureflag"},
	{"hugging", "face", "huggingface"},
	{"rss", "feed", "rssfeed"},
	{"atom", "feed", "atomfeed"},
}

// vocabTriples are three words, by their stems, read as one term: the
// expansions of acronyms whose middle word is a stopword ("point of
// sale") or that hold a two-word phrase of their own ("server-side
// rendering"). They are matched before vocabPhrases.
var vocabTriples = [][4]string{
	{"right", "to", "left", "rtl"},
	{"left", "to", "right", "ltr"},
	{"point", "of", "sale", "pos"},
	{"just", "in", "time", "jit"},
	{"high", "performance", "computing", "hpc"},
	{"http", "live", "streaming", "hls"},
	{"server", "side", "rendering", "ssr"},
	{"static", "site", "generator", "ssg"},
	{"json", "web", "token", "jwt"},
	{"role", "based", "access", "rbac"},
	{"cross", "site", "request", "csrf"},
	{"cross", "site", "scripting", "xss"},
	{"end", "to", "end", "e2e"},
	{"extract", "transform", "load", "etl"},
	{"change", "data", "capture", "cdc"},
	{"optical", "character", "recognition", "ocr"},
	{"text", "to", "speech", "tts"},
	{"speech", "to", "text", "stt"},
	{"natural", "language", "processing", "nlp"},
	{"bluetooth", "low", "energy", "ble"},
	{"internet", "of", "things", "iot"},
	{"electronic", "health", "records", "ehr"},
	{"customer", "relationship", "management", "crm"},
	{"long", "term", "support", "lts"},
	{"video", "on", "demand", "vod"},
	{"visual", "studio", "code", "vscode"},
	{"domainkeys", "identified", "mail", "dkim"},
	{"time", "to", "live", "ttl"},
	{"create", "react", "app", "cra"},
	{"large", "language", "model", "llm"},
	{"large", "language", "models", "llm"},
}

// Kinds of the action that leads a goal.
const (
	actNone     uint8 = iota // no known action: the goal starts with a noun or an unlisted verb
	actGeneric               // something is made: add, create, write, implement, build, set up...
	actSpecific              // a named action: parse, migrate, restore, cache...
)

// genericActions say that something is made or put in place; what is made
// tells the task ("write a CSV parser", "add rate limiting"). Canonical
// terms of their groups.
var genericActions = []string{
	"create", "write", "implement", "build", "develop", "introduce", "setup",
	"support", "configure", "enable", "design", "code", "integrate",
	"instrument",
}

// specificActions name what a task does. Two goals led by different ones
// are different tasks (backup and restore, parse and update, cache and
// delete); a goal led by one matches a goal led by a generic action only
// when the generic goal names it ("enable gzip compression", "compress
// the responses"). Verbs in neither list lead no action: "make", "let",
// "get" say too little.
var specificActions = []string{
	"fix", "delete", "update", "parse", "read", "fetch", "upload",
	"convert", "cache", "backup", "restore", "deploy", "refactor", "optimize",
	"reduce", "increase", "rename", "document", "translate", "validate",
	"schedule", "paginate", "encrypt", "decrypt", "compress", "extract",
	"encode", "decode", "sort", "merge", "split", "handle", "monitor",
	"profile", "benchmark", "lint", "format", "upgrade", "downgrade", "send",
	"consume", "stream", "retry", "ratelimit", "dedupe", "find", "count",
	"resize", "rotate", "push", "promote", "explain", "run", "test",
	"debounce", "lazyload", "preload", "internationalize", "containerize",
	"disable", "export", "unsubscribe",
	"install", "uninstall", "copy", "list", "clear", "reset", "revert",
	"rollback", "center", "align", "style", "mock", "index",
	"revoke", "grant", "hash", "sign", "block", "unblock", "redirect",
	"expire", "invalidate", "archive", "approve", "refund",
	"charge", "crawl", "sync", "replay", "seed", "audit", "refresh", "redact", "apply",
	"stop",
	// The seventh round's: actions with a sense of their own, each the
	// other task of a stored one that names the thing it acts on
	// ("cancel the scheduled job", "render the scene", "reindex the
	// catalog", "resume the workflow", "scan the barcodes").
	"cancel", "pause", "resume", "scan", "render", "reindex", "print",
}

// lightVerbs lead no action of their own, whatever their group: "make the
// build faster" optimises, "get the tests green" fixes. Words as written.
var lightVerbs = map[string]bool{
	"make": true, "makes": true, "making": true, "get": true, "gets": true,
	"getting": true, "let": true, "keep": true, "have": true, "do": true,
	"turn": true, "bring": true, "take": true, "put": true,
}

// substitutionVerbs put one thing in place of another, the object first:
// "replace moment with date-fns", "swap requests for httpx" go from the
// object to the "with", "by" or "for" phrase. Words as written.
var substitutionVerbs = map[string]bool{
	"replace": true, "replaces": true, "replacing": true, "swap": true,
	"swaps": true, "swapping": true,
}

// Categories of tools: a task tied to one tool of a category is another
// task with another tool of the same category.
const (
	catLanguage uint32 = 1 << iota
	catFramework
	catDatabase
	catBroker
	catCI
	catIaC
	catCloud
	catObservability
	catIdentity
	catCodeHost
	catBundler
	catTestRunner
	catWebServer
	catOS
	catOrchestrator
	catSearch
	catSide // client or server
	catRuntime
	catStorage  // object storage
	catService  // a hosted service with an API of its own
	catHash     // password hashing
	catLinter   // linters and formatters
	catScraper  // scraping and browser automation
	catFormat   // data and document formats
	catBoard    // microcontrollers and single-board computers
	catML       // machine learning frameworks
	catSecrets  // secret stores
	catProcess  // what runs a service: a service manager or a container engine
	catEditor   // code editors and IDEs, which plugins and extensions extend
	catViz      // chart and map libraries
	catBatch    // batch schedulers of clusters and their cloud services
	catWorkflow // workflow managers
)

// toolTable lists tools by their canonical term (after vocabGroups and
// vocabPhrases), with their categories and, for a framework, a runtime, a
// linter or a scraper of one language, the language it implies when a
// goal names none (impliedTools in parts.go lists the other implications).
var toolTable = []struct {
	name  string
	cats  uint32
	lang  string
	shown string
}{
	{"python", catLanguage, "", "Python"},
	{"rust", catLanguage, "", "Rust"},
	{"golang", catLanguage, "", "Go"},
	{"java", catLanguage, "", "Java"},
	{"kotlin", catLanguage, "", "Kotlin"},
	{"scala", catLanguage, "", "Scala"},
	{"javascript", catLanguage, "", "JavaScript"},
	{"typescript", catLanguage, "", "TypeScript"},
	{"deno", catLanguage, "", "Deno"},
	{"ruby", catLanguage, "", "Ruby"},
	{"php", catLanguage, "", "PHP"},
	{"swift", catLanguage, "", "Swift"},
	{"elixir", catLanguage, "", "Elixir"},
	{"haskell", catLanguage, "", "Haskell"},
	{"perl", catLanguage, "", "Perl"},
	{"lua", catLanguage, "", "Lua"},
	{"dart", catLanguage, "", "Dart"},
	{"bash", catLanguage, "", "shell"},
	{"powershell", catLanguage, "", "PowerShell"},
	{"react", catFramework, "javascript", "React"},
	{"reactnative", catFramework, "javascript", "React Native"},
	{"vue", catFramework, "javascript", "Vue"},
	{"angular", catFramework, "typescript", "Angular"},
	{"svelte", catFramework, "javascript", "Svelte"},
	{"nextjs", catFramework, "javascript", "Next.js"},
	{"express", catFramework, "javascript", "Express"},
	{"django", catFramework, "python", "Django"},
	{"flask", catFramework, "python", "Flask"},
	{"fastapi", catFramework, "python", "FastAPI"},
	{"rails", catFramework, "ruby", "Rails"},
	{"spring", catFramework, "java", "Spring"},
	{"laravel", catFramework, "php", "Laravel"},
	{"flutter", catFramework, "dart", "Flutter"},
	{"bun", catRuntime, "javascript", "Bun"},
	{"postgresql", catDatabase, "", "PostgreSQL"},
	{"mysql", catDatabase, "", "MySQL"},
	{"mariadb", catDatabase, "", "MariaDB"},
	{"sqlite", catDatabase, "", "SQLite"},
	{"mongodb", catDatabase, "", "MongoDB"},
	{"redis", catDatabase | catBroker, "", "Redis"},
	{"valkey", catDatabase | catBroker, "", "Valkey"},
	{"memcached", catDatabase, "", "Memcached"},
	{"cassandra", catDatabase, "", "Cassandra"},
	{"dynamodb", catDatabase, "", "DynamoDB"},
	{"clickhouse", catDatabase, "", "ClickHouse"},
	{"elasticsearch", catSearch | catDatabase, "", "Elasticsearch"},
	{"opensearch", catSearch | catDatabase, "", "OpenSearch"},
	{"meilisearch", catSearch, "", "Meilisearch"},
	{"solr", catSearch, "", "Solr"},
	{"kafka", catBroker, "", "Kafka"},
	{"rabbitmq", catBroker, "", "RabbitMQ"},
	{"sqs", catBroker, "", "SQS"},
	{"nats", catBroker, "", "NATS"},
	{"githubactions", catCI, "", "GitHub Actions"},
	{"gitlabci", catCI, "", "GitLab CI"},
	{"jenkins", catCI, "", "Jenkins"},
	{"circleci", catCI, "", "CircleCI"},
	{"travis", catCI, "", "Travis CI"},
	{"terraform", catIaC, "", "Terraform"},
	{"cloudformation", catIaC, "", "CloudFormation"},
	{"pulumi", catIaC, "", "Pulumi"},
	{"ansible", catIaC, "", "Ansible"},
	{"aws", catCloud, "", "AWS"},
	{"gcp", catCloud, "", "Google Cloud"},
	{"azure", catCloud, "", "Azure"},
	{"prometheus", catObservability, "", "Prometheus"},
	{"datadog", catObservability, "", "Datadog"},
	{"opentelemetry", catObservability, "", "OpenTelemetry"},
	{"newrelic", catObservability, "", "New Relic"},
	{"sentry", catObservability, "", "Sentry"},
	{"google", catIdentity, "", "Google"},
	{"github", catIdentity | catCodeHost | catService, "", "GitHub"},
	{"gitlab", catCodeHost | catService, "", "GitLab"},
	{"bitbucket", catCodeHost | catService, "", "Bitbucket"},
	{"stripe", catService, "", "Stripe"},
	{"paypal", catService, "", "PayPal"},
	{"braintree", catService, "", "Braintree"},
	{"shopify", catService, "", "Shopify"},
	{"slack", catService, "", "Slack"},
	{"discord", catService, "", "Discord"},
	{"twilio", catService, "", "Twilio"},
	{"sendgrid", catService, "", "SendGrid"},
	{"mailgun", catService, "", "Mailgun"},
	{"s3", catStorage, "", "S3"},
	{"gcs", catStorage, "", "GCS"},
	{"azureblob", catStorage, "", "Azure Blob Storage"},
	{"minio", catStorage, "", "MinIO"},
	{"bcrypt", catHash, "", "bcrypt"},
	{"argon2", catHash, "", "Argon2"},
	{"scrypt", catHash, "", "scrypt"},
	{"pbkdf2", catHash, "", "PBKDF2"},
	{"eslint", catLinter, "javascript", "ESLint"},
	{"prettier", catLinter, "javascript", "Prettier"},
	{"stylelint", catLinter, "javascript", "Stylelint"},
	{"black", catLinter, "python", "Black"},
	{"flake8", catLinter, "python", "Flake8"},
	{"ruff", catLinter, "python", "Ruff"},
	{"pylint", catLinter, "python", "Pylint"},
	{"rubocop", catLinter, "ruby", "RuboCop"},
	{"clippy", catLinter, "rust", "Clippy"},
	{"rustfmt", catLinter, "rust", "rustfmt"},
	{"gofmt", catLinter, "golang", "gofmt"},
	{"golangcilint", catLinter, "golang", "golangci-lint"},
	{"beautifulsoup", catScraper, "python", "BeautifulSoup"},
	{"scrapy", catScraper, "python", "Scrapy"},
	{"puppeteer", catScraper, "javascript", "Puppeteer"},
	{"cheerio", catScraper, "javascript", "Cheerio"},
	{"playwright", catScraper, "", "Playwright"},
	{"selenium", catScraper, "", "Selenium"},
	{"json", catFormat, "", "JSON"},
	{"xml", catFormat, "", "XML"},
	{"yaml", catFormat, "", "YAML"},
	{"toml", catFormat, "", "TOML"},
	{"csv", catFormat, "", "CSV"},
	{"pdf", catFormat, "", "PDF"},
	{"excel", catFormat, "", "Excel"},
	{"parquet", catFormat, "", "Parquet"},
	{"protobuf", catFormat, "", "Protocol Buffers"},
	{"apple", catIdentity, "", "Apple"},
	{"microsoft", catIdentity, "", "Microsoft"},
	{"facebook", catIdentity, "", "Facebook"},
	{"okta", catIdentity, "", "Okta"},
	{"auth0", catIdentity, "", "Auth0"},
	{"webpack", catBundler, "", "webpack"},
	{"vite", catBundler, "", "Vite"},
	{"rollup", catBundler, "", "Rollup"},
	{"esbuild", catBundler, "", "esbuild"},
	{"parcel", catBundler, "", "Parcel"},
	{"jest", catTestRunner, "", "Jest"},
	{"vitest", catTestRunner, "", "Vitest"},
	{"mocha", catTestRunner, "", "Mocha"},
	{"pytest", catTestRunner, "", "pytest"},
	{"junit", catTestRunner, "", "JUnit"},
	{"rspec", catTestRunner, "", "RSpec"},
	{"nginx", catWebServer, "", "nginx"},
	{"apache", catWebServer, "", "Apache"},
	{"caddy", catWebServer, "", "Caddy"},
	{"traefik", catWebServer, "", "Traefik"},
	{"linux", catOS, "", "Linux"},
	{"windows", catOS, "", "Windows"},
	{"macos", catOS, "", "macOS"},
	{"android", catOS, "", "Android"},
	{"ios", catOS, "", "iOS"},
	{"client", catSide, "", "client"},
	{"server", catSide, "", "server"},
	{"kubernetes", catOrchestrator, "", "Kubernetes"},
	{"nomad", catOrchestrator, "", "Nomad"},
	{"ecs", catOrchestrator, "", "ECS"},
	{"dockercompose", catOrchestrator, "", "Docker Compose"},
	// The fifth round's categories and tools, named as their projects'
	// documentation names them: databases (Microsoft SQL Server),
	// microcontrollers and boards (Espressif's ESP32 and ESP8266,
	// ST's STM32, Nordic's nRF52, Arduino, Raspberry Pi and its Pico),
	// machine learning frameworks (PyTorch, TensorFlow, Keras, JAX) and
	// model formats (ONNX, TensorFlow Lite, GGUF, safetensors), secret
	// stores (HashiCorp Vault, AWS Secrets Manager, Azure Key Vault,
	// Doppler), what runs a service (systemd, Docker, supervisord, PM2),
	// logs (Grafana Loki) and task queues (Celery).
	{"sqlserver", catDatabase, "", "SQL Server"},
	{"esp32", catBoard, "", "ESP32"},
	{"esp8266", catBoard, "", "ESP8266"},
	{"stm32", catBoard, "", "STM32"},
	{"nrf52", catBoard, "", "nRF52"},
	{"arduino", catBoard, "", "Arduino"},
	{"raspberrypi", catBoard, "", "Raspberry Pi"},
	{"firmware", catSide, "", "firmware"},
	{"pytorch", catML, "python", "PyTorch"},
	{"tensorflow", catML, "python", "TensorFlow"},
	{"keras", catML, "python", "Keras"},
	{"jax", catML, "python", "JAX"},
	{"onnx", catFormat, "", "ONNX"},
	{"tflite", catFormat, "", "TensorFlow Lite"},
	{"gguf", catFormat, "", "GGUF"},
	{"safetensors", catFormat, "", "safetensors"},
	{"vault", catSecrets, "", "Vault"},
	{"secretsmanager", catSecrets, "", "Secrets Manager"},
	{"keyvault", catSecrets, "", "Key Vault"},
	{"doppler", catSecrets, "", "Doppler"},
	{"systemd", catProcess, "", "systemd"},
	{"containerize", catProcess, "", "Docker"},
	{"supervisord", catProcess, "", "supervisord"},
	{"pm2", catProcess, "", "PM2"},
	{"loki", catObservability, "", "Loki"},
	{"celery", catFramework, "python", "Celery"},
	// The seventh round's, named as their projects' documentation names
	// them: code editors and IDEs (Visual Studio Code, Neovim, Vim, Emacs,
	// JetBrains' IntelliJ, Sublime Text, Eclipse, Zed); platforms that
	// plugins and integrations are written for (WordPress, Drupal and
	// Joomla in PHP, Home Assistant in Python, openHAB in Java,
	// Homebridge in JavaScript); chart and map libraries (D3,
	// Chart.js, Highcharts, Apache ECharts, Recharts, Matplotlib,
	// Seaborn, Bokeh, Leaflet, Mapbox, OpenLayers, CesiumJS); the batch
	// schedulers that Nextflow's and Snakemake's executors name (Slurm,
	// PBS, LSF, HTCondor, AWS Batch); workflow managers (Snakemake,
	// Nextflow, Airflow, Prefect, Dagster, Luigi); configuration
	// management (SaltStack; Puppet's name stems as Puppeteer's does, and
	// Plotly's as "plot", so they are left to the names of thing.go);
	// time-series, graph and
	// document databases and PostgreSQL's extensions (InfluxDB,
	// TimescaleDB, PostGIS, Neo4j, CouchDB, CockroachDB, Firestore);
	// chat and commerce services (Telegram, Mattermost, WhatsApp, Zulip,
	// Mastodon, Microsoft Teams, WooCommerce, Magento); formats of
	// calendars, 3D scenes and images (iCalendar, glTF, FBX, PNG, JPEG,
	// WebP, SVG, GIF) and feeds (an RSS or Atom feed: RSS alone is the
	// resident memory of the groups above).
	{"vscode", catEditor, "", "VS Code"},
	{"neovim", catEditor, "", "Neovim"},
	{"vim", catEditor, "", "Vim"},
	{"emacs", catEditor, "", "Emacs"},
	{"jetbrains", catEditor, "", "JetBrains"},
	{"intellij", catEditor, "", "IntelliJ"},
	{"sublime", catEditor, "", "Sublime Text"},
	{"eclipse", catEditor, "", "Eclipse"},
	{"zed", catEditor, "", "Zed"},
	{"wordpress", catFramework, "php", "WordPress"},
	{"drupal", catFramework, "php", "Drupal"},
	{"joomla", catFramework, "php", "Joomla"},
	{"homeassistant", catFramework, "python", "Home Assistant"},
	{"openhab", catFramework, "java", "openHAB"},
	{"homebridge", catFramework, "javascript", "Homebridge"},
	{"d3", catViz, "javascript", "D3"},
	{"chartjs", catViz, "javascript", "Chart.js"},
	{"highcharts", catViz, "javascript", "Highcharts"},
	{"echarts", catViz, "javascript", "ECharts"},
	{"recharts", catViz, "javascript", "Recharts"},
	{"matplotlib", catViz, "python", "Matplotlib"},
	{"seaborn", catViz, "python", "Seaborn"},
	{"bokeh", catViz, "python", "Bokeh"},
	{"leaflet", catViz, "javascript", "Leaflet"},
	{"mapbox", catViz, "", "Mapbox"},
	{"openlayers", catViz, "javascript", "OpenLayers"},
	{"cesium", catViz, "javascript", "Cesium"},
	{"slurm", catBatch, "", "Slurm"},
	{"pbs", catBatch, "", "PBS"},
	{"lsf", catBatch, "", "LSF"},
	{"htcondor", catBatch, "", "HTCondor"},
	{"awsbatch", catBatch, "", "AWS Batch"},
	{"snakemake", catWorkflow, "python", "Snakemake"},
	{"nextflow", catWorkflow, "", "Nextflow"},
	{"airflow", catWorkflow, "python", "Airflow"},
	{"prefect", catWorkflow, "python", "Prefect"},
	{"dagster", catWorkflow, "python", "Dagster"},
	{"luigi", catWorkflow, "python", "Luigi"},
	{"saltstack", catIaC, "", "SaltStack"},
	{"influxdb", catDatabase, "", "InfluxDB"},
	{"timescaledb", catDatabase, "", "TimescaleDB"},
	{"postgis", catDatabase, "", "PostGIS"},
	{"neo4j", catDatabase, "", "Neo4j"},
	{"couchdb", catDatabase, "", "CouchDB"},
	{"cockroachdb", catDatabase, "", "CockroachDB"},
	{"firestore", catDatabase, "", "Firestore"},
	{"telegram", catService, "", "Telegram"},
	{"mattermost", catService, "", "Mattermost"},
	{"whatsapp", catService, "", "WhatsApp"},
	{"zulip", catService, "", "Zulip"},
	{"mastodon", catService, "", "Mastodon"},
	{"msteams", catService, "", "Microsoft Teams"},
	{"woocommerce", catService, "", "WooCommerce"},
	{"magento", catService, "", "Magento"},
	{"icalendar", catFormat, "", "iCalendar"},
	{"rssfeed", catFormat, "", "RSS feed"},
	{"atomfeed", catFormat, "", "Atom feed"},
	{"gltf", catFormat, "", "glTF"},
	{"fbx", catFormat, "", "FBX"},
	{"png", catFormat, "", "PNG"},
	{"jpeg", catFormat, "", "JPEG"},
	{"webp", catFormat, "", "WebP"},
	{"svg", catFormat, "", "SVG"},
	{"gif", catFormat, "", "GIF"},
}

var (
	actionKinds = map[string]uint8{} // canonical term -> actGeneric or actSpecific
	toolIndex   = map[string]uint8{} // canonical term -> index in toolTable
)

// initVocab fills actionKinds and toolIndex; text.go's init calls it once
// the synonyms are known.
func initVocab() {
	repairVerb = canonical("fix")
	exportTerm, convertTerm = canonical("export"), canonical("convert")
	for _, w := range []string{"convert", "translate"} {
		conversionVerbs[canonical(w)] = true
	}
	for _, w := range genericActions {
		actionKinds[canonical(w)] = actGeneric
	}
	for _, w := range specificActions {
		t := canonical(w)
		if actionKinds[t] == actGeneric {
			continue // a group of both: "install" sits with "set up"
		}
		actionKinds[t] = actSpecific
	}
	if len(toolTable) > 255 {
		panic("recall: more than 255 tools")
	}
	for i, t := range toolTable {
		toolIndex[canonical(t.name)] = uint8(i)
		wholeWords[t.name] = true
	}
	for _, g := range append(synonymGroups[:len(synonymGroups):len(synonymGroups)], vocabGroups...) {
		for _, w := range g {
			wholeWords[w] = true
		}
	}
	for _, w := range camelNames {
		wholeWords[w] = true
	}
	initThing()
	initWordNet()
}

// camelNames are names written in camel case that are one word, besides
// the tools and the groups: "GraphQL", "WebAssembly".
var camelNames = []string{
	"graphql", "webassembly", "openapi", "oauth", "websocket", "javascript",
	"typescript", "github", "gitlab", "postgresql", "mysql", "mongodb",
	"rabbitmq", "opentelemetry", "cloudformation", "fastapi", "dynamodb",
	"clickhouse", "opensearch", "circleci", "nodejs", "macos", "ios",
	"newrelic", "mariadb", "sqlite", "powershell", "devops", "elasticsearch",
	"ratelimit", "ratelimiter", "dockerfile", "pytest", "vitest", "esbuild",
}

// canonical returns the index term of one word.
func canonical(w string) string {
	t := stemWord(w)
	if c, ok := synonym(t); ok {
		return c
	}
	return t
}
