-- Token usage (AddUsage): counts summed per tenant, conversation, provider,
-- model and UTC hour, which every replica adds to. Names compare byte by
-- byte (COLLATE "C"), as the bbolt store compares them, so ListUsage
-- orders records alike whatever the database's collation.
CREATE TABLE usage (
    workspace          text COLLATE "C" NOT NULL,
    project            text COLLATE "C" NOT NULL,
    conversation       text COLLATE "C" NOT NULL DEFAULT '',
    provider           text COLLATE "C" NOT NULL DEFAULT '',
    model              text COLLATE "C" NOT NULL DEFAULT '',
    hour               timestamptz      NOT NULL, -- the start of a UTC hour
    requests           bigint           NOT NULL DEFAULT 0 CHECK (requests >= 0),
    input_tokens       bigint           NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      bigint           NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  bigint           NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens bigint           NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    -- Also the index of ListUsage with a Conversation.
    PRIMARY KEY (workspace, project, conversation, hour, provider, model)
);
-- ListUsage without a Conversation: the tenant's records in the order it
-- returns them, so a read without a grouping stops at its limit.
CREATE INDEX usage_tenant_hour ON usage (workspace, project, hour DESC, conversation, provider, model);
-- PruneUsage, across every tenant.
CREATE INDEX usage_hour ON usage (hour);
