// Package store defines scarproxy's two memories: incidents (failures),
// solutions (solved tasks) and learned fixes (what ended a repeated
// failure), and the token usage of the answers (usage.go). It owns their
// types, the [Store] interface every backend implements, the errors its
// methods return and the incident types the proxy records; it stores
// nothing itself.
//
// # Backends
//
// Two packages implement [Store]: store/bolt, one embedded bbolt file in
// the data directory (the default), and store/postgres, a PostgreSQL
// database shared by the replicas of a team gateway. Both pass one
// conformance suite, store/storetest. What they do alike (validation, text
// cleaning, limits) lives in store/internal.
//
// # Tenancy
//
// Incidents, fixes and usage records belong to a (workspace, project)
// pair and solutions to a workspace (with an optional project). Every read names its tenant
// and is answered from an index of that tenant alone: no read scans other
// tenants.
//
// # Text
//
// Text fields accept any string, so any JSON string a client sends can be
// stored. PostgreSQL's text cannot hold U+0000 nor bytes that are not
// UTF-8, so both backends store each U+0000, and each run of bytes that is
// not UTF-8, as U+FFFD: a record reads back the same from either. Names
// given to reads and deletes (workspace, project, session, id) are cleaned
// the same way, so a record is found by the name it was stored under.
//
// # Imports
//
// This package imports the standard library and store/internal/stored
// alone, so that a package that needs only the types (guard, recall) links
// no database driver. It must not import bbolt, pgx, Echo nor any other
// scarproxy package: only store/bolt imports bbolt, only store/postgres
// imports pgx.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors returned by [Store] methods. Match them with errors.Is.
var (
	// ErrNotFound is returned when the named record does not exist in the
	// tenant that was asked.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid is returned when a record misses a required field
	// (workspace, project for incidents, goal for solutions, key and tool
	// for fixes, workspace and project for usage) or holds a value out of
	// range (a negative count).
	ErrInvalid = errors.New("store: invalid record")
)

// Incident types recorded by the proxy. Clients of the memory API may use
// other types; these are the ones the proxy itself writes.
const (
	TypeHTTPError   = "http_error"           // a non-2xx answer from the provider
	TypeTimeout     = "timeout"              // no answer (or no next chunk) in time
	TypeUnreachable = "upstream_unreachable" // the provider could not be reached
	TypeStreamError = "stream_error"         // an error event or a truncated SSE stream
	TypeToolError   = "tool_error"           // a role:"tool" message that says the tool failed
	// TypeLoop is a loop the proxy detected in a conversation (not a
	// failure of its own: the guard does not count it). Its Code is the
	// level reached ("guard", "stop", "hard-stop") or "broken" when the
	// agent left the loop; its Message names the kind and the calls.
	TypeLoop = "loop"
)

// Incident is one failure the proxy saw or was told about.
type Incident struct {
	ID          string    `json:"id"` // assigned by the store when empty; sorts by time
	Time        time.Time `json:"time"`
	Workspace   string    `json:"workspace"`
	Project     string    `json:"project"`
	Session     string    `json:"session,omitempty"`
	Agent       string    `json:"agent,omitempty"`
	Provider    string    `json:"provider,omitempty"`
	Model       string    `json:"model,omitempty"`
	Type        string    `json:"type"`
	StatusCode  int       `json:"status_code,omitempty"`
	Code        string    `json:"code,omitempty"` // optional error code, e.g. Node's error.code "ECONNRESET"
	Message     string    `json:"message"`
	Fingerprint string    `json:"fingerprint,omitempty"`
}

// MaxLimit is the most records one read returns: backends cap the Limit of
// IncidentQuery, IncidentFilter and FixQuery, and the limit of
// SolutionChanges, at it.
const MaxLimit = 10000

// IncidentQuery selects incidents of one tenant, newest first.
type IncidentQuery struct {
	Workspace string // required
	Project   string // required
	Session   string // when set, only incidents of this session
	// Since, when non-zero, drops incidents older than it (Time < Since).
	Since time.Time
	// Limit caps the number returned; 0 means 100. Backends cap it at MaxLimit.
	Limit int
}

// Solution sources.
const (
	SourceAPI  = "api"  // stored by a person or a tool through the memory API or CLI
	SourceAuto = "auto" // captured by the proxy from a finished conversation
)

