package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/upstream"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
	"go.opentelemetry.io/otel/trace"
)

// The copies of an answer kept to read it: the start of an error answer,
// for its message; a non-streaming answer, for auto-capture.
const (
	captureErrors     = 64 << 10
	captureCompletion = 4 << 20
)

// exchange is one request of a rewritten route on its way through the
// pipeline: prepare reads and rewrites it, forward sends it, finish
// delivers and observes the answer.
type exchange struct {
	c      echo.Context
	format wire.Format
	path   string // where the request goes below a provider's API root
	start  time.Time
	now    time.Time
	tenant tenant.Tenant

	// The body's buffers go back to their pool once the provider has the
	// body (dropBody): a stream's answer may take minutes and needs none
	// of it.
	lease       *body.Lease
	bodyDropped bool
	req         wire.Request
	info        *wire.Info
	chain       []*providers.Provider // the providers to try, in order
	out         []byte                // the body forwarded

	turn         memory.Turn // what the memory decided: the blocks, or Degraded
	memoryFailed bool        // the memory panicked on the request (see decide)

	wantCapture bool // a final answer would be captured
	// unnamedRun says the request is the first of a run that names itself
	// nowhere: the answer's first tool call names it (wire.Info.Origin).
	unnamedRun bool

	// For the access line (access.go) and the spans (trace.go): the
	// body's size, the provider that answered (or failed last) with its
	// type and request id, and the usage its answer reported.
	bytesIn                                   int
	provider, providerType, providerRequestID string
	usage                                     wire.Usage
	span, upstreamSpan                        trace.Span // nil without tracing
	// whole: the answer went out whole. A client that leaves after it
	// (Codex CLI closes on a stream's last event) is no client that left
	// (499) in the access line and the spans either.
	whole bool
}

// dropBody lets go of the exchange's hold on its body's buffers, once.
// Only the request's own goroutine calls it.
func (ex *exchange) dropBody() {
	if !ex.bodyDropped {
		ex.bodyDropped = true
		ex.lease.Drop()
	}
}

// pipeline serves a route whose requests are read, rewritten and
// observed in format f: POST /v1/chat/completions, /v1/responses,
// /v1/messages and the Gemini API's generateContent and
// streamGenerateContent.
func (s *Server) pipeline(f wire.Format) echo.HandlerFunc {
	return func(c echo.Context) error {
		ex := &exchange{c: c, format: f, start: time.Now(), now: s.memory.Now()}
		r := c.Request()
		_, path, aerr := target(r.Method, r.URL.EscapedPath(), c.Param("workspace") != "")
		if aerr != nil {
			s.count(f.Name(), aerr.Status, "")
			return s.writeError(c, aerr)
		}
		ex.path = path
		lease := body.NewLease()
		ex.lease = lease
		defer ex.dropBody()
		defer s.logAccess(ex)
		s.startTrace(ex)
		defer s.endTrace(ex)
		if aerr := s.prepare(ex); aerr != nil {
			s.count(f.Name(), aerr.Status, "")
			return s.writeError(c, aerr)
		}
		a, fail := s.forward(ex)
		if fail != nil {
			if fail.Incident == "" { // the client left
				return nil
			}
			return s.writeError(c, fail.APIError())
		}
		defer a.Release()
		s.finish(ex, a)
		return nil
	}
}

// prepare resolves the tenant, reads the body, asks the memory for the
// request's blocks and places them. A store that fails or hangs leaves
// the body as it came (fail open).
func (s *Server) prepare(ex *exchange) *apiError {
	t, aerr := s.resolveTenant(ex.c)
	if aerr != nil {
		return aerr
	}
	ctx := ex.c.Request().Context()
	early := s.memory.Early(ctx, t.Workspace, t.Project, ex.now) // before the body: it does not depend on it
	body, aerr := s.readBody(ex.c, ex.lease)
	if aerr != nil {
		return aerr
	}
	ex.bytesIn = len(body)
	if aerr := s.read(ex, t, body); aerr != nil {
		return aerr
	}
	s.decide(ctx, early, ex, body)
	s.setBlockHeaders(ex)
	return nil
}

