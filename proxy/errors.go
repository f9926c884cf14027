package proxy

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// apiError is an error the proxy answers itself; writeError gives it
// the shape of the API the client spoke.
type apiError = wire.Error

func errBadRequest(msg string) *apiError { return wire.BadRequest(msg) }

// writeError answers e in the error shape of the API the request was for
// (formatOf): Anthropic's on the Messages API's paths, Google's on the
// Gemini API's, OpenAI's everywhere else. It is the one place that turns
// proxy errors into bytes.
func (s *Server) writeError(c echo.Context, e *apiError) error {
	if c.Response().Committed {
		return nil
	}
	return c.Blob(e.Status, echo.MIMEApplicationJSON, s.formatOf(c.Request()).Error(*e))
}

// formatOf returns the wire format whose error shape answers r: the one
// of the API its path belongs to (see target; also in the tenant form
// /w/{workspace}/{project}/...), the chat format's (OpenAI's shape)
// everywhere else.
func (s *Server) formatOf(r *http.Request) wire.Format {
	path := r.URL.EscapedPath()
	api, _, _ := target(r.Method, path, strings.HasPrefix(path, "/w/"))
	if f, ok := s.formats[api]; ok {
		return f
	}
	return s.chat
}
