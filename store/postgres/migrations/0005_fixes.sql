-- Learned fixes: what ended a repeated failure, one per (workspace,
-- project, key). key is the fix's key as given; key_id is the form in
-- which it is indexed (the key itself, or its SHA-256 when longer than 256
-- bytes: see dedupeKey), so a key of any length fits the index.
CREATE TABLE fixes (
    id          text        PRIMARY KEY,
    workspace   text        NOT NULL,
    project     text        NOT NULL,
    key         text        NOT NULL,
    key_id      text        NOT NULL,
    pattern     text        NOT NULL DEFAULT '',
    fingerprint text        NOT NULL DEFAULT '',
    tool        text        NOT NULL,
    failure     text        NOT NULL DEFAULT '',
    call        text        NOT NULL DEFAULT '',
    explanation text        NOT NULL DEFAULT '',
    failures    integer     NOT NULL DEFAULT 0,
    session     text        NOT NULL DEFAULT '',
    created     timestamptz NOT NULL,
    updated     timestamptz NOT NULL,
    UNIQUE (workspace, project, key_id)
);
-- ListFixes and the per-tenant cap of PruneFixes.
CREATE INDEX fixes_tenant_updated ON fixes (workspace, project, updated DESC, id DESC);
-- The age rule of PruneFixes, across every tenant.
CREATE INDEX fixes_updated ON fixes (updated);

-- The guard shows a tenant's fixes and is cached per incident version:
-- every change of a tenant's fixes moves that version too (migration 0002).
CREATE TRIGGER fixes_inserted AFTER INSERT ON fixes
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_incident_versions();
CREATE TRIGGER fixes_updated AFTER UPDATE ON fixes
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_incident_versions();
CREATE TRIGGER fixes_deleted AFTER DELETE ON fixes
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_incident_versions();
