// Package tenant decides whose memory a request reads and writes: the
// workspace and project of a proxied request (path, headers, defaults),
// gateway keys that bind a client to one workspace, and the scope a
// memory API or MCP caller acts in. It is the one tenancy check of the
// proxy: the pipeline, the memory API, MCP and the dashboard all ask it.
//
// # Imports
//
// It imports proxy/wire (for the error it answers with) and the standard
// library only: no Echo, no store.
package tenant

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Tenant headers a client may send. With gateway keys configured the key
// decides the workspace and X-Scar-Workspace cannot move a request into
// another team's memory.
const (
	HeaderWorkspace = "X-Scar-Workspace"
	HeaderProject   = "X-Scar-Project"
	HeaderSession   = "X-Scar-Session"
	HeaderAgent     = "X-Scar-Agent"
)

// DefaultName is the workspace and project of a request that names none,
// unless configured otherwise.
const DefaultName = "default"

// Tenant says whose memory a request reads and writes.
type Tenant struct {
	Workspace string
	Project   string
	Session   string // optional; narrows the guard to one conversation
	Agent     string // optional; X-Scar-Agent, else the request's "user" field
}

// Key maps one client key to a workspace. Only the key's SHA-256 is kept,
// so configuration holds no secret.
type Key struct {
	SHA256    string   // hex SHA-256 of the key the team uses as its API key
	Workspace string   // the workspace every request with this key belongs to
	Projects  []string // optional allow-list; empty allows any project
}

// AllowsProject reports whether the key may use project.
func (k *Key) AllowsProject(project string) bool {
	return len(k.Projects) == 0 || slices.Contains(k.Projects, project)
}

// Policy resolves tenants and checks credentials. Build it with [New];
// it is safe for concurrent use. [Policy.Update] replaces its whole
// configuration at once (a configuration reload): each call sees either
// the old one or the new one.
type Policy struct {
	state atomic.Pointer[policyState]
}

// policyState is one configuration of a Policy, never changed once built.
type policyState struct {
	defaultWorkspace, defaultProject string
	adminToken                       string
	keys                             []keyEntry
}

type keyEntry struct {
	sum [sha256.Size]byte
	Key
}

// Config is what a [Policy] is built from.
type Config struct {
	// DefaultWorkspace and DefaultProject apply when neither the path nor
	// headers name them. Empty means [DefaultName].
	DefaultWorkspace, DefaultProject string
	// GatewayKeys, when set, make a valid key mandatory on the proxied routes and
	// decide the workspace.
	GatewayKeys []Key
	// AdminToken, when set, is required (as a bearer token) by the memory
	// API, MCP and the dashboard; a gateway key may use them for its own
	// workspace.
	AdminToken string
}

// New builds a policy. A default that is not a valid name, or a key whose
// hash or workspace is malformed, is an error naming the setting at fault.
func New(c Config) (*Policy, error) {
	st, err := newState(c)
	if err != nil {
		return nil, err
	}
	p := &Policy{}
	p.state.Store(st)
	return p, nil
}

// Update makes c the policy of the calls that follow; those under way
// finish with the old one. An invalid c (see [New]) changes nothing. The
// keys the old policy returned stay valid: a caller holding one acts as
// that key allowed when it was looked up.
func (p *Policy) Update(c Config) error {
	st, err := newState(c)
	if err != nil {
		return err
	}
	p.state.Store(st)
	return nil
}

func newState(c Config) (*policyState, error) {
	p := &policyState{defaultWorkspace: c.DefaultWorkspace, defaultProject: c.DefaultProject, adminToken: c.AdminToken}
	if p.defaultWorkspace == "" {
		p.defaultWorkspace = DefaultName
	}
	if p.defaultProject == "" {
		p.defaultProject = DefaultName
	}
	keys := c.GatewayKeys
	for _, d := range []struct{ name, v string }{{"DefaultWorkspace", p.defaultWorkspace}, {"DefaultProject", p.defaultProject}} {
		if err := ValidName(d.v); err != nil {
			return nil, fmt.Errorf("tenant: %s: %v", d.name, err)
		}
	}
	for i, k := range keys {
		raw, err := hex.DecodeString(strings.TrimSpace(k.SHA256))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("gateway.keys[%d].key_sha256: not a hex SHA-256", i)
		}
		if err := ValidName(k.Workspace); err != nil {
			return nil, fmt.Errorf("gateway.keys[%d].workspace: %v", i, err)
		}
		e := keyEntry{Key: k}
		copy(e.sum[:], raw)
		p.keys = append(p.keys, e)
	}
	return p, nil
}

