-- The audit of writes through the HTTP API: which token (by its name, never the token itself),
-- when, the action, its target and what changed (`detail`; a rollup's before and after). Written
-- in the transaction of the write it records where that write is one, so a write rolled back
-- leaves no entry. Listed newest first by id; pruned by `at` with the history
-- (retention.history). Every statement on it is in src/store/audit.ts.
CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL,
  token text NOT NULL,
  action text NOT NULL,
  -- What the action was to: a rollup, an asset, a run (its id, <key>~a<attempt>), the config.
  target_type text NOT NULL,
  target text NOT NULL,
  detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON audit_log (at);
