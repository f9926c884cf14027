package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testConversations checks conversation labels: the first stored wins,
// reads are per tenant, pruning goes by the start time.
func testConversations(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("conversation labels", func(t *testing.T) {
		s := open(t)
		at := Epoch.Add(time.Hour + 1500*time.Nanosecond)
		a := store.Conversation{Workspace: "w", Project: "p", ID: "c:0011", Task: "fix the failing parser tests", Agent: "claude-code", Started: at}
		b := store.Conversation{Workspace: "w", Project: "p", ID: "run-7", Task: "añadir \x00 un índice", Started: at.Add(time.Minute)}
		other := store.Conversation{Workspace: "w", Project: "q", ID: a.ID, Task: "another tenant", Started: at}
		if err := s.PutConversations(ctx, []store.Conversation{a, b, other}); err != nil {
			t.Fatalf("PutConversations: %v", err)
		}
		// A later label of the same conversation (another replica, or a
		// retry) changes nothing; a new one in the same batch is stored.
		late := a
		late.Task, late.Started = "something else", at.Add(time.Hour)
		c := store.Conversation{Workspace: "w", Project: "p", ID: "c:0022", Task: "", Started: at}
		if err := s.PutConversations(ctx, []store.Conversation{late, c}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetConversations(ctx, "w", "p", []string{a.ID, b.ID, c.ID, "unknown", ""})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]store.Conversation{}
		for _, x := range []store.Conversation{a, b, c} {
			x.Started = x.Started.Truncate(time.Microsecond).UTC()
			want[x.ID] = x
		}
		bw := want[b.ID]
		bw.Task = "añadir \uFFFD un índice"
		want[b.ID] = bw
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("GetConversations:\n got %+v\nwant %+v", got, want)
		}
		if got, err := s.GetConversations(ctx, "w", "q", []string{a.ID, b.ID}); err != nil || len(got) != 1 || got[a.ID].Task != "another tenant" {
			t.Fatalf("the other tenant: %+v, %v", got, err)
		}
		if got, err := s.GetConversations(ctx, "nobody", "p", []string{a.ID}); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("an unknown tenant: %#v, %v", got, err)
		}
		if got, err := s.GetConversations(ctx, "w", "p", nil); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("no ids: %#v, %v", got, err)
		}

		// Pruned by start time, every tenant.
		n, err := s.PruneConversations(ctx, at.Add(30*time.Second))
		if err != nil || n != 3 {
			t.Fatalf("PruneConversations = %d, %v; want the 3 started at %v", n, err, at)
		}
		if got, _ := s.GetConversations(ctx, "w", "p", []string{a.ID, b.ID, c.ID}); len(got) != 1 || got[b.ID].ID != b.ID {
			t.Fatalf("after the prune: %+v, want only %s", got, b.ID)
		}
		if n, err := s.PruneConversations(ctx, at.Add(30*time.Second)); err != nil || n != 0 {
			t.Fatalf("a second prune = %d, %v", n, err)
		}
		// Pruned, a conversation can be labelled again.
		if err := s.PutConversations(ctx, []store.Conversation{late}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetConversations(ctx, "w", "p", []string{a.ID}); got[a.ID].Task != "something else" {
			t.Fatalf("relabelled after the prune: %+v", got)
		}
	})

	t.Run("invalid conversation labels", func(t *testing.T) {
		s := open(t)
		ok := store.Conversation{Workspace: "w", Project: "p", ID: "c:1", Started: Epoch}
		for _, bad := range []store.Conversation{
			{Project: "p", ID: "c:1"}, {Workspace: "w", ID: "c:1"}, {Workspace: "w", Project: "p"},
		} {
			if err := s.PutConversations(ctx, []store.Conversation{ok, bad}); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("PutConversations(%+v) err = %v, want ErrInvalid", bad, err)
			}
		}
		if got, _ := s.GetConversations(ctx, "w", "p", []string{"c:1"}); len(got) != 0 {
			t.Fatalf("a refused batch stored %+v", got)
		}
		long := make([]store.Conversation, store.MaxConversationBatch+1)
		ids := make([]string, store.MaxConversationBatch+1)
		for i := range long {
			long[i] = store.Conversation{Workspace: "w", Project: "p", ID: fmt.Sprint(i), Started: Epoch}
			ids[i] = fmt.Sprint(i)
		}
		if err := s.PutConversations(ctx, long); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("a batch of %d: err = %v, want ErrInvalid", len(long), err)
		}
		if _, err := s.GetConversations(ctx, "w", "p", ids); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("%d ids: err = %v, want ErrInvalid", len(ids), err)
		}
		if err := s.PutConversations(ctx, long[:store.MaxConversationBatch]); err != nil {
			t.Fatalf("a full batch: %v", err)
		}
		if got, err := s.GetConversations(ctx, "w", "p", ids[:store.MaxConversationBatch]); err != nil || len(got) != store.MaxConversationBatch {
			t.Fatalf("a full read: %d, %v", len(got), err)
		}
	})
}
