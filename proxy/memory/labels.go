package memory

import (
	"context"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

// Conversation labels (store.Conversation): the dashboard names a
// conversation by the first words of its task, its agent and its start.
// A replica labels each conversation once, at the first answer it
// delivers in it, and stores the labels with the token usage (every 10 s,
// and on shutdown); the store keeps the first label of a conversation.

// Bounds of the labels a replica keeps.
const (
	maxLabelTask    = 80      // runes of the task a label keeps
	maxLabelScan    = 2000    // bytes of the task read (and redacted) to make it
	maxLabelPending = 5000    // labels waiting for the store; more are dropped
	maxLabelSeen    = 1 << 16 // conversations remembered as labelled, per generation
)

// labelBook holds the labels not yet stored and remembers, in two
// generations of at most maxLabelSeen each, which conversations this
// replica labelled.
type labelBook struct {
	seed    maphash.Seed
	mu      sync.Mutex
	seen    *generations[uint64, struct{}]
	pending []store.Conversation
}

func newLabelBook() *labelBook {
	return &labelBook{seed: maphash.MakeSeed(), seen: newGenerations[uint64, struct{}](maxLabelSeen, 0, nil)}
}

// first reports whether the conversation is new to the book, and
// remembers it.
func (lb *labelBook) first(t tenant.Tenant) bool {
	var h maphash.Hash
	h.SetSeed(lb.seed)
	for _, s := range [...]string{t.Workspace, t.Project, t.Session} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	k := h.Sum64()
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if _, ok := lb.seen.get(k); ok {
		return false
	}
	lb.seen.put(k, struct{}{})
	return true
}

// add queues c; it reports false when the queue is full.
func (lb *labelBook) add(c store.Conversation) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if len(lb.pending) >= maxLabelPending {
		return false
	}
	lb.pending = append(lb.pending, c)
	return true
}

// take returns the queued labels and empties the queue.
func (lb *labelBook) take() []store.Conversation {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := lb.pending
	lb.pending = nil
	return out
}

// putBack queues batch again, ahead of what came since, as far as there
// is room.
func (lb *labelBook) putBack(batch []store.Conversation) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	room := maxLabelPending - len(lb.pending)
	if room <= 0 {
		return
	}
	if len(batch) > room {
		batch = batch[:room]
	}
	lb.pending = append(slices.Clip(batch), lb.pending...)
}

// TaskLabel is what a conversation's label keeps of its task: its first
// words, on one line, secrets redacted, at most maxLabelTask runes.
func TaskLabel(goal string) string {
	if len(goal) > maxLabelScan {
		goal = goal[:maxLabelScan]
	}
	return guard.Sanitize(guard.Redact(goal), maxLabelTask)
}

// AgentLabel is the agent a label names: the one the request named
// (X-Scar-Agent, or its "user" field), else the first product of its
// User-Agent ("claude-cli/2.1.197", "GeminiCLI/0.61.0"), on one line, at
// most 60 runes.
func AgentLabel(named, userAgent string) string {
	if named != "" {
		return guard.Sanitize(named, 60)
	}
	if i := strings.IndexAny(userAgent, " \t("); i >= 0 {
		userAgent = userAgent[:i]
	}
	return guard.Sanitize(userAgent, 60)
}

// NoteConversation labels t's conversation (t.Session) with its task and
// agent (see AgentLabel), started now, unless this replica labelled it
// already. Call it once the conversation is named (after a run's first
// answer).
func (m *Memory) NoteConversation(t tenant.Tenant, goal, userAgent string) {
	if t.Session == "" || !m.labels.first(t) {
		return
	}
	// A label that finds the queue full is lost: its conversation is
	// shown by its id.
	m.labels.add(store.Conversation{Workspace: t.Workspace, Project: t.Project, ID: t.Session,
		Task: TaskLabel(goal), Agent: AgentLabel(t.Agent, userAgent), Started: m.Now()})
}

// flushLabels stores the queued labels, in batches of at most
// store.MaxConversationBatch; what the store refused is queued again.
func (m *Memory) flushLabels(ctx context.Context) error {
	batch := m.labels.take()
	for len(batch) > 0 {
		n := min(len(batch), store.MaxConversationBatch)
		if err := m.store.PutConversations(ctx, batch[:n]); err != nil {
			m.metrics.storeErrs.WithLabelValues("put_conversations").Inc()
			m.labels.putBack(batch)
			return err
		}
		batch = batch[n:]
	}
	return nil
}