// Solution is a solved task: what was asked, how it was solved, how it ended.
type Solution struct {
	ID         string    `json:"id"` // assigned by the store when new
	Workspace  string    `json:"workspace"`
	Project    string    `json:"project,omitempty"`
	Key        string    `json:"key"` // dedupe key, unique per workspace (see recall.GoalKey)
	Goal       string    `json:"goal"`
	Approach   string    `json:"approach"`
	Outcome    string    `json:"outcome"`
	Confidence float64   `json:"confidence"` // in [0,1]
	Source     string    `json:"source"`     // SourceAPI or SourceAuto
	Verified   bool      `json:"verified"`
	Wrong      *Wrong    `json:"wrong,omitempty"` // set when a person marked it wrong: kept, never recalled
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	// Embedding is the vector of Goal made by an embedding model, or nil.
	// Only SetSolutionEmbedding sets it: PutSolution ignores it, keeps the
	// stored one while the goal stays the same and drops it when the goal
	// changes. It is not part of the memory API's JSON.
	Embedding *Embedding `json:"-"`
}

// MaxEmbeddingDims is the most dimensions a stored embedding has.
const MaxEmbeddingDims = 16384

// Embedding is a solution goal's vector and the model that made it.
type Embedding struct {
	Model  string    // the embedding model's name, as configured
	Vector []float32 // 1 to MaxEmbeddingDims finite values
}

// Wrong is a person's verdict that a memory (a learned fix or a solution)
// is wrong. A marked memory is kept, for audit, and listed with its mark,
// but never shown to an agent: recall skips a marked solution, the guard
// and fix search a marked fix. Storing the same memory again keeps the
// mark while what it judged is unchanged (a fix's Call, a solution's
// Approach) and drops it when a new fix or approach replaces it.
type Wrong struct {
	At   time.Time `json:"at"`             // when it was marked
	Note string    `json:"note,omitempty"` // why, in the marker's words (redacted, capped)
}

// SolutionChange is one entry of the solution change feed that keeps each
// replica's in-memory recall index current.
type SolutionChange struct {
	Seq      int64
	Deleted  bool
	Solution Solution // for a deletion only ID and Workspace are set
}

