package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

// failingLabels is a store whose PutConversations fails while fail is set.
type failingLabels struct {
	store.Store
	fail bool
}

func (f *failingLabels) PutConversations(ctx context.Context, batch []store.Conversation) error {
	if f.fail {
		return errors.New("database unreachable")
	}
	return f.Store.PutConversations(ctx, batch)
}

// A conversation is labelled once per replica, at its first answer, and
// the label reaches the store with the usage flush, or the next one when
// the store refused it.
func TestConversationLabels(t *testing.T) {
	st := &failingLabels{Store: tempBolt(t)}
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	m := newTestMemory(t, st, func(o *Options) { o.Now = func() time.Time { return now } })
	secret := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	a := tenant.Tenant{Workspace: "ws", Project: "p", Session: "c:1"}
	m.NoteConversation(a, "Fix the failing\n\tparser tests, token "+secret+" "+strings.Repeat("and more ", 40), "claude-cli/2.1.197 (external, cli)")
	now = now.Add(time.Minute)
	m.NoteConversation(a, "a later turn's task", "other/1.0")                                  // labelled already
	m.NoteConversation(tenant.Tenant{Workspace: "ws", Project: "p"}, "no conversation", "x/1") // none to label
	b := tenant.Tenant{Workspace: "ws", Project: "p", Session: "run-2", Agent: "ci-bot"}
	m.NoteConversation(b, "add an index", "GeminiCLI/0.61.0 (linux; x64)")

	st.fail = true
	if err := m.FlushUsage(t.Context()); err == nil {
		t.Fatal("a refused flush returned no error")
	}
	st.fail = false
	if err := m.FlushUsage(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetConversations(t.Context(), "ws", "p", []string{"c:1", "run-2", ""})
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := got["c:1"], got["run-2"]
	if len(got) != 2 || !strings.HasPrefix(ca.Task, "Fix the failing parser tests, token "+guard.Redacted) ||
		utf8.RuneCountInString(ca.Task) > maxLabelTask || strings.Contains(ca.Task, secret) ||
		ca.Agent != "claude-cli/2.1.197" || !ca.Started.Equal(now.Add(-time.Minute)) {
		t.Fatalf("label of c:1: %+v (of %d)", ca, len(got))
	}
	if cb.Task != "add an index" || cb.Agent != "ci-bot" || !cb.Started.Equal(now) {
		t.Fatalf("label of run-2: %+v", cb)
	}
	if v := counterValue(t, m.metrics.storeErrs.WithLabelValues("put_conversations")); v != 1 {
		t.Errorf("store errors put_conversations = %v, want 1", v)
	}
}

// The book forgets the oldest generation of labelled conversations, never
// holds more than its bounds, and queues at most maxLabelPending labels.
func TestLabelBookBounds(t *testing.T) {
	lb := newLabelBook()
	tn := func(i int) tenant.Tenant {
		return tenant.Tenant{Workspace: "w", Project: "p", Session: fmt.Sprint("c:", i)}
	}
	for i := range 2*maxLabelSeen + 10 {
		if !lb.first(tn(i)) {
			t.Fatalf("conversation %d seen before", i)
		}
		lb.add(store.Conversation{ID: tn(i).Session})
	}
	if len(lb.seen.cur) > maxLabelSeen || len(lb.seen.prev) > maxLabelSeen || len(lb.pending) != maxLabelPending {
		t.Fatalf("book holds %d + %d seen, %d pending", len(lb.seen.cur), len(lb.seen.prev), len(lb.pending))
	}
	if lb.first(tn(2*maxLabelSeen + 5)) {
		t.Fatal("a conversation of the current generation is new again")
	}
	if !lb.first(tn(0)) {
		t.Fatal("a conversation two generations old is still remembered")
	}
	batch := lb.take()
	lb.add(store.Conversation{ID: "late"})
	lb.putBack(batch)
	if len(lb.pending) != maxLabelPending || lb.pending[0].ID != "c:0" || lb.pending[len(lb.pending)-1].ID != "late" {
		t.Fatalf("after putBack: %d pending, first %q, last %q", len(lb.pending), lb.pending[0].ID, lb.pending[len(lb.pending)-1].ID)
	}
}

func TestAgentLabel(t *testing.T) {
	for _, c := range [][3]string{
		{"", "claude-cli/2.1.197 (external, cli)", "claude-cli/2.1.197"},
		{"", "ai-sdk/openai-compatible/3.0.37 ai-sdk/provider-utils/5.0.30 runtime/bun/1.3.13", "ai-sdk/openai-compatible/3.0.37"},
		{"", "GeminiCLI/0.61.0 (linux; x64)", "GeminiCLI/0.61.0"},
		{"my-agent", "curl/8", "my-agent"},
		{"", "", ""},
		{"", "bad\x1b[31m\u202eagent", "bad[31magent"},
	} {
		if got := AgentLabel(c[0], c[1]); got != c[2] {
			t.Errorf("AgentLabel(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}