// decide asks the memory what the request needs and places its blocks.
// The proxy never fails an agent for its own sake: should either panic
// (a bug, on text nobody foresaw), the panic is logged with its stack and
// the request goes out as the client sent it, X-Scar-Degraded: memory;
// nothing it leads to is captured.
func (s *Server) decide(ctx context.Context, early memory.Early, ex *exchange, body []byte) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "memory failed on a request; it goes out as sent", "panic", fmt.Sprint(p),
				"stack", string(debug.Stack()), "workspace", ex.tenant.Workspace, "project", ex.tenant.Project)
			ex.turn, ex.out, ex.memoryFailed = memory.Turn{Degraded: true}, body, true
		}
	}()
	ex.turn = s.memory.Decide(ctx, early, ex.tenant, ex.req, ex.chain[0].Name(), ex.now)
	ex.out = body
	if !ex.turn.Degraded {
		s.place(ex, body)
	}
}

// read reads the body in the request's format, finds the providers that
// serve it, and completes the tenant with what the body says: its agent
// (the "user" field) and its conversation, unless the client named them.
func (s *Server) read(ex *exchange, t tenant.Tenant, body []byte) *apiError {
	if wire.NotAnObject(body) {
		return errBadRequest("The body of your request must be a JSON object.")
	}
	req, err := ex.format.Read(body, wire.Route{Tenant: t.Workspace + "\x00" + t.Project, Path: ex.path})
	if err != nil {
		return badBody(err)
	}
	ex.req, ex.info = req, req.Info()
	if ex.chain = s.providers().Route(ex.format.Name(), ex.info.Model); len(ex.chain) == 0 {
		return &apiError{Status: http.StatusNotFound, Message: "No provider of this proxy serves the " + ex.format.Name() + " API (" + ex.path + ").", Type: "invalid_request_error", Code: "api_not_served"}
	}
	if t.Agent == "" && tenant.ValidName(ex.info.User) == nil {
		t.Agent = ex.info.User
	}
	run := runOf(t, ex.info, ex.c.Request().Header)
	ex.info.RunKey = wire.RunKey(ex.info.Key, run)
	// A run's first request that names no run: its answer's first tool
	// call will (see finish).
	ex.unnamedRun = run == "" && !ex.info.Later
	if t.Session == "" {
		t.Session = conversationOf(ex.info)
	}
	if t.Session != "" {
		ex.c.Response().Header().Set(HeaderConversation, t.Session)
	}
	ex.tenant = t
	return nil
}

// placedOverhead bounds the bytes a placement adds besides the blocks'
// own: two frames (see wire.Framed) and the JSON around each (a text part,
// a message or an input item).
const placedOverhead = 2 * (len(wire.FrameStart) + len(wire.FrameNote) + len(wire.FrameEnd) + 128)

// place writes the turn's blocks into the body forwarded. The rewrite
// keeps JSON valid (each format's fuzz target); a failure forwards the
// original bytes, and the turn places nothing.
func (s *Server) place(ex *exchange, body []byte) {
	tu := &ex.turn
	p := wire.Placement{Turn: []wire.Block{tu.Stop, tu.Guard}, Recall: tu.Recall, System: s.placeInSystem()}
	dst := *ex.lease.Buf(len(body) + len(tu.Stop.JSON) + len(tu.Guard.JSON) + len(tu.Recall.JSON) + placedOverhead)
	out, err := ex.req.Inject(dst, body, p)
	if err == nil && tu.Loop.Level >= guard.LevelHardStop {
		// The hard stop: this turn, the model must answer in words.
		out, err = ex.format.HardStop(out)
	}
	if err != nil {
		s.log.Error("rewrite failed; forwarding the original body", "format", ex.format.Name(), "workspace", ex.tenant.Workspace, "project", ex.tenant.Project, "err", err)
		tu.Entries, tu.Matches, tu.Loop = nil, nil, guard.Loop{}
		return
	}
	ex.out = out
}

// setBlockHeaders says what the rewrite injected, or that the store failed.
func (s *Server) setBlockHeaders(ex *exchange) {
	h := ex.c.Response().Header()
	if ex.turn.Degraded {
		s.metrics.degraded.Inc()
		h.Set(HeaderDegraded, "store")
		if ex.memoryFailed {
			h.Set(HeaderDegraded, "memory")
		}
	}
	h.Set(HeaderGuard, strconv.Itoa(len(ex.turn.Entries)))
	h.Set(HeaderRecall, strconv.Itoa(len(ex.turn.Matches)))
	if ex.turn.Loop.Level >= guard.LevelStop {
		h.Set(HeaderLoop, guard.LevelName(ex.turn.Loop.Level))
	}
	if len(ex.turn.Entries) > 0 {
		s.metrics.injectedGuard.Inc()
	}
	if len(ex.turn.Matches) > 0 {
		s.metrics.injectedRecall.Inc()
	}
	s.logBlocks(ex)
}

