package storetest

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testEmbeddings checks SetSolutionEmbedding: the vector is read back
// from every read and the change feed, kept while the goal stays, dropped
// when it changes, refused for a goal that moved on, and it leaves
// retention's order alone.
func testEmbeddings(t *testing.T, open Opener) {
	ctx := context.Background()
	fresh := func(t *testing.T) store.Store {
		s, _ := open(t)
		return s
	}
	vec := []float32{0.5, -0.25, 1e-7, 3}
	emb := store.Embedding{Model: "m1", Vector: vec}

	t.Run("embedding read back everywhere", func(t *testing.T) {
		s, reopen := open(t)
		a := store.Solution{Workspace: "w", Key: "ka", Goal: "rate limit the API", Approach: "token bucket"}
		mustPut(t, s, &a)
		if a.Embedding != nil {
			t.Fatalf("new solution has an embedding: %+v", a.Embedding)
		}
		_, cursor, err := s.SolutionChanges(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetSolutionEmbedding(ctx, "w", a.ID, a.Goal, emb); err != nil {
			t.Fatalf("SetSolutionEmbedding: %v", err)
		}
		want := a
		want.Embedding = &store.Embedding{Model: "m1", Vector: vec}
		got, err := s.GetSolution(ctx, "w", a.ID)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("GetSolution = %+v (%+v), %v; want %+v", got, got.Embedding, err, want)
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || !reflect.DeepEqual(list, []store.Solution{want}) {
			t.Fatalf("ListSolutions = %+v, %v", list, err)
		}
		ch, _, err := s.SolutionChanges(ctx, cursor, 100)
		if err != nil || len(ch) != 1 || ch[0].Deleted || !reflect.DeepEqual(ch[0].Solution, want) {
			t.Fatalf("changes after the embedding = %+v, %v; want one with %+v", ch, err, want)
		}
		// A new reader gets the embedding with the solution, once.
		r := newFeedReader()
		r.readAll(t, s, 10)
		if r.liveSeen[a.ID] != 1 || !reflect.DeepEqual(r.state[a.ID], want) {
			t.Fatalf("feed from 0: seen %d times, %+v", r.liveSeen[a.ID], r.state[a.ID])
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := reopen(t)
		if got, err := s2.GetSolution(ctx, "w", a.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after reopening: %+v, %v", got, err)
		}
	})

	t.Run("embedding kept with the goal, dropped with it", func(t *testing.T) {
		s := fresh(t)
		a := store.Solution{Workspace: "w", Key: "ka", Goal: "rate limit the API", Approach: "token bucket"}
		mustPut(t, s, &a)
		if err := s.SetSolutionEmbedding(ctx, "w", a.ID, a.Goal, emb); err != nil {
			t.Fatal(err)
		}
		// Another approach, the same goal: the vector still describes it.
		b := store.Solution{Workspace: "w", Key: "ka", Goal: a.Goal, Approach: "leaky bucket",
			Embedding: &store.Embedding{Model: "ignored", Vector: []float32{9}}}
		mustPut(t, s, &b)
		if b.Embedding == nil || b.Embedding.Model != "m1" || !reflect.DeepEqual(b.Embedding.Vector, vec) {
			t.Fatalf("same goal: returned embedding %+v, want m1's", b.Embedding)
		}
		if got, _ := s.GetSolution(ctx, "w", a.ID); got.Embedding == nil || got.Embedding.Model != "m1" {
			t.Fatalf("same goal: stored embedding %+v", got.Embedding)
		}
		// A new model replaces it.
		emb2 := store.Embedding{Model: "m2", Vector: []float32{1, 0}}
		if err := s.SetSolutionEmbedding(ctx, "w", a.ID, a.Goal, emb2); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetSolution(ctx, "w", a.ID); got.Embedding == nil || !reflect.DeepEqual(*got.Embedding, emb2) {
			t.Fatalf("re-embedded: %+v", got.Embedding)
		}
		// Another goal under the same key: the vector is of the old goal.
		c := store.Solution{Workspace: "w", Key: "ka", Goal: "throttle the API"}
		mustPut(t, s, &c)
		if c.Embedding != nil {
			t.Fatalf("changed goal: returned embedding %+v", c.Embedding)
		}
		got, _ := s.GetSolution(ctx, "w", a.ID)
		if got.Embedding != nil {
			t.Fatalf("changed goal: stored embedding %+v", got.Embedding)
		}
		// A vector made from the old goal is refused.
		if err := s.SetSolutionEmbedding(ctx, "w", a.ID, a.Goal, emb); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("stale goal: err = %v, want ErrNotFound", err)
		}
		if got, _ := s.GetSolution(ctx, "w", a.ID); got.Embedding != nil {
			t.Fatalf("stale goal stored: %+v", got.Embedding)
		}
	})

	t.Run("embedding of nothing", func(t *testing.T) {
		s := fresh(t)
		a := store.Solution{Workspace: "w", Key: "ka", Goal: "g"}
		mustPut(t, s, &a)
		for name, err := range map[string]error{
			"unknown id":        s.SetSolutionEmbedding(ctx, "w", "nope", "g", emb),
			"empty id":          s.SetSolutionEmbedding(ctx, "w", "", "g", emb),
			"unknown workspace": s.SetSolutionEmbedding(ctx, "w2", a.ID, "g", emb),
		} {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", name, err)
			}
		}
		big := make([]float32, store.MaxEmbeddingDims+1)
		for name, e := range map[string]store.Embedding{
			"no model":  {Vector: vec},
			"no values": {Model: "m"},
			"NaN":       {Model: "m", Vector: []float32{1, float32(math.NaN())}},
			"infinity":  {Model: "m", Vector: []float32{float32(math.Inf(-1))}},
			"too long":  {Model: "m", Vector: big},
		} {
			if err := s.SetSolutionEmbedding(ctx, "w", a.ID, "g", e); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
		if got, _ := s.GetSolution(ctx, "w", a.ID); got.Embedding != nil {
			t.Fatalf("refused embeddings stored: %+v", got.Embedding)
		}
	})

	t.Run("embedding leaves retention order", func(t *testing.T) {
		s := fresh(t)
		old := store.Solution{Workspace: "w", Key: "old", Goal: "old task"}
		mustPut(t, s, &old)
		young := store.Solution{Workspace: "w", Key: "young", Goal: "young task"}
		mustPut(t, s, &young)
		if err := s.SetSolutionEmbedding(ctx, "w", old.ID, old.Goal, emb); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetSolution(ctx, "w", old.ID)
		if !got.Updated.Equal(old.Updated) {
			t.Fatalf("Updated moved: %v, was %v", got.Updated, old.Updated)
		}
		if n, err := s.PruneSolutions(ctx, time.Time{}, 1); err != nil || n != 1 {
			t.Fatalf("PruneSolutions = %d, %v", n, err)
		}
		if _, err := s.GetSolution(ctx, "w", old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the least recently updated solution was kept: %v", err)
		}
	})
}
