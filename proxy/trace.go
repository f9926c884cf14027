package proxy

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/guard"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traces, when Options.TracerProvider is set: a server span per request of
// a rewritten route, continuing the client's trace (W3C traceparent) when
// it sends one, and a client span for the call to the provider, with the
// attributes of OpenTelemetry's GenAI semantic conventions (the system,
// the model, the tokens the answer reported). Like the logs, spans never
// hold prompt or answer text, nor a key.

// tracerName names the proxy's tracer (the instrumentation scope).
const tracerName = "github.com/scarproxy/scarproxy/proxy"

// traceContext reads and writes W3C trace context headers.
var traceContext = propagation.TraceContext{}

// startTrace starts the server span of a request, and makes its context
// the request's. Without tracing it does nothing.
func (s *Server) startTrace(ex *exchange) {
	if s.tracer == nil {
		return
	}
	r := ex.c.Request()
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, ex.span = s.tracer.Start(ctx, r.Method+" "+ex.c.Path(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(ex.start), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("http.route", ex.c.Path())))
	ex.c.SetRequest(r.WithContext(ctx))
}

// startUpstreamSpan starts the client span of the call to the providers,
// a child of the request's span.
func (s *Server) startUpstreamSpan(ex *exchange) {
	if ex.span == nil {
		return
	}
	model := ex.info.Model
	if len(model) > maxLoggedModel {
		model = model[:maxLoggedModel]
	}
	_, ex.upstreamSpan = s.tracer.Start(ex.c.Request().Context(), strings.TrimSpace("chat "+model), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", model)))
}

// endTrace ends a request's spans once its answer went out: what the
// provider reported of its usage on the client span, what the memory did
// on the server span, and the status on both.
func (s *Server) endTrace(ex *exchange) {
	if ex.span == nil {
		return
	}
	status := ex.status()
	if up := ex.upstreamSpan; up != nil {
		up.SetAttributes(attribute.String("gen_ai.system", ex.providerType), attribute.String("scarproxy.provider", ex.provider),
			attribute.Int("http.response.status_code", status))
		if !ex.usage.Zero() {
			up.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", ex.usage.Input),
				attribute.Int64("gen_ai.usage.output_tokens", ex.usage.Output))
		}
		if status >= http.StatusBadRequest {
			up.SetStatus(codes.Error, strconv.Itoa(status))
		}
		up.End()
	}
	ex.span.SetAttributes(attribute.Int("http.response.status_code", status),
		attribute.String("scarproxy.workspace", ex.tenant.Workspace), attribute.String("scarproxy.project", ex.tenant.Project),
		attribute.String("scarproxy.conversation", ex.tenant.Session),
		attribute.Int("scarproxy.guard", len(ex.turn.Entries)), attribute.Int("scarproxy.recall", len(ex.turn.Matches)))
	if ex.turn.Loop.Level > guard.LevelNone {
		ex.span.SetAttributes(attribute.String("scarproxy.loop", guard.LevelName(ex.turn.Loop.Level)))
	}
	if status >= http.StatusInternalServerError {
		ex.span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	ex.span.End()
}
