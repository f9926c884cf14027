package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/messages"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// StatusClientClosed is logged (never sent: nobody is listening) when the
// client goes away before the answer is complete. It is not an incident.
const StatusClientClosed = 499

// Causes set on a request context when the proxy itself gives up on the
// provider; classify tells them apart from a client that left.
var (
	errHeaderTimeout = errors.New("provider did not send response headers in time")
	errIdleTimeout   = errors.New("provider stream was idle for too long")
)

// apiError is an error the proxy answers itself; writeError gives it
// the shape of the API the client spoke.
type apiError = wire.Error

func errBadRequest(msg string) *apiError { return wire.BadRequest(msg) }

// writeError answers e in the error shape of the API the request was
// for: Anthropic's on the Messages API's paths, OpenAI's everywhere else.
// It is the one place that turns proxy errors into bytes.
func writeError(c echo.Context, e *apiError) error {
	if c.Response().Committed {
		return nil
	}
	body := wire.OpenAIError(*e)
	if messagesPath(c.Request().URL.Path) {
		body = messages.ErrorBody(*e)
	}
	return c.Blob(e.Status, echo.MIMEApplicationJSON, body)
}

// messagesPath reports whether path is one of the Anthropic Messages
// API's: /v1/messages and below it, also in the tenant form
// /w/{workspace}/{project}/v1/messages.
func messagesPath(path string) bool {
	if strings.HasPrefix(path, "/w/") {
		// "", "w", workspace, project, then the API path.
		parts := strings.SplitN(path, "/", 5)
		if len(parts) < 5 {
			return false
		}
		path = "/" + parts[4]
	}
	rest, ok := strings.CutPrefix(path, "/v1")
	return ok && apiOf(rest) == providers.APIMessages
}

// failure is how one attempt to reach a provider ended, decided by classify.
type failure struct {
	status   int    // status answered to the client: 502, 504 or StatusClientClosed
	incident string // store incident type, "" when it is not an incident
	message  string // safe to show the client and to store
}

// classify is the proxy's single error-to-status policy for transport
// errors: a client that left is 499 and no incident; a timeout (before
// headers or between stream chunks) is 504; anything else means the
// provider was unreachable, 502.
func classify(clientCtx, attemptCtx context.Context, err error) failure {
	switch cause := context.Cause(attemptCtx); {
	case errors.Is(cause, errHeaderTimeout):
		return failure{http.StatusGatewayTimeout, "timeout", "provider timed out: " + errHeaderTimeout.Error()}
	case errors.Is(cause, errIdleTimeout):
		return failure{http.StatusGatewayTimeout, "timeout", "provider timed out: " + errIdleTimeout.Error()}
	}
	if clientCtx.Err() != nil {
		return failure{StatusClientClosed, "", "client closed the request"}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return failure{http.StatusGatewayTimeout, "timeout", "provider timed out"}
	}
	return failure{http.StatusBadGateway, "upstream_unreachable", "provider unreachable: " + transportMessage(err)}
}

// transportMessage names the kind of transport failure without leaking
// internal addresses beyond what the operator configured.
func transportMessage(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return "connection failed (" + op.Err.Error() + ")"
	case errors.Is(err, net.ErrClosed):
		return "connection closed"
	default:
		var dns *net.DNSError
		if errors.As(err, &dns) {
			return "host not found"
		}
		return "connection error"
	}
}

func (f failure) apiError() *apiError {
	switch f.status {
	case http.StatusGatewayTimeout:
		return &apiError{Status: f.status, Message: f.message, Type: "timeout", Code: "provider_timeout"}
	default:
		return &apiError{Status: f.status, Message: f.message, Type: "api_error", Code: "provider_unreachable"}
	}
}
