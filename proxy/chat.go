package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// maxIncidentMessage caps the stored text of one incident.
const maxIncidentMessage = 2000

// captureMax bounds the copy of a non-streaming answer kept to read its
// error message or, for auto-capture, its final answer.
const (
	captureErrors     = 64 << 10
	captureCompletion = 4 << 20
)

var errBodyTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Message: "Request body too large.", Type: "invalid_request_error", Code: "request_too_large"}

// readBody reads the request body, bounded by MaxBodyBytes. With a lease,
// it reads into a pooled buffer that goes back with the lease.
func (s *Server) readBody(c echo.Context, lease *bodyLease) ([]byte, *apiError) {
	r := c.Request()
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	var buf *bytes.Buffer
	switch n := int(r.ContentLength) + bytes.MinRead; {
	case lease != nil:
		buf = bytes.NewBuffer(*lease.buf(n))
	case n > bytes.MinRead:
		buf = bytes.NewBuffer(make([]byte, 0, n))
	default:
		buf = new(bytes.Buffer)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), r.Body, s.opts.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errBodyTooLarge
		}
		return nil, errBadRequest("could not read request body")
	}
	return body, nil
}

// badJSON is the answer to a chat request body that scanChat refused.
func badJSON(err error) *apiError {
	msg := "We could not parse the JSON body of your request: it is not valid JSON."
	var je *jsonError
	if errors.As(err, &je) && je.deep {
		msg = "We could not parse the JSON body of your request: it is nested more than " + strconv.Itoa(maxJSONDepth) + " levels deep."
	}
	return errBadRequest(msg)
}

// storeCtx bounds a store call made for a request that may already be over.
func storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), defaultStoreCallTimeout)
}

