package memory

import (
	"context"
	"testing"

	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// TestRecallIsDecidedOnTheFirstRequest: a conversation's recall is decided
// on its first request and kept; one first met on a later request (its
// first went to another replica, or came before a restart) recalls
// nothing, even when a solution matches, so its first user turn never
// changes mid-way. A first request is a new run of its task: it decides
// afresh.
func TestRecallIsDecidedOnTheFirstRequest(t *testing.T) {
	st := tempBolt(t)
	sol := store.Solution{Workspace: "w", Goal: "Rotate the ingress TLS certificates", Approach: "cert-manager renew", Outcome: "ok", Confidence: 0.9, Key: "k-rotate"}
	if err := st.PutSolution(context.Background(), &sol); err != nil {
		t.Fatal(err)
	}
	m := newTestMemory(t, st)
	const goal = "rotate the TLS certificates of the ingress"
	first, block := m.recallFor(context.Background(), "w", "p", goal, "conv-a", "conv-a", false)
	if len(first) != 1 || len(block.JSON) == 0 {
		t.Fatalf("first request: %d matches", len(first))
	}
	again, again2 := m.recallFor(context.Background(), "w", "p", goal, "conv-a", "conv-a", true)
	if len(again) != 1 || string(again2.JSON) != string(block.JSON) {
		t.Fatal("a later request of the conversation got another recall")
	}
	if late, b := m.recallFor(context.Background(), "w", "p", goal, "conv-b", "conv-b", true); len(late) != 0 || len(b.JSON) != 0 {
		t.Fatalf("a conversation first met on a later request recalled %d solutions", len(late))
	}
	if late, _ := m.recallFor(context.Background(), "w", "p", goal, "conv-b", "conv-b", true); len(late) != 0 {
		t.Fatal("the decision of a conversation changed")
	}
	if run, _ := m.recallFor(context.Background(), "w", "p", goal, "conv-b", "conv-b", false); len(run) != 1 {
		t.Fatalf("a new run of the task recalled %d solutions, want the stored one", len(run))
	}
}

// TestARunNamedByItsHistoryKeepsItsRecall: an agent that names no run has
// its run's first request under the task's key and the later ones under
// the run's (the task's key and its first tool call): they keep the block
// decided on the first, whatever is stored meanwhile; the task run again
// recalls what was stored.
func TestARunNamedByItsHistoryKeepsItsRecall(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st, func(o *Options) {
		rc := recall.DefaultConfig()
		rc.MaxResults = 2
		o.Recall = &rc
	})
	const goal = "rotate the TLS certificates of the ingress"
	put := func(key, g string) {
		t.Helper()
		sol := store.Solution{Workspace: "w", Goal: g, Approach: "cert-manager renew", Outcome: "ok", Confidence: 0.9, Key: key}
		if err := st.PutSolution(context.Background(), &sol); err != nil {
			t.Fatal(err)
		}
		if err := m.SyncIndex(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	put("k-1", "Rotate the ingress TLS certificates")
	first, block := m.recallFor(context.Background(), "w", "p", goal, "task", "task", false)
	if len(first) != 1 {
		t.Fatalf("first request: %d matches", len(first))
	}
	put("k-2", "Rotate the TLS certificates of the ingress controller")
	for range 2 {
		later, b := m.recallFor(context.Background(), "w", "p", goal, "task+call_1", "task", true)
		if string(b.JSON) != string(block.JSON) || len(later) != 1 {
			t.Fatalf("a later request of the run got %d matches, another block", len(later))
		}
	}
	if again, _ := m.recallFor(context.Background(), "w", "p", goal, "task", "task", false); len(again) != 2 {
		t.Fatalf("the task run again recalled %d solutions, want both", len(again))
	}
	if later, _ := m.recallFor(context.Background(), "w", "p", goal, "task+call_1", "task", true); len(later) != 1 {
		t.Fatalf("the first run's recall changed when the task ran again: %d", len(later))
	}
}