// conversationOf names the conversation of a request that does not name
// its own (X-Scar-Session): a hash of its start (system text and task,
// the conversation's recall key) and of its run (see runOf), the same on
// every turn of the run. A request without a task belongs to none ("").
func conversationOf(in *wire.Info) string {
	if k, ok := strings.CutPrefix(in.ConversationKey(), "conv:"); ok && k != "" {
		return "c:" + k
	}
	return ""
}

// runOf names the run of the agent a request belongs to, so that two runs
// of one task (an agent run again with the same prompt) are two
// conversations: the session the client names (X-Scar-Session), else the
// one the agent says in its body (wire.Info.Run) or in X-Session-Id
// (opencode), else the run's first tool call (wire.Info.Origin). A run's
// first request of an agent that names none has no call yet: it belongs
// to the task's conversation, whose recall the run's later requests take
// on (see memory.Memory.Decide).
func runOf(t tenant.Tenant, in *wire.Info, h http.Header) string {
	if t.Session != "" {
		return t.Session
	}
	if in.Run != "" {
		return in.Run
	}
	if v := h.Get(HeaderAgentSession); tenant.ValidName(v) == nil {
		return v
	}
	return in.Origin
}

// badBody is the answer to a body its format refused.
func badBody(err error) *apiError {
	var je *wire.JSONError
	switch {
	case errors.As(err, &je) && je.Deep:
		return errBadRequest("We could not parse the JSON body of your request: it is nested more than " + strconv.Itoa(wire.MaxDepth) + " levels deep.")
	case je != nil:
		return errBadRequest("We could not parse the JSON body of your request: it is not valid JSON.")
	}
	return errBadRequest(err.Error())
}

// forward sends the rewritten body to the providers that serve the
// format's API for its model, falling back on failures before any byte
// reached the client. Every provider that failed is recorded.
func (s *Server) forward(ex *exchange) (*upstream.Attempt, *upstream.Failure) {
	c, f, t := ex.c, ex.format, ex.tenant
	ctx := c.Request().Context()
	hdr := upstream.OutgoingHeader(c.Request().Header, s.tenants.Keys())
	hdr.Del("Accept-Encoding") // the answer is observed: never let it be compressed
	ur := &upstream.Request{
		Method: http.MethodPost, Path: ex.path, Query: upstream.OutgoingQuery(c.Request().URL.RawQuery, s.tenants.Keys()),
		Header: hdr, Body: ex.out, Lease: ex.lease,
	}
	chain := ex.chain
	// A request the store failed on is not captured: its tool failures
	// may not all have been counted.
	ex.wantCapture = s.memory.Recall().AutoCapture && ex.info.UsedTools() && ex.info.Goal != "" && !ex.turn.Degraded
	// Last use of what the format read of the body.
	ex.req.Forwarded(!ex.turn.Degraded)
	s.metrics.overhead.Observe(time.Since(ex.start).Seconds())
	s.startUpstreamSpan(ex)
	a, fail := upstream.Send(ctx, chain, ur, upstream.Hooks{Fallback: s.countFallback, Failed: func(pf upstream.ProviderFailure) {
		if !s.memory.Record(ctx, t, ex.info.Model, pf.Provider, pf.Type, pf.StatusCode, pf.Message) {
			// Nothing is sent before send returns: the answer, the
			// provider's or the proxy's own, says the failure went unrecorded.
			c.Response().Header().Set(HeaderDegraded, "store")
		}
	}})
	ex.dropBody()
	// The request's tool failures were written while it went out: the
	// agent's next turn, wherever it goes, must find them stored.
	if !s.memory.Committed(ctx, &ex.turn) {
		c.Response().Header().Set(HeaderDegraded, "store")
	}
	if fail != nil {
		last := chain[len(chain)-1]
		ex.provider, ex.providerType = last.Name(), last.Config().Type
		s.count(f.Name(), fail.Status, ex.provider)
	} else {
		ex.provider, ex.providerType, ex.providerRequestID = a.Provider.Name(), a.Provider.Config().Type, a.Res.Header.Get(HeaderRequestID)
	}
	return a, fail
}

