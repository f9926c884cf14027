package proxy

import (
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// apiError is an error the proxy answers itself; writeError gives it
// the shape of the API the client spoke.
type apiError = wire.Error

func errBadRequest(msg string) *apiError { return wire.BadRequest(msg) }

// writeError answers e in the error shape of the API the request was for
// (formatOf): Anthropic's on the Messages API's paths, OpenAI's everywhere
// else. It is the one place that turns proxy errors into bytes.
func (s *Server) writeError(c echo.Context, e *apiError) error {
	if c.Response().Committed {
		return nil
	}
	return c.Blob(e.Status, echo.MIMEApplicationJSON, s.formatOf(c.Request().URL.Path).Error(*e))
}

// formatOf returns the wire format whose error shape answers a request
// for path: the API's under /v1 (also in the tenant form
// /w/{workspace}/{project}/v1), the chat format's (OpenAI's shape)
// everywhere else.
func (s *Server) formatOf(path string) wire.Format {
	if strings.HasPrefix(path, "/w/") {
		// "", "w", workspace, project, then the API path.
		parts := strings.SplitN(path, "/", 5)
		if len(parts) < 5 {
			return s.chat
		}
		path = "/" + parts[4]
	}
	rest, ok := strings.CutPrefix(path, "/v1")
	if !ok {
		return s.chat
	}
	return s.formats[apiOf(rest)]
}
