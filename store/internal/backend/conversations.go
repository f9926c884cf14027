package backend

import (
	"fmt"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// PrepareConversations returns copies of batch in the form both backends
// store them (text cleaned, Started in stored form), or an error wrapping
// store.ErrInvalid, and no copies, when the batch is too long or a label
// misses its workspace, project or id.
func PrepareConversations(batch []store.Conversation) ([]store.Conversation, error) {
	if len(batch) > store.MaxConversationBatch {
		return nil, fmt.Errorf("%w: %d conversations in one batch, at most %d", store.ErrInvalid, len(batch), store.MaxConversationBatch)
	}
	out := make([]store.Conversation, len(batch))
	for i, c := range batch {
		if c.Workspace == "" || c.Project == "" || c.ID == "" {
			return nil, fmt.Errorf("%w: a conversation needs a workspace, a project and an id", store.ErrInvalid)
		}
		for _, p := range []*string{&c.Workspace, &c.Project, &c.ID, &c.Task, &c.Agent} {
			*p = stored.Text(*p)
		}
		c.Started = stored.Time(c.Started)
		out[i] = c
	}
	return out, nil
}

// ConversationIDs returns ids cleaned as stored, or an error wrapping
// store.ErrInvalid when there are more than store.MaxConversationBatch.
func ConversationIDs(ids []string) ([]string, error) {
	if len(ids) > store.MaxConversationBatch {
		return nil, fmt.Errorf("%w: %d conversation ids, at most %d", store.ErrInvalid, len(ids), store.MaxConversationBatch)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = stored.Text(id)
	}
	return out, nil
}
