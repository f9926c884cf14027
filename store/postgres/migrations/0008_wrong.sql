-- A person's verdict that a learned fix or a solution is wrong: the row is
-- kept, for audit, and never shown to an agent. wrong_at is NULL for a
-- memory nobody marked.
ALTER TABLE fixes ADD COLUMN wrong_at timestamptz;
ALTER TABLE fixes ADD COLUMN wrong_note text NOT NULL DEFAULT '';
ALTER TABLE solutions ADD COLUMN wrong_at timestamptz;
ALTER TABLE solutions ADD COLUMN wrong_note text NOT NULL DEFAULT '';