// Fix is what ended a repeated failure: the tool call that succeeded after
// the failures, remembered so the same failure elsewhere in the project is
// shown how it was fixed.
type Fix struct {
	ID          string    `json:"id"` // assigned by the store when new
	Workspace   string    `json:"workspace"`
	Project     string    `json:"project"`
	Key         string    `json:"key"`                   // dedupe key per (workspace, project): the failure it fixed
	Pattern     string    `json:"pattern"`               // guard pattern label of the failure ("REPEATED ERROR" when none)
	Fingerprint string    `json:"fingerprint,omitempty"` // fingerprint of the failure's message
	Tool        string    `json:"tool"`                  // the tool that failed, then succeeded
	Failure     string    `json:"failure"`               // example of the failure (redacted, capped)
	Call        string    `json:"call"`                  // the successful call's arguments (redacted, capped)
	Explanation string    `json:"explanation,omitempty"` // the assistant's short note with that call (redacted, capped)
	Failures    int       `json:"failures"`              // how many failures it ended
	Session     string    `json:"session,omitempty"`     // the conversation it was learned in
	Wrong       *Wrong    `json:"wrong,omitempty"`       // set when a person marked it wrong: kept, never shown to agents
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

// FixQuery selects fixes of one tenant, most recently updated first.
type FixQuery struct {
	Workspace string // required
	Project   string // required
	Limit     int    // 0 means 100; backends cap it at MaxLimit
}

// MemoryVersions is implemented by a store whose IncidentVersion reads
// memory and never waits (bbolt keeps every tenant's version in a map):
// a caller needs no deadline for that call, and a request path spares
// the timer one costs. A store that does not implement it, or a wrapper
// that embeds one, is given a deadline.
type MemoryVersions interface {
	VersionsInMemory() bool
}

// Store is the persistence both memories need. Implementations are safe for
// concurrent use.
type Store interface {
	// AddIncident stores inc, assigning ID (and Time when zero). It returns
	// ErrInvalid when Workspace or Project is empty.
	AddIncident(ctx context.Context, inc *Incident) error
	// AddIncidentOnce stores inc unless an incident with the same dedupeKey
	// was already stored for the tenant (workspace, project); it reports
	// whether it stored. Dedupe keys are pruned with the incidents.
	AddIncidentOnce(ctx context.Context, inc *Incident, dedupeKey string) (bool, error)
	// AddIncidents stores a batch of incidents (at most 1000) in one
	// transaction: all of them, or none when it returns an error. Each
	// entry is stored as AddIncident stores it, or, with a DedupeKey, as
	// AddIncidentOnce does; on return its Incident holds the stored record
	// and Stored says whether it was stored. Incidents of the same Time are
	// listed in batch order (the later first). For each tenant the batch
	// changed it returns the step its incident version took (see
	// [VersionStep]). It returns ErrInvalid, storing nothing, when an
	// incident misses its tenant.
	AddIncidents(ctx context.Context, batch []IncidentWrite) ([]VersionStep, error)
	// ListIncidents returns the tenant's incidents, newest first.
	ListIncidents(ctx context.Context, q IncidentQuery) ([]Incident, error)
	// DeleteIncidents removes every incident (and dedupe key) of one tenant
	// and returns how many incidents it removed.
	DeleteIncidents(ctx context.Context, workspace, project string) (int, error)
	// IncidentVersion returns a number that changes whenever the tenant's
	// incidents or fixes change (added, updated, deleted, pruned), by this
	// process or any other sharing the store; it never decreases. Equal
	// numbers mean the same incidents and fixes, so a caller may keep what
	// it derived from them (the guard, which shows fixes) until the number
	// changes. It is cheap: one map or primary-key lookup. A change made
	// through this store is in the number at once; one made by another
	// process, once committed (PostgreSQL with VersionMaxAge: within
	// VersionMaxAge of its commit).
	IncidentVersion(ctx context.Context, workspace, project string) (int64, error)
	// IncidentGroups counts the tenant's incidents between q.Since and
	// q.Until in groups (see [IncidentGroup]), ordered by hour, type,
	// status code, code, provider and fingerprint. Its cost follows the
	// incidents in the range, and its answer the groups.
	IncidentGroups(ctx context.Context, q GroupQuery) ([]IncidentGroup, error)
	// SearchIncidents returns a page of the tenant's incidents that f
	// selects, newest first (incidents of the same microsecond: last
	// stored first), and the cursor of the next page. It returns
	// ErrInvalid for a cursor it did not make.
	SearchIncidents(ctx context.Context, f IncidentFilter) (IncidentPage, error)
	// PruneIncidents removes incidents older than before, and the oldest
	// incidents of any tenant holding more than maxPerTenant (0: no cap).
	// It returns how many it removed.
	PruneIncidents(ctx context.Context, before time.Time, maxPerTenant int) (int, error)

	// PutSolution inserts s, or updates the solution with the same
	// (Workspace, Key), keeping its ID and Created time. On return s holds
	// the stored record. It returns ErrInvalid when Workspace, Key or Goal
	// is empty. It keeps no cap: it is PutSolutions of s alone with
	// maxPerWorkspace 0.
	PutSolution(ctx context.Context, s *Solution) error
	// PutSolutions stores each of sols as PutSolution does, in one
	// transaction: all of them or, with an error, none. Solutions with
	// the same (Workspace, Key) are stored in order, the last one kept.
	// With maxPerWorkspace > 0, every workspace the batch added a solution
	// to is brought back to maxPerWorkspace solutions in the same
	// transaction, by the removals PruneSolutions' size rule makes: the
	// least recently updated unverified solutions, then, only when the
	// verified ones alone are over the cap, the least recently updated
	// verified ones (the batch's own among them when it alone is over the
	// cap), each a deletion in the change feed. So a workspace never holds
	// more than the cap, nor does a recall index that follows the feed.
	// It returns how many solutions it removed.
	PutSolutions(ctx context.Context, sols []*Solution, maxPerWorkspace int) (int, error)
	// GetSolution returns one solution of the workspace, or ErrNotFound.
	GetSolution(ctx context.Context, workspace, id string) (Solution, error)
	// ListSolutions returns the workspace's solutions, most recently updated first.
	ListSolutions(ctx context.Context, workspace string) ([]Solution, error)
	// MarkSolution sets the Wrong mark of one solution of the workspace,
	// or clears it when wrong is nil, without changing its Updated time,
	// and returns the solution as stored. The change is in the change
	// feed, so every replica's recall index follows it. It returns
	// ErrNotFound when the workspace has no such solution.
	MarkSolution(ctx context.Context, workspace, id string, wrong *Wrong) (Solution, error)
	// DeleteSolutions removes every solution of the workspace, recording
	// each deletion in the change feed as DeleteSolution does, and returns
	// how many it removed (0 for a workspace without solutions).
	DeleteSolutions(ctx context.Context, workspace string) (int, error)
	// DeleteSolution removes one solution of the workspace, or returns ErrNotFound.
	DeleteSolution(ctx context.Context, workspace, id string) error
	// PruneSolutions removes the solutions that retention no longer keeps
	// and returns how many it removed:
	//   - by age: every unverified solution last updated before before (a
	//     zero before applies no age rule);
	//   - by size: in every workspace holding more than maxPerWorkspace
	//     solutions (0: no cap), the least recently updated unverified
	//     ones, then, only when the verified ones alone are more than the
	//     cap, the least recently updated verified ones.
	// A verified solution (stored by a person) is never removed for its
	// age, and gives way to the cap only after every unverified
	// (auto-captured) one of its workspace is gone. Solutions of the same
	// Updated time go in ID order. Every removal is a deletion in the
	// change feed, as DeleteSolution's, so every replica's recall index
	// drops it. The work is done in several transactions: a cancelled ctx
	// leaves what was done so far removed, and the count says how much.
	PruneSolutions(ctx context.Context, before time.Time, maxPerWorkspace int) (int, error)
	// SetSolutionEmbedding stores e as the embedding of the solution id of
	// workspace, provided its Goal is still goal (the goal the vector was
	// made from), replacing any embedding it had. It leaves the solution's
	// Updated time (and so retention's order) as it is, and is a change in
	// the feed, so that every replica's recall index gets the vector. It
	// returns ErrNotFound when there is no such solution or its goal is no
	// longer goal, and ErrInvalid when e has no Model, no values, more than
	// MaxEmbeddingDims of them, or a value that is NaN or infinite.
	SetSolutionEmbedding(ctx context.Context, workspace, id, goal string, e Embedding) error
	// SolutionChanges returns changes with Seq > after, in Seq order, at most
	// limit of them, and the highest Seq returned (after when none). A new
	// reader starts with after = 0 and receives every live solution.
	SolutionChanges(ctx context.Context, after int64, limit int) ([]SolutionChange, int64, error)

	// PutFix inserts f, or updates the fix with the same (Workspace,
	// Project, Key), keeping its ID and Created time; Updated is set to
	// the store's clock. On return f holds the stored record. It returns
	// ErrInvalid when Workspace, Project, Key or Tool is empty, or when
	// Failures is negative. Every PutFix changes the tenant's
	// IncidentVersion. It keeps no cap: it is PutFixes of f alone with
	// maxPerTenant 0.
	PutFix(ctx context.Context, f *Fix) error
	// PutFixes stores each of fixes as PutFix does, in one transaction:
	// all of them or, with an error, none. With maxPerTenant > 0, every
	// tenant the batch added a fix to is brought back to maxPerTenant
	// fixes in the same transaction, by the removals PruneFixes' size
	// rule makes (the least recently updated first; the same Updated:
	// lower ID first). It returns how many fixes it removed.
	PutFixes(ctx context.Context, fixes []*Fix, maxPerTenant int) (int, error)
	// ListFixes returns the tenant's fixes, most recently updated first
	// (the same Updated: higher ID first), at most q.Limit of them. It
	// returns ErrInvalid when q names no workspace or project.
	ListFixes(ctx context.Context, q FixQuery) ([]Fix, error)
	// MarkFix sets the Wrong mark of one fix of the tenant, or clears it
	// when wrong is nil, without changing its Updated time, and returns
	// the fix as stored (its Wrong.At and Note in stored form). It moves
	// the tenant's IncidentVersion, and returns ErrNotFound when the
	// tenant has no such fix.
	MarkFix(ctx context.Context, workspace, project, id string, wrong *Wrong) (Fix, error)
	// DeleteFix removes one fix of the tenant, or returns ErrNotFound.
	DeleteFix(ctx context.Context, workspace, project, id string) error
	// DeleteFixes removes every fix of the tenant and returns how many it
	// removed (0 for a tenant without fixes). It returns ErrInvalid when
	// workspace or project is empty.
	DeleteFixes(ctx context.Context, workspace, project string) (int, error)
	// PruneFixes removes the fixes last updated before before (a zero
	// before applies no age rule), then, in every tenant holding more than
	// maxPerTenant (0: no cap), the least recently updated ones (the same
	// Updated: lower ID first). It returns how many it removed.
	PruneFixes(ctx context.Context, before time.Time, maxPerTenant int) (int, error)

	// AddUsage adds the counts of each record of batch to the stored
	// record with the same Workspace, Project, Conversation, Provider,
	// Model and Hour (truncated to its UTC hour), creating it at zero when
	// there is none: replicas add to the same records. The batch is
	// stored whole or not at all. It returns ErrInvalid when a record
	// names no workspace or project, or holds a negative count, or when a
	// sum would not fit an int64.
	AddUsage(ctx context.Context, batch []Usage) error
	// ListUsage returns the tenant's usage records that q selects, newest
	// Hour first (the same Hour: by Conversation, Provider, then Model),
	// at most q.Limit of them. It returns ErrInvalid when q names no
	// workspace or project, or an unknown By.
	ListUsage(ctx context.Context, q UsageQuery) ([]Usage, error)
	// PruneUsage removes the usage records of hours that started before
	// before and returns how many it removed.
	PruneUsage(ctx context.Context, before time.Time) (int, error)

	ConversationStore

	// ListTenants returns the tenants that hold incidents, fixes, usage
	// records or (with an empty Project) solutions, the most recently
	// changed first (the same Latest: by Workspace, then Project), at most
	// limit of them (see [TenantLimit]). Its cost follows the tenants, not
	// their records.
	ListTenants(ctx context.Context, limit int) ([]TenantRef, error)

	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
	// Close releases the store. Methods called after Close return ErrClosed.
	Close() error
}
