package memory

import (
	"context"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// TestRecallIsDecidedOnTheFirstRequest: a conversation's recall is decided
// on its first request and kept; one first met on a later request (its
// first went to another replica, or came before a restart) recalls
// nothing, even when a solution matches, so its first user turn never
// changes mid-way.
func TestRecallIsDecidedOnTheFirstRequest(t *testing.T) {
	st := tempBolt(t)
	sol := store.Solution{Workspace: "w", Goal: "Rotate the ingress TLS certificates", Approach: "cert-manager renew", Outcome: "ok", Confidence: 0.9, Key: "k-rotate"}
	if err := st.PutSolution(context.Background(), &sol); err != nil {
		t.Fatal(err)
	}
	m := newTestMemory(t, st)
	const goal = "rotate the TLS certificates of the ingress"
	first, block := m.recallFor("w", "p", goal, "conv-a", false)
	if len(first) != 1 || len(block.JSON) == 0 {
		t.Fatalf("first request: %d matches", len(first))
	}
	again, again2 := m.recallFor("w", "p", goal, "conv-a", true)
	if len(again) != 1 || string(again2.JSON) != string(block.JSON) {
		t.Fatal("a later request of the conversation got another recall")
	}
	if late, b := m.recallFor("w", "p", goal, "conv-b", true); len(late) != 0 || len(b.JSON) != 0 {
		t.Fatalf("a conversation first met on a later request recalled %d solutions", len(late))
	}
	if late, _ := m.recallFor("w", "p", goal, "conv-b", false); len(late) != 0 {
		t.Fatal("the decision of a conversation changed")
	}
}
