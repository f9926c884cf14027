-- The embedding of a solution's goal (SetSolutionEmbedding): the model that
-- made it and its values, float32 little-endian. An update that changes
-- the goal drops it (PutSolutions).
ALTER TABLE solutions ADD COLUMN embedding_model text NOT NULL DEFAULT '';
ALTER TABLE solutions ADD COLUMN embedding bytea;
