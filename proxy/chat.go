package proxy

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// captureMax bounds the copy of a non-streaming answer kept to read its
// error message or, for auto-capture, its final answer.
const (
	captureErrors     = 64 << 10
	captureCompletion = 4 << 20
)

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
