package store

import (
	"context"
	"time"
)

// Conversations: how the dashboard names a conversation, which the
// records themselves know only by its id ("c:…", or the session the
// client named). Each replica stores the label of a conversation the
// first time it answers one of its requests; the first label stored wins.

// Conversation labels one conversation of a tenant.
type Conversation struct {
	Workspace string    `json:"workspace"`
	Project   string    `json:"project"`
	ID        string    `json:"id"`              // the conversation, as incidents' Session and usage's Conversation
	Task      string    `json:"task"`            // the first words of its task (redacted, capped)
	Agent     string    `json:"agent,omitempty"` // the agent that ran it, as incidents name it
	Started   time.Time `json:"started"`         // when the proxy first answered it
}

// MaxConversationBatch is the most labels one PutConversations stores,
// and the most ids one GetConversations reads.
const MaxConversationBatch = 1000

// ConversationStore is the part of [Store] that keeps conversation labels.
type ConversationStore interface {
	// PutConversations stores the labels of batch (at most
	// MaxConversationBatch) whose (Workspace, Project, ID) has none yet,
	// in one transaction; a conversation already labelled keeps its
	// label. It returns ErrInvalid, storing nothing, when a label misses
	// its workspace, project or id, or the batch is too long.
	PutConversations(ctx context.Context, batch []Conversation) error
	// GetConversations returns the labels the tenant holds among ids (at
	// most MaxConversationBatch of them), by id; an id without one is
	// absent from the map.
	GetConversations(ctx context.Context, workspace, project string, ids []string) (map[string]Conversation, error)
	// PruneConversations removes the labels of conversations started
	// before before, and returns how many it removed.
	PruneConversations(ctx context.Context, before time.Time) (int, error)
}
