package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// Tenant headers a client may send. With gateway keys configured the key
// decides the workspace and X-Scar-Workspace cannot move a request into
// another team's memory.
const (
	HeaderWorkspace = "X-Scar-Workspace"
	HeaderProject   = "X-Scar-Project"
	HeaderSession   = "X-Scar-Session"
	HeaderAgent     = "X-Scar-Agent"

	HeaderGuard    = "X-Scar-Guard"
	HeaderRecall   = "X-Scar-Recall"
	HeaderDegraded = "X-Scar-Degraded"
	HeaderProvider = "X-Scar-Provider"
	// HeaderConversation names the conversation a rewritten request
	// belongs to: its X-Scar-Session, else the name derived from its start
	// ("c:" and 16 hex digits). The memory API's session= takes it.
	HeaderConversation = "X-Scar-Conversation"
	// HeaderLoop says how the proxy escalated against a loop: "stop" when
	// the STOP block was injected, "hard-stop" when the turn also went out
	// with tools forbidden. Absent otherwise.
	HeaderLoop = "X-Scar-Loop"
)

// Tenant says whose memory a request reads and writes.
type Tenant struct {
	Workspace string
	Project   string
	Session   string // optional; narrows the guard to one session
	Agent     string // optional; X-Scar-Agent, else the request's "user" field
}

// GatewayKey maps one client key to a workspace. Only the key's SHA-256 is
// kept, so configuration holds no secret.
type GatewayKey struct {
	SHA256    string   // hex SHA-256 of the key the team uses as its OpenAI API key
	Workspace string   // the workspace every request with this key belongs to
	Projects  []string // optional allow-list; empty allows any project
}

// keyring resolves gateway keys in constant time per candidate.
type keyring struct {
	keys []keyEntry
}

type keyEntry struct {
	sum [sha256.Size]byte
	GatewayKey
}

func newKeyring(keys []GatewayKey) (*keyring, error) {
	kr := &keyring{}
	for i, k := range keys {
		raw, err := hex.DecodeString(strings.TrimSpace(k.SHA256))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("gateway.keys[%d].key_sha256: not a hex SHA-256", i)
		}
		if err := ValidName(k.Workspace); err != nil {
			return nil, fmt.Errorf("gateway.keys[%d].workspace: %v", i, err)
		}
		var e keyEntry
		copy(e.sum[:], raw)
		e.GatewayKey = k
		kr.keys = append(kr.keys, e)
	}
	return kr, nil
}

func (kr *keyring) enabled() bool { return kr != nil && len(kr.keys) > 0 }

// lookup returns the entry of a presented key, or nil.
func (kr *keyring) lookup(key string) *GatewayKey {
	if key == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(key))
	var found *GatewayKey
	for i := range kr.keys {
		if subtle.ConstantTimeCompare(sum[:], kr.keys[i].sum[:]) == 1 {
			found = &kr.keys[i].GatewayKey
		}
	}
	return found
}

// bearer returns the key a client presents: the token of an
// Authorization: Bearer header, else the Api-Key header (Azure OpenAI
// clients), else the X-Api-Key header (Anthropic clients). The first one
// present is the key; the others are not tried.
func bearer(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	if v := strings.TrimSpace(h.Get("Api-Key")); v != "" {
		return v
	}
	return strings.TrimSpace(h.Get("X-Api-Key"))
}

// ValidName checks a workspace, project, session or agent name: 1 to 128
// characters of letters, digits and ._-:@ (no slashes, spaces or controls).
func ValidName(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	if len(s) > 128 {
		return fmt.Errorf("longer than 128 characters")
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

// resolveTenant decides the tenant of a proxied request: path parameters
// (/w/{workspace}/{project}/v1), then headers, then defaults. With gateway
// keys the key decides the workspace; a header naming another workspace is
// refused rather than ignored, so a misconfigured client notices.
func (s *Server) resolveTenant(c echo.Context) (Tenant, *apiError) {
	r := c.Request()
	t := Tenant{
		Workspace: firstNonEmpty(c.Param("workspace"), r.Header.Get(HeaderWorkspace), s.opts.DefaultWorkspace),
		Project:   firstNonEmpty(c.Param("project"), r.Header.Get(HeaderProject), s.opts.DefaultProject),
		Session:   r.Header.Get(HeaderSession),
		Agent:     r.Header.Get(HeaderAgent),
	}
	if s.keys.enabled() {
		k := s.keys.lookup(bearer(r.Header))
		if k == nil {
			return t, &apiError{Status: http.StatusUnauthorized, Message: "Invalid or missing gateway key. Use your team's scarproxy key as the API key.", Type: "invalid_request_error", Code: "invalid_api_key"}
		}
		if named := firstNonEmpty(c.Param("workspace"), r.Header.Get(HeaderWorkspace)); named != "" && named != k.Workspace {
			return t, &apiError{Status: http.StatusForbidden, Message: "This gateway key does not give access to workspace " + quoteName(named) + ".", Type: "invalid_request_error", Code: "workspace_forbidden"}
		}
		t.Workspace = k.Workspace
		if !projectAllowed(k, t.Project) {
			return t, &apiError{Status: http.StatusForbidden, Message: "This gateway key does not give access to project " + quoteName(t.Project) + ".", Type: "invalid_request_error", Code: "project_forbidden"}
		}
	}
	for _, f := range []struct{ name, v string }{{"workspace", t.Workspace}, {"project", t.Project}} {
		if err := ValidName(f.v); err != nil {
			return t, errBadRequest("invalid " + f.name + ": " + err.Error())
		}
	}
	for _, f := range []struct{ name, v string }{{HeaderSession, t.Session}, {HeaderAgent, t.Agent}} {
		if f.v != "" {
			if err := ValidName(f.v); err != nil {
				return t, errBadRequest("invalid " + f.name + ": " + err.Error())
			}
		}
	}
	return t, nil
}

func projectAllowed(k *GatewayKey, project string) bool {
	if len(k.Projects) == 0 {
		return true
	}
	for _, p := range k.Projects {
		if p == project {
			return true
		}
	}
	return false
}

func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return fmt.Sprintf("%q", s)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
