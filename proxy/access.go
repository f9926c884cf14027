package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/upstream"
)

// maxLoggedModel caps the model name a log line repeats from a request.
const maxLoggedModel = 128

// logAccess writes the access line of a request of a rewritten route, at
// info, once it ended: who (workspace, project, conversation), what (API,
// provider, model), how it went (status, duration, bytes in and out) and
// what the memory did (guard entries, recall matches, loop level, a store
// that failed). The request id comes with it (requestIDHandler). Never
// any text of the request or the answer, nor a key.
func (s *Server) logAccess(ex *exchange) {
	ctx := ex.c.Request().Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	res := ex.c.Response()
	status := ex.status()
	var model string
	if ex.info != nil {
		model = ex.info.Model
		if len(model) > maxLoggedModel {
			model = model[:maxLoggedModel]
		}
	}
	ap := accessAttrs.Get().(*[]slog.Attr)
	attrs := append((*ap)[:0],
		slog.String("workspace", ex.tenant.Workspace), slog.String("project", ex.tenant.Project),
		slog.String("conversation", ex.tenant.Session), slog.String("api", ex.format.Name()),
		slog.String("provider", ex.provider), slog.String("model", model),
		slog.Int("status", status), slog.Float64("duration_ms", float64(time.Since(ex.start).Microseconds())/1000),
		slog.Int("bytes_in", ex.bytesIn), slog.Int64("bytes_out", res.Size),
		slog.Int("guard", len(ex.turn.Entries)), slog.Int("recall", len(ex.turn.Matches)))
	if ex.turn.Loop.Level > guard.LevelNone {
		attrs = append(attrs, slog.String("loop", guard.LevelName(ex.turn.Loop.Level)))
	}
	if ex.turn.Degraded {
		attrs = append(attrs, slog.Bool("degraded", true))
	}
	if validRequestID(ex.providerRequestID) {
		attrs = append(attrs, slog.String("provider_request_id", ex.providerRequestID))
	}
	logLine(ctx, s.log, slog.LevelInfo, "request", attrs)
	clear(attrs[:cap(attrs)]) // the pool keeps no request's strings (logLine's request id included)
	*ap = attrs[:0]
	accessAttrs.Put(ap)
}

// accessAttrs holds the attributes of access lines being written: a
// handler keeps none of them past its Handle or WriteLine.
var accessAttrs = sync.Pool{New: func() any { a := make([]slog.Attr, 0, 16); return &a }}

// logLine logs a line of every request as l.LogAttrs does, with the
// request id, without what a line logged once in a while may afford: the
// caller's program counter (no handler here reports the source) and a
// copy of the line to add the id to. A handler that writes such lines
// itself (a [lineWriter]) writes it.
func logLine(ctx context.Context, l *slog.Logger, level slog.Level, msg string, attrs []slog.Attr) {
	h := l.Handler()
	if rh, ok := h.(requestIDHandler); ok {
		h = rh.Handler
		if id := requestIDOf(ctx); id != "" {
			attrs = append(attrs, slog.String("request_id", id))
		}
	}
	now := time.Now()
	if lw, ok := h.(lineWriter); ok && lw.WriteLine(now, level, msg, attrs) {
		return
	}
	r := slog.NewRecord(now, level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}

// lineWriter is a handler that writes a line of plain attributes itself,
// as it would handle the record (see logline.Handler), and reports
// whether it did.
type lineWriter interface {
	WriteLine(t time.Time, level slog.Level, msg string, attrs []slog.Attr) bool
}

// logBlocks writes, at debug, what a request's rewrite injected.
func (s *Server) logBlocks(ex *exchange) {
	tu := &ex.turn
	if tu.Degraded || (len(tu.Entries) == 0 && len(tu.Matches) == 0 && tu.Loop.Level < guard.LevelStop) ||
		!s.log.Enabled(ex.c.Request().Context(), slog.LevelDebug) {
		return
	}
	placement := "turn"
	if s.placeInSystem() {
		placement = "system"
	}
	s.log.DebugContext(ex.c.Request().Context(), "blocks injected", "workspace", ex.tenant.Workspace, "project", ex.tenant.Project,
		"conversation", ex.tenant.Session, "guard", len(tu.Entries), "recall", len(tu.Matches),
		"loop", guard.LevelName(tu.Loop.Level), "placement", placement)
}

// status is the status an exchange ended with, as the access line and the
// spans tell it: StatusClientClosed when the client left before the
// answer went out whole.
func (ex *exchange) status() int {
	if ex.c.Request().Context().Err() != nil && !ex.whole {
		return upstream.StatusClientClosed
	}
	return ex.c.Response().Status
}

// logPassThrough writes the access line of a pass-through request (see
// logAccess): its tenant, the API its path belongs to, the provider, the
// status, duration and bytes.
func (s *Server) logPassThrough(c echo.Context, t tenant.Tenant, provider string, start time.Time) {
	ctx := c.Request().Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	res := c.Response()
	status := res.Status
	if ctx.Err() != nil {
		status = upstream.StatusClientClosed
	}
	logLine(ctx, s.log, slog.LevelInfo, "request", []slog.Attr{
		slog.String("workspace", t.Workspace), slog.String("project", t.Project),
		slog.String("api", "passthrough"), slog.String("path", c.Request().URL.Path),
		slog.String("provider", provider), slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.Int64("bytes_in", max(c.Request().ContentLength, 0)), slog.Int64("bytes_out", res.Size)})
}
