-- An error code given with a failure (Node's error.code "ECONNRESET", an
-- errno name), kept apart from the HTTP status. Rows written before it
-- have none.
ALTER TABLE incidents ADD COLUMN code text NOT NULL DEFAULT '';
