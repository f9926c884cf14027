package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"go.etcd.io/bbolt"
)

// bktConversations holds the conversation labels (see the layout at the
// top of bolt.go): per tenant, the conversation's id -> its JSON label
// (task, agent, started).
var bktConversations = []byte("conversations")

// conversationLabel is a label as stored under its id.
type conversationLabel struct {
	Task    string    `json:"task,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Started time.Time `json:"started"`
}

// PutConversations stores the labels of conversations that have none, in
// one transaction; see [store.Store].
func (b *Store) PutConversations(ctx context.Context, batch []store.Conversation) error {
	recs, err := backend.PrepareConversations(batch)
	if err != nil {
		return fmt.Errorf("store: put conversations: %w", err)
	}
	if len(recs) == 0 {
		return b.check(ctx)
	}
	return b.update(ctx, "put conversations", func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bktConversations)
		if err != nil {
			return err
		}
		for _, c := range recs {
			tb, err := root.CreateBucketIfNotExists(tenantKey(c.Workspace, c.Project))
			if err != nil {
				return err
			}
			if tb.Get([]byte(c.ID)) != nil {
				continue
			}
			v, err := json.Marshal(conversationLabel{Task: c.Task, Agent: c.Agent, Started: c.Started})
			if err != nil {
				return err
			}
			if err := tb.Put([]byte(c.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetConversations returns the tenant's labels among ids; see [store.Store].
func (b *Store) GetConversations(ctx context.Context, workspace, project string, ids []string) (map[string]store.Conversation, error) {
	ids, err := backend.ConversationIDs(ids)
	if err != nil {
		return nil, fmt.Errorf("store: get conversations: %w", err)
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	out := map[string]store.Conversation{}
	err = b.view(ctx, "get conversations", func(tx *bbolt.Tx) error {
		root := tx.Bucket(bktConversations)
		if root == nil {
			return nil
		}
		tb := root.Bucket(tenantKey(workspace, project))
		if tb == nil {
			return nil
		}
		for _, id := range ids {
			v := tb.Get([]byte(id))
			if v == nil || id == "" {
				continue
			}
			var l conversationLabel
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("conversation %q: %w: %w", id, errCorrupt, err)
			}
			out[id] = store.Conversation{Workspace: workspace, Project: project, ID: id, Task: l.Task, Agent: l.Agent, Started: l.Started.UTC()}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PruneConversations removes the labels of conversations started before
// before, in one transaction; see [store.Store].
func (b *Store) PruneConversations(ctx context.Context, before time.Time) (int, error) {
	cut := stored.CeilMicro(before)
	n := 0
	err := b.update(ctx, "prune conversations", func(tx *bbolt.Tx) error {
		n = 0
		root := tx.Bucket(bktConversations)
		if root == nil {
			return nil
		}
		var empty [][]byte
		err := root.ForEachBucket(func(name []byte) error {
			tb := root.Bucket(name)
			var doomed [][]byte
			err := tb.ForEach(func(k, v []byte) error {
				var l conversationLabel
				if err := json.Unmarshal(v, &l); err != nil || l.Started.Before(cut) {
					doomed = append(doomed, bytes.Clone(k))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range doomed {
				if err := tb.Delete(k); err != nil {
					return err
				}
			}
			n += len(doomed)
			if k, _ := tb.Cursor().First(); k == nil {
				empty = append(empty, bytes.Clone(name))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, name := range empty {
			if err := root.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
