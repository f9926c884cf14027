package proxy

import (
	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/tenant"
)

// Headers of the answers to rewritten requests. The headers a client sends
// to name its tenant are the tenant package's (tenant.HeaderWorkspace...).
const (
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

// resolveTenant decides the tenant of a proxied request (tenant.Policy.Resolve)
// from its headers and the route's /w/{workspace}/{project} names.
func (s *Server) resolveTenant(c echo.Context) (tenant.Tenant, *apiError) {
	return s.tenants.Resolve(c.Request().Header, c.Param("workspace"), c.Param("project"))
}

// readBody reads a request's body (body.Reader.Read) and logs a refusal
// for want of room.
func (s *Server) readBody(c echo.Context, lease *body.Lease) ([]byte, *apiError) {
	b, aerr := s.bodies.Read(c.Response(), c.Request(), lease)
	if aerr == body.ErrInFlight {
		s.log.Debug("request bodies in flight past the bound; refused")
	}
	return b, aerr
}

// countFallback counts a request moving on to the next provider.
func (s *Server) countFallback(from, to string) {
	s.metrics.fallbacks.WithLabelValues(from, to).Inc()
}
