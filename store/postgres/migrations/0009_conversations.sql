-- Conversation labels: how the dashboard names a conversation (the first
-- words of its task, its agent, when it started). The first label stored
-- for a conversation is kept (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE conversations (
    workspace text        NOT NULL,
    project   text        NOT NULL,
    id        text        NOT NULL,
    task      text        NOT NULL DEFAULT '',
    agent     text        NOT NULL DEFAULT '',
    started   timestamptz NOT NULL,
    PRIMARY KEY (workspace, project, id)
);
-- PruneConversations' age rule.
CREATE INDEX conversations_started ON conversations (started);
