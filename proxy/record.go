package proxy

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// maxIncidentMessage caps the stored text of one incident.
const maxIncidentMessage = 2000

// storeCtx bounds a store call made for a request, which may already be
// over (the client gone), by StoreTimeout: the store never holds an answer
// back for longer.
func (s *Server) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.opts.StoreTimeout)
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

// record stores a failure the proxy observed, within StoreTimeout. It
// returns false when the store failed: the caller then answers with
// X-Scar-Degraded: store if the headers are not sent yet.
func (s *Server) record(ctx context.Context, t Tenant, model, provider, typ string, status int, message string) bool {
	inc := s.incident(t, model, provider, typ, status, message, s.opts.Now())
	sctx, cancel := s.storeCtx(ctx)
	defer cancel()
	if err := s.store.AddIncident(sctx, inc); err != nil {
		s.storeFailed(ctx, "add_incident", err)
		return false
	}
	s.countIncident(inc)
	s.log.Info("incident", "workspace", t.Workspace, "project", t.Project, "session", t.Session,
		"provider", provider, "type", typ, "status", status, "bytes", len(inc.Message))
	return true
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
	sctx, cancel := s.storeCtx(ctx)
	defer cancel()
	if err := s.store.PutSolution(sctx, &sol); err != nil {
		s.storeFailed(ctx, "put_solution", err)
		return
	}
	if err := s.syncIndex(sctx); err != nil {
		s.log.Warn("recall index sync after capture failed", "err", err)
	}
}

// recordErrorAnswer records a provider's non-2xx answer as an incident. It
// reads the start of the body for the error message and puts it back, so
// the client still receives every byte. It runs before the answer is
// delivered: when the store fails, the answer's headers get
// X-Scar-Degraded: store.
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
	if !s.record(ctx, t, model, a.provider.Name(), store.TypeHTTPError, a.res.StatusCode, msg) {
		// deliver copies it to the client; the failure is counted in
		// store_errors_total.
		a.res.Header.Set(HeaderDegraded, "store")
	}
	return msg
}
