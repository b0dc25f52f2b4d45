-- Rollups written through the API (PUT /v1/rollups/{id}): the definition as sent, one rollup as the
-- config file spells it, with who wrote it and when. The config file's rollups are not here: each
-- instance reads them from its own file. A deleted rollup's row goes; its periods, triggers and
-- runs (in the tables of 0003 and 0008, by rollup id) stay until retention prunes them.
CREATE TABLE api_rollups (
  id text PRIMARY KEY,
  definition jsonb NOT NULL,
  -- The writer as the API knew it (a token's name; 'local' for this machine's commands).
  written_by text NOT NULL,
  written_at timestamptz NOT NULL DEFAULT now()
);
