package proxy

import (
	"bytes"
	"context"
	"io"
	"strconv"

	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/upstream"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

func (s *Server) count(route string, status int, provider string) {
	s.metrics.requests.WithLabelValues(route, strconv.Itoa(status), provider).Inc()
}

// recordErrorAnswer records a provider's non-2xx answer as an incident. It
// reads the start of the body for the error message and puts it back, so
// the client still receives every byte. It runs before the answer is
// delivered: when the store fails, the answer's headers get
// X-Scar-Degraded: store.
func (s *Server) recordErrorAnswer(ctx context.Context, t tenant.Tenant, model string, a *upstream.Attempt) string {
	prefix := upstream.ReadAnswer(a.Res, captureErrors)
	a.Res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(prefix), a.Res.Body), a.Res.Body}
	msg := wire.ErrorMessage(prefix, a.Res.StatusCode)
	if wire.IsSSE(a.Res.Header) {
		// An error sent as an event stream: the first error event says it.
		found := false
		events := wire.SSE{Data: func(event string, data []byte) {
			if !found && wire.Valid(data) && (event == "error" || gjson.GetBytes(data, "error").Exists()) {
				msg, found = wire.ErrorMessage(data, a.Res.StatusCode), true
			}
		}}
		events.Write(prefix)
	}
	if !s.memory.Record(ctx, t, model, a.Provider.Name(), store.TypeHTTPError, a.Res.StatusCode, msg) {
		// deliver copies it to the client; the failure is counted in
		// store_errors_total.
		a.Res.Header.Set(HeaderDegraded, "store")
	}
	return msg
}

// countFallback counts a request moving on to the next provider.
func (s *Server) countFallback(from, to string) {
	s.metrics.fallbacks.WithLabelValues(from, to).Inc()
}