// finish delivers the provider's answer and observes it as it goes
// through: a non-2xx answer, a timeout or a stream that fails becomes an
// incident; a final answer after tool use is captured as a solution.
func (s *Server) finish(ex *exchange, a *upstream.Attempt) {
	c, t, info := ex.c, ex.tenant, ex.info
	ctx := c.Request().Context()
	route, prov := ex.format.Name(), a.Provider.Name()
	c.Response().Header().Set(HeaderProvider, prov)
	defer func() { s.metrics.latency.WithLabelValues(route).Observe(time.Since(ex.start).Seconds()) }()

	if a.Res.StatusCode < 200 || a.Res.StatusCode > 299 {
		// Record the provider's error before the client sees it, so the
		// client's next request (a retry, often at once) is guarded by it.
		s.count(route, a.Res.StatusCode, prov)
		s.recordErrorAnswer(ctx, t, info.Model, a)
		s.memory.NoteConversation(t, info.Goal, c.Request().UserAgent())
		upstream.Deliver(c.Response(), ctx, a, nil)
		return
	}
	keep := 0
	if ex.wantCapture || ex.unnamedRun {
		keep = captureCompletion
	}
	sse := wire.IsSSE(a.Res.Header)
	obs := ex.req.Observe(sse, keep)
	readErr, gone := upstream.Deliver(c.Response(), ctx, a, obs.Write)
	out := obs.Outcome()
	if ex.unnamedRun && out.FirstCall != "" && ex.tenant.Session == conversationOf(info) {
		// What follows (usage, a failure of the stream, the access line
		// and the span) belongs to the run the answer started.
		info.RunKey = wire.RunKey(info.Key, out.FirstCall)
		t.Session = conversationOf(info)
		ex.tenant.Session = t.Session
	}
	// What the provider said it billed counts, whoever cut the answer.
	s.memory.CountUsage(t, prov, info.Model, out.Usage)
	s.memory.NoteConversation(t, info.Goal, c.Request().UserAgent())
	ex.usage = out.Usage
	if readErr != nil && !gone {
		s.cutShort(ex, a, sse, readErr)
		return
	}
	if gone && (!sse || out.Failure != "") {
		// The client left before the answer was complete: no incident.
		// One that leaves once a stream's last event arrived (Codex CLI
		// closes on response.completed) got the whole answer.
		s.count(route, upstream.StatusClientClosed, prov)
		s.log.DebugContext(ctx, "client closed the request", "workspace", t.Workspace, "provider", prov)
		return
	}
	ex.whole = true
	s.count(route, a.Res.StatusCode, prov)
	switch {
	case out.Failure != "" && sse:
		s.memory.Record(ctx, t, info.Model, prov, store.TypeStreamError, a.Res.StatusCode, out.Failure)
	case out.Failure != "":
		// A 2xx answer that says it failed (a Responses API response
		// whose status is failed or incomplete).
		s.memory.Record(ctx, t, info.Model, prov, store.TypeHTTPError, a.Res.StatusCode, out.Failure)
	default:
		s.memory.ProviderAnswered(&ex.turn, prov)
		if ex.wantCapture && out.Final {
			s.memory.Capture(t, info, out.Answer)
		}
	}
}

// cutShort records an answer the provider cut short (a timeout between
// chunks, a broken connection), then tells a streaming client so in its
// API's own event format: it would otherwise see a stream that just
// stops. A client that left is no incident.
func (s *Server) cutShort(ex *exchange, a *upstream.Attempt, sse bool, readErr error) {
	ctx := ex.c.Request().Context()
	route, prov := ex.format.Name(), a.Provider.Name()
	fl := upstream.Classify(ctx, a.Ctx, readErr)
	if fl.Incident == "" {
		s.count(route, upstream.StatusClientClosed, prov)
		return
	}
	typ := fl.Incident
	if typ != store.TypeTimeout {
		typ, fl.Message = store.TypeStreamError, "provider answer cut short: "+upstream.TransportMessage(readErr)
	}
	// Recorded before the client is told (store.durability sync: after
	// the commit).
	s.memory.Record(ctx, ex.tenant, ex.info.Model, prov, typ, fl.Status, fl.Message)
	if sse {
		_, _ = ex.c.Response().Write(ex.format.StreamError(*fl.APIError()))
		ex.c.Response().Flush()
	}
	s.count(route, fl.Status, prov)
}

// resolveTenant decides the tenant of a proxied request (tenant.Policy.Resolve)
// from its headers and the route's /w/{workspace}/{project} names.
func (s *Server) resolveTenant(c echo.Context) (tenant.Tenant, *apiError) {
	return s.tenants.Resolve(c.Request(), c.Param("workspace"), c.Param("project"))
}

// readBody reads a request's body (body.Reader.Read) and logs a refusal
// for want of room.
func (s *Server) readBody(c echo.Context, lease *body.Lease) ([]byte, *apiError) {
	b, aerr := s.bodies.Read(c.Response(), c.Request(), lease)
	if aerr == body.ErrInFlight {
		s.log.DebugContext(c.Request().Context(), "request bodies in flight past the bound; refused")
	}
	return b, aerr
}