// chatCompletions is the rewritten path: POST /v1/chat/completions.
func (s *Server) chatCompletions(c echo.Context) error {
	start := time.Now()
	route := "chat"
	t, aerr := s.resolveTenant(c)
	if aerr != nil {
		s.count(route, aerr.Status, "")
		return writeError(c, aerr)
	}
	ctx := c.Request().Context()
	now := s.opts.Now()
	// The guard does not depend on the body: it is looked up while the
	// body is still arriving (a Postgres round trip then costs the client
	// nothing), and again below only if this request carries a new tool
	// failure. The store gets a budget for that lookup and one for the
	// calls made once the body is read: a store that fails or hangs makes
	// the request go out unchanged (fail open).
	gctx, cancelGuard := context.WithTimeout(ctx, s.opts.StoreTimeout)
	entries, guardBlock, gerr := s.guardEntries(gctx, t.Workspace, t.Project, t.Session, now)
	cancelGuard()

	// The body's buffers go back to their pool once the provider has the
	// body: a stream's answer may take minutes and needs none of it.
	lease := newBodyLease()
	bodyDone := sync.OnceFunc(lease.drop)
	defer bodyDone()
	body, aerr := s.readBody(c, lease)
	if aerr != nil {
		s.count(route, aerr.Status, "")
		return writeError(c, aerr)
	}
	conv, err := inspect(body, s.memo, t.Workspace+"\x00"+t.Project)
	if err != nil {
		s.count(route, http.StatusBadRequest, "")
		return writeError(c, badJSON(err))
	}
	if t.Agent == "" && ValidName(conv.user) == nil {
		t.Agent = conv.user
	}

	budget := storeBudget{parent: ctx, d: s.opts.StoreTimeout}
	defer budget.end()
	degraded := gerr != nil
	if gerr != nil {
		s.storeFailed(ctx, "list_incidents", gerr)
	} else {
		// A new failure may make a pattern repeat, whether this request
		// stored it or another one (a retry, another replica) just did.
		failed, ok := s.recordToolErrors(&budget, t, conv, now)
		degraded = !ok
		if ok && failed > 0 {
			if entries, guardBlock, gerr = s.guardEntries(budget.context(), t.Workspace, t.Project, t.Session, now); gerr != nil {
				s.storeFailed(ctx, "list_incidents", gerr)
				degraded = true
			}
		}
	}
	var matches []recall.Match
	var recallBlock block
	if !degraded && conv.goal != "" {
		matches, recallBlock = s.recallFor(t.Workspace, t.Project, conv.goal, conv.key)
	}

	out := body
	h := c.Response().Header()
	if degraded {
		s.metrics.degraded.Inc()
		h.Set(HeaderDegraded, "store")
		entries, matches = nil, nil
	} else {
		// The rewrite keeps JSON valid (FuzzInject); a failure forwards the
		// original bytes.
		dst := *lease.buf(len(body) + len(guardBlock.json) + len(recallBlock.json) + 64)
		rewritten, err := injectSystem(dst, body, conv, guardBlock, recallBlock)
		if err != nil {
			// Never forward a body we may have broken: send the original.
			s.log.Error("rewrite failed; forwarding the original body", "workspace", t.Workspace, "project", t.Project, "err", err)
			entries, matches = nil, nil
		} else {
			out = rewritten
		}
	}
	h.Set(HeaderGuard, strconv.Itoa(len(entries)))
	h.Set(HeaderRecall, strconv.Itoa(len(matches)))
	if len(entries) > 0 {
		s.metrics.injectedGuard.Inc()
	}
	if len(matches) > 0 {
		s.metrics.injectedRecall.Inc()
	}

	hdr := s.outgoingHeader(c.Request().Header)
	hdr.Del("Accept-Encoding") // the answer is observed: never let it be compressed
	ur := &upstreamRequest{
		method: http.MethodPost, path: "/chat/completions", query: c.Request().URL.RawQuery,
		header: hdr, body: out, lease: lease,
	}
	chain := s.router.Route(conv.model)
	if !degraded {
		// Last use of what the scan found: the memo takes it over.
		s.memo.remember(conv, body)
	}
	conv.release()
	s.metrics.overhead.Observe(time.Since(start).Seconds())
	a, f := s.send(ctx, chain, ur, func(pf providerFailure) {
		s.record(ctx, t, conv.model, pf.provider, pf.typ, pf.statusCode, pf.message)
	})
	bodyDone()
	if f != nil {
		s.count(route, f.status, chain[len(chain)-1].Name())
		if f.incident == "" {
			return nil
		}
		return writeError(c, f.apiError())
	}
	defer a.release()
	h.Set(HeaderProvider, a.provider.Name())

	sse := isSSE(a.res.Header)
	ok := a.res.StatusCode >= 200 && a.res.StatusCode < 300
	defer func() { s.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds()) }()
	prov := a.provider.Name()
	if !ok {
		// Record the provider's error before the client sees it, so the
		// client's next request (a retry, often at once) is guarded by it.
		s.count(route, a.res.StatusCode, prov)
		msg := s.recordErrorAnswer(ctx, t, conv.model, a)
		if _, gone := deliver(c, a, nil); !gone {
			s.log.Debug("provider error passed through", "provider", prov, "status", a.res.StatusCode, "bytes", len(msg))
		}
		return nil
	}
	keep := 0
	// A request the store failed on is not captured: its tool failures
	// may not all have been counted.
	wantCapture := s.recall.AutoCapture && conv.usedTools() && conv.goal != "" && !degraded
	if wantCapture {
		keep = captureCompletion
	}
	obs := newObserver(sse, keep)
	readErr, gone := deliver(c, a, obs.write)
	switch {
	case gone:
		s.count(route, StatusClientClosed, prov)
		s.log.Debug("client closed the request", "workspace", t.Workspace, "provider", prov)
		return nil
	case readErr != nil:
		f := classify(ctx, a.ctx, readErr)
		if f.incident == "" {
			s.count(route, StatusClientClosed, prov)
			return nil
		}
		typ := f.incident
		if typ != store.TypeTimeout {
			typ, f.message = store.TypeStreamError, "provider answer cut short: "+transportMessage(readErr)
		}
		s.count(route, f.status, prov)
		s.record(ctx, t, conv.model, prov, typ, f.status, f.message)
		return nil
	case sse && obs.errMsg != "":
		s.count(route, a.res.StatusCode, prov)
		s.record(ctx, t, conv.model, prov, store.TypeStreamError, a.res.StatusCode, obs.errMsg)
		return nil
	case sse && !obs.done:
		s.count(route, a.res.StatusCode, prov)
		s.record(ctx, t, conv.model, prov, store.TypeStreamError, a.res.StatusCode, "stream ended before data: [DONE]")
		return nil
	}
	s.count(route, a.res.StatusCode, prov)
	if wantCapture {
		if finish, answer := obs.completion(); finish == "stop" {
			s.capture(ctx, t, conv, answer)
		}
	}
	return nil
}

func (s *Server) count(route string, status int, provider string) {
	s.metrics.requests.WithLabelValues(route, strconv.Itoa(status), provider).Inc()
}

// storeBudget is the time the store calls made for a request once its
// body is read may take in all. It starts with the first call that needs
// it: most requests make none.
type storeBudget struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *storeBudget) context() context.Context {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithTimeout(b.parent, b.d)
	}
	return b.ctx
}

func (b *storeBudget) end() {
	if b.cancel != nil {
		b.cancel()
	}
}

