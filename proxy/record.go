package proxy

import (
	"bytes"
	"context"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/upstream"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
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
// it: most requests make none. A budget made with ctx set is that context.
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
// per conversation (t.Session) and call id, within budget: agents number
// their calls call_1, call_2... in every conversation, so an id alone
// names nothing across them. It returns how many tool results it found
// failed that it had not seen before (stored by this request or, as a
// duplicate, by another), and false when the store failed.
func (s *Server) recordToolErrors(budget *storeBudget, t tenant.Tenant, info *wire.Info, now time.Time) (int, bool) {
	n := 0
	for i := range info.ToolResults {
		tr := &info.ToolResults[i]
		seenKey := s.seen.key(t.Workspace, t.Project, t.Session, tr.Key)
		if failed, ok := s.seen.get(seenKey); ok {
			tr.Failed = failed
			continue
		}
		text := tr.Text()
		// The API's own error flag is authoritative; otherwise the text
		// says whether the tool failed.
		failed := tr.IsError || guard.ToolFailed(text)
		tr.Failed = failed
		if failed {
			msg := text
			if tr.Name != "" {
				msg = tr.Name + ": " + msg
			}
			inc := s.incident(t, info.Model, "", store.TypeToolError, 0, msg, now)
			dedupe := tr.Key
			if t.Session != "" {
				dedupe = t.Session + "|" + tr.Key
			}
			_, err := s.writeIncident(budget.context(), inc, dedupe, false)
			if err != nil {
				s.storeFailed(budget.parent, "add_incident", err)
				return n, false
			}
			n++
		}
		s.seen.add(seenKey, failed)
	}
	return n, true
}

// incident builds a redacted, capped incident record.
func (s *Server) incident(t tenant.Tenant, model, provider, typ string, status int, message string, now time.Time) *store.Incident {
	txt := s.texts.of(message)
	return &store.Incident{
		Time: now, Workspace: t.Workspace, Project: t.Project, Session: t.Session, Agent: t.Agent,
		Provider: provider, Model: guard.Redact(model), Type: typ, StatusCode: status,
		Message: txt.msg, Fingerprint: txt.fp,
	}
}

// incidentText is what an incident stores of a failure's message: the
// message redacted, capped and made valid UTF-8, and its fingerprint.
type incidentText struct{ msg, fp string }

func newIncidentText(message string) incidentText {
	msg := guard.Redact(message)
	if len(msg) > maxIncidentMessage {
		cut := maxIncidentMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	return incidentText{msg: msg, fp: guard.Fingerprint(msg)}
}

// textMemo remembers the incident texts of recent messages: a storm of
// failures repeats one error body thousands of times, and redacting and
// fingerprinting it each time cost more than the rest of its record. It
// is keyed by the whole message (what it gives depends on nothing else),
// holds messages up to maxMemoMessage bytes, and is cleared when it holds
// maxMemoBytes.
type textMemo struct {
	mu    sync.Mutex
	m     map[string]incidentText
	bytes int
}

const (
	maxMemoMessage = 8 << 10
	maxMemoBytes   = 4 << 20
)

func (tm *textMemo) of(message string) incidentText {
	if len(message) > maxMemoMessage {
		return newIncidentText(message)
	}
	tm.mu.Lock()
	txt, ok := tm.m[message]
	tm.mu.Unlock()
	if ok {
		return txt
	}
	txt = newIncidentText(message)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.m == nil || tm.bytes+len(message)+len(txt.msg) > maxMemoBytes {
		tm.m, tm.bytes = make(map[string]incidentText), 0
	}
	tm.m[message] = txt
	tm.bytes += len(message) + len(txt.msg) + len(txt.fp)
	return txt
}

// record stores a failure the proxy observed, within StoreTimeout: it is
// in the guard of this replica's requests at once, and in the store when
// record returns true. It returns false when the store failed or is still
// writing: the caller then answers with X-Scar-Degraded: store if the
// headers are not sent yet.
func (s *Server) record(ctx context.Context, t tenant.Tenant, model, provider, typ string, status int, message string) bool {
	inc := s.incident(t, model, provider, typ, status, message, s.opts.Now())
	sctx, cancel := s.storeCtx(ctx)
	defer cancel()
	if _, err := s.writeIncident(sctx, inc, "", guard.ProviderFailure(typ)); err != nil {
		s.storeFailed(ctx, "add_incident", err)
		return false
	}
	s.log.Debug("incident", "workspace", t.Workspace, "project", t.Project, "session", t.Session,
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

// capture stores the solution of a conversation that finished well, in
// the background (the capture queue, writer.go, builds, redacts and
// writes it). A conversation is captured only when it ended well: a final
// answer, and the latest result of every tool it called succeeded (a run
// that gave up after a failure is no solution). Secrets in what is stored
// are redacted; a capture that would store what the last one of the
// conversation stored writes nothing.
func (s *Server) capture(t tenant.Tenant, info *wire.Info, answer string) {
	tallies := info.Tallies()
	for _, tl := range tallies {
		if tl.LastFailed {
			s.metrics.captureSkipped.Inc()
			return
		}
	}
	// The queue keeps what it is given: info's slices are the request's
	// (a format's memo may hand them to the conversation's next turn).
	c := solutionCapture{conv: recall.Conversation{Workspace: t.Workspace, Project: t.Project, Key: info.Key,
		Goal: info.Goal, Tools: slices.Clone(info.Tools), FinalAnswer: answer}, tallies: tallies, at: s.opts.Now()}
	if !s.captures.add(c) {
		s.metrics.captureDropped.Inc()
	}
}

// redactSolution removes secrets from every text field of a solution.
func redactSolution(sol *store.Solution) {
	sol.Goal = guard.Redact(sol.Goal)
	sol.Approach = guard.Redact(sol.Approach)
	sol.Outcome = guard.Redact(sol.Outcome)
}

// captureMemo remembers, per tenant and conversation, a hash of the
// solution last captured, so that the turns of a finished conversation
// (an agent often answers again and again in words) do not rewrite the
// same solution. It is bounded like the seen set: two generations.
type captureMemo struct {
	seed      maphash.Seed
	mu        sync.Mutex
	max       int
	cur, prev map[uint64]uint64 // hash of (workspace, key) -> hash of the content
}

func newCaptureMemo(max int) *captureMemo {
	return &captureMemo{seed: maphash.MakeSeed(), max: max, cur: make(map[uint64]uint64)}
}

func (m *captureMemo) hashes(sol *store.Solution) (k, v uint64) {
	var h maphash.Hash
	h.SetSeed(m.seed)
	for _, f := range []string{sol.Workspace, sol.Project, sol.Key} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	k = h.Sum64()
	for _, f := range []string{sol.Goal, sol.Approach, sol.Outcome, strconv.FormatFloat(sol.Confidence, 'g', -1, 64)} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	return k, h.Sum64()
}

// changed reports whether sol differs from what was last captured under
// its key, and remembers it.
func (m *captureMemo) changed(sol *store.Solution) bool {
	k, v := m.hashes(sol)
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.cur[k]
	if !ok {
		old, ok = m.prev[k]
	}
	if ok && old == v {
		return false
	}
	if len(m.cur) >= m.max {
		m.prev, m.cur = m.cur, make(map[uint64]uint64, m.max)
	}
	m.cur[k] = v
	return true
}

// forget drops what changed remembered of sol (its write failed).
func (m *captureMemo) forget(sol *store.Solution) {
	k, _ := m.hashes(sol)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cur, k)
	delete(m.prev, k)
}

// recordErrorAnswer records a provider's non-2xx answer as an incident. It
// reads the start of the body for the error message and puts it back, so
// the client still receives every byte. It runs before the answer is
// delivered: when the store fails, the answer's headers get
// X-Scar-Degraded: store.
func (s *Server) recordErrorAnswer(ctx context.Context, t tenant.Tenant, model string, a *upstream.Attempt) string {
	prefix := upstream.ReadCapped(a.Res.Body, captureErrors)
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
	if !s.record(ctx, t, model, a.Provider.Name(), store.TypeHTTPError, a.Res.StatusCode, msg) {
		// deliver copies it to the client; the failure is counted in
		// store_errors_total.
		a.Res.Header.Set(HeaderDegraded, "store")
	}
	return msg
}