// Keys reports whether gateway keys are configured: then every proxied
// request needs one, and no client credential reaches a provider.
func (p *Policy) Keys() bool { return p.state.Load().hasKeys() }

func (p *policyState) hasKeys() bool { return len(p.keys) > 0 }

// Open reports whether the memory API and the dashboard are open: neither
// an admin token nor gateway keys are configured.
func (p *Policy) Open() bool { return p.state.Load().open() }

func (p *policyState) open() bool { return p.adminToken == "" && !p.hasKeys() }

// Defaults returns the default workspace and project.
func (p *Policy) Defaults() (workspace, project string) {
	st := p.state.Load()
	return st.defaultWorkspace, st.defaultProject
}

// Lookup returns the key a client presents, or nil. It takes the same
// time whichever key matches.
func (p *Policy) Lookup(key string) *Key { return p.state.Load().lookup(key) }

func (p *policyState) lookup(key string) *Key {
	if key == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(key))
	return p.bySum(sum)
}

// BySHA256 returns the configured key of a hex SHA-256 (a dashboard
// session remembers its key so), or nil.
func (p *Policy) BySHA256(sum string) *Key {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return nil
	}
	return p.state.Load().bySum([sha256.Size]byte(raw))
}

func (p *policyState) bySum(sum [sha256.Size]byte) *Key {
	var found *Key
	for i := range p.keys {
		if subtle.ConstantTimeCompare(sum[:], p.keys[i].sum[:]) == 1 {
			found = &p.keys[i].Key
		}
	}
	return found
}

// AdminToken reports whether tok is the configured admin token.
func (p *Policy) AdminToken(tok string) bool { return p.state.Load().isAdmin(tok) }

func (p *policyState) isAdmin(tok string) bool {
	return p.adminToken != "" && tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(p.adminToken)) == 1
}

// Credential returns the key a client presents in its headers: the token
// of an Authorization: Bearer header, else the Api-Key header (Azure
// OpenAI clients), else the X-Api-Key header (Anthropic clients), else the
// X-Goog-Api-Key header (Gemini clients). The first one present is the
// key; the others are not tried.
func Credential(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	for _, k := range [...]string{"Api-Key", "X-Api-Key", "X-Goog-Api-Key"} {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			return v
		}
	}
	return ""
}

// RequestCredential returns the key a proxied request presents: its
// headers' (see [Credential]), else its "key" query parameter, where a
// Gemini API client may send its key.
func RequestCredential(r *http.Request) string {
	if k := Credential(r.Header); k != "" {
		return k
	}
	if r.URL.RawQuery == "" {
		return ""
	}
	return strings.TrimSpace(r.URL.Query().Get("key"))
}

// Authorize checks the credentials of a memory API or MCP request. With
// the policy open every request passes (on an address other than
// loopback, serve closes the memory in front of it unless admin.open says
// so: proxy.Options.CloseOpenMemory). Otherwise the admin
// token passes for every workspace (k nil) and a gateway key for its own
// workspace only (k is the key).
func (p *Policy) Authorize(h http.Header) (k *Key, ok bool) {
	st := p.state.Load()
	if st.open() {
		return nil, true
	}
	tok := Credential(h)
	if st.isAdmin(tok) {
		return nil, true
	}
	if k := st.lookup(tok); k != nil {
		return k, true
	}
	return nil, false
}

// The errors of ValidName that name no input: a request that names no
// agent or session is checked on every request.
var (
	errNameEmpty = errors.New("must not be empty")
	errNameLong  = errors.New("longer than 128 characters")
)

// ValidName checks a workspace, project, session or agent name: 1 to 128
// characters of letters, digits and ._-:@ (no slashes, spaces or controls).
func ValidName(s string) error {
	if s == "" {
		return errNameEmpty
	}
	if len(s) > 128 {
		return errNameLong
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '.' || r == '_' || r == '-' || r == ':' || r == '@':
		default:
			return fmt.Errorf("%q has a character outside letters, digits and ._-:@", s)
		}
	}
	return nil
}

// Resolve decides the tenant of a proxied request r: the path's names
// (/w/{workspace}/{project}/v1, empty when the route has none), then
// headers, then defaults. With gateway keys the key (see
// [RequestCredential]) decides the workspace; a header naming another
// workspace is refused rather than ignored, so a misconfigured client
// notices.
func (p *Policy) Resolve(r *http.Request, pathWorkspace, pathProject string) (Tenant, *wire.Error) {
	return p.state.Load().resolve(r, pathWorkspace, pathProject)
}