// recordToolErrors stores each new failed tool result of the request once
// per tenant, within budget. It returns how many tool results it found
// failed that it had not seen before (stored by this request or, as a
// duplicate, by another), and false when the store failed.
func (s *Server) recordToolErrors(budget *storeBudget, t Tenant, conv *conversation, now time.Time) (int, bool) {
	n := 0
	for i := range conv.toolResults {
		tr := &conv.toolResults[i]
		seenKey := s.seen.key(t.Workspace, t.Project, tr.dedupeKey)
		if failed, ok := s.seen.get(seenKey); ok {
			if failed {
				tr.failed = true
				conv.failures++
			}
			continue
		}
		text := tr.text()
		failed := guard.ToolFailed(text)
		tr.failed = failed
		if failed {
			conv.failures++
			msg := text
			if tr.name != "" {
				msg = tr.name + ": " + msg
			}
			inc := s.incident(t, conv.model, "", store.TypeToolError, 0, msg, now)
			added, err := s.store.AddIncidentOnce(budget.context(), inc, tr.dedupeKey)
			if err != nil {
				s.storeFailed(budget.parent, "add_incident", err)
				return n, false
			}
			n++
			if added {
				s.countIncident(inc)
			}
		}
		s.seen.add(seenKey, failed)
	}
	return n, true
}

// incident builds a redacted, capped incident record.
func (s *Server) incident(t Tenant, model, provider, typ string, status int, message string, now time.Time) *store.Incident {
	msg := guard.Redact(message)
	if len(msg) > maxIncidentMessage {
		cut := maxIncidentMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	return &store.Incident{
		Time: now, Workspace: t.Workspace, Project: t.Project, Session: t.Session, Agent: t.Agent,
		Provider: provider, Model: model, Type: typ, StatusCode: status,
		Message: msg, Fingerprint: guard.Fingerprint(msg),
	}
}

// record stores a failure the proxy observed.
func (s *Server) record(ctx context.Context, t Tenant, model, provider, typ string, status int, message string) {
	inc := s.incident(t, model, provider, typ, status, message, s.opts.Now())
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	if err := s.store.AddIncident(sctx, inc); err != nil {
		s.storeFailed(ctx, "add_incident", err)
		return
	}
	s.countIncident(inc)
	s.log.Info("incident", "workspace", t.Workspace, "project", t.Project, "session", t.Session,
		"provider", provider, "type", typ, "status", status, "bytes", len(inc.Message))
}

func (s *Server) countIncident(inc *store.Incident) {
	pattern, ok := s.guard.Classify(inc.Type, inc.StatusCode, inc.Message)
	if !ok {
		pattern = "none"
	}
	s.metrics.incidents.WithLabelValues(inc.Type, pattern).Inc()
}

func (s *Server) storeFailed(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return // the client left; not the store's fault
	}
	s.metrics.storeErrs.WithLabelValues(op).Inc()
	s.log.Warn("store failed; failing open", "op", op, "err", err)
}

// capture stores the solution of a conversation that finished well.
func (s *Server) capture(ctx context.Context, t Tenant, conv *conversation, answer string) {
	sol := recall.AutoSolution(recall.Conversation{
		Workspace: t.Workspace, Project: t.Project, Key: conv.key, Goal: conv.goal,
		Tools: conv.tools, ToolFailures: conv.failures, FinalAnswer: answer,
	}, s.opts.Now())
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	if err := s.store.PutSolution(sctx, &sol); err != nil {
		s.storeFailed(ctx, "put_solution", err)
		return
	}
	if err := s.syncIndex(sctx); err != nil {
		s.log.Warn("recall index sync after capture failed", "err", err)
	}
}

