-- Retention of solutions (PruneSolutions). The age rule removes unverified
-- solutions last updated before a time, across every workspace, oldest
-- first: this index finds them without reading the table. The cap reads
-- each workspace's solutions through solutions_workspace.
CREATE INDEX solutions_unverified_updated ON solutions (updated, id) WHERE NOT verified;
