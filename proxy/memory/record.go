package memory

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// maxIncidentMessage caps the stored text of one incident.
const maxIncidentMessage = 2000

// storeCtx bounds a store call made for a request, which may already be
// over (the client gone), by StoreTimeout: the store never holds an answer
// back for longer.
func (m *Memory) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), m.opts.StoreTimeout)
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

// spent starts the budget if no call did, and returns the error of its
// context once its deadline has passed: at once, not when its timer
// fires (on a busy machine a waiter may wake after the deadline, before
// the timer's goroutine has run).
func (b *storeBudget) spent() error {
	ctx := b.context()
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// started is the budget's context once a call started it, else its
// parent: the context of a call that never waits (see
// Memory.versionContext).
func (b *storeBudget) started() context.Context {
	if b.ctx != nil {
		return b.ctx
	}
	return b.parent
}

func (b *storeBudget) end() {
	if b.cancel != nil {
		b.cancel()
	}
}

// fileReaders are the tools of the agents scarproxy serves that answer
// with a file's text (see guard.FileTextFailed): Claude Code's Read, the
// Gemini CLI's, qwen-code's and Cline's read_file and read_many_files,
// opencode's read.
var fileReaders = map[string]bool{"Read": true, "read_file": true, "read_many_files": true, "read": true}

// recordToolErrors stores each new failed tool result of the request once
// per conversation (t.Session) and call id, within budget: agents number
// their calls call_1, call_2... in every conversation, so an id alone
// names nothing across them. It returns how many tool results it found
// failed that it had not seen before (stored by this request or, as a
// duplicate, by another), and false when the store failed. Each incident
// names provider, the one the request is sent to first.
//
// A failure of a request that continues the turn this replica read last
// (wire.Info.Continued) is new to every replica: it is shown to the
// guard at once and the request goes out while it is written; its answer
// waits for the commit (Memory.Committed), so the agent's next turn finds
// it stored. Any other may have been stored already, by a replica that
// read the turns this one did not: the request waits to learn whether it
// was new, or the guard would count it twice.
func (m *Memory) recordToolErrors(budget *storeBudget, t tenant.Tenant, req wire.Request, provider string, now time.Time, commits *[]*pendingWrite) (int, bool) {
	info := req.Info()
	n := 0
	for i := range info.ToolResults {
		tr := &info.ToolResults[i]
		seenKey := m.seen.key(t.Workspace, t.Project, t.Session, tr.Key)
		if failed, ok := m.seen.get(seenKey); ok {
			tr.Failed = failed
			continue
		}
		text := tr.Text()
		// The API's own flag is authoritative, either way (Anthropic's
		// is_error, which Claude Code sends on every result of its shell:
		// a command that exited 0 succeeded, whatever it printed);
		// otherwise the text says whether the tool failed, and a file
		// reader's text, or a shell's that only printed files, is the
		// files'.
		var failed bool
		switch {
		case tr.IsError:
			failed = true
		case tr.OK:
		case fileReaders[tr.Name]:
			failed = guard.FileTextFailed(text)
		default:
			var read bool
			if failed, read = guard.ShellReadFailed(wire.CallCommand(tr.Args), text); !read {
				failed = m.seen.toolFailed(t.Workspace, text)
			}
		}
		tr.Failed = failed
		if failed {
			msg := guard.FailureText(text)
			if tr.Name != "" {
				msg = tr.Name + ": " + msg
			}
			inc := m.Incident(t, info.Model, provider, store.TypeToolError, 0, msg, now)
			dedupe := tr.Key
			if t.Session != "" {
				dedupe = t.Session + "|" + tr.Key
			}
			// Seen from now on, unless the write fails: the next turn,
			// which sends the result again, is then read whole and
			// records it.
			m.seen.add(seenKey, true)
			lost := func() {
				m.seen.remove(seenKey)
				req.Forget()
			}
			var err error
			if info.Continued {
				var p *pendingWrite
				if p, err = m.queueShown(budget.context(), inc, dedupe, lost); err == nil {
					*commits = append(*commits, p)
				}
			} else {
				_, err = m.writeIncident(budget, inc, dedupe, false, lost)
			}
			if err != nil {
				lost()
				m.StoreFailed(budget.parent, "add_incident", err)
				return n, false
			}
			n++
			continue
		}
		m.seen.add(seenKey, false)
	}
	return n, true
}

// Incident builds a redacted, capped incident record.
func (m *Memory) Incident(t tenant.Tenant, model, provider, typ string, status int, message string, now time.Time) *store.Incident {
	txt := m.texts.of(message)
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

// Record stores a failure the proxy observed, within StoreTimeout: it is
// in the guard of this replica's requests at once, and in the store when
// record returns true. It returns false when the store failed or is still
// writing: the caller then answers with X-Scar-Degraded: store if the
// headers are not sent yet.
func (m *Memory) Record(ctx context.Context, t tenant.Tenant, model, provider, typ string, status int, message string) bool {
	inc := m.Incident(t, model, provider, typ, status, message, m.opts.Now())
	// The client may be gone already: the failure is recorded all the
	// same. The budget starts only if the write has to wait.
	budget := storeBudget{parent: context.WithoutCancel(ctx), d: m.opts.StoreTimeout}
	defer budget.end()
	if _, err := m.writeIncident(&budget, inc, "", guard.ProviderFailure(typ), nil); err != nil {
		m.StoreFailed(ctx, "add_incident", err)
		return false
	}
	return true
}

func (m *Memory) CountIncident(inc *store.Incident) {
	pattern, ok := m.Guard().Classify(inc.Type, inc.StatusCode, inc.Message)
	if !ok {
		pattern = "none"
	}
	m.metrics.incidents.WithLabelValues(inc.Type, pattern).Inc()
}

func (m *Memory) StoreFailed(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return // the client left; not the store's fault
	}
	m.metrics.storeErrs.WithLabelValues(op).Inc()
	m.log.WarnContext(ctx, "store failed; failing open", "op", op, "err", err)
}

// seenSet remembers tool results already processed per tenant, so a
// history re-sent every turn is classified and stored once. It is bounded:
// when the current generation is full it becomes the previous one. A
// result is known by a 64-bit hash (seeded per process) of its tenant and
// dedupe key: the set holds no pointers for the garbage collector to
// trace, about 10 bytes a result.
//
// It also remembers what the newest outputs read as (verdicts): an agent
// that loops sends the same output again under a new call id, and a
// retried request sends the same new output again; an output is judged
// once while it is remembered, per workspace.
type seenSet struct {
	seed     maphash.Seed
	mu       sync.Mutex
	set      *generations[uint64, bool] // key -> the tool failed
	verdicts *generations[uint64, bool] // workspace and output -> guard.ToolFailed
}

// maxVerdicts bounds the outputs whose verdict is remembered, per
// generation: about 20 bytes each.
const maxVerdicts = 1 << 14

func newSeenSet(max int) *seenSet {
	return &seenSet{seed: maphash.MakeSeed(), set: newGenerations[uint64, bool](max, 0, nil),
		verdicts: newGenerations[uint64, bool](maxVerdicts, 0, nil)}
}

// toolFailed is guard.ToolFailed(text) for a tool output of the
// workspace, remembered by a 64-bit hash of both.
func (ss *seenSet) toolFailed(workspace, text string) bool {
	var h maphash.Hash
	h.SetSeed(ss.seed)
	h.WriteString(workspace)
	h.WriteByte(0)
	h.WriteString(text)
	k := h.Sum64()
	ss.mu.Lock()
	failed, ok := ss.verdicts.get(k)
	ss.mu.Unlock()
	if ok {
		return failed
	}
	failed = guard.ToolFailed(text)
	ss.mu.Lock()
	ss.verdicts.put(k, failed)
	ss.mu.Unlock()
	return failed
}

// key names the tool result with the given dedupe key in a conversation
// of a tenant.
func (ss *seenSet) key(workspace, project, conversation, dedupeKey string) uint64 {
	var h maphash.Hash
	h.SetSeed(ss.seed)
	h.WriteString(workspace)
	h.WriteByte(0)
	h.WriteString(project)
	h.WriteByte(0)
	h.WriteString(conversation)
	h.WriteByte(0)
	h.WriteString(dedupeKey)
	return h.Sum64()
}

// get reports whether k was seen and whether that tool result failed.
func (ss *seenSet) get(k uint64) (failed, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.set.get(k)
}

func (ss *seenSet) add(k uint64, failed bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.set.put(k, failed)
}

func (ss *seenSet) remove(k uint64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.set.remove(k)
}