// models answers GET /v1/models with the merged lists of every provider.
func (s *Server) models(c echo.Context) error {
	if _, aerr := s.resolveTenant(c); aerr != nil {
		return writeError(c, aerr)
	}
	ctx := c.Request().Context()
	var data []json.RawMessage
	seen := map[string]bool{}
	var lastFail *failure
	var lastStatus int
	var lastBody []byte
	for _, p := range s.router.Providers() {
		hdr := s.outgoingHeader(c.Request().Header)
		hdr.Del("Accept-Encoding")
		a, f := s.try(ctx, p, &upstreamRequest{method: http.MethodGet, path: "/models", header: hdr})
		if f != nil {
			if f.incident == "" {
				return nil
			}
			lastFail = f
			continue
		}
		body := readCapped(a.res.Body, 16<<20)
		a.release()
		if a.res.StatusCode != http.StatusOK {
			lastStatus, lastBody = a.res.StatusCode, body
			continue
		}
		gjson.GetBytes(body, "data").ForEach(func(_, m gjson.Result) bool {
			id := m.Get("id").String()
			if id == "" || seen[id] {
				return true
			}
			seen[id] = true
			data = append(data, json.RawMessage(m.Raw))
			return true
		})
	}
	if data == nil {
		switch {
		case lastStatus != 0:
			return c.Blob(lastStatus, echo.MIMEApplicationJSON, lastBody)
		case lastFail != nil:
			return writeError(c, lastFail.apiError())
		}
		data = []json.RawMessage{}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

// passThrough forwards any other /v1/* request byte for byte. A JSON body
// is read (bounded) to route by its "model"; any other body streams.
func (s *Server) passThrough(c echo.Context) error {
	t, aerr := s.resolveTenant(c)
	if aerr != nil {
		return writeError(c, aerr)
	}
	r := c.Request()
	path, aerr := passThroughPath(r.URL.EscapedPath(), c.Param("workspace") != "")
	if aerr != nil {
		return writeError(c, aerr)
	}
	ur := &upstreamRequest{method: r.Method, path: path, query: r.URL.RawQuery, header: s.outgoingHeader(r.Header)}
	chain := s.router.Route("")[:1]
	if r.ContentLength > s.opts.MaxBodyBytes {
		return writeError(c, errBodyTooLarge)
	}
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		body, aerr := s.readBody(c, nil)
		if aerr != nil {
			return writeError(c, aerr)
		}
		ur.body = body
		if m := gjson.GetBytes(body, "model"); m.Type == gjson.String {
			chain = s.router.Route(m.Str)[:1]
		}
	default:
		lb := &limitedBody{r: r.Body, left: s.opts.MaxBodyBytes}
		ur.stream, ur.length = lb, r.ContentLength
		defer func() {
			if lb.tripped && !c.Response().Committed {
				_ = writeError(c, errBodyTooLarge)
			}
		}()
	}
	ctx := r.Context()
	a, f := s.send(ctx, chain, ur, func(pf providerFailure) {
		if lb, ok := ur.stream.(*limitedBody); ok && lb.tripped {
			return // the client sent too much; not the provider's failure
		}
		s.record(ctx, t, "", pf.provider, pf.typ, pf.statusCode, pf.message)
	})
	if f != nil {
		if lb, ok := ur.stream.(*limitedBody); (ok && lb.tripped) || f.incident == "" {
			return nil
		}
		return writeError(c, f.apiError())
	}
	defer a.release()
	prov := a.provider.Name()
	c.Response().Header().Set(HeaderProvider, prov)
	if retryable(a.res.StatusCode) {
		s.recordErrorAnswer(ctx, t, "", a)
	}
	deliver(c, a, nil)
	s.count("passthrough", a.res.StatusCode, prov)
	return nil
}

// recordErrorAnswer records a provider's non-2xx answer as an incident. It
// reads the start of the body for the error message and puts it back, so
// the client still receives every byte.
func (s *Server) recordErrorAnswer(ctx context.Context, t Tenant, model string, a *attempt) string {
	prefix := readCapped(a.res.Body, captureErrors)
	a.res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(prefix), a.res.Body), a.res.Body}
	msg := errorMessage(prefix, a.res.StatusCode)
	if isSSE(a.res.Header) {
		o := newObserver(true, 0)
		o.write(prefix)
		if o.errMsg != "" {
			msg = o.errMsg
		}
	}
	s.record(ctx, t, model, a.provider.Name(), store.TypeHTTPError, a.res.StatusCode, msg)
	return msg
}

// limitedBody forwards a streamed request body and fails once it passes
// the body limit, remembering that it did (the answer is then 413).
type limitedBody struct {
	r       io.Reader
	left    int64
	tripped bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Probe for one more byte: a body of exactly the limit is fine.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.tripped = true
			return 0, errors.New("request body too large")
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// passThroughPath returns the escaped path below the API root of a
// pass-through request: "/v1/files/x" or "/w/{ws}/{proj}/v1/files/x" give
// "/files/x". Dot segments (plain or percent-encoded) are refused: with
// the proxy's key injected they could reach outside the provider's API.
func passThroughPath(escaped string, tenantForm bool) (string, *apiError) {
	rest := escaped
	if tenantForm {
		// "", "w", workspace, project, "v1", rest... (names hold no '/').
		parts := strings.SplitN(escaped, "/", 6)
		if len(parts) < 6 {
			return "", errBadRequest("bad request path")
		}
		rest = "/" + parts[5]
	} else {
		rest = strings.TrimPrefix(escaped, "/v1")
	}
	for _, seg := range strings.Split(rest, "/") {
		if u, err := url.PathUnescape(seg); err != nil || u == "." || u == ".." {
			return "", errBadRequest("bad request path: dot segments and bad escapes are not allowed")
		}
	}
	return rest, nil
}
