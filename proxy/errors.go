package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
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

// apiError is an error answered to the client in OpenAI's shape.
type apiError struct {
	Status  int
	Message string
	Type    string
	Code    string
}

func (e *apiError) Error() string { return e.Message }

func errBadRequest(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: msg, Type: "invalid_request_error", Code: "invalid_request"}
}

// writeError answers err in OpenAI's error shape. It is the one place that
// turns proxy errors into bytes.
func writeError(c echo.Context, e *apiError) error {
	if c.Response().Committed {
		return nil
	}
	body := struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message = e.Message
	body.Error.Type = e.Type
	body.Error.Code = e.Code
	return c.JSON(e.Status, body)
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
