-- A version per tenant that changes whenever the tenant's incidents change
-- (insert or delete, whoever wrote them), so a replica can tell in one
-- primary-key lookup whether what it computed from them is still current.
CREATE SEQUENCE incident_version_seq;
CREATE TABLE incident_versions (
    workspace text   NOT NULL,
    project   text   NOT NULL,
    version   bigint NOT NULL,
    PRIMARY KEY (workspace, project)
);

CREATE FUNCTION bump_incident_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO incident_versions (workspace, project, version)
    SELECT t.workspace, t.project, nextval('incident_version_seq')
    FROM (SELECT DISTINCT workspace, project FROM changed_rows) t
    ORDER BY t.workspace, t.project -- one lock order: concurrent writers never deadlock
    ON CONFLICT (workspace, project) DO UPDATE SET version = EXCLUDED.version;
    RETURN NULL;
END $$;

CREATE TRIGGER incidents_inserted AFTER INSERT ON incidents
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_incident_versions();
CREATE TRIGGER incidents_deleted AFTER DELETE ON incidents
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_incident_versions();