func (p *policyState) resolve(r *http.Request, pathWorkspace, pathProject string) (Tenant, *wire.Error) {
	h := r.Header
	t := Tenant{
		Workspace: cmp.Or(pathWorkspace, first(h[HeaderWorkspace]), p.defaultWorkspace),
		Project:   cmp.Or(pathProject, first(h[HeaderProject]), p.defaultProject),
		Session:   first(h[HeaderSession]),
		Agent:     first(h[HeaderAgent]),
	}
	if p.hasKeys() {
		k := p.lookup(RequestCredential(r))
		if k == nil {
			return t, &wire.Error{Status: http.StatusUnauthorized, Message: "Invalid or missing gateway key. Use your team's scarproxy key as the API key.", Type: "invalid_request_error", Code: "invalid_api_key"}
		}
		if named := cmp.Or(pathWorkspace, first(h[HeaderWorkspace])); named != "" && named != k.Workspace {
			return t, workspaceForbidden(named)
		}
		t.Workspace = k.Workspace
		if !k.AllowsProject(t.Project) {
			return t, projectForbidden(t.Project)
		}
	}
	for _, f := range []struct{ name, v string }{{"workspace", t.Workspace}, {"project", t.Project}} {
		if err := ValidName(f.v); err != nil {
			return t, wire.BadRequest("invalid " + f.name + ": " + err.Error())
		}
	}
	for _, f := range []struct{ name, v string }{{HeaderSession, t.Session}, {HeaderAgent, t.Agent}} {
		if f.v != "" {
			if err := ValidName(f.v); err != nil {
				return t, wire.BadRequest("invalid " + f.name + ": " + err.Error())
			}
		}
	}
	return t, nil
}

// Workspace resolves the workspace a memory call acts on: the one asked,
// else the default; a gateway key k (nil: the admin, or an open policy)
// may only name its own.
func (p *Policy) Workspace(k *Key, asked string) (string, *wire.Error) {
	return p.state.Load().workspace(k, asked)
}

func (p *policyState) workspace(k *Key, asked string) (string, *wire.Error) {
	if k == nil {
		if asked == "" {
			asked = p.defaultWorkspace
		}
		if err := ValidName(asked); err != nil {
			return "", wire.BadRequest("workspace: " + err.Error())
		}
		return asked, nil
	}
	if asked != "" && asked != k.Workspace {
		return "", workspaceForbidden(asked)
	}
	return k.Workspace, nil
}

// ProjectScope checks a project named by a memory call against the
// allow-list of its gateway key k (nil: none). A key limited to some
// projects may not use workspace-wide solutions (project ""): they reach
// every project's recall.
func ProjectScope(k *Key, project string) *wire.Error {
	if k == nil || len(k.Projects) == 0 || (project != "" && k.AllowsProject(project)) {
		return nil
	}
	if project == "" {
		project = "(all projects)"
	}
	return projectForbidden(project)
}

// Scoped resolves (workspace, project) for a memory call of gateway key k
// (nil: none); unless required, either defaults to the configured one (a
// key's workspace is its own).
func (p *Policy) Scoped(k *Key, workspace, project string, required bool) (Tenant, *wire.Error) {
	if required && (workspace == "" && k == nil || project == "") {
		return Tenant{}, wire.BadRequest("workspace and project are required")
	}
	st := p.state.Load()
	ws, aerr := st.workspace(k, workspace)
	if aerr != nil {
		return Tenant{}, aerr
	}
	if project == "" {
		project = st.defaultProject
	}
	if err := ValidName(project); err != nil {
		return Tenant{}, wire.BadRequest("project: " + err.Error())
	}
	if k != nil && !k.AllowsProject(project) {
		return Tenant{}, projectForbidden(project)
	}
	return Tenant{Workspace: ws, Project: project}, nil
}

// Quote quotes a name for an error message, cut to 64 bytes.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return fmt.Sprintf("%q", s)
}

func workspaceForbidden(name string) *wire.Error {
	return &wire.Error{Status: http.StatusForbidden, Message: "This gateway key does not give access to workspace " + Quote(name) + ".", Type: "invalid_request_error", Code: "workspace_forbidden"}
}

func projectForbidden(name string) *wire.Error {
	return &wire.Error{Status: http.StatusForbidden, Message: "This gateway key does not give access to project " + Quote(name) + ".", Type: "invalid_request_error", Code: "project_forbidden"}
}

// first is the first value of a header, read by its canonical name (the
// Header* constants are: TestHeaderNamesCanonical) without canonicalizing
// it again as Header.Get does.
func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
