-- Incidents: one row per failure, read newest first per tenant.
CREATE TABLE incidents (
    id          text        PRIMARY KEY,
    seq         bigserial   NOT NULL, -- insertion order: breaks ties of ts
    workspace   text        NOT NULL,
    project     text        NOT NULL,
    session     text        NOT NULL DEFAULT '',
    agent       text        NOT NULL DEFAULT '',
    provider    text        NOT NULL DEFAULT '',
    model       text        NOT NULL DEFAULT '',
    type        text        NOT NULL DEFAULT '',
    status_code integer     NOT NULL DEFAULT 0,
    message     text        NOT NULL DEFAULT '',
    fingerprint text        NOT NULL DEFAULT '',
    ts          timestamptz NOT NULL
);
CREATE INDEX incidents_tenant_ts ON incidents (workspace, project, ts DESC, seq DESC);
CREATE INDEX incidents_session_ts ON incidents (workspace, project, session, ts DESC, seq DESC);
CREATE INDEX incidents_ts ON incidents (ts);

-- Dedupe keys of AddIncidentOnce, pruned with the incidents.
CREATE TABLE incident_dedupe (
    workspace text        NOT NULL,
    project   text        NOT NULL,
    key       text        NOT NULL,
    ts        timestamptz NOT NULL,
    PRIMARY KEY (workspace, project, key)
);
CREATE INDEX incident_dedupe_ts ON incident_dedupe (ts);

-- Solutions and their change feed: every insert or update takes a new seq
-- from solution_seq; a deletion leaves a tombstone with its own seq.
CREATE SEQUENCE solution_seq;
CREATE TABLE solutions (
    id         text             PRIMARY KEY,
    workspace  text             NOT NULL,
    project    text             NOT NULL DEFAULT '',
    key        text             NOT NULL,
    goal       text             NOT NULL,
    approach   text             NOT NULL DEFAULT '',
    outcome    text             NOT NULL DEFAULT '',
    confidence double precision NOT NULL DEFAULT 0,
    source     text             NOT NULL DEFAULT '',
    verified   boolean          NOT NULL DEFAULT false,
    created    timestamptz      NOT NULL,
    updated    timestamptz      NOT NULL,
    seq        bigint           NOT NULL DEFAULT nextval('solution_seq'),
    UNIQUE (workspace, key)
);
CREATE INDEX solutions_workspace ON solutions (workspace, updated DESC, id DESC);
CREATE UNIQUE INDEX solutions_seq ON solutions (seq);

CREATE TABLE solution_tombstones (
    seq       bigint      PRIMARY KEY DEFAULT nextval('solution_seq'),
    workspace text        NOT NULL,
    id        text        NOT NULL,
    ts        timestamptz NOT NULL DEFAULT now()
);
